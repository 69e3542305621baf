// The backends a build holds. Each backend registers itself in its own launcher file, as the CLI's commands do:
//
//   CPSIM_BACKEND(threads) {
//     info.backend = Backend::threads;
//     info.device = "cpu";
//     info.launch = launch_threads;
//   }
//
// so nothing here or in the launcher names a backend's code: a backend that is not built in is simply not
// registered, and asking for it is a UsageError saying what the build lacks. (The files that register are linked
// into every program that links cpsim: sim/CMakeLists.txt.)
#pragma once
#include <functional>
#include <string>
#include <vector>

#include "sim/comm/backend.hpp"

namespace cpsim {

struct BackendInfo {
  Backend backend = Backend::threads;
  std::string device;  // the Device its ranks compute on (sim/kernels/device_registry.hpp): "cpu", "cuda"
  int max_ranks = 0;   // the most ranks one launch may have; 0: no limit of its own
  std::string max_ranks_fix;
  bool job_ranks = false;  // its ranks are the processes an MPI launcher (mpirun, srun) started
  LaunchFn launch;         // starts opt.ranks ranks, runs fn on each, returns the outcomes in rank order
  // Job services of a job_ranks backend (launcher.hpp: run_on_rank0, broadcast_from_rank0); unset otherwise.
  std::function<void(const std::function<void()>&)> run_on_rank0;
  std::function<void(std::string&)> broadcast_from_rank0;
};

// Registers the backend `describe` fills in (once per backend; a second registration is an Error). Returns true.
bool register_backend(void (*describe)(BackendInfo& info));
// The backend's entry, or null when this build does not hold it.
const BackendInfo* find_backend(Backend b);
// The backend's entry; UsageError "backend 'X' is not built in (it needs ...); use --backend threads ..." otherwise.
const BackendInfo& built_in_backend(Backend b);
// The backends this build holds, in the vocabulary's order.
std::vector<Backend> built_in_backends();

// CPSIM_BACKEND(id) { info.backend = ...; }: the braces are the body of a function filling `info`.
#define CPSIM_BACKEND(id)                                                                                         \
  static void cpsim_describe_backend_##id(::cpsim::BackendInfo& info);                                            \
  [[maybe_unused]] static const bool cpsim_backend_##id = ::cpsim::register_backend(cpsim_describe_backend_##id); \
  static void cpsim_describe_backend_##id(::cpsim::BackendInfo& info)

}  // namespace cpsim
