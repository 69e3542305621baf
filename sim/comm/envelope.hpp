// What every message carries, how a receive is matched to a message, and the error texts both CPU backends
// share (so a deadlock or a mismatched call reads the same on threads and on processes).
//
// Matching: a receive takes the oldest message with the same (source, context, channel, tag). Messages of one
// (source, destination, context, channel, tag) arrive in the order sent. After matching, the receive checks
// what the message says about itself: its size, and for collectives the kind and sequence number of the call
// that sent it. A difference is an Error naming both sides, never silent corruption.
#pragma once
#include <chrono>
#include <cstdint>
#include <string>

#include "sim/core/error.hpp"

namespace cpsim {

// p2p: the user's send/recv (matched by tag). collective: messages inside a collective call (tag 0, stamped
// with the call). control: the launcher's own traffic (a rank's result on its way to the parent).
enum class Channel : std::uint8_t { p2p, collective, control };

enum class CollectiveKind : std::uint8_t { none, all_gather, reduce_scatter, all_to_all, all_reduce, barrier, split };
const char* collective_name(CollectiveKind k);

struct Envelope {
  std::uint64_t context = 0;  // which communicator: the world, or one made by split
  Channel channel = Channel::p2p;
  CollectiveKind kind = CollectiveKind::none;
  std::int32_t tag = 0;   // user tag (p2p); 0 otherwise
  std::uint64_t seq = 0;  // collective calls made on this communicator before this one
};

// The header a message travels with. src is a world rank.
struct MessageHeader {
  Envelope env;
  std::int32_t src = 0;
  std::uint64_t bytes = 0;
};

// Same stream: a receive posted with `want` from `src` may take a message with header h.
inline bool matches(const Envelope& want, int src, const MessageHeader& h) {
  return h.src == src && h.env.context == want.context && h.env.channel == want.channel && h.env.tag == want.tag;
}

// The context id of the world communicator; split derives the others from it.
constexpr std::uint64_t kWorldContext = 1;
// A context for the launcher's own messages, never produced by split.
constexpr std::uint64_t kControlContext = 0;

// "recv from rank 1 (tag 0)", "all_gather #3 (send to rank 2)". Ranks are world ranks.
std::string describe_wait(const Envelope& env, bool sending, int peer_world);

// Empty when the message fits the receive; otherwise why not, e.g.
// "rank 1 posted recv from rank 0 (tag 0) of 100 bytes, but rank 0 sent 50 bytes: sizes must match".
std::string match_error(int me_world, const Envelope& want, std::uint64_t want_bytes, const MessageHeader& got);

// "rank 2 waited 5.0 s in recv from rank 1 (tag 0): likely deadlock"
std::string timeout_error(int me_world, std::chrono::milliseconds waited, const Envelope& env, bool sending,
                          int peer_world);
// "rank 0 waited in recv from rank 1 (tag 0), but rank 1 had already finished without sending it"
std::string peer_gone_error(int me_world, const Envelope& env, bool sending, int peer_world, const std::string& how);

// Thrown in a rank that was waiting when another rank failed. The launcher reports the rank that failed first,
// never these.
struct Aborted : Error {
  using Error::Error;
};

// splitmix64: the mixing step used to derive sub-communicator context ids.
std::uint64_t mix64(std::uint64_t x);

}  // namespace cpsim
