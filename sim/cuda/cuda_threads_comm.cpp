// The cuda-threads backend: every rank a thread of this process, all on one GPU (gpu_world.hpp for how messages
// and collectives move), and launch_cuda_threads().
//
// Collectives, for member i of a group of C (n bytes or count elements per rank):
//   all_gather     recv[p] <- send of p                      reduce_scatter  recv <- sum over p of send_p[i]
//   all_to_all     recv[p] <- send_p[i]                      all_reduce      recv <- op over p of send_p
// Reductions run in rank order 0, 1, ..., C-1 on every member, so every member gets the same bits.
#include <algorithm>
#include <thread>

#include "sim/comm/backend_registry.hpp"
#include "sim/comm/envelope.hpp"
#include "sim/comm/launch_support.hpp"
#include "sim/cuda/cuda_check.hpp"
#include "sim/cuda/gpu_world.hpp"
#include "sim/cuda/kernels/launch.hpp"
#include "sim/cuda/launchers.hpp"
#include "sim/cuda/probe.hpp"
#include "sim/cuda/rank_gpu.hpp"

namespace cpsim::cuda {
namespace {

constexpr std::uint64_t kWorldGroup = 1;

ElemType elem(DType t) {
  switch (t) {
    case DType::f32:
      return ElemType::f32;
    case DType::f64:
      return ElemType::f64;
    case DType::bf16:
      return ElemType::bf16;
    case DType::i64:
      return ElemType::i64;
  }
  return ElemType::f32;
}

ReduceKind reduce_kind(ReduceOp op) {
  switch (op) {
    case ReduceOp::sum:
      return ReduceKind::sum;
    case ReduceOp::max:
      return ReduceKind::max;
    case ReduceOp::min:
      return ReduceKind::min;
  }
  return ReduceKind::sum;
}

const char* at_offset(const void* p, std::size_t bytes) {
  return static_cast<const char*>(p) + bytes;
}
char* at_offset(void* p, std::size_t bytes) {
  return static_cast<char*>(p) + bytes;
}

class GpuRequest final : public Request::Impl {
 public:
  GpuRequest(GpuWorld& w, RankGpu& gpu, int me, int peer, std::shared_ptr<Transfer> t, std::string what)
      : w_(w), gpu_(gpu), me_(me), peer_(peer), t_(std::move(t)), what_(std::move(what)) {}
  ~GpuRequest() override {
    if (!waited_) w_.cancel(t_);  // unmatched: no one may copy into or out of its buffer any more
  }
  void wait() override {
    w_.wait_transfer(me_, *t_, peer_, what_);
    gpu_.compute_waits_for(t_->done);  // later compute sees the delivered bytes / may overwrite the sent ones
    waited_ = true;
  }
  bool test() override {
    if (!w_.transfer_done(*t_)) return false;
    waited_ = true;
    return true;
  }

 private:
  GpuWorld& w_;
  RankGpu& gpu_;
  int me_, peer_;
  std::shared_ptr<Transfer> t_;
  std::string what_;
  bool waited_ = false;
};

class CudaThreadsCommunicator final : public Communicator {
 public:
  CudaThreadsCommunicator(std::shared_ptr<GpuWorld> world, std::shared_ptr<GpuGroup> group, std::uint64_t id, int rank,
                          Recorder& rec, std::shared_ptr<RankGpu> gpu)
      : Communicator(rank, static_cast<int>(group->members.size()), rec, group->members),
        world_(std::move(world)),
        group_(std::move(group)),
        id_(id),
        gpu_(std::move(gpu)),
        me_(world_ranks()[rank]) {
    std::lock_guard lk(world_->mutex());
    GpuGroup::Slot& s = group_->slots[rank];
    if (!s.ready) check(cudaEventCreateWithFlags(&s.ready, cudaEventDisableTiming), "creating a communicator event");
    if (!s.done) check(cudaEventCreateWithFlags(&s.done, cudaEventDisableTiming), "creating a communicator event");
    ready_ = s.ready;
    done_ = s.done;
  }
  ~CudaThreadsCommunicator() override {
    cudaStreamSynchronize(gpu_->comm());
    if (scratch_) cudaFreeAsync(scratch_, gpu_->compute());
  }
  std::string backend() const override { return "cuda-threads"; }

 protected:
  std::unique_ptr<Request::Impl> post(void* buf, std::size_t bytes, int peer, int tag, bool is_send) {
    auto op = std::make_unique<PostedOp>();
    op->context = id_;
    op->src = is_send ? me_ : world_ranks()[peer];
    op->dst = is_send ? world_ranks()[peer] : me_;
    op->tag = tag;
    op->ptr = buf;
    op->bytes = bytes;
    op->poster_comm = gpu_->comm();
    check(cudaEventCreateWithFlags(&op->ready, cudaEventDisableTiming), "creating a message event");
    check(cudaEventRecord(op->ready, gpu_->compute()), "recording a message event");
    const int peer_world = world_ranks()[peer];
    auto t = world_->post(std::move(op), is_send);
    const std::string what = std::string(is_send ? "send to rank " : "recv from rank ") + std::to_string(peer_world) +
                             " (tag " + std::to_string(tag) + ")";
    return std::make_unique<GpuRequest>(*world_, *gpu_, me_, peer_world, std::move(t), what);
  }

