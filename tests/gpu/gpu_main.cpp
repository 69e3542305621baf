// The GPU tests' main: without a usable GPU (or with fewer than --min-gpus=N) the executable prints why and exits
// with 77, which CTest reports as skipped (SKIP_RETURN_CODE), never as passed. Otherwise doctest runs as usual.
// The probe runs in a child process, so this process stays free to fork nccl ranks.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "sim/cuda/probe.hpp"

int main(int argc, char** argv) {
  constexpr int kSkipped = 77;
  int min_gpus = 1;
  std::vector<char*> args;
  for (int i = 0; i < argc; ++i) {
    if (std::strncmp(argv[i], "--min-gpus=", 11) == 0)
      min_gpus = std::atoi(argv[i] + 11);
    else
      args.push_back(argv[i]);
  }
  const cpsim::GpuProbe probe = cpsim::probe_gpus();
  if (!probe.problem.empty()) {
    std::printf("SKIPPED: %s\n", probe.problem.c_str());
    return kSkipped;
  }
  if (static_cast<int>(probe.gpus.size()) < min_gpus) {
    std::printf("SKIPPED: these tests need %d GPUs; %zu are visible\n", min_gpus, probe.gpus.size());
    return kSkipped;
  }
  for (std::size_t i = 0; i < probe.gpus.size(); ++i)
    std::printf("GPU %zu: %s (compute capability %d.%d)\n", i, probe.gpus[i].name.c_str(), probe.gpus[i].major,
                probe.gpus[i].minor);
  std::printf("driver for CUDA %d.%d, runtime CUDA %d.%d\n", probe.driver_version / 1000,
              probe.driver_version % 1000 / 10, probe.runtime_version / 1000, probe.runtime_version % 1000 / 10);
  doctest::Context ctx(static_cast<int>(args.size()), args.data());
  return ctx.run();
}
