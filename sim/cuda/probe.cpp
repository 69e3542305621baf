// What the machine offers, in words: the driver, the runtime cpsim was built with, the visible GPUs.
//
// A process that has used CUDA may not fork children that use it too, and launch_nccl forks its ranks; so unless
// this process already uses CUDA, the probe runs in a child process and sends its findings back through a pipe.
#include "sim/cuda/probe.hpp"

#include <poll.h>
#include <unistd.h>

#include <csignal>
#include <cstdlib>
#include <mutex>
#include <optional>

#include "sim/core/bytes.hpp"
#include "sim/cuda/cuda_check.hpp"
#include "sim/cuda/cuda_device.hpp"
#include "sim/cuda/rank_gpu.hpp"
#include "sim/os/forked_children.hpp"

namespace cpsim {
namespace {

constexpr int kMinMajor = 8;  // mma.sync with bf16, cp.async, ldmatrix: Ampere (8.0) and newer

std::string cuda_version(int v) {
  return std::to_string(v / 1000) + "." + std::to_string(v % 1000 / 10);
}

GpuProbe probe_here() {
  cuda::note_cuda_used();
  GpuProbe p;
  p.runtime_version = CUDART_VERSION;
  if (cudaDriverGetVersion(&p.driver_version) != cudaSuccess) p.driver_version = 0;
  int n = 0;
  const cudaError_t e = cudaGetDeviceCount(&n);
  const char* visible = std::getenv("CUDA_VISIBLE_DEVICES");
  if (p.driver_version == 0) {
    p.problem =
        "no NVIDIA driver was found (the CUDA driver library libcuda.so.1 is missing); install the NVIDIA "
        "driver on a machine with an NVIDIA GPU";
    p.cpu_backend_helps = true;
  } else if (p.driver_version < p.runtime_version || e == cudaErrorInsufficientDriver) {
    p.problem = "the NVIDIA driver supports CUDA " + cuda_version(p.driver_version) + ", older than the CUDA " +
                cuda_version(p.runtime_version) +
                " runtime cpsim was built with; update the driver, or build cpsim "
                "with a CUDA toolkit no newer than " +
                cuda_version(p.driver_version);
  } else if (e == cudaErrorNoDevice || (e == cudaSuccess && n == 0)) {
    p.problem = std::string("no CUDA GPU is visible") +
                (visible ? std::string(" (CUDA_VISIBLE_DEVICES=") + visible + ")" : std::string()) +
                "; run on a machine with an NVIDIA GPU";
    p.cpu_backend_helps = true;
  } else if (e != cudaSuccess) {
    p.problem = std::string("CUDA could not start: ") + cudaGetErrorString(e) + " (" + cudaGetErrorName(e) + ")";
  } else {
    for (int i = 0; i < n; ++i) {
      cudaDeviceProp prop{};
      if (cudaGetDeviceProperties(&prop, i) != cudaSuccess) continue;
      p.gpus.push_back(GpuInfo{prop.name, prop.major, prop.minor, static_cast<std::int64_t>(prop.totalGlobalMem)});
      if (prop.major < kMinMajor && p.problem.empty())
        p.problem = "GPU " + std::to_string(i) + " (" + prop.name + ") has compute capability " +
                    std::to_string(prop.major) + "." + std::to_string(prop.minor) + "; cpsim's kernels need " +
                    std::to_string(kMinMajor) + ".0 or newer; choose newer GPUs with CUDA_VISIBLE_DEVICES";
    }
  }
  (void)cudaGetLastError();
  return p;
}

std::string serialize(const GpuProbe& p) {
  ByteWriter w;
  w.put(p.problem);
  w.put(p.cpu_backend_helps);
  w.put(p.driver_version);
  w.put(p.runtime_version);
  w.put<std::uint64_t>(p.gpus.size());
  for (const GpuInfo& g : p.gpus) {
    w.put(g.name);
    w.put(g.major);
    w.put(g.minor);
    w.put(g.memory_bytes);
  }
  return w.take();
}

GpuProbe deserialize(const std::string& s) {
  ByteReader r(s);
  GpuProbe p;
  r.get(p.problem);
  r.get(p.cpu_backend_helps);
  r.get(p.driver_version);
  r.get(p.runtime_version);
  const auto n = r.get<std::uint64_t>();
  for (std::uint64_t i = 0; i < n; ++i) {
    GpuInfo g;
    r.get(g.name);
    r.get(g.major);
    r.get(g.minor);
    r.get(g.memory_bytes);
    p.gpus.push_back(g);
  }
  return p;
}

// The probe in a child process: what it finds, or why it could not tell.
GpuProbe probe_in_child() {
  int fds[2];
  if (::pipe(fds) != 0) return probe_here();
  ForkedChildren procs;  // the supervisor: the probe dies with this process, and is killed and reaped below
  const int child = procs.start([&]() -> int {
    ::close(fds[0]);
    const std::string out = serialize(probe_here());
    std::size_t done = 0;
    while (done < out.size()) {
      const ssize_t n = ::write(fds[1], out.data() + done, out.size() - done);
      if (n <= 0) break;
      done += static_cast<std::size_t>(n);
    }
    return 0;
  });
  if (child < 0) {
    ::close(fds[0]);
    ::close(fds[1]);
    return probe_here();
  }
  ::close(fds[1]);
  std::string in;
  char buf[4096];
  for (;;) {
    pollfd pfd{fds[0], POLLIN, 0};
    if (::poll(&pfd, 1, 60000) <= 0) break;  // a driver that hangs for a minute counts as no answer
    const ssize_t n = ::read(fds[0], buf, sizeof buf);
    if (n <= 0) break;
    in.append(buf, static_cast<std::size_t>(n));
  }
  ::close(fds[0]);
  if (!procs.poll(child)) procs.kill(child, SIGKILL);  // it gave no answer in time (or closed the pipe and hangs)
  const ChildExit end = procs.wait(child);
  try {
    return deserialize(in);
  } catch (const Error&) {
    GpuProbe p;
    p.runtime_version = CUDART_VERSION;
    p.problem = end.signal && !procs.killed(child)
                    ? "the GPU probe process " + end.words() + " while starting CUDA; check the NVIDIA driver (nvidia-smi)"
                    : "the GPU probe process gave no answer; check the NVIDIA driver (nvidia-smi)";
    return p;
  }
}

}  // namespace

GpuProbe probe_gpus() {
  static std::mutex m;
  static std::optional<GpuProbe> cached;
  std::lock_guard lk(m);
  if (!cached) cached = cuda::cuda_used() ? probe_here() : probe_in_child();
  return *cached;
}

Error probe_error(const GpuProbe& probe, const std::string& prefix) {
  // The problem is "what is missing; what would give it", and a CPU backend is the other way out.
  const auto at = probe.problem.find("; ");
  if (!probe.cpu_backend_helps || at == std::string::npos) return Error(prefix + probe.problem);
  return Error(prefix + probe.problem.substr(0, at),
               {Fix{{}, probe.problem.substr(at + 2)}, Fix{{"--backend threads"}}});
}

std::string cuda_runtime_problem() {
  return probe_gpus().problem;
}

}  // namespace cpsim
