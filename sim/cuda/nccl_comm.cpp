#include "sim/cuda/nccl_comm.hpp"

#include <algorithm>
#include <exception>

#include "sim/cuda/cuda_check.hpp"

namespace cpsim::cuda {

void nccl_check(ncclResult_t r, const std::string& what, ncclComm_t comm) {
  if (r == ncclSuccess) return;
  std::string m = what + ": " + ncclGetErrorString(r);
  const char* last = ncclGetLastError(comm);
  if (last != nullptr && *last != '\0') m += " (" + std::string(last) + ")";
  throw Error(m);
}

namespace {

ncclDataType_t nccl_type(DType t) {
  switch (t) {
    case DType::f32:
      return ncclFloat32;
    case DType::f64:
      return ncclFloat64;
    case DType::bf16:
      return ncclBfloat16;
    case DType::i64:
      return ncclInt64;
  }
  return ncclFloat32;
}

ncclRedOp_t nccl_op(ReduceOp op) {
  switch (op) {
    case ReduceOp::sum:
      return ncclSum;
    case ReduceOp::max:
      return ncclMax;
    case ReduceOp::min:
      return ncclMin;
  }
  return ncclSum;
}

const char* offset(const void* p, std::size_t n) {
  return static_cast<const char*>(p) + n;
}
char* offset(void* p, std::size_t n) {
  return static_cast<char*>(p) + n;
}

}  // namespace

struct NcclCommunicator::Launched {
  cudaEvent_t ev = nullptr;
  ~Launched() {
    if (ev) cudaEventDestroy(ev);
  }
};

class NcclCommunicator::Req final : public Request::Impl {
 public:
  Req(NcclCommunicator& c, std::shared_ptr<std::shared_ptr<Launched>> l) : c_(c), l_(std::move(l)) {}
  void wait() override {
    if (!*l_) c_.launch_batch();
    c_.gpu().compute_waits_for((*l_)->ev);  // the host goes on; the compute stream waits for the transfer
  }
  bool test() override {
    if (!*l_) c_.launch_batch();
    const cudaError_t e = cudaEventQuery((*l_)->ev);
    if (e == cudaErrorNotReady) return false;
    check(e, "testing a transfer");
    return true;
  }

