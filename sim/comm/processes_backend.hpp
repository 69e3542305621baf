// The processes backend: C ranks as forked processes sharing one shared-memory segment (shm_segment.hpp)
// that holds their mailboxes (shm_world.hpp: slot rings and doorbells), each process running its own
// progress engine (shm_engine.hpp). The parent supervises: it collects each rank's result and Recorder
// through the segment, notices a rank that crashed or exited early, stops the others and reaps every child.
// See docs/backends-threads-processes.md.
//
// Call launch() from a single-threaded process (fork copies only the calling thread).
#pragma once
#include <vector>

#include "sim/comm/backend.hpp"
#include "sim/comm/shm_world.hpp"

namespace cpsim {

std::vector<RankOutcome> launch_processes(const LaunchOptions& opt, const RankFn& fn);

}  // namespace cpsim
