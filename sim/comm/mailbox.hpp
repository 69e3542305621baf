// The mailboxes of the threads and processes backends: how a message gets from one rank's buffer to another's.
//
// One mailbox per endpoint (each rank; on the processes backend also the launcher, which receives the ranks'
// results). A mailbox is a list of the messages that arrived for it, oldest first. Every mailbox of a launch, and
// the one lock that guards them all, lie in memory every rank can reach: the process's memory for threads, a
// shared-memory segment mapped before the ranks are forked for processes (so a pointer means the same everywhere).
//
// The protocol (mailbox.cpp):
//   send    the sender copies the message into a block of the launch's message pool (the process's heap for
//           threads, the shared segment for processes), then, under the lock, appends the block to the
//           receiver's mailbox and rings the receiver's doorbell. The send is complete: the sender may reuse its
//           buffer at once, and a send never waits for its receive (so a ring of sendrecv never deadlocks).
//   receive the receiving rank keeps its posted receives in posting order (its own memory). Under the lock it
//           gives each, in that order, the oldest message of its mailbox from the same stream (source, context,
//           channel, tag: envelope.hpp), unlinks it, and after the lock copies it into the receive buffer (or
//           folds it in: fold.hpp) and returns the block to the pool. A message of the wrong size or of another
//           collective fails the receive with an error naming both sides.
//   wait    a waiting rank takes what arrived, then sleeps on its doorbell until a sender rings it, at most 50 ms
//           at a time: every turn it checks whether another rank failed (the run is aborted), whether its peer
//           finished or died without sending (an error naming both), and its timeout (a likely deadlock).
// So every message is copied twice, into the pool and out of it, and the lock is never held during a copy.
//
// The doorbell is a 32-bit counter: a sender bumps it and wakes the futex on it; a waiter reads it before looking,
// and sleeps only while it has not changed. A futex works across processes and never waits for anyone, so a rank
// killed at any moment cannot leave another asleep for good. The lock is a process-shared, robust pthread mutex:
// if a rank dies holding it, the next rank to take it is told (EOWNERDEAD), and the run stops (every call throws
// Aborted) rather than trust lists the dead rank was changing.
#pragma once
#include <pthread.h>

#include <boost/interprocess/indexes/iset_index.hpp>
#include <boost/interprocess/managed_external_buffer.hpp>
#include <boost/interprocess/mem_algo/rbtree_best_fit.hpp>
#include <boost/interprocess/sync/mutex_family.hpp>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "sim/comm/envelope.hpp"
#include "sim/comm/p2p_communicator.hpp"

namespace cpsim {

// Where messages wait for their receiver. Called with the mailboxes' lock held.
class MessagePool {
 public:
  virtual ~MessagePool() = default;
  virtual void* allocate(std::size_t bytes) = 0;  // 64-byte aligned; null while the pool is full
  virtual void release(void* p) = 0;
  virtual std::size_t capacity() const = 0;  // the most bytes it holds at once
};

// The pool of both backends: Boost.Interprocess's best-fit allocator over one region of memory (a private mapping
// for threads, the shared segment for processes), laid out before any rank starts and called only under the
// mailboxes' lock (it takes no lock of its own). A freed block is reused by later messages, so a message's pages are
// backed once, not at every send; each block's pages are backed before the sender writes it (MADV_POPULATE_WRITE),
// so memory running out is an error naming the need, never a SIGBUS.
class RegionPool final : public MessagePool {
 public:
  RegionPool(std::byte* base, std::size_t bytes);
  void* allocate(std::size_t bytes) override;
  void release(void* p) override;
  std::size_t capacity() const override { return capacity_; }