 private:
  NcclCommunicator& c_;
  std::shared_ptr<std::shared_ptr<Launched>> l_;
};

NcclCommunicator::NcclCommunicator(ncclComm_t comm, int rank, int size, Recorder& rec, std::vector<int> world_ranks,
                                   std::shared_ptr<RankGpu> gpu)
    : Communicator(rank, size, rec, std::move(world_ranks)), comm_(comm), gpu_(std::move(gpu)) {
  gpu_->add_watch(this, RankGpu::Watch{[this]() -> std::string {
                                         ncclResult_t e = ncclSuccess;
                                         if (aborted_ || ncclCommGetAsyncError(comm_, &e) != ncclSuccess) return "";
                                         if (e == ncclSuccess || e == ncclInProgress) return "";
                                         return std::string("NCCL reported ") + ncclGetErrorString(e) + " (" +
                                                ncclGetLastError(comm_) + ")";
                                       },
                                       [this] {
                                         if (!aborted_) ncclCommAbort(comm_);
                                         aborted_ = true;
                                       }});
}

NcclCommunicator::~NcclCommunicator() {
  gpu_->remove_watch(this);
  if (!aborted_) {
    if (std::uncaught_exceptions() > 0) {
      ncclCommAbort(comm_);  // a failing rank: peers may never answer, and abort does not wait for them
    } else {
      try {
        launch_batch();
        gpu_->wait(gpu_->comm(), "finishing communication");
      } catch (const std::exception&) {
      }
      ncclCommDestroy(comm_);
    }
  }
  if (scratch_) cudaFreeAsync(scratch_, gpu_->compute());
}

void NcclCommunicator::launch_batch() {
  if (held_.empty()) return;
  gpu_->comm_waits_for_compute();  // the sends read, and the receives overwrite, what compute has queued so far
  nccl_check(ncclGroupStart(), "ncclGroupStart", comm_);
  for (const Op& op : held_) {
    const ncclResult_t r = op.send ? ncclSend(op.ptr, op.bytes, ncclUint8, op.peer, comm_, gpu_->comm())
                                   : ncclRecv(op.ptr, op.bytes, ncclUint8, op.peer, comm_, gpu_->comm());
    if (r != ncclSuccess) {
      ncclGroupEnd();
      nccl_check(r, op.send ? "ncclSend" : "ncclRecv", comm_);
    }
  }
  nccl_check(ncclGroupEnd(), "ncclGroupEnd (point-to-point)", comm_);
  auto l = std::make_shared<Launched>();
  check(cudaEventCreateWithFlags(&l->ev, cudaEventDisableTiming), "creating a transfer event");
  check(cudaEventRecord(l->ev, gpu_->comm()), "recording a transfer event");
  for (Op& op : held_) *op.launched = l;
  held_.clear();
  batch_.clear();
}

std::unique_ptr<Request::Impl> NcclCommunicator::hold(bool send, void* ptr, std::size_t bytes, int peer) {
  auto launched = std::make_shared<std::shared_ptr<Launched>>();
  held_.push_back(Op{send, ptr, bytes, peer, launched});
  if (batch_.add(send)) launch_batch();
  return std::make_unique<Req>(*this, std::move(launched));
}

std::unique_ptr<Request::Impl> NcclCommunicator::do_isend(const void* buf, std::size_t bytes, int peer, int) {
  return hold(true, const_cast<void*>(buf), bytes, peer);  // only read: NCCL's send takes a const pointer
}

std::unique_ptr<Request::Impl> NcclCommunicator::do_irecv(void* buf, std::size_t bytes, int peer, int) {
  return hold(false, buf, bytes, peer);
}

template <class Calls>
void NcclCommunicator::blocking(const std::string& what, Calls&& calls) {
  launch_batch();  // what was held back goes first, in call order
  gpu_->comm_waits_for_compute();
  calls();
  gpu_->compute_waits_for_comm();
  gpu_->wait(gpu_->comm(), what);
}

void NcclCommunicator::do_send(const void* buf, std::size_t bytes, int peer, int) {
  blocking("send to rank " + std::to_string(world_ranks()[peer]),
           [&] { nccl_check(ncclSend(buf, bytes, ncclUint8, peer, comm_, gpu_->comm()), "ncclSend", comm_); });
}

void NcclCommunicator::do_recv(void* buf, std::size_t bytes, int peer, int) {
  blocking("recv from rank " + std::to_string(world_ranks()[peer]),
           [&] { nccl_check(ncclRecv(buf, bytes, ncclUint8, peer, comm_, gpu_->comm()), "ncclRecv", comm_); });
}

void NcclCommunicator::do_sendrecv(const void* sendbuf, std::size_t send_bytes, int dst, void* recvbuf,
                                   std::size_t recv_bytes, int src, int) {
  blocking("sendrecv", [&] {
    nccl_check(ncclGroupStart(), "ncclGroupStart", comm_);
    nccl_check(ncclSend(sendbuf, send_bytes, ncclUint8, dst, comm_, gpu_->comm()), "ncclSend", comm_);
    nccl_check(ncclRecv(recvbuf, recv_bytes, ncclUint8, src, comm_, gpu_->comm()), "ncclRecv", comm_);
    nccl_check(ncclGroupEnd(), "ncclGroupEnd (sendrecv)", comm_);
  });
}

void NcclCommunicator::do_all_gather(const void* sendbuf, void* recvbuf, std::size_t n) {
  blocking("all_gather", [&] {
    nccl_check(ncclAllGather(sendbuf, recvbuf, n, ncclUint8, comm_, gpu_->comm()), "ncclAllGather", comm_);
  });
}

void NcclCommunicator::do_reduce_scatter(const void* sendbuf, void* recvbuf, std::size_t count, DType dtype) {
  blocking("reduce_scatter", [&] {
    nccl_check(ncclReduceScatter(sendbuf, recvbuf, count, nccl_type(dtype), ncclSum, comm_, gpu_->comm()),
               "ncclReduceScatter", comm_);
  });
}

void NcclCommunicator::do_all_to_all(const void* sendbuf, void* recvbuf, std::size_t n) {
  blocking("all_to_all", [&] {
    nccl_check(ncclGroupStart(), "ncclGroupStart", comm_);
    for (int p = 0; p < size(); ++p) {
      const std::size_t at = static_cast<std::size_t>(p) * n;
      nccl_check(ncclSend(offset(sendbuf, at), n, ncclUint8, p, comm_, gpu_->comm()), "ncclSend", comm_);
      nccl_check(ncclRecv(offset(recvbuf, at), n, ncclUint8, p, comm_, gpu_->comm()), "ncclRecv", comm_);
    }
    nccl_check(ncclGroupEnd(), "ncclGroupEnd (all_to_all)", comm_);
  });
}

void NcclCommunicator::do_all_reduce(const void* sendbuf, void* recvbuf, std::size_t count, DType dtype, ReduceOp op) {
  blocking("all_reduce", [&] {
    nccl_check(ncclAllReduce(sendbuf, recvbuf, count, nccl_type(dtype), nccl_op(op), comm_, gpu_->comm()),
               "ncclAllReduce", comm_);
  });
}

void NcclCommunicator::do_barrier() {
  if (scratch_cap_ < sizeof(float)) {
    if (scratch_) check(cudaFreeAsync(scratch_, gpu_->compute()), "freeing communicator scratch");
    scratch_ = nullptr;
    check(cudaMallocAsync(&scratch_, 64, gpu_->compute()), "allocating communicator scratch");
    check(cudaMemsetAsync(scratch_, 0, 64, gpu_->compute()), "zero-filling communicator scratch");
    scratch_cap_ = 64;
  }
  blocking("barrier", [&] {
    nccl_check(ncclAllReduce(scratch_, scratch_, 1, ncclFloat32, ncclSum, comm_, gpu_->comm()), "barrier", comm_);
  });
}

std::unique_ptr<Communicator> NcclCommunicator::do_split(int color, int key) {
  // Every rank's (color, key), so that each knows its group's members as world ranks.
  const std::size_t bytes = 2 * sizeof(int) * (static_cast<std::size_t>(size()) + 1);
  if (scratch_cap_ < bytes) {
    if (scratch_) check(cudaFreeAsync(scratch_, gpu_->compute()), "freeing communicator scratch");
    scratch_ = nullptr;
    check(cudaMallocAsync(&scratch_, bytes, gpu_->compute()), "allocating communicator scratch");
    scratch_cap_ = bytes;
  }
  int* table = static_cast<int*>(scratch_);
  const int mine[2] = {color, key};
  std::vector<int> all(2 * static_cast<std::size_t>(size()));
  blocking("split", [&] {
    check(cudaMemcpyAsync(table + 2 * size(), mine, sizeof mine, cudaMemcpyHostToDevice, gpu_->comm()), "split");
    nccl_check(ncclAllGather(table + 2 * size(), table, 2, ncclInt32, comm_, gpu_->comm()), "ncclAllGather (split)",
               comm_);
    check(cudaMemcpyAsync(all.data(), table, all.size() * sizeof(int), cudaMemcpyDeviceToHost, gpu_->comm()), "split");
  });
  ncclComm_t sub = nullptr;
  nccl_check(ncclCommSplit(comm_, color < 0 ? NCCL_SPLIT_NOCOLOR : color, key, &sub, nullptr), "ncclCommSplit", comm_);
  if (color < 0) return nullptr;
  std::vector<std::pair<std::pair<int, int>, int>> same;  // ((key, old rank), world rank)
  for (int p = 0; p < size(); ++p)
    if (all[2 * p] == color) same.push_back({{all[2 * p + 1], p}, world_ranks()[p]});
  std::sort(same.begin(), same.end());
  std::vector<int> members;
  int mine_rank = -1;
  for (std::size_t r = 0; r < same.size(); ++r) {
    members.push_back(same[r].second);
    if (same[r].first.second == rank()) mine_rank = static_cast<int>(r);
  }
  int nccl_rank = -1;
  nccl_check(ncclCommUserRank(sub, &nccl_rank), "ncclCommUserRank", sub);
  if (nccl_rank != mine_rank) {
    ncclCommDestroy(sub);
    throw Error("split: NCCL ordered the new group differently (rank " + std::to_string(nccl_rank) + ", expected " +
                std::to_string(mine_rank) + ")");
  }
  return std::make_unique<NcclCommunicator>(sub, mine_rank, static_cast<int>(members.size()), recorder(),
                                            std::move(members), gpu_);
}

}  // namespace cpsim::cuda
