// The nccl backend's communicator: one per rank (and one per split), every call on the rank's comm stream.
//
//   isend / irecv   held back and launched together as one group (p2p_batch.hpp); Request::wait makes the compute
//                   stream wait on the group's event, without blocking the host
//   send / recv / sendrecv, the collectives, barrier, split
//                   launched after the compute queued so far (an event), then the host waits for them: a blocking
//                   call returns with its result in place, as on the CPU backends
//   all_gather ncclAllGather, reduce_scatter ncclReduceScatter, all_reduce ncclAllReduce, all_to_all one group of
//   ncclSend/ncclRecv to every rank, barrier an all-reduce of one value, split ncclCommSplit.
#pragma once
#include <nccl.h>

#include <memory>
#include <string>
#include <vector>

#include "sim/comm/communicator.hpp"
#include "sim/cuda/p2p_batch.hpp"
#include "sim/cuda/rank_gpu.hpp"

namespace cpsim::cuda {

// Throws Error("<what>: <NCCL's message>") unless r is ncclSuccess.
void nccl_check(ncclResult_t r, const std::string& what, ncclComm_t comm = nullptr);

class NcclCommunicator final : public Communicator {
 public:
  // Takes ownership of comm (destroyed with the communicator).
  NcclCommunicator(ncclComm_t comm, int rank, int size, Recorder& rec, std::vector<int> world_ranks,
                   std::shared_ptr<RankGpu> gpu);
  ~NcclCommunicator() override;
  std::string backend() const override { return "nccl"; }

  // Launches the held-back isend/irecv as one group.
  void launch_batch();
  RankGpu& gpu() const { return *gpu_; }

 protected:
  void do_send(const void* buf, std::size_t bytes, int peer, int tag) override;
  void do_recv(void* buf, std::size_t bytes, int peer, int tag) override;
  std::unique_ptr<Request::Impl> do_isend(const void* buf, std::size_t bytes, int peer, int tag) override;
  std::unique_ptr<Request::Impl> do_irecv(void* buf, std::size_t bytes, int peer, int tag) override;
  void do_sendrecv(const void* sendbuf, std::size_t send_bytes, int dst, void* recvbuf, std::size_t recv_bytes, int src,
                   int tag) override;
  void do_all_gather(const void* sendbuf, void* recvbuf, std::size_t bytes_per_rank) override;
  void do_reduce_scatter(const void* sendbuf, void* recvbuf, std::size_t count_per_rank, DType dtype) override;
  void do_all_to_all(const void* sendbuf, void* recvbuf, std::size_t bytes_per_rank) override;
  void do_all_reduce(const void* sendbuf, void* recvbuf, std::size_t count, DType dtype, ReduceOp op) override;
  void do_barrier() override;
  std::unique_ptr<Communicator> do_split(int color, int key) override;

 private:
  struct Launched;  // the event after a launched group
  struct Op {
    bool send;
    void* ptr;
    std::size_t bytes;
    int peer;
    std::shared_ptr<std::shared_ptr<Launched>> launched;  // set when its group is launched
  };
  class Req;

  std::unique_ptr<Request::Impl> hold(bool send, void* ptr, std::size_t bytes, int peer);
  // Queues calls on the comm stream after the compute so far, then waits for them (host).
  template <class Calls>
  void blocking(const std::string& what, Calls&& calls);

  ncclComm_t comm_;
  std::shared_ptr<RankGpu> gpu_;
  P2pBatch batch_;
  std::vector<Op> held_;
  bool aborted_ = false;
  void* scratch_ = nullptr;  // barrier's value, split's (color, key) table
  std::size_t scratch_cap_ = 0;
};

}  // namespace cpsim::cuda