  void do_send(const void* buf, std::size_t bytes, int peer, int tag) override {
    do_isend(buf, bytes, peer, tag)->wait();
  }
  void do_recv(void* buf, std::size_t bytes, int peer, int tag) override { do_irecv(buf, bytes, peer, tag)->wait(); }
  std::unique_ptr<Request::Impl> do_isend(const void* buf, std::size_t bytes, int peer, int tag) override {
    return post(const_cast<void*>(buf), bytes, peer, tag, true);  // never written through: it is the copy's source
  }
  std::unique_ptr<Request::Impl> do_irecv(void* buf, std::size_t bytes, int peer, int tag) override {
    return post(buf, bytes, peer, tag, false);
  }
  void do_sendrecv(const void* sendbuf, std::size_t send_bytes, int dst, void* recvbuf, std::size_t recv_bytes, int src,
                   int tag) override {
    auto r = do_irecv(recvbuf, recv_bytes, src, tag);
    auto s = do_isend(sendbuf, send_bytes, dst, tag);
    s->wait();
    r->wait();
  }

  // The collective pattern: publish, meet, move on the comm stream, meet again, order compute after everyone.
  template <class Move>
  void collective(const char* name, const void* send, void* recv, Move&& move) {
    const int i = rank();
    check(cudaEventRecord(ready_, gpu_->compute()), "recording a collective event");
    {
      std::lock_guard lk(world_->mutex());
      group_->slots[i].send = send;
      group_->slots[i].recv = recv;
    }
    world_->rendezvous(me_, *group_, name);
    for (const auto& s : group_->slots) check(cudaStreamWaitEvent(gpu_->comm(), s.ready, 0), name);
    move(group_->slots);
    check(cudaEventRecord(done_, gpu_->comm()), name);
    gpu_->compute_waits_for(done_);
    world_->rendezvous(me_, *group_, name);  // every member has queued its reads of the others' buffers
    for (const auto& s : group_->slots)
      if (s.done != done_) gpu_->compute_waits_for(s.done);
  }

  void do_all_gather(const void* sendbuf, void* recvbuf, std::size_t n) override {
    collective("all_gather", sendbuf, recvbuf, [&](const std::vector<GpuGroup::Slot>& slots) {
      for (std::size_t p = 0; p < slots.size(); ++p) copy(at_offset(recvbuf, p * n), slots[p].send, n, "all_gather");
    });
  }

  void do_reduce_scatter(const void* sendbuf, void* recvbuf, std::size_t count, DType dtype) override {
    const std::size_t n = count * dtype_size(dtype), mine = static_cast<std::size_t>(rank()) * n;
    collective("reduce_scatter", sendbuf, recvbuf, [&](const std::vector<GpuGroup::Slot>& slots) {
      copy(recvbuf, at_offset(slots[0].send, mine), n, "reduce_scatter");
      for (std::size_t p = 1; p < slots.size(); ++p)
        check(launch_accumulate(recvbuf, at_offset(slots[p].send, mine), static_cast<std::int64_t>(count), elem(dtype),
                                ReduceKind::sum, gpu_->comm()),
              "reduce_scatter");
    });
  }

  void do_all_to_all(const void* sendbuf, void* recvbuf, std::size_t n) override {
    const std::size_t mine = static_cast<std::size_t>(rank()) * n;
    collective("all_to_all", sendbuf, recvbuf, [&](const std::vector<GpuGroup::Slot>& slots) {
      for (std::size_t p = 0; p < slots.size(); ++p)
        copy(at_offset(recvbuf, p * n), at_offset(slots[p].send, mine), n, "all_to_all");
    });
  }

  void do_all_reduce(const void* sendbuf, void* recvbuf, std::size_t count, DType dtype, ReduceOp op) override {
    // Into scratch first: recv may be this rank's send, which the others are still reading.
    const std::size_t n = count * dtype_size(dtype);
    void* acc = scratch(n);
    collective("all_reduce", sendbuf, recvbuf, [&](const std::vector<GpuGroup::Slot>& slots) {
      copy(acc, slots[0].send, n, "all_reduce");
      for (std::size_t p = 1; p < slots.size(); ++p)
        check(launch_accumulate(acc, slots[p].send, static_cast<std::int64_t>(count), elem(dtype), reduce_kind(op),
                                gpu_->comm()),
              "all_reduce");
    });
    if (n > 0) check(cudaMemcpyAsync(recvbuf, acc, n, cudaMemcpyDeviceToDevice, gpu_->compute()), "all_reduce");
  }

