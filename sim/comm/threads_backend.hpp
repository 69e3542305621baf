// The threads backend: C ranks as std::threads of one process, exchanging messages through per-rank
// mailboxes in process memory (threads_world.hpp; docs/backends-threads-processes.md).
//
// A message is written once into memory its receiver owns (threads_world.hpp):
//   - small messages (<= kThreadsEagerBytes) to a receive already posted: the sender copies straight into the
//     receive buffer;
//   - small messages sent before the receive: copied into the receiver's mailbox at send time (the send
//     completes at once); the receive later copies them out of its own mailbox;
//   - large messages: the receiving rank copies straight out of the sender's buffer, when it posts the receive
//     (the message came first) or in its next wait or test (the receive came first), and completes the send
//     (the only time a rank reads another rank's buffer: for that one copy into its own memory).
// Every rank's waits and tests make its pending copies, so isend + irecv + compute + wait around a ring always
// progresses, in any wait order.
#pragma once
#include <cstddef>
#include <vector>

#include "sim/comm/backend.hpp"

namespace cpsim {

constexpr std::size_t kThreadsEagerBytes = 16 * 1024;
constexpr int kMaxThreadsRanks = 1024;

std::vector<RankOutcome> launch_threads(const LaunchOptions& opt, const RankFn& fn);

}  // namespace cpsim
