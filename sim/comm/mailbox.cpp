// The mailboxes' protocol (mailbox.hpp): send, receive, wait.
#include "sim/comm/mailbox.hpp"

#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstring>
#include <ctime>
#include <new>
#include <thread>

#include "sim/comm/shm_segment.hpp"  // populate_pages

namespace cpsim {

static_assert(sizeof(Message) <= Message::kHeaderBytes);
static_assert(std::atomic<std::uint32_t>::is_always_lock_free && std::atomic<std::int32_t>::is_always_lock_free,
              "atomics shared between processes must be lock-free");

// The part of the mailboxes' memory before the slots.
struct Mailboxes::Shared {
  pthread_mutex_t lock;
  std::int32_t endpoints = 0;
  std::atomic<std::int32_t> aborted{0};
  std::atomic<std::int32_t> poisoned{0};  // a rank died holding the lock: the lists may be half-changed
  std::atomic<std::int32_t> failed_rank{-1};
  std::atomic<std::int32_t> failure_ready{0};
  char failure[4096] = {};
};

namespace {

constexpr std::size_t kAlign = 64;
constexpr auto kLongestSleep = std::chrono::milliseconds(50);  // a wait looks around at least this often
constexpr auto kPoolFullRetry = std::chrono::milliseconds(1);

std::size_t round_up(std::size_t n) {
  return (n + kAlign - 1) / kAlign * kAlign;
}

// --- The doorbell: a futex on a counter (no FUTEX_PRIVATE_FLAG: the word may be shared between processes). ---

void ring_bell(std::atomic<std::uint32_t>& bell) {
  bell.fetch_add(1);
  ::syscall(SYS_futex, reinterpret_cast<std::uint32_t*>(&bell), FUTEX_WAKE, INT_MAX, nullptr, nullptr, 0);
}

// Sleeps while the counter still reads `seen`, at most `max` (a ring, a signal or the time wakes it).
void sleep_on_bell(std::atomic<std::uint32_t>& bell, std::uint32_t seen, std::chrono::microseconds max) {
  const timespec ts{static_cast<time_t>(max.count() / 1000000), static_cast<long>(max.count() % 1000000) * 1000};
  ::syscall(SYS_futex, reinterpret_cast<std::uint32_t*>(&bell), FUTEX_WAIT, seen, &ts, nullptr, 0);
}

}  // namespace

// The lock, held for as long as one lives. A lock whose holder died is made consistent and the run aborted; the
// lists it guarded are not touched again (Aborted).
class Mailboxes::Locked {
 public:
  explicit Locked(Mailboxes& b) : s_(*b.s_) {
    if (pthread_mutex_lock(&s_.lock) == EOWNERDEAD) {
      pthread_mutex_consistent(&s_.lock);
      s_.poisoned.store(1);
      s_.aborted.store(1);
    }
    if (s_.poisoned.load() != 0) {
      pthread_mutex_unlock(&s_.lock);
      throw Aborted("a rank died while it held the mailboxes' lock");
    }
  }
  ~Locked() { pthread_mutex_unlock(&s_.lock); }
  Locked(const Locked&) = delete;
  Locked& operator=(const Locked&) = delete;

