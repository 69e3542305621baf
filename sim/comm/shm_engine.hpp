// One endpoint's progress engine for the processes backend: it streams this endpoint's sends into the rings
// to their destinations and drains the rings from every source, matching arriving messages to posted
// receives. It runs only inside this process's calls (post, wait, test): single-threaded, no locks.
//
//   send:  queued per destination; the head message of each queue streams chunk by chunk into free slots.
//          A send of kByReferenceFrom bytes or more from a buffer in the shared heap (shm_heap.hpp) goes by
//          reference instead: one slot says where its bytes lie and names a token of the sender's; the receiver
//          copies the bytes once, straight out of the sender's buffer, into the receive buffer (or folds them in),
//          and marks the token done, which completes the send. Like the threads backend's rendezvous, the copy is
//          made by whoever arrives second: the receive, when it is posted after the message, or the receiver's
//          progress when the message comes to a posted receive.
//   drain: a message's first chunk is matched to the oldest posted receive of the same stream; without one
//          the message is kept in a private buffer (unexpected; reused from call to call) until a receive takes
//          it. Chunks are copied out of the slot into the receive buffer (or that buffer) and the slot freed at
//          once; a receive with a fold (fold.hpp) combines each chunk with its own data on the way instead.
//          A receive drains its source's ring as it is posted, so a message waiting there streams straight
//          into it.
//   wait:  progress; if nothing can move, spin briefly, then sleep on this endpoint's doorbell. A wait fails
//          when the run is aborted, when its peer is gone, or after the timeout (likely deadlock).
#pragma once
#include <chrono>
#include <cstddef>
#include <deque>
#include <list>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "sim/comm/p2p_communicator.hpp"
#include "sim/comm/shm_world.hpp"

namespace cpsim {

// Sends of at least this many bytes from the heap go by reference; smaller ones are copied through a slot at once
// (eager: the send completes without its receiver), which is faster than a hand-over for a few KiB.
constexpr std::size_t kByReferenceFrom = 16 * 1024;

class ShmEngine {
 public:
  ShmEngine(const ShmWorld& world, int me, std::chrono::milliseconds timeout);
  ShmEngine(const ShmEngine&) = delete;
  ShmEngine& operator=(const ShmEngine&) = delete;

  int me() const { return me_; }
  const ShmWorld& world() const { return world_; }
  Pending send(const Envelope& env, const void* buf, std::size_t bytes, int dst);
  Pending recv(const Envelope& env, void* buf, std::size_t bytes, int src, Landing how = {});
  // Moves whatever can move now. True when something moved.
  bool progress();
  // Sends so far that went by reference, and through the slots (the launcher's results included).
  std::uint64_t sent_by_reference() const { return by_reference_; }
  std::uint64_t sent_through_slots() const { return through_slots_; }

  struct Op;

 private:
  struct Stash;     // a message that arrived before its receive
  struct Inbound {  // the message currently streaming in from one source
    bool active = false;
    std::uint64_t total = 0, got = 0;
    std::shared_ptr<Op> op;        // the receive it streams into, or
    std::shared_ptr<Stash> stash;  // the private buffer it streams into (neither: discarded)
  };
  friend struct ShmPending;

  bool push(int dst);
  bool drain(int src);
  void bind(int src, const MessageHeader& h, bool by_reference);
  // The receiver's copy of a message sent by reference (or zeros, when its sender revoked it), then the token.
  void take(int src, const Reference& ref, void* buf, std::size_t bytes, const Landing& how, bool copy);
  bool reference_done(Op& op);  // a send by reference: its receiver marked it done (the token is freed)
  void wait(Op& op);
  void cancel(Op& op);
  bool finished(Op& op);  // done? throws the op's error

  const ShmWorld& world_;
  int me_;
  std::chrono::milliseconds timeout_;
  std::vector<std::deque<std::shared_ptr<Op>>> sends_;  // per destination endpoint, in posting order
  std::vector<Inbound> inbound_;                        // per source rank
  std::list<std::shared_ptr<Stash>> unexpected_;        // in arrival order
  std::list<std::shared_ptr<Op>> posted_;               // in posting order
  std::vector<std::vector<std::byte>> spare_;           // unexpected messages' buffers, kept for reuse
  static constexpr std::size_t kMaxSpare = 4;
  std::vector<std::uint32_t> free_tokens_;     // this rank's tokens not in use
  std::list<std::shared_ptr<Op>> references_;  // sends by reference not yet done
  std::uint64_t by_reference_ = 0, through_slots_ = 0;
  bool broken_ = false;  // a wait failed: this endpoint's streams are unusable
};

}  // namespace cpsim
