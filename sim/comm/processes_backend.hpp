// The processes backend: C ranks as forked processes, exchanging messages through the mailboxes of mailbox.hpp,
// which live in one shared-memory segment (shm_segment.hpp) mapped before the ranks are forked, with the messages
// in flight in a pool in the same segment. The parent supervises: it collects each rank's result and Recorder
// through its own mailbox, notices a rank that crashed or exited early, stops the others and reaps every child.
// docs/backends-threads-processes.md walks a message's path.
//
// Call launch() from a single-threaded process (fork copies only the calling thread).
#pragma once
#include <cstddef>
#include <vector>

#include "sim/comm/backend.hpp"

namespace cpsim {

constexpr int kMaxProcessRanks = 64;

// The bytes of the segment's pool of messages in flight for C ranks whose largest buffers hold `heap_bytes`
// (LaunchOptions::heap_bytes), where /dev/shm has `shm_free` bytes free: room for every rank to have four times that
// in flight, 1 GiB at the least, and half of what /dev/shm has free at the most (tmpfs backs only the pages that
// messages touch).
std::size_t message_pool_bytes(int ranks, std::size_t heap_bytes, std::size_t shm_free);

std::vector<RankOutcome> launch_processes(const LaunchOptions& opt, const RankFn& fn);

}  // namespace cpsim
