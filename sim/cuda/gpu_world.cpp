#include "sim/cuda/gpu_world.hpp"

#include <algorithm>

#include "sim/comm/envelope.hpp"
#include "sim/core/error.hpp"

namespace cpsim::cuda {

Transfer::~Transfer() {
  if (done) cudaEventDestroy(done);
}

PostedOp::~PostedOp() {
  if (ready) cudaEventDestroy(ready);
}

GpuGroup::GpuGroup(std::vector<int> m) : members(std::move(m)), slots(members.size()) {}

GpuGroup::~GpuGroup() {
  for (Slot& s : slots) {
    if (s.ready) cudaEventDestroy(s.ready);
    if (s.done) cudaEventDestroy(s.done);
  }
}

GpuWorld::GpuWorld(int size, std::chrono::milliseconds timeout)
    : size_(size), timeout_(timeout), status_(size, running), sends_(size), recvs_(size) {}

void GpuWorld::issue(PostedOp& s, PostedOp& r, cudaStream_t stream) {
  Transfer& t = *r.transfer;
  if (s.bytes != r.bytes) {
    t.error = "rank " + std::to_string(r.dst) + " posted a receive from rank " + std::to_string(s.src) + " (tag " +
              std::to_string(r.tag) + ") of " + std::to_string(r.bytes) + " bytes, but rank " + std::to_string(s.src) +
              " sent " + std::to_string(s.bytes) + " bytes: sizes must match";
    return;
  }
  // The copy runs after the sender's data is written and the receiver's buffer is free, on the stream of the rank
  // that completed the match.
  cudaError_t e = cudaStreamWaitEvent(stream, s.ready, 0);
  if (e == cudaSuccess) e = cudaStreamWaitEvent(stream, r.ready, 0);
  if (e == cudaSuccess && s.bytes > 0) e = cudaMemcpyAsync(r.ptr, s.ptr, s.bytes, cudaMemcpyDeviceToDevice, stream);
  if (e == cudaSuccess) e = cudaEventCreateWithFlags(&t.done, cudaEventDisableTiming);
  if (e == cudaSuccess) e = cudaEventRecord(t.done, stream);
  if (e != cudaSuccess) {
    t.error = std::string("the copy of a message could not be queued: ") + cudaGetErrorString(e);
    return;
  }
  t.issued = true;
}

std::shared_ptr<Transfer> GpuWorld::post(std::unique_ptr<PostedOp> op, bool is_send) {
  std::lock_guard lk(m_);
  if (aborted_)
    throw Aborted("rank " + std::to_string(is_send ? op->src : op->dst) + " stopped: rank " +
                  std::to_string(first_failed_) + " failed");
  auto& others = is_send ? recvs_[op->dst] : sends_[op->dst];
  const auto it = std::find_if(others.begin(), others.end(), [&](const auto& o) {
    return o->context == op->context && o->src == op->src && o->tag == op->tag;
  });
  if (it == others.end()) {
    auto t = op->transfer;
    (is_send ? sends_[op->dst] : recvs_[op->dst]).push_back(std::move(op));
    return t;
  }
  std::unique_ptr<PostedOp> found = std::move(*it);
  others.erase(it);
  op->transfer = found->transfer;  // one Transfer for both sides
  if (is_send)
    issue(*op, *found, op->poster_comm);
  else
    issue(*found, *op, op->poster_comm);
  cv_.notify_all();
  return op->transfer;
}

void GpuWorld::cancel(const std::shared_ptr<Transfer>& t) {
  std::lock_guard lk(m_);
  for (auto* queues : {&sends_, &recvs_})
    for (auto& q : *queues) std::erase_if(q, [&](const auto& o) { return o->transfer == t; });
}

template <class Done>
void GpuWorld::wait_for(std::unique_lock<std::mutex>& lk, int me, Done done, const std::vector<int>& peers,
                        const std::string& what) {
  const auto deadline = std::chrono::steady_clock::now() + timeout_;
  for (;;) {
    if (done()) return;
    if (aborted_)
      throw Aborted("rank " + std::to_string(me) + " stopped: rank " + std::to_string(first_failed_) + " failed");
    for (int p : peers)
      if (p != me && status_[p] != running)
        throw Error("rank " + std::to_string(me) + " waited in " + what + ", but rank " + std::to_string(p) +
                    (status_[p] == finished ? " had already finished" : " failed"));
    if (cv_.wait_until(lk, deadline) == std::cv_status::timeout && !done())
      throw Error("rank " + std::to_string(me) + " waited " + std::to_string(timeout_.count() / 1000) + " s in " +
                  what + ": likely deadlock (no rank posted the matching operation)");
  }
}

void GpuWorld::wait_transfer(int me, const Transfer& t, int peer, const std::string& what) {
  std::unique_lock lk(m_);
  wait_for(
      lk, me, [&] { return t.issued || !t.error.empty(); }, {peer}, what);
  if (!t.error.empty()) throw Error(t.error);
}

bool GpuWorld::transfer_done(const Transfer& t) {
  std::lock_guard lk(m_);
  if (!t.error.empty()) throw Error(t.error);
  return t.issued && cudaEventQuery(t.done) == cudaSuccess;
}

void GpuWorld::rendezvous(int me, GpuGroup& g, const std::string& what) {
  std::unique_lock lk(m_);
  const std::uint64_t gen = g.generation;
  if (++g.arrived == static_cast<int>(g.members.size())) {
    g.arrived = 0;
    ++g.generation;
    cv_.notify_all();
    return;
  }
  wait_for(
      lk, me, [&] { return g.generation != gen; }, g.members, what);
}

std::shared_ptr<GpuGroup> GpuWorld::group(std::uint64_t id, const std::vector<int>& members) {
  std::lock_guard lk(m_);
  auto& g = groups_[id];
  if (!g) g = std::make_shared<GpuGroup>(members);
  return g;
}

void GpuWorld::finish(int rank) {
  std::lock_guard lk(m_);
  status_[rank] = finished;
  cv_.notify_all();
}

void GpuWorld::fail(int rank, const std::string& what) {
  std::lock_guard lk(m_);
  status_[rank] = failed;
  if (first_failed_ < 0) {
    first_failed_ = rank;
    first_failure_ = what;
  }
  aborted_ = true;
  cv_.notify_all();
}

int GpuWorld::first_failed() const {
  std::lock_guard lk(m_);
  return first_failed_;
}

std::string GpuWorld::first_failure() const {
  std::lock_guard lk(m_);
  return first_failure_;
}

}  // namespace cpsim::cuda