  void do_barrier() override { world_->rendezvous(me_, *group_, "barrier"); }

  std::unique_ptr<Communicator> do_split(int color, int key) override {
    {
      std::lock_guard lk(world_->mutex());
      group_->slots[rank()].color = color;
      group_->slots[rank()].key = key;
    }
    world_->rendezvous(me_, *group_, "split");
    std::vector<std::pair<std::pair<int, int>, int>> same;  // ((key, old rank), world rank)
    {
      std::lock_guard lk(world_->mutex());
      for (int p = 0; p < size(); ++p)
        if (group_->slots[p].color == color) same.push_back({{group_->slots[p].key, p}, world_ranks()[p]});
    }
    world_->rendezvous(me_, *group_, "split");  // everyone has read the colors before they are written again
    const std::uint64_t id = mix64(id_ * 1315423911u + (++splits_) * 2654435761u + static_cast<std::uint64_t>(color));
    if (color < 0) return nullptr;
    std::sort(same.begin(), same.end());
    std::vector<int> members;
    int my_rank = 0;
    for (std::size_t r = 0; r < same.size(); ++r) {
      members.push_back(same[r].second);
      if (same[r].second == me_) my_rank = static_cast<int>(r);
    }
    return std::make_unique<CudaThreadsCommunicator>(world_, world_->group(id, members), id, my_rank, recorder(), gpu_);
  }

 private:
  void copy(void* dst, const void* src, std::size_t n, const char* what) {
    if (n > 0) check(cudaMemcpyAsync(dst, src, n, cudaMemcpyDeviceToDevice, gpu_->comm()), what);
  }
  void* scratch(std::size_t n) {
    if (n <= scratch_cap_) return scratch_;
    if (scratch_) check(cudaFreeAsync(scratch_, gpu_->compute()), "freeing communicator scratch");
    scratch_ = nullptr;
    scratch_cap_ = 0;
    check(cudaMallocAsync(&scratch_, n, gpu_->compute()), "allocating communicator scratch");
    scratch_cap_ = n;
    return scratch_;
  }

  std::shared_ptr<GpuWorld> world_;
  std::shared_ptr<GpuGroup> group_;
  std::uint64_t id_;
  std::shared_ptr<RankGpu> gpu_;
  int me_;
  cudaEvent_t ready_ = nullptr, done_ = nullptr;  // this member's slot events (owned by the group)
  void* scratch_ = nullptr;
  std::size_t scratch_cap_ = 0;
  std::uint64_t splits_ = 0;
};

}  // namespace
}  // namespace cpsim::cuda

namespace cpsim {

std::vector<RankOutcome> launch_cuda_threads(const LaunchOptions& opt, const RankFn& fn) {
  require(opt.ranks >= 1, "the number of ranks must be at least 1 (got " + std::to_string(opt.ranks) + ")",
          Fix{{"--ranks 1 or more"}});
  const GpuProbe probe = probe_gpus();
  if (!probe.problem.empty()) throw probe_error(probe, "--backend cuda-threads: ");
  const int c = opt.ranks;
  auto world = std::make_shared<cuda::GpuWorld>(c, opt.timeout);
  auto group = world->group(cuda::kWorldGroup, rank_range(0, c));
  std::vector<RankOutcome> out = fresh_outcomes(c, opt.tracing);
  std::vector<std::thread> threads;
  threads.reserve(c);
  for (int r = 0; r < c; ++r) {
    threads.emplace_back([&, r] {
      try {
        auto gpu = std::make_shared<cuda::RankGpu>(0, r, opt.timeout);
        cuda::RankGpu::set_current(gpu);
        {
          cuda::CudaThreadsCommunicator comm(world, group, cuda::kWorldGroup, r, out[r].stats, gpu);
          out[r].result = fn(comm);
        }
        gpu->wait(gpu->comm(), "finishing communication");
        gpu->wait(gpu->compute(), "finishing compute");
        cuda::RankGpu::set_current(nullptr);
        world->finish(r);
      } catch (const Aborted&) {
        cuda::RankGpu::set_current(nullptr);
        world->finish(r);  // stopped because another rank failed: that rank is the one to report
      } catch (const std::exception& e) {
        cuda::RankGpu::set_current(nullptr);
        world->fail(r, encoded(e));  // its fixes apart, for the program to word
      } catch (...) {
        cuda::RankGpu::set_current(nullptr);
        world->fail(r, "threw an exception that is not a std::exception");
      }
    });
  }
  for (auto& t : threads) t.join();
  if (world->first_failed() >= 0) throw rank_failure(world->first_failed(), world->first_failure());
  return out;
}

CPSIM_BACKEND(cuda_threads) {
  info.backend = Backend::cuda_threads;
  info.device = "cuda";
  info.launch = launch_cuda_threads;
}

}  // namespace cpsim
