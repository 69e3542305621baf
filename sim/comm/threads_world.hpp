// The mailboxes of the threads backend: one per rank, in process memory, and the waits on them.
//
// Each mailbox holds a mutex, a condition variable, the messages that arrived before their receive and the
// receives posted before their message. A message is written once into memory its receiver owns (see
// threads_backend.hpp): straight into a posted receive, into the receiver's mailbox (small, early), or, for a
// large early send, straight into the receive once it is posted, by the sender during any of its waits.
#pragma once
#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
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
  Pending recv(int me, const Envelope& env, void* buf, std::size_t bytes, int src);

  // The launcher's view: a rank returned (finish) or threw (fail; the first failure is the one reported).
  void finish(int r);
  void fail(int r, const std::string& what);
  int first_failed() const;
  std::string first_failure() const;

  // For the requests send() and recv() return.
  void wait_recv(int me, threads_detail::RecvOp& op);
  void wait_send(int me, const std::shared_ptr<threads_detail::SendOp>& op);
  void push(int me);  // copy this rank's rendezvous sends whose receive has been posted
  void cancel(int me, const std::shared_ptr<threads_detail::RecvOp>& op);
  bool recv_done(const threads_detail::RecvOp& op) const;

 private:
  void ring(int r);
  void ring_all();
  void complete(int dst, threads_detail::RecvOp& op);
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
