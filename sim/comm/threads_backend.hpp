// The threads backend: C ranks as std::threads of one process, exchanging messages through per-rank
// mailboxes in process memory (threads_world.hpp; docs/backends-threads-processes.md).
//
// A rank never reads another rank's buffer. A message is written once into memory its receiver owns:
//   - a receive already posted: the sender copies straight into the receive buffer;
//   - small messages (<= kThreadsEagerBytes) sent before the receive: copied into the receiver's mailbox at
//     send time (the send completes at once); the receive later copies them out of its own mailbox;
//   - large messages sent before the receive: the send waits in the receiver's mailbox until a receive is
//     posted, then the sender copies straight into it (in any wait of the sending rank, so the ring pattern
//     isend + irecv + compute + wait always makes progress).
#pragma once
#include <cstddef>
#include <vector>

#include "sim/comm/launcher.hpp"

namespace cpsim {

constexpr std::size_t kThreadsEagerBytes = 16 * 1024;
constexpr int kMaxThreadsRanks = 1024;

std::vector<RankOutcome> launch_threads(const LaunchOptions& opt, const RankFn& fn);

}  // namespace cpsim
