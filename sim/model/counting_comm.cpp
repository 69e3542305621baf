#include "sim/model/counting_comm.hpp"

#include <algorithm>
#include <numeric>

#include "sim/core/error.hpp"

namespace cpsim::model {

// ---- the shared world ----

CountingWorld::CountingWorld(int ranks, int slots) : free_slots_(std::max(1, slots)) {
  std::vector<int> world(static_cast<std::size_t>(ranks));
  std::iota(world.begin(), world.end(), 0);
  groups_.push_back(std::move(world));  // context 0
}

void CountingWorld::take_slot(std::unique_lock<std::mutex>& lock) {
  if (aborted_) return;
  if (free_slots_ > 0 && waiting_.empty()) {
    --free_slots_;
    return;
  }
  Waiter me;
  waiting_.push_back(&me);
  me.cv.wait(lock, [&] { return me.granted || aborted_; });
}

void CountingWorld::give_slot() {
  if (waiting_.empty()) {
    ++free_slots_;
    return;
  }
  Waiter* next = waiting_.front();
  waiting_.pop_front();
  next->granted = true;
  next->cv.notify_one();
}

void CountingWorld::acquire() {
  std::unique_lock lock(mu_);
  take_slot(lock);
}

void CountingWorld::release() {
  std::lock_guard lock(mu_);
  give_slot();
}

void CountingWorld::abort() {
  std::lock_guard lock(mu_);
  aborted_ = true;
  for (Waiter* w : waiting_) w->cv.notify_one();
  waiting_.clear();
  for (auto& [key, r] : splits_) r.cv.notify_all();
}

std::vector<std::vector<int>> CountingWorld::groups() const {
  std::lock_guard lock(mu_);
  return groups_;
}

// Called with the lock held, by the last member to arrive: the groups in order of first appearance of their color,
// members ordered by (key, member), each group a new context.
void CountingWorld::resolve(int context, Rendezvous& r) {
  const std::vector<int> parent = groups_[static_cast<std::size_t>(context)];
  const int n = static_cast<int>(parent.size());
  r.result.assign(static_cast<std::size_t>(n), SplitResult{});
  std::vector<bool> placed(static_cast<std::size_t>(n), false);
  for (int m = 0; m < n; ++m) {
    const int color = r.color_key[static_cast<std::size_t>(m)].first;
    if (color < 0 || placed[static_cast<std::size_t>(m)]) continue;
    std::vector<int> members;  // parent ranks of this color
    for (int j = 0; j < n; ++j)
      if (r.color_key[static_cast<std::size_t>(j)].first == color) members.push_back(j);
    std::stable_sort(members.begin(), members.end(), [&](int a, int b) {
      return r.color_key[static_cast<std::size_t>(a)].second < r.color_key[static_cast<std::size_t>(b)].second;
    });
    std::vector<int> world;
    for (int j : members) world.push_back(parent[static_cast<std::size_t>(j)]);
    const int ctx = static_cast<int>(groups_.size());
    groups_.push_back(world);
    for (std::size_t i = 0; i < members.size(); ++i) {
      const auto j = static_cast<std::size_t>(members[i]);
      placed[j] = true;
      r.result[j] = SplitResult{ctx, static_cast<int>(i), world};
    }
  }
  r.done = true;
}

CountingWorld::SplitResult CountingWorld::split(int context, std::int64_t index, int member, int color, int key) {
  std::unique_lock lock(mu_);
  give_slot();  // lend the slot while waiting for the other members
  const int n = static_cast<int>(groups_[static_cast<std::size_t>(context)].size());
  Rendezvous& r = splits_[{context, index}];
  if (r.color_key.empty()) r.color_key.resize(static_cast<std::size_t>(n));
  r.color_key[static_cast<std::size_t>(member)] = {color, key};
  if (++r.arrived == n) {
    resolve(context, r);
    r.cv.notify_all();
  }
  r.cv.wait(lock, [&] { return r.done || aborted_; });
  if (!aborted_) take_slot(lock);
  if (aborted_) throw SplitAbandoned();
  SplitResult mine = r.result[static_cast<std::size_t>(member)];
  if (++r.left == n) splits_.erase({context, index});
  return mine;
}

// ---- the communicator ----

namespace {

// A pending isend / irecv: completing it (wait, test, or the Request's destructor) appends a wait op.
class CountingRequest : public Request::Impl {
 public:
  CountingRequest(Program& program, int request) : program_(program), request_(request) {}
  void wait() override { complete(); }
  bool test() override {  // the clock decides when it is done; the program records where it was observed done
    complete();
    return true;
  }