 private:
  Shared& s_;
};

// --- The pool ---

RegionPool::RegionPool(std::byte* base, std::size_t bytes)
    : memory_(boost::interprocess::create_only, base, bytes), capacity_(memory_.get_free_memory()) {}

void* RegionPool::allocate(std::size_t bytes) {
  void* p = memory_.allocate_aligned(bytes, kAlign, std::nothrow);
  if (p == nullptr) return nullptr;
  constexpr std::uintptr_t kPage = 4096;
  const std::uintptr_t from = reinterpret_cast<std::uintptr_t>(p) / kPage * kPage;
  const std::uintptr_t to = (reinterpret_cast<std::uintptr_t>(p) + bytes + kPage - 1) / kPage * kPage;
  // EINVAL: a kernel that cannot populate (before Linux 5.14); the pages are then backed as they are written.
  if (const int err = populate_pages(reinterpret_cast<void*>(from), to - from); err != 0 && err != EINVAL) {
    memory_.deallocate(p);
    throw Error("the memory for a message in flight (" + std::to_string(bytes) + " bytes) could not be backed (" +
                std::strerror(err == EFAULT ? ENOSPC : err) + "); use fewer ranks or a smaller problem");
  }
  return p;
}

void RegionPool::release(void* p) {
  memory_.deallocate(p);
}

// --- The mailboxes ---

std::size_t Mailboxes::bytes_needed(int endpoints) {
  return round_up(sizeof(Shared)) + sizeof(MailboxSlot) * static_cast<std::size_t>(endpoints);
}

Mailboxes::Mailboxes(void* memory, int endpoints, MessagePool& pool, bool init)
    : s_(static_cast<Shared*>(memory)),
      slots_(reinterpret_cast<MailboxSlot*>(static_cast<std::byte*>(memory) + round_up(sizeof(Shared)))),
      pool_(pool) {
  if (!init) return;
  new (s_) Shared();
  s_->endpoints = endpoints;
  pthread_mutexattr_t attr;
  pthread_mutexattr_init(&attr);
  pthread_mutexattr_setpshared(&attr, PTHREAD_PROCESS_SHARED);
  pthread_mutexattr_setrobust(&attr, PTHREAD_MUTEX_ROBUST);
  pthread_mutex_init(&s_->lock, &attr);
  pthread_mutexattr_destroy(&attr);
  for (int e = 0; e < endpoints; ++e) new (&slots_[e]) MailboxSlot();
}

int Mailboxes::endpoints() const {
  return s_->endpoints;
}

RankStatus Mailboxes::status(int endpoint) const {
  return static_cast<RankStatus>(slots_[endpoint].status.load());
}

void Mailboxes::set_status(int endpoint, RankStatus s) {
  slots_[endpoint].status.store(static_cast<std::int32_t>(s));
  ring_all();
}

void Mailboxes::fail(int rank, std::string_view what, RankStatus s) {
  std::int32_t none = -1;
  if (s_->failed_rank.compare_exchange_strong(none, rank)) {
    const std::size_t n = std::min(what.size(), sizeof(s_->failure) - 1);
    std::memcpy(s_->failure, what.data(), n);
    s_->failure[n] = '\0';
    s_->failure_ready.store(1);
  }
  s_->aborted.store(1);
  set_status(rank, s);
}

bool Mailboxes::aborted() const {
  return s_->aborted.load() != 0;
}

int Mailboxes::first_failed() const {
  return s_->failed_rank.load();
}

std::string Mailboxes::failure() const {
  return s_->failure_ready.load() != 0 ? std::string(s_->failure) : std::string("failed");
}

void Mailboxes::discard_unreceived() {
  for (int e = 0; e < endpoints(); ++e) {
    for (Message* m = slots_[e].first; m != nullptr;) {
      Message* next = m->next;
      pool_.release(m);
      m = next;
    }
    slots_[e].first = slots_[e].last = nullptr;
  }
}

void Mailboxes::ring(int endpoint) {
  ring_bell(slots_[endpoint].bell);
}

void Mailboxes::ring_all() {
  for (int e = 0; e < endpoints(); ++e) ring(e);
}

// --- One endpoint's sends and receives ---

struct Postbox::Receive {
  Envelope env;
  int src = 0;
  void* buf = nullptr;
  std::size_t bytes = 0;
  Landing how;
  bool landed = false;
  std::string error;  // set when landed: the message did not fit the receive
};

namespace {

// A send is complete when send() returns: its request has nothing left to wait for.
struct SentRequest final : Request::Impl {
  void wait() override {}
  bool test() override { return true; }
};

struct ReceiveRequest final : Request::Impl {
  Postbox& box;
  std::shared_ptr<Postbox::Receive> op;
  ReceiveRequest(Postbox& b, std::shared_ptr<Postbox::Receive> o) : box(b), op(std::move(o)) {}
  ~ReceiveRequest() override { box.cancel(*op); }
  void wait() override { box.wait(*op); }
  bool test() override {
    box.take_arrivals();
    return box.done(*op);
  }
};

}  // namespace

Postbox::Postbox(Mailboxes& boxes, int me, std::chrono::milliseconds timeout)
    : boxes_(boxes), me_(me), timeout_(timeout) {}

Pending Postbox::send(const Envelope& env, const void* buf, std::size_t bytes, int dst) {
  const std::size_t block = Message::kHeaderBytes + round_up(bytes);
  if (block > boxes_.pool_.capacity()) {
    throw Error("rank " + std::to_string(me_) + ": a message of " + std::to_string(bytes) + " bytes in " +
                describe_wait(env, true, dst) + " is larger than the memory for messages in flight (" +
                std::to_string(boxes_.pool_.capacity()) + " bytes); use smaller messages or --backend threads");
  }
  // 1. A block of the pool: while it is full (receivers have not taken what is there yet), retry until the timeout.
  const auto deadline = std::chrono::steady_clock::now() + timeout_;
  void* memory = nullptr;
  for (;;) {
    {
      Mailboxes::Locked lock(boxes_);
      memory = boxes_.pool_.allocate(block);
    }
    if (memory != nullptr) break;
    if (boxes_.aborted()) throw Aborted("rank " + std::to_string(me_) + " stopped: another rank failed");
    if (std::chrono::steady_clock::now() >= deadline)
      throw Error(timeout_error(me_, timeout_, env, true, dst) + " (the memory for messages in flight stayed full)");
    std::this_thread::sleep_for(kPoolFullRetry);
  }
  // 2. The copy, outside the lock.
  Message* m = new (memory) Message{nullptr, MessageHeader{env, me_, bytes}};
  if (bytes > 0) std::memcpy(m->bytes(), buf, bytes);
  // 3. Into the receiver's mailbox, last; then its doorbell.
  {
    Mailboxes::Locked lock(boxes_);
    MailboxSlot& box = boxes_.slots_[dst];
    (box.last ? box.last->next : box.first) = m;
    box.last = m;
  }
  boxes_.ring(dst);
  return std::make_unique<SentRequest>();
}

Pending Postbox::recv(const Envelope& env, void* buf, std::size_t bytes, int src, Landing how) {
  auto op = std::make_shared<Receive>(Receive{env, src, buf, bytes, std::move(how), false, {}});
  posted_.push_back(op);
  take_arrivals();  // it may be there already
  return std::make_unique<ReceiveRequest>(*this, std::move(op));
}

void Postbox::take_arrivals() {
  if (posted_.empty()) return;
  // 1. Under the lock: each posted receive, in posting order, takes the oldest message of its stream.
  std::vector<std::pair<Receive*, Message*>> taken;
  {
    Mailboxes::Locked lock(boxes_);
    MailboxSlot& box = boxes_.slots_[me_];
    for (const auto& op : posted_) {
      Message* prev = nullptr;
      for (Message* m = box.first; m != nullptr; prev = m, m = m->next) {
        if (!matches(op->env, op->src, m->hdr)) continue;
        (prev ? prev->next : box.first) = m->next;
        if (box.last == m) box.last = prev;
        taken.emplace_back(op.get(), m);
        break;
      }
    }
  }
  if (taken.empty()) return;
  // 2. Outside it: each message checked against its receive and landed; then the blocks go back to the pool.
  for (auto [op, m] : taken) {
    op->error = match_error(me_, op->env, op->bytes, m->hdr);
    if (op->error.empty()) land(op->buf, m->bytes(), op->bytes, op->how);
    op->landed = true;
  }
  {
    Mailboxes::Locked lock(boxes_);
    for (auto [op, m] : taken) boxes_.pool_.release(m);
  }
  std::erase_if(posted_, [](const auto& op) { return op->landed; });
}

bool Postbox::done(const Receive& op) {
  if (op.landed && !op.error.empty()) broken(Error(op.error));
  return op.landed;
}

void Postbox::wait(const Receive& op) {
  if (broken_) throw Aborted("rank " + std::to_string(me_) + ": an earlier operation of this rank failed");
  const auto deadline = std::chrono::steady_clock::now() + timeout_;
  MailboxSlot& mine = boxes_.slots_[me_];
  for (;;) {
    // Read before looking: a ring after this wakes the sleep below, and a peer seen finished sent everything first.
    const std::uint32_t seen = mine.bell.load();
    const RankStatus peer = boxes_.status(op.src);
    try {
      take_arrivals();
    } catch (const Aborted& e) {
      broken(e);
    }
    if (done(op)) return;
    if (boxes_.aborted())
      broken(Aborted("rank " + std::to_string(me_) + " stopped: rank " + std::to_string(boxes_.first_failed()) +
                     " failed"));
    if (peer != RankStatus::running) {
      broken(Error(peer_gone_error(me_, op.env, false, op.src,
                                   peer == RankStatus::finished ? "had already finished" : "failed")));
    }
    const auto now = std::chrono::steady_clock::now();
    if (now >= deadline) broken(Error(timeout_error(me_, timeout_, op.env, false, op.src)));
    const auto left = std::chrono::duration_cast<std::chrono::microseconds>(deadline - now);
    sleep_on_bell(mine.bell, seen, std::min<std::chrono::microseconds>(left, kLongestSleep));
  }
}

void Postbox::cancel(const Receive& op) {
  std::erase_if(posted_, [&](const auto& p) { return p.get() == &op; });
}

// --- The communicator ---

MailboxCommunicator::MailboxCommunicator(Postbox& box, std::string backend, int rank, Recorder& rec,
                                         std::vector<int> world_ranks, std::uint64_t context)
    : P2pCommunicator(rank, static_cast<int>(world_ranks.size()), rec, world_ranks, context),
      box_(box),
      backend_(std::move(backend)) {}

Pending MailboxCommunicator::start_send(const Envelope& env, const void* buf, std::size_t bytes, int peer_world) {
  return box_.send(env, buf, bytes, peer_world);
}

Pending MailboxCommunicator::start_recv(const Envelope& env, void* buf, std::size_t bytes, int peer_world,
                                        const Landing& how) {
  return box_.recv(env, buf, bytes, peer_world, how);
}

std::unique_ptr<P2pCommunicator> MailboxCommunicator::make_sub(int rank, std::vector<int> world_ranks,
                                                               std::uint64_t context) {
  return std::make_unique<MailboxCommunicator>(box_, backend_, rank, recorder(), std::move(world_ranks), context);
}

}  // namespace cpsim
