// `cpsim bench comm --backend processes`: is a single copy between processes worth having here?
//
// Linux cross-memory attach (process_vm_readv) copies from another process's memory straight into ours: one
// copy per message instead of the processes backend's two (into a shared-memory slot, out of it). The probe
// forks a child that holds a buffer and reads it back with process_vm_readv, beside memcpy of the same size,
// both best of 3, so the bench can print whether the kernel allows it and what it costs on this machine.
#pragma once
#include <cstddef>
#include <string>

namespace cpsim::cli {

struct CmaProbe {
  bool allowed = false;  // false: the kernel refused (`why`), e.g. EPERM under Yama ptrace_scope or seccomp
  std::string why;
  double cma_gbps = 0, memcpy_gbps = 0;
};

CmaProbe probe_cross_memory_attach(std::size_t bytes);

}  // namespace cpsim::cli