 private:
  void complete() {
    if (done_) return;
    done_ = true;
    Op op;
    op.kind = OpKind::wait;
    op.request = request_;
    program_.push(std::move(op));
  }
  Program& program_;
  int request_;
  bool done_ = false;
};

}  // namespace

CountingCommunicator::CountingCommunicator(int rank, int size, Recorder& rec, CountingWorld& world, Program& program)
    : CountingCommunicator(
          rank, size, rec,
          [&] {
            std::vector<int> w(static_cast<std::size_t>(size));
            std::iota(w.begin(), w.end(), 0);
            return w;
          }(),
          world, program, 0) {}

CountingCommunicator::CountingCommunicator(int rank, int size, Recorder& rec, std::vector<int> world_ranks,
                                           CountingWorld& world, Program& program, int context)
    : Communicator(rank, size, rec, std::move(world_ranks)), world_(world), program_(program), context_(context) {}

int CountingCommunicator::post(OpKind kind, std::size_t bytes, int peer, int tag) {
  Op op;
  op.kind = kind;
  op.bytes = static_cast<std::int64_t>(bytes);
  op.peer = world_ranks()[static_cast<std::size_t>(peer)];
  op.tag = tag;
  op.context = context_;
  return program_.push(std::move(op));
}

void CountingCommunicator::wait_for(int request) {
  Op op;
  op.kind = OpKind::wait;
  op.request = request;
  program_.push(std::move(op));
}

void CountingCommunicator::collective(Collective c, std::size_t bytes) {
  Op op;
  op.kind = OpKind::collective;
  op.collective = c;
  op.bytes = static_cast<std::int64_t>(bytes);
  op.context = context_;
  program_.push(std::move(op));
}

void CountingCommunicator::do_send(const void*, std::size_t bytes, int peer, int tag) {
  wait_for(post(OpKind::isend, bytes, peer, tag));
}

void CountingCommunicator::do_recv(void*, std::size_t bytes, int peer, int tag) {
  wait_for(post(OpKind::irecv, bytes, peer, tag));
}

std::unique_ptr<Request::Impl> CountingCommunicator::do_isend(const void*, std::size_t bytes, int peer, int tag) {
  return std::make_unique<CountingRequest>(program_, post(OpKind::isend, bytes, peer, tag));
}

std::unique_ptr<Request::Impl> CountingCommunicator::do_irecv(void*, std::size_t bytes, int peer, int tag) {
  return std::make_unique<CountingRequest>(program_, post(OpKind::irecv, bytes, peer, tag));
}

void CountingCommunicator::do_sendrecv(const void*, std::size_t send_bytes, int dst, void*, std::size_t recv_bytes,
                                       int src, int tag) {
  const int s = post(OpKind::isend, send_bytes, dst, tag), r = post(OpKind::irecv, recv_bytes, src, tag);
  wait_for(s);
  wait_for(r);
}

void CountingCommunicator::do_all_gather(const void*, void*, std::size_t bytes_per_rank) {
  collective(Collective::all_gather, bytes_per_rank);
}

void CountingCommunicator::do_reduce_scatter(const void*, void*, std::size_t count_per_rank, DType dtype) {
  collective(Collective::reduce_scatter, count_per_rank * dtype_size(dtype));
}

void CountingCommunicator::do_all_to_all(const void*, void*, std::size_t bytes_per_rank) {
  collective(Collective::all_to_all, bytes_per_rank);
}

void CountingCommunicator::do_all_reduce(const void*, void*, std::size_t count, DType dtype, ReduceOp) {
  collective(Collective::all_reduce, count * dtype_size(dtype));
}

void CountingCommunicator::do_barrier() {
  collective(Collective::barrier, 0);
}

std::unique_ptr<Communicator> CountingCommunicator::do_split(int color, int key) {
  const CountingWorld::SplitResult r = world_.split(context_, splits_++, rank(), color, key);
  if (r.context < 0) return nullptr;
  const int n = static_cast<int>(r.world_ranks.size());
  return std::unique_ptr<Communicator>(
      new CountingCommunicator(r.rank, n, recorder(), r.world_ranks, world_, program_, r.context));
}

}  // namespace cpsim::model
