#include "sim/comm/threads_world.hpp"

#include <algorithm>
#include <cstring>
#include <deque>
#include <thread>

#include "sim/comm/adaptive_mutex.hpp"
#include "sim/comm/threads_backend.hpp"
#include "sim/comm/wait_policy.hpp"

namespace cpsim {

namespace threads_detail {

using Clock = std::chrono::steady_clock;

enum RecvState : int { kPosted, kCopying, kMatched, kDone, kFailed, kCancelled };
struct SendOp;
struct RecvOp {
  Envelope env;
  int src = 0;
  void* buf = nullptr;
  std::size_t bytes = 0;
  Landing how;  // a copy, or receive-and-reduce: buf = op(message, fold->own)
  std::atomic<int> state{kPosted};
  std::string error;               // written before state becomes kFailed
  std::shared_ptr<SendOp> sender;  // kMatched: the large send this receive copies from (set before the state)
};

// A large send: the receive copies out of `buf` (arrived before its receive, or matched to a posted one).
enum SendState : int { kWaiting, kClaimed, kSent, kSendCancelled };
struct SendOp {
  MessageHeader hdr;
  const void* buf = nullptr;
  int dst = 0;
  std::atomic<int> state{kWaiting};
};

// A small message's bytes in the receiver's mailbox. The sender files it under the mailbox's lock and fills it
// after, so that no copy is made under the lock (a holder preempted mid-copy stalls every rank that wants the
// mailbox: docs/performance/comm.md, "No copy under the lock"); the receive that takes it out waits until it is
// filled, which ends with the sender's copy.
struct Eager {
  std::vector<std::byte> data;  // at least the message's bytes (a spare only grows: no zeroing on reuse)
  std::atomic<bool> filled{false};
  void wait_filled() const {
    while (!filled.load(std::memory_order_acquire)) std::this_thread::yield();
  }
};

// A message no receive was posted for yet: its bytes (eager) or its waiting sender (rendezvous).
struct Parcel {
  MessageHeader hdr;
  std::unique_ptr<Eager> eager;
  std::shared_ptr<SendOp> rendezvous;
};

struct Mailbox {
  AdaptiveMutex m;  // held for a match, never a copy: polled briefly before sleeping (adaptive_mutex.hpp)
  std::deque<Parcel> arrived;                    // in arrival order
  std::vector<std::shared_ptr<RecvOp>> posted;   // in posting order
  std::vector<std::shared_ptr<RecvOp>> matched;  // posted receives a large send has come to: this rank copies them
  std::atomic<bool> any_matched{false};          // matched is not empty (read without the lock)
  std::vector<std::unique_ptr<Eager>> spare;     // eager buffers to reuse: the hot path does not allocate
  Doorbell bell;                                 // rung when an operation of this rank completes
  bool broken = false;                           // a wait of this rank failed: later waits fail at once (own thread)
};
constexpr std::size_t kMaxSpare = 64;

enum RankStatus : int { kRunning, kFinished, kFailedRank };

// The receive's one pass over the message: a copy, or the fold.
void land(const RecvOp& op, const void* message) {
  cpsim::land(op.buf, message, 0, op.bytes, op.how);
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
  boxes_[r]->bell.ring();
}

void ThreadsWorld::ring_all() {
  for (int r = 0; r < static_cast<int>(boxes_.size()); ++r) ring(r);
}

namespace {

struct RecvImpl final : Request::Impl {
  ThreadsWorld& w;
  int me;
  std::shared_ptr<RecvOp> op;
  RecvImpl(ThreadsWorld& world, int rank, std::shared_ptr<RecvOp> o) : w(world), me(rank), op(std::move(o)) {}
  ~RecvImpl() override { w.cancel_recv(me, op); }
  void wait() override { w.wait_recv(me, *op); }
  bool test() override {
    w.serve(me);
    return w.recv_done(*op);
  }
};

struct SendImpl final : Request::Impl {
  ThreadsWorld& w;
  int me;
  std::shared_ptr<SendOp> op;  // null: the bytes are already where the receiver owns them
  SendImpl(ThreadsWorld& world, int rank, std::shared_ptr<SendOp> o) : w(world), me(rank), op(std::move(o)) {}
  ~SendImpl() override {
    if (op) w.cancel_send(op);  // the sender's buffer is going away: nobody may copy from it afterwards
  }
  void wait() override {
    if (op) w.wait_send(me, *op);
  }
  bool test() override {
    w.serve(me);
    return !op || ThreadsWorld::send_done(*op);
  }
};

}  // namespace

Pending ThreadsWorld::send(int me, const Envelope& env, const void* buf, std::size_t bytes, int dst) {
  const MessageHeader h{env, me, bytes};
  Mailbox& b = *boxes_[dst];
  std::shared_ptr<RecvOp> target;
  {
    std::unique_lock lk(b.m);
    auto it = std::find_if(b.posted.begin(), b.posted.end(), [&](const auto& r) { return matches(r->env, r->src, h); });
    if (it != b.posted.end()) {
      target = *it;
      b.posted.erase(it);
      const std::string err = match_error(dst, target->env, target->bytes, h);
      if (!err.empty()) {
        target->error = err;
        target->state.store(kFailed);
      } else if (bytes <= kThreadsEagerBytes) {
        // 1a. The receive came first, the message is small: claim it; we copy, outside the lock.
        target->state.store(kCopying);
      } else {
        // 1b. The receive came first, the message is large: its rank copies it, in its next call (serve below), so
        // that every rank makes the copies into its own buffers (with more ranks than cores, copies made by whoever
        // runs pile up on one core while the other's ranks sit waiting).
        auto op = std::make_shared<SendOp>();
        op->hdr = h;
        op->buf = buf;
        op->dst = dst;
        target->sender = op;
        target->state.store(kMatched);
        b.matched.push_back(std::move(target));
        b.any_matched.store(true);
        lk.unlock();
        ring(dst);
        return std::make_unique<SendImpl>(*this, me, std::move(op));
      }
    } else if (bytes <= kThreadsEagerBytes) {
      // 2. Small and early: filed in the receiver's mailbox, then filled outside the lock; the send is complete.
      std::unique_ptr<Eager> e;
      if (!b.spare.empty()) {
        e = std::move(b.spare.back());
        b.spare.pop_back();
      } else {
        e = std::make_unique<Eager>();
      }
      e->filled.store(false, std::memory_order_relaxed);
      if (e->data.size() < bytes) e->data.resize(bytes);
      Eager& filling = *e;
      b.arrived.push_back(Parcel{h, std::move(e), nullptr});
      lk.unlock();
      if (bytes > 0) std::memcpy(filling.data.data(), buf, bytes);
      filling.filled.store(true, std::memory_order_release);
      return std::make_unique<SendImpl>(*this, me, nullptr);
    } else {
      // 3. Large and early: wait in the mailbox; the receive copies from our buffer when it is posted.
      auto op = std::make_shared<SendOp>();
      op->hdr = h;
      op->buf = buf;
      op->dst = dst;
      b.arrived.push_back(Parcel{h, nullptr, op});
      return std::make_unique<SendImpl>(*this, me, std::move(op));
    }
  }
  if (target->state.load() == kCopying) {
    land(*target, buf);
    target->state.store(kDone);
  }
  ring(dst);
  return std::make_unique<SendImpl>(*this, me, nullptr);
}

Pending ThreadsWorld::recv(int me, const Envelope& env, void* buf, std::size_t bytes, int src, Landing how) {
  auto op = std::make_shared<RecvOp>();
  op->env = env;
  op->src = src;
  op->buf = buf;
  op->bytes = bytes;
  op->how = std::move(how);
  Mailbox& b = *boxes_[me];
  std::shared_ptr<SendOp> sender;
  {
    std::unique_lock lk(b.m);
    auto it =
        std::find_if(b.arrived.begin(), b.arrived.end(), [&](const Parcel& p) { return matches(env, src, p.hdr); });
    if (it == b.arrived.end()) {  // nothing yet: the sender will find this receive posted
      b.posted.push_back(op);
      return std::make_unique<RecvImpl>(*this, me, op);
    }
    Parcel parcel = std::move(*it);
    b.arrived.erase(it);
    const std::string err = match_error(me, env, bytes, parcel.hdr);
    if (!parcel.rendezvous) {  // eager: out of our own mailbox, outside the lock, once its sender has filled it
      lk.unlock();
      parcel.eager->wait_filled();
      if (err.empty()) land(*op, parcel.eager->data.data());
      op->error = err;
      op->state.store(err.empty() ? kDone : kFailed);
      lk.lock();
      if (b.spare.size() < kMaxSpare) b.spare.push_back(std::move(parcel.eager));
      return std::make_unique<RecvImpl>(*this, me, op);
    }
    if (!err.empty()) {
      op->error = err;
      op->state.store(kFailed);
      // The sender of a mismatched rendezvous is not released here: its rank fails or times out like ours.
      return std::make_unique<RecvImpl>(*this, me, op);
    }
    int waiting = kWaiting;
    // A cancelled sender (its rank is failing) sends nothing: the receive stays pending until the run aborts.
    if (parcel.rendezvous->state.compare_exchange_strong(waiting, kClaimed)) sender = std::move(parcel.rendezvous);
  }
  if (sender) {  // rendezvous: we arrived second, so we copy, straight out of the sender's buffer
    land(*op, sender->buf);
    op->state.store(kDone);
    sender->state.store(kSent);
    ring(src);
  }
  return std::make_unique<RecvImpl>(*this, me, op);
}

void ThreadsWorld::serve(int me) {
  Mailbox& b = *boxes_[me];
  if (!b.any_matched.load()) return;
  std::vector<std::shared_ptr<RecvOp>> mine;
  {
    std::lock_guard lk(b.m);
    mine.swap(b.matched);
    b.any_matched.store(false);
  }
  for (const auto& op : mine) {
    if (op->state.load() != kMatched) continue;  // cancelled since
    SendOp& sender = *op->sender;
    int waiting = kWaiting;
    // A cancelled sender (its rank is failing) sends nothing: the receive stays pending until the run aborts.
    if (!sender.state.compare_exchange_strong(waiting, kClaimed)) continue;
    land(*op, sender.buf);
    op->state.store(kDone);
    sender.state.store(kSent);
    ring(sender.hdr.src);
  }
}

bool ThreadsWorld::recv_done(const RecvOp& op) const {
  const int st = op.state.load();
  if (st == kFailed) throw Error(op.error);
  return st == kDone;
}

bool ThreadsWorld::send_done(const SendOp& op) {
  return op.state.load() == kSent;
}

void ThreadsWorld::cancel_recv(int me, const std::shared_ptr<RecvOp>& op) {
  if (op->state.load() == kMatched) {  // only this rank leaves kMatched: its sender is released, nothing is copied
    int waiting = kWaiting;
    if (op->sender->state.compare_exchange_strong(waiting, kSent)) ring(op->sender->hdr.src);
    op->state.store(kCancelled);
    return;
  }
  if (op->state.load() == kPosted) {
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

void ThreadsWorld::cancel_send(const std::shared_ptr<SendOp>& op) {
  if (op->state.load() == kWaiting) {
    Mailbox& b = *boxes_[op->dst];
    std::lock_guard lk(b.m);
    int waiting = kWaiting;
    op->state.compare_exchange_strong(waiting, kSendCancelled);
  }
  // The receiver may be copying out of the buffer right now: it must finish before the buffer can go.
  while (op->state.load() == kClaimed) std::this_thread::yield();
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
    const std::uint32_t seen = b.bell.seq.load();
    const int peer_status = status_[peer].load();  // read before checking: a finished peer sent everything first
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
    const auto now = Clock::now();
    if (now >= deadline) fail(Error(timeout_error(me, timeout_, env, sending, peer)));
    const auto left = std::chrono::duration_cast<std::chrono::microseconds>(deadline - now);
    b.bell.sleep(seen, std::min(left, std::chrono::microseconds(50000)));
  }
}

void ThreadsWorld::wait_recv(int me, const RecvOp& op) {
  wait_for(
      me,
      [&] {
        serve(me);
        return recv_done(op);
      },
      op.env, false, op.src);
}

void ThreadsWorld::wait_send(int me, const SendOp& op) {
  wait_for(
      me,
      [&] {
        serve(me);
        return send_done(op);
      },
      op.hdr.env, true, op.dst);
}

}  // namespace cpsim