 private:
  using Memory = boost::interprocess::basic_managed_external_buffer<
      char, boost::interprocess::rbtree_best_fit<boost::interprocess::null_mutex_family>,
      boost::interprocess::iset_index>;
  Memory memory_;
  std::size_t capacity_;
};

// A rank's state as the other ranks (and the processes backend's launcher) see it.
enum class RankStatus : std::int32_t { running, finished, failed, stopped, dead };

// A message in the pool: its header, then its bytes.
struct Message {
  Message* next = nullptr;  // the next message of the same mailbox
  MessageHeader hdr;
  std::byte* bytes() { return reinterpret_cast<std::byte*>(this) + kHeaderBytes; }
  static constexpr std::size_t kHeaderBytes = 64;
};

// One endpoint's mailbox and what others need to know about it.
struct MailboxSlot {
  Message* first = nullptr;  // arrived, oldest first (under the lock)
  Message* last = nullptr;
  std::atomic<std::uint32_t> bell{0};  // the doorbell
  std::atomic<std::int32_t> status{static_cast<std::int32_t>(RankStatus::running)};
};

// Every mailbox of a launch: a view of memory laid out by the launcher (init) before any rank starts.
class Mailboxes {
 public:
  static std::size_t bytes_needed(int endpoints);
  Mailboxes(void* memory, int endpoints, MessagePool& pool, bool init);

  int endpoints() const;
  RankStatus status(int endpoint) const;
  void set_status(int endpoint, RankStatus s);  // and rings everyone: waits on that endpoint look again
  // Records the first failure (later ones are ignored), marks the rank, and aborts the run: every wait stops.
  void fail(int rank, std::string_view what, RankStatus s = RankStatus::failed);
  bool aborted() const;
  int first_failed() const;     // -1 while none failed
  std::string failure() const;  // the first failure's text
  // Returns every message still in a mailbox to the pool (the launcher, once no rank runs).
  void discard_unreceived();

 private:
  friend class Postbox;
  struct Shared;
  class Locked;
  void ring(int endpoint);
  void ring_all();
  Shared* s_;
  MailboxSlot* slots_;
  MessagePool& pool_;
};

// One endpoint's side: its posted receives, and its sends. Used by one thread (the rank's, or the launcher's).
class Postbox {
 public:
  Postbox(Mailboxes& boxes, int me, std::chrono::milliseconds timeout);
  int me() const { return me_; }

  // The message is in dst's mailbox when this returns (the request is already complete).
  Pending send(const Envelope& env, const void* buf, std::size_t bytes, int dst);
  // Lands the oldest message of the stream (src, env) in buf as `how` says, in a later wait or test.
  Pending recv(const Envelope& env, void* buf, std::size_t bytes, int src, Landing how = {});

  struct Receive;
  void take_arrivals();          // gives the posted receives the messages that arrived for them, and lands them
  bool done(const Receive& op);  // true when landed; throws the receive's error
  void wait(const Receive& op);  // until landed; throws when it cannot be (see the protocol)
  void cancel(const Receive& op);

 private:
  template <class E>
  [[noreturn]] void broken(const E& e) {  // throws e, and every later wait fails at once
    broken_ = true;
    throw e;
  }
  Mailboxes& boxes_;
  int me_;
  std::chrono::milliseconds timeout_;
  std::vector<std::shared_ptr<Receive>> posted_;  // in posting order
  bool broken_ = false;                           // a wait failed: later waits fail at once
};

// The communicator of both backends: point-to-point through a Postbox, the rest in P2pCommunicator.
class MailboxCommunicator final : public P2pCommunicator {
 public:
  MailboxCommunicator(Postbox& box, std::string backend, int rank, Recorder& rec, std::vector<int> world_ranks,
                      std::uint64_t context);
  std::string backend() const override { return backend_; }

 protected:
  // Every message of a collective at once, straight from its sender's input (collectives.hpp).
  CollectiveAlgorithm backend_algorithm(std::size_t) const override { return CollectiveAlgorithm::direct; }
  Pending start_send(const Envelope& env, const void* buf, std::size_t bytes, int peer_world) override;
  Pending start_recv(const Envelope& env, void* buf, std::size_t bytes, int peer_world, const Landing& how) override;
  std::unique_ptr<P2pCommunicator> make_sub(int rank, std::vector<int> world_ranks, std::uint64_t context) override;

 private:
  Postbox& box_;
  std::string backend_;
};

}  // namespace cpsim
