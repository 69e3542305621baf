// The mailboxes of the threads backend: one per rank, in process memory, and the waits on them.
//
// Protocol: every message is copied once, into memory its receiver owns. A mailbox holds, under its mutex, the
// messages that arrived before their receive, the receives posted before their message, and the posted receives a
// large message has come to:
//   - a small send (<= kThreadsEagerBytes) finds its receive posted: the sender copies straight into the receive
//     buffer, at once;
//   - a small send finds none: it files a buffer in the receiver's mailbox, fills it after releasing the mutex,
//     and the send is complete; the receive later copies the bytes out of its own mailbox (outside the mutex too,
//     once the buffer is filled);
//   - a large send finds its receive posted: the receive is marked matched and its rank rung; that rank copies
//     straight out of the sender's buffer in its next wait or test (serve), then marks the send done;
//   - a large send finds none: a rendezvous entry waits in the receiver's mailbox; the receive, when posted,
//     claims it and copies straight out of the sender's buffer into its own, then marks the send done.
// So every large message is copied by its receiver, as the processes backend's sends by reference are: each rank
// makes its own receives' copies, and with more ranks than cores (4 ranks on 2 cores) the copies spread over the
// cores with the ranks instead of piling up on whichever core runs the senders (measured:
// docs/performance/comm.md). A waiting rank serves its matched receives, then polls briefly, then sleeps on its
// doorbell (wait_policy.hpp), which a sender rings when it matches a receive and a receiver rings when it
// completes a send.
//
// The state machines (a transition out of the first state that another rank can race is made under the
// receiver's mailbox mutex):
//   receive:         posted -> copying -> done (a small sender copies) | posted -> matched -> done (a large sender's
//                    bytes, copied by the receive's rank) | posted -> done (the receive copies, at once) |
//                    posted -> failed (size mismatch) | posted -> cancelled | matched -> cancelled (the sender is
//                    released, nothing copied)
//   rendezvous send: waiting -> claimed -> done (the receive copies) | waiting -> cancelled
// A request destroyed unwaited (its rank is failing) cancels; if its peer is copying at that moment, the
// destructor waits for the copy to end before the buffer can go.
#pragma once
#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "sim/comm/envelope.hpp"
#include "sim/comm/p2p_communicator.hpp"

namespace cpsim {

namespace threads_detail {
struct RecvOp;
struct SendOp;
struct Mailbox;
}  // namespace threads_detail

class ThreadsWorld {
 public:
  ThreadsWorld(int size, std::chrono::milliseconds timeout);
  ~ThreadsWorld();

  // Rank `me` posts a message to / a receive from world rank dst / src.
  Pending send(int me, const Envelope& env, const void* buf, std::size_t bytes, int dst);
  Pending recv(int me, const Envelope& env, void* buf, std::size_t bytes, int src, Landing how = {});

  // The launcher's view: a rank returned (finish) or threw (fail; the first failure is the one reported).
  void finish(int r);
  void fail(int r, const std::string& what);
  int first_failed() const;
  std::string first_failure() const;

  // For the requests send() and recv() return.
  void wait_recv(int me, const threads_detail::RecvOp& op);
  void wait_send(int me, const threads_detail::SendOp& op);
  bool recv_done(const threads_detail::RecvOp& op) const;  // throws the receive's error
  // Rank `me` copies the large messages that came to its posted receives (in each of its waits and tests).
  void serve(int me);
  static bool send_done(const threads_detail::SendOp& op);
  void cancel_recv(int me, const std::shared_ptr<threads_detail::RecvOp>& op);
  void cancel_send(const std::shared_ptr<threads_detail::SendOp>& op);

 private:
  void ring(int r);
  void ring_all();
  template <class Done>
  void wait_for(int me, Done done, const Envelope& env, bool sending, int peer);

  std::chrono::milliseconds timeout_;
  std::vector<std::unique_ptr<threads_detail::Mailbox>> boxes_;
  std::vector<std::atomic<int>> status_;
  std::atomic<bool> aborted_{false};
  mutable std::mutex fail_m_;
  int first_failed_ = -1;
  std::string first_failure_;
};

}  // namespace cpsim
