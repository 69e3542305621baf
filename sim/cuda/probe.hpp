// What the machine offers a CUDA build, in words. Plain C++ (no CUDA header), so the CLI and tests can ask.
//
// Probing never initialises CUDA in the calling process (it runs in a short-lived child process), so that
// launch_nccl may still fork its ranks afterwards.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "sim/core/error.hpp"

namespace cpsim {

struct GpuInfo {
  std::string name;
  int major = 0, minor = 0;  // compute capability
  std::int64_t memory_bytes = 0;
};
struct GpuProbe {
  std::string problem;        // "" when at least one usable GPU is present
  bool cpu_backend_helps = false;  // the problem is no GPU at all: a CPU backend runs the same problem
  int driver_version = 0;     // e.g. 13000 for CUDA 13.0; 0 when no driver is installed
  int runtime_version = 0;    // the CUDA runtime cpsim was built with
  std::vector<GpuInfo> gpus;  // the visible GPUs (CUDA_VISIBLE_DEVICES applies)
};
GpuProbe probe_gpus();
// The problem as an Error, after `prefix` ("--backend nccl: "), with ", or use --backend threads" for the program to
// word where a CPU backend helps.
Error probe_error(const GpuProbe& probe, const std::string& prefix);
std::string cuda_runtime_problem();  // "" when a usable GPU is present, else why not, in words

}  // namespace cpsim
