#include "sim/comm/shm_engine.hpp"

#include <algorithm>
#include <cstring>
#include <thread>

#include "sim/comm/wait_policy.hpp"

namespace cpsim {

static_assert(kSlotBytes % 8 == 0, "a fold lands whole elements of every chunk of a message");

struct ShmEngine::Op {
  bool sending = false;
  Envelope env;
  int peer = 0;  // destination endpoint (send) or source rank (receive)
  std::byte* buf = nullptr;
  std::size_t bytes = 0;
  std::size_t moved = 0;      // bytes streamed out (send)
  Landing how;                // a copy, or receive-and-reduce: buf = op(message, fold->own)
  bool started = false;       // first chunk written (send)
  bool by_reference = false;  // a send whose one slot holds `ref` (the receiver copies out of the heap)
  Reference ref;
  enum class State { active, done, failed, cancelled } state = State::active;
  std::string error;
};

struct ShmEngine::Stash {
  MessageHeader hdr;
  std::vector<std::byte> data;  // empty for a message sent by reference: its bytes stay in the sender's buffer
  std::uint64_t got = 0;
  bool complete = false;
  bool by_reference = false;
  Reference ref;
};

// A Request::Impl over one engine op. Destroying it before completion cancels the op: the engine never touches
// its buffer again.
struct ShmPending final : Request::Impl {
  ShmEngine& engine;
  std::shared_ptr<ShmEngine::Op> op;
  ShmPending(ShmEngine& e, std::shared_ptr<ShmEngine::Op> o) : engine(e), op(std::move(o)) {}
  ~ShmPending() override { engine.cancel(*op); }
  void wait() override { engine.wait(*op); }
  bool test() override {
    engine.progress();
    return engine.finished(*op);
  }
};

using State = ShmEngine::Op::State;

namespace {

std::uint32_t as_word(RefToken t) {
  return static_cast<std::uint32_t>(t);
}

// Lands n zero bytes as a message (a send its rank revoked): the receive's buffer is defined, the stream goes on.
void land_zeros(void* buf, std::size_t n, const Landing& how) {
  static const std::byte zeros[kSlotBytes] = {};
  for (std::size_t at = 0; at < n; at += kSlotBytes) land(buf, zeros, at, std::min(kSlotBytes, n - at), how);
}

}  // namespace

ShmEngine::ShmEngine(const ShmWorld& world, int me, std::chrono::milliseconds timeout)
    : world_(world), me_(me), timeout_(timeout), sends_(world.ranks() + 1), inbound_(world.ranks()) {
  if (me < world.ranks() && world.arena_size() > 0)
    for (std::uint32_t t = kRefTokens; t-- > 0;) free_tokens_.push_back(t);
}

Pending ShmEngine::send(const Envelope& env, const void* buf, std::size_t bytes, int dst) {
  auto op = std::make_shared<Op>();
  op->sending = true;
  op->env = env;
  op->peer = dst;
  op->buf = static_cast<std::byte*>(const_cast<void*>(buf));  // only ever read
  op->bytes = bytes;
  std::uint64_t offset = 0;
  if (bytes >= kByReferenceFrom && dst < world_.ranks() && !free_tokens_.empty() &&
      world_.in_heap(buf, bytes, &offset)) {
    op->by_reference = true;
    op->ref = Reference{offset, free_tokens_.back()};
    free_tokens_.pop_back();
    world_.token(me_, op->ref.token).store(as_word(RefToken::pending), std::memory_order_release);
    ++by_reference_;
  } else {
    ++through_slots_;
  }
  sends_[dst].push_back(op);
  push(dst);  // what fits leaves now: a small send completes here, one by reference is posted
  return std::make_unique<ShmPending>(*this, op);
}

Pending ShmEngine::recv(const Envelope& env, void* buf, std::size_t bytes, int src, Landing how) {
  auto op = std::make_shared<Op>();
  op->env = env;
  op->peer = src;
  op->buf = static_cast<std::byte*>(buf);
  op->bytes = bytes;
  op->how = std::move(how);
  // The oldest message of this stream that arrived before us, if any. (No progress() first: a message still
  // in the ring is better left there for this receive to take straight into its buffer.)
  auto it =
      std::find_if(unexpected_.begin(), unexpected_.end(), [&](const auto& s) { return matches(env, src, s->hdr); });
  if (it == unexpected_.end()) {
    posted_.push_back(op);
    drain(src);  // what has arrived from src starts streaming into the receive now
    return std::make_unique<ShmPending>(*this, op);
  }
  const std::shared_ptr<Stash> stash = *it;
  unexpected_.erase(it);
  const std::string err = match_error(me_, env, bytes, stash->hdr);
  if (!err.empty()) {
    op->state = State::failed;
    op->error = err;
    if (stash->by_reference) take(src, stash->ref, nullptr, 0, {}, false);  // its sender goes on
  } else if (stash->by_reference) {  // arrived first, left where it lies: we copy it, once
    take(src, stash->ref, buf, bytes, op->how, true);
    op->state = State::done;
  } else {
    land(buf, stash->data.data(), 0, stash->got, op->how);
    if (stash->complete) {
      op->state = State::done;
    } else {  // still streaming in from src: the rest goes straight into buf
      Inbound& in = inbound_[src];
      in.stash = nullptr;
      in.op = op;
    }
  }
  // Its buffer is free for reuse unless the rest of the message still streams into it (a mismatched receive).
  if (inbound_[src].stash != stash && !stash->by_reference && spare_.size() < kMaxSpare)
    spare_.push_back(std::move(stash->data));
  return std::make_unique<ShmPending>(*this, op);
}

bool ShmEngine::progress() {
  bool moved = false;
  for (int d = 0; d < static_cast<int>(sends_.size()); ++d)
    if (!sends_[d].empty()) moved |= push(d);
  for (int s = 0; s < world_.ranks(); ++s) moved |= drain(s);
  for (auto it = references_.begin(); it != references_.end();) {
    if ((*it)->state != State::active || reference_done(**it)) {
      moved = moved || (*it)->state == State::done;
      it = references_.erase(it);
    } else {
      ++it;
    }
  }
  return moved;
}

bool ShmEngine::reference_done(Op& op) {
  std::atomic<std::uint32_t>& token = world_.token(me_, op.ref.token);
  if (token.load(std::memory_order_acquire) != as_word(RefToken::done)) return false;
  token.store(as_word(RefToken::free), std::memory_order_relaxed);
  free_tokens_.push_back(op.ref.token);
  op.state = State::done;
  return true;
}

void ShmEngine::take(int src, const Reference& ref, void* buf, std::size_t bytes, const Landing& how, bool copy) {
  std::atomic<std::uint32_t>& token = world_.token(src, ref.token);
  std::uint32_t pending = as_word(RefToken::pending);
  const bool live = token.compare_exchange_strong(pending, as_word(RefToken::claimed), std::memory_order_acq_rel);
  if (copy && live) land(buf, world_.heap_at(ref.offset), 0, bytes, how);
  if (copy && !live) land_zeros(buf, bytes, how);  // revoked: its rank is failing
  if (live) token.store(as_word(RefToken::done), std::memory_order_release);
  world_.bell(src).ring();  // the sender may be waiting for its send to complete
}

bool ShmEngine::push(int dst) {
  auto& queue = sends_[dst];
  const Ring ring = world_.ring(me_, dst);
  bool moved = false;
  while (!queue.empty()) {
    Op& op = *queue.front();
    const bool cancelled = op.state == State::cancelled;
    if (cancelled && !op.started) {
      if (op.by_reference) {  // never posted: nobody can read its buffer
        world_.token(me_, op.ref.token).store(as_word(RefToken::free), std::memory_order_relaxed);
        free_tokens_.push_back(op.ref.token);
      }
      queue.pop_front();
      continue;
    }
    SlotHeader* slot = ring.free_slot();
    if (!slot && ring.want_room()) slot = ring.free_slot();
    if (!slot) break;
    if (op.by_reference) {  // one slot: where the bytes lie; done when the receiver has copied them
      slot->first = 1;
      slot->msg = MessageHeader{op.env, me_, op.bytes};
      slot->len = 0;
      slot->by_reference = 1;
      std::memcpy(Ring::payload(slot), &op.ref, sizeof op.ref);
      ring.publish();
      op.started = true;
      op.moved = op.bytes;
      moved = true;
      references_.push_back(queue.front());
      queue.pop_front();
      continue;
    }
    const std::size_t n = std::min(kSlotBytes, op.bytes - op.moved);
    slot->first = op.started ? 0 : 1;
    slot->by_reference = 0;
    if (!op.started) slot->msg = MessageHeader{op.env, me_, op.bytes};
    slot->len = n;
    // A send cancelled half-way (its rank is failing) finishes with zeros: the stream stays well-formed.
    if (n > 0 && cancelled) std::memset(Ring::payload(slot), 0, n);
    if (n > 0 && !cancelled) std::memcpy(Ring::payload(slot), op.buf + op.moved, n);
    ring.publish();
    op.started = true;
    op.moved += n;
    moved = true;
    if (op.moved == op.bytes) {
      if (!cancelled) op.state = State::done;
      queue.pop_front();
    }
  }
  if (moved) world_.bell(dst).ring();
  return moved;
}

void ShmEngine::bind(int src, const MessageHeader& h, bool by_reference) {
  Inbound& in = inbound_[src];
  in = Inbound{};
  in.active = true;
  in.total = h.bytes;
  for (auto it = posted_.begin(); it != posted_.end();) {
    const std::shared_ptr<Op> op = *it;
    if (op->state == State::cancelled) {
      it = posted_.erase(it);
      continue;
    }
    if (!matches(op->env, op->peer, h)) {
      ++it;
      continue;
    }
    posted_.erase(it);
    const std::string err = match_error(me_, op->env, op->bytes, h);
    if (err.empty()) {
      in.op = op;
    } else {  // the receive fails; the message is read and dropped
      op->state = State::failed;
      op->error = err;
    }
    return;
  }
  auto stash = std::make_shared<Stash>();
  stash->hdr = h;
  stash->by_reference = by_reference;
  if (by_reference) {  // the bytes stay in the sender's buffer until a receive takes them
    unexpected_.push_back(stash);
    in.stash = stash;
    return;
  }
  if (!spare_.empty()) {  // reuse a buffer: fresh memory costs a page fault per 4 KiB on first touch
    stash->data = std::move(spare_.back());
    spare_.pop_back();
  }
  stash->data.resize(h.bytes);
  unexpected_.push_back(stash);
  in.stash = stash;
}

bool ShmEngine::drain(int src) {
  const Ring ring = world_.ring(src, me_);
  Inbound& in = inbound_[src];
  bool moved = false;
  while (SlotHeader* slot = ring.filled_slot()) {
    if (!in.active) bind(src, slot->msg, slot->by_reference != 0);
    if (slot->by_reference != 0) {
      Reference ref;
      std::memcpy(&ref, Ring::payload(slot), sizeof ref);
      ring.release();
      moved = true;
      if (in.op && in.op->state == State::active) {  // the receive came first: we copy now
        take(src, ref, in.op->buf, in.op->bytes, in.op->how, true);
        in.op->state = State::done;
      } else if (in.stash) {
        in.stash->ref = ref;
        in.stash->complete = true;
      } else {  // its receive failed or was cancelled: release the sender
        take(src, ref, nullptr, 0, {}, false);
      }
      in = Inbound{};
      continue;
    }
    const std::size_t n = slot->len;
    if (in.op && in.op->state == State::active) land(in.op->buf, Ring::payload(slot), in.got, n, in.op->how);
    if (in.stash && n > 0) std::memcpy(in.stash->data.data() + in.got, Ring::payload(slot), n);
    ring.release();
    moved = true;
    in.got += n;
    if (in.stash) in.stash->got = in.got;
    if (in.got == in.total) {
      if (in.op && in.op->state == State::active) in.op->state = State::done;
      if (in.stash) in.stash->complete = true;
      in = Inbound{};
    }
  }
  if (moved && ring.room_was_wanted()) world_.bell(src).ring();  // its producer waits for a free slot
  return moved;
}

bool ShmEngine::finished(Op& op) {
  if (op.state == State::failed) throw Error(op.error);
  return op.state == State::done;
}

void ShmEngine::cancel(Op& op) {
  if (op.state != State::active) return;
  if (op.sending && op.by_reference && op.started) {
    std::atomic<std::uint32_t>& token = world_.token(me_, op.ref.token);
    std::uint32_t pending = as_word(RefToken::pending);
    if (!token.compare_exchange_strong(pending, as_word(RefToken::revoked), std::memory_order_acq_rel)) {
      // Claimed: the receiver is copying out of the buffer now, and the buffer must outlive that copy (bounded: a
      // receiver that dies or stops mid-copy no longer counts).
      const auto deadline = std::chrono::steady_clock::now() + timeout_;
      while (token.load(std::memory_order_acquire) == as_word(RefToken::claimed) &&
             world_.status_of(op.peer) == ShmStatus::running && std::chrono::steady_clock::now() < deadline)
        std::this_thread::yield();
    }
  }
  op.state = State::cancelled;
}

void ShmEngine::wait(Op& op) {
  auto fail = [&](auto&& error) {
    broken_ = true;
    throw error;
  };
  const std::string me = "rank " + std::to_string(me_);
  if (broken_ && op.state == State::active) throw Aborted(me + ": an earlier operation of this rank failed");
  const bool peer_is_rank = op.peer < world_.ranks();
  const auto deadline = std::chrono::steady_clock::now() + timeout_;
  Doorbell& bell = world_.bell(me_);
  WaitPolicy policy;
  for (;;) {
    const std::uint32_t seen = bell.seq.load();
    // Read before progressing: a peer that finished had put all its messages in the rings before.
    const ShmStatus peer = peer_is_rank ? world_.status_of(op.peer) : ShmStatus::running;
    if (progress()) policy.reset();
    try {
      if (finished(op)) return;
    } catch (const Error&) {
      broken_ = true;
      throw;
    }
    if (world_.aborted()) {
      const int who = world_.control().failed_rank.load();
      fail(Aborted(me + " stopped: " + (who >= 0 ? "rank " + std::to_string(who) : std::string("another rank")) +
                   " failed"));
    }
    if (peer != ShmStatus::running) {
      const char* how = peer == ShmStatus::finished ? "had already finished" : "failed";
      fail(Error(peer_gone_error(me_, op.env, op.sending, op.peer, how)));
    }
    if (policy.spin()) continue;
    const auto now = std::chrono::steady_clock::now();
    if (now >= deadline) fail(Error(timeout_error(me_, timeout_, op.env, op.sending, op.peer)));
    const auto left = std::chrono::duration_cast<std::chrono::microseconds>(deadline - now);
    bell.sleep(seen, std::min(left, std::chrono::microseconds(50000)));
  }
}

}  // namespace cpsim
