#include "sim/comm/threads_world.hpp"

#include <algorithm>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <thread>

#include "sim/comm/threads_backend.hpp"
#include "sim/comm/wait_policy.hpp"

namespace cpsim {

namespace threads_detail {

using Clock = std::chrono::steady_clock;

// A posted receive. Its state leaves `posted` only under its receiver's mailbox mutex.
enum RecvState : int { kPosted, kCopying, kDone, kFailed, kCancelled };
struct RecvOp {
  Envelope env;
  int src = 0;
  void* buf = nullptr;
  std::size_t bytes = 0;
  std::atomic<int> state{kPosted};
  std::string error;  // written before state becomes kFailed
};

// A large send that arrived before its receive. The receiver sets `target` (under its mailbox mutex) when it
// posts the receive; the sending rank then copies in its next wait.
struct SendOp {
  MessageHeader hdr;
  const void* buf = nullptr;
  int dst = 0;
  std::shared_ptr<RecvOp> target;
  bool sent = false;  // only the sending thread reads or writes these two
  bool cancelled = false;
};

// A message no receive was posted for yet: its bytes (eager) or its waiting sender (rendezvous).
struct Parcel {
  MessageHeader hdr;
  std::vector<std::byte> data;
  std::shared_ptr<SendOp> rendezvous;
};

struct Mailbox {
  std::mutex m;
  std::condition_variable cv;
  std::deque<Parcel> arrived;                    // in arrival order
  std::vector<std::shared_ptr<RecvOp>> posted;   // in posting order
  std::atomic<std::uint64_t> bell{0};            // changes on every event this rank may be waiting for
  std::vector<std::shared_ptr<SendOp>> pushing;  // this rank's rendezvous sends (its thread only)
  bool broken = false;                           // a wait of this rank failed: later waits fail at once
};

enum RankStatus : int { kRunning, kFinished, kFailedRank };

void copy_bytes(void* dst, const void* src, std::size_t n) {
  if (n > 0) std::memcpy(dst, src, n);
}

}  // namespace threads_detail

using namespace threads_detail;

ThreadsWorld::ThreadsWorld(int size, std::chrono::milliseconds timeout) : timeout_(timeout), status_(size) {
  for (int r = 0; r < size; ++r) boxes_.push_back(std::make_unique<Mailbox>());
  for (auto& s : status_) s.store(kRunning);
}

ThreadsWorld::~ThreadsWorld() = default;

void ThreadsWorld::finish(int r) {
  status_[r].store(kFinished);
  ring_all();
}

void ThreadsWorld::fail(int r, const std::string& what) {
  {
    std::lock_guard lk(fail_m_);
    if (first_failed_ < 0) {
      first_failed_ = r;
      first_failure_ = what;
    }
  }
  status_[r].store(kFailedRank);
  aborted_.store(true);
  ring_all();
}

int ThreadsWorld::first_failed() const {
  std::lock_guard lk(fail_m_);
  return first_failed_;
}

std::string ThreadsWorld::first_failure() const {
  std::lock_guard lk(fail_m_);
  return first_failure_;
}

void ThreadsWorld::ring(int r) {
  Mailbox& b = *boxes_[r];
  {
    std::lock_guard lk(b.m);
    b.bell.fetch_add(1);
  }
  b.cv.notify_all();
}

void ThreadsWorld::ring_all() {
  for (int r = 0; r < static_cast<int>(boxes_.size()); ++r) ring(r);
}

void ThreadsWorld::complete(int dst, RecvOp& op) {
  op.state.store(kDone);
  ring(dst);
}

namespace {

struct RecvImpl final : Request::Impl {
  ThreadsWorld& w;
  int me;
  std::shared_ptr<RecvOp> op;
  RecvImpl(ThreadsWorld& world, int rank, std::shared_ptr<RecvOp> o) : w(world), me(rank), op(std::move(o)) {}
  ~RecvImpl() override { w.cancel(me, op); }
  void wait() override { w.wait_recv(me, *op); }
  bool test() override {
    w.push(me);
    return w.recv_done(*op);
  }
};

struct SendImpl final : Request::Impl {
  ThreadsWorld& w;
  int me;
  std::shared_ptr<SendOp> op;  // null: the bytes are already where the receiver owns them
  SendImpl(ThreadsWorld& world, int rank, std::shared_ptr<SendOp> o) : w(world), me(rank), op(std::move(o)) {}
  ~SendImpl() override {
    if (op && !op->sent) op->cancelled = true;  // the sender's buffer is going away: never copy from it
  }
  void wait() override {
    if (op) w.wait_send(me, op);
  }
  bool test() override {
    w.push(me);
    return !op || op->sent;
  }
};

}  // namespace

Pending ThreadsWorld::send(int me, const Envelope& env, const void* buf, std::size_t bytes, int dst) {
  const MessageHeader h{env, me, bytes};
  Mailbox& b = *boxes_[dst];
  std::shared_ptr<RecvOp> target;
  {
    std::lock_guard lk(b.m);
    // 1. A receive is waiting for this message: claim it, copy outside the lock.
    auto it = std::find_if(b.posted.begin(), b.posted.end(), [&](const auto& r) { return matches(r->env, r->src, h); });
    if (it != b.posted.end()) {
      target = *it;
      b.posted.erase(it);
      const std::string err = match_error(dst, target->env, target->bytes, h);
      if (!err.empty()) {
        target->error = err;
        target->state.store(kFailed);
        target = nullptr;
      } else {
        target->state.store(kCopying);
      }
    } else if (bytes <= kThreadsEagerBytes) {
      // 2. Small and early: into the receiver's mailbox now; the send is complete.
      const auto* p = static_cast<const std::byte*>(buf);
      b.arrived.push_back(Parcel{h, std::vector<std::byte>(p, p + bytes), nullptr});
    } else {
      // 3. Large and early: wait in the mailbox for the receive (rendezvous).
      auto op = std::make_shared<SendOp>();
      op->hdr = h;
      op->buf = buf;
      op->dst = dst;
      b.arrived.push_back(Parcel{h, {}, op});
      boxes_[me]->pushing.push_back(op);
      b.bell.fetch_add(1);
      b.cv.notify_all();
      return std::make_unique<SendImpl>(*this, me, op);
    }
    b.bell.fetch_add(1);
  }
  b.cv.notify_all();
  if (target) {
    copy_bytes(target->buf, buf, bytes);
    complete(dst, *target);
  }
  return std::make_unique<SendImpl>(*this, me, nullptr);
}

Pending ThreadsWorld::recv(int me, const Envelope& env, void* buf, std::size_t bytes, int src) {
  auto op = std::make_shared<RecvOp>();
  op->env = env;
  op->src = src;
  op->buf = buf;
  op->bytes = bytes;
  Mailbox& b = *boxes_[me];
  Parcel parcel;
  {
    std::lock_guard lk(b.m);
    auto it =
        std::find_if(b.arrived.begin(), b.arrived.end(), [&](const Parcel& p) { return matches(env, src, p.hdr); });
    if (it == b.arrived.end()) {  // nothing yet: the sender will find this receive posted
      b.posted.push_back(op);
      return std::make_unique<RecvImpl>(*this, me, op);
    }
    parcel = std::move(*it);
    b.arrived.erase(it);
    const std::string err = match_error(me, env, bytes, parcel.hdr);
    if (!err.empty()) {
      op->error = err;
      op->state.store(kFailed);
      return std::make_unique<RecvImpl>(*this, me, op);
    }
    if (parcel.rendezvous) parcel.rendezvous->target = op;  // the sender copies in its next wait
  }
  if (parcel.rendezvous) {
    ring(src);
  } else {
    copy_bytes(buf, parcel.data.data(), bytes);  // out of our own mailbox
    op->state.store(kDone);
  }
  return std::make_unique<RecvImpl>(*this, me, op);
}

void ThreadsWorld::push(int me) {
  auto& list = boxes_[me]->pushing;
  for (auto it = list.begin(); it != list.end();) {
    SendOp& s = **it;
    if (s.cancelled) {
      it = list.erase(it);
      continue;
    }
    std::shared_ptr<RecvOp> t;
    bool claimed = false;
    {
      Mailbox& b = *boxes_[s.dst];
      std::lock_guard lk(b.m);
      t = s.target;
      if (t && t->state.load() == kPosted) {
        t->state.store(kCopying);
        claimed = true;
      }
    }
    if (!t) {  // no receive yet
      ++it;
      continue;
    }
    if (claimed) {
      copy_bytes(t->buf, s.buf, s.hdr.bytes);
      complete(s.dst, *t);
    }
    s.sent = true;  // delivered, or its receive was cancelled
    it = list.erase(it);
  }
}

bool ThreadsWorld::recv_done(const RecvOp& op) const {
  const int st = op.state.load();
  if (st == kFailed) throw Error(op.error);
  return st == kDone;
}

void ThreadsWorld::cancel(int me, const std::shared_ptr<RecvOp>& op) {
  {
    Mailbox& b = *boxes_[me];
    std::lock_guard lk(b.m);
    if (op->state.load() == kPosted) {
      op->state.store(kCancelled);
      std::erase(b.posted, op);
    }
  }
  // A sender may be copying into the buffer right now: it must finish before the buffer can go.
  while (op->state.load() == kCopying) std::this_thread::yield();
}

template <class Done>
void ThreadsWorld::wait_for(int me, Done done, const Envelope& env, bool sending, int peer) {
  Mailbox& b = *boxes_[me];
  auto fail = [&](auto&& error) {
    b.broken = true;
    throw error;
  };
  if (b.broken) throw Aborted("rank " + std::to_string(me) + ": an earlier operation of this rank failed");
  const auto deadline = Clock::now() + timeout_;
  WaitPolicy policy;
  for (;;) {
    const std::uint64_t seen = b.bell.load();
    const int peer_status = status_[peer].load();  // read before checking: a finished peer sent everything first
    push(me);
    try {
      if (done()) return;
    } catch (const Error&) {
      b.broken = true;
      throw;
    }
    if (aborted_.load())
      fail(Aborted("rank " + std::to_string(me) + " stopped: rank " + std::to_string(first_failed()) + " failed"));
    if (peer_status != kRunning) {
      fail(
          Error(peer_gone_error(me, env, sending, peer, peer_status == kFinished ? "had already finished" : "failed")));
    }
    if (policy.spin()) continue;
    std::unique_lock lk(b.m);
    if (Clock::now() >= deadline) fail(Error(timeout_error(me, timeout_, env, sending, peer)));
    b.cv.wait_until(lk, deadline, [&] { return b.bell.load() != seen; });
  }
}

void ThreadsWorld::wait_recv(int me, RecvOp& op) {
  wait_for(
      me, [&] { return recv_done(op); }, op.env, false, op.src);
}

void ThreadsWorld::wait_send(int me, const std::shared_ptr<SendOp>& op) {
  wait_for(
      me, [&] { return op->sent; }, op->hdr.env, true, op->dst);
}

}  // namespace cpsim
