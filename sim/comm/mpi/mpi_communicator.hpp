// The mpi backend's communicator: every call of the Communicator interface on an MPI communicator.
//
//   send / recv / sendrecv     MPI_Send, MPI_Recv, MPI_Sendrecv (MPI_BYTE)
//   isend / irecv              MPI_Isend, MPI_Irecv; Request::wait is MPI_Wait, test is MPI_Test
//   all_gather                 MPI_Allgather (in place when the send chunk already sits at its place)
//   all_to_all                 MPI_Alltoall
//   barrier                    MPI_Barrier
//   split                      MPI_Comm_split (a negative color is MPI_UNDEFINED: no communicator)
//   all_reduce max / min       MPI_Allreduce (f32, f64, i64: exact, whatever order MPI combines in)
//   reduce_scatter, all_reduce sum (and bf16)
//                              in the ring's order, so that results are bitwise those of the threads and processes
//                              backends: MPI_Alltoall(v) hands rank r every rank's chunk r, rank r adds them up as
//                              the ring would (start with rank r+1's, add r+2's, ..., rank r's own last: the
//                              same combine() on the same operands), and all_reduce then MPI_Allgatherv's the
//                              reduced chunks. Floating-point sums depend on their order; MPI leaves its order
//                              to the implementation (and to the message size), so MPI_Reduce_scatter_block and
//                              MPI_Allreduce would differ from the other backends in the last bits.
//                              CPSIM_MPI_REDUCTIONS=native in the environment uses them instead (MPI's own
//                              reduction algorithms; results not bitwise those of the other backends).
// Bytes and calls are counted by the Communicator base class, as on every backend.
// Every blocking call runs under the rank's Watchdog (mpi_runtime.hpp): a deadlock ends the job after the timeout.
// Errors return (MPI_ERRORS_RETURN) and become cpsim Errors naming the call.
#pragma once
#include <mpi.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "sim/comm/communicator.hpp"
#include "sim/comm/mpi/mpi_runtime.hpp"

namespace cpsim::mpi {

class MpiCommunicator final : public Communicator {
 public:
  // Takes ownership of comm (freed with the communicator). world_ranks: rank r of comm is world rank
  // world_ranks[r] of the launch.
  MpiCommunicator(MPI_Comm comm, Recorder& rec, std::vector<int> world_ranks, std::shared_ptr<Watchdog> dog,
                  bool native_reductions);
  ~MpiCommunicator() override;
  std::string backend() const override { return "mpi"; }
  MPI_Comm handle() const { return comm_; }

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
  class Req;
  Call p2p(const char* op, int peer, int tag) const;
  Call collective(const char* op);
  void check_tag(int tag) const;
  std::byte* scratch(std::size_t bytes);
  // reduce_scatter and all_reduce in the ring's order (mpi_reductions.cpp).
  void ordered_reduce_scatter(const void* sendbuf, void* recvbuf, std::size_t count_per_rank, DType dtype);
  void ordered_all_reduce(const void* sendbuf, void* recvbuf, std::size_t count, DType dtype, ReduceOp op);

  MPI_Comm comm_;
  int tag_ub_ = 32767;
  std::shared_ptr<Watchdog> dog_;
  bool native_reductions_;
  long long collectives_ = 0;
  std::vector<std::byte> scratch_;
};

}  // namespace cpsim::mpi
