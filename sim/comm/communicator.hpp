// The Communicator seam: everything a strategy asks of the other ranks. One Communicator per rank.
//
// Backends: threads and processes (this folder), mpi (sim/comm/mpi), nccl and cuda-threads (sim/cuda).
// Buffers are raw device memory (host memory on CPU devices, device memory on GPUs, null on the counting
// device). Every public call is counted in the rank's Recorder by this base class, so every backend counts
// the same way:
//   calls[kind] += 1 for kind in send, recv, isend, irecv, sendrecv, all_gather, reduce_scatter,
//   all_to_all, all_reduce, barrier;
//   bytes are the logical payload this rank sends / receives, whatever algorithm the backend uses:
//     send/isend n: sent n            recv/irecv n: received n          sendrecv: sent s, received r
//     all_gather n per rank:     sent (C-1) n, received (C-1) n
//     reduce_scatter n per rank: sent (C-1) n, received (C-1) n        (n = count * dtype size)
//     all_to_all n per rank:     sent (C-1) n, received (C-1) n
//     all_reduce n:              sent 2 (C-1)/C n, received 2 (C-1)/C n  (ring: reduce-scatter + all-gather)
//     barrier: 0
// Time a rank spends blocked in wait() is recorded as idle time.
#pragma once
#include <chrono>
#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "sim/core/dtype.hpp"
#include "sim/core/recorder.hpp"

namespace cpsim {

enum class ReduceOp { sum, max, min };
// How the threads and processes backends run all_gather, reduce_scatter and all_reduce
// (sim/comm/collectives/collectives.hpp): the ring, or every message at once from its sender's input.
enum class CollectiveAlgorithm { ring, direct };
const char* algorithm_name(CollectiveAlgorithm a);

// The ranks first, first + 1, ..., first + count - 1: a world's ranks (rank_range(0, C)), or a group of
// consecutive ranks (the hybrid's A2A group g: rank_range(g A, A)).
std::vector<int> rank_range(int first, int count);

// A pending isend or irecv. wait() blocks until done (and throws Error on timeout or a dead peer);
// test() says whether it is done without blocking. A Request must be waited before its buffer is reused.
class Request {
 public:
  struct Impl {
    virtual ~Impl() = default;
    virtual void wait() = 0;
    virtual bool test() = 0;
  };
  Request() = default;
  Request(std::unique_ptr<Impl> impl, Recorder* rec, std::string what, int peer);
  Request(Request&&) noexcept = default;
  Request& operator=(Request&&) noexcept = default;
  ~Request();  // an unwaited request is waited (errors swallowed: destructors must not throw)

  void wait();
  bool test();
  bool valid() const { return impl_ != nullptr; }

 private:
  std::unique_ptr<Impl> impl_;
  Recorder* rec_ = nullptr;
  std::string what_;
  int peer_ = -1;
};

class Communicator {
 public:
  virtual ~Communicator() = default;
  Communicator(const Communicator&) = delete;
  Communicator& operator=(const Communicator&) = delete;

  int rank() const { return rank_; }
  int size() const { return size_; }
  Recorder& recorder() const { return *rec_; }
  // Rank r of this communicator is world rank world_ranks()[r] (the identity on a world communicator).
  const std::vector<int>& world_ranks() const { return world_ranks_; }
  virtual std::string backend() const = 0;

  // Point to point. Messages between one (sender, receiver, tag) arrive in the order sent.
  // A receive of a different size than the matching send is an Error naming both sizes.
  void send(const void* buf, std::size_t bytes, int peer, int tag = 0);
  void recv(void* buf, std::size_t bytes, int peer, int tag = 0);
  Request isend(const void* buf, std::size_t bytes, int peer, int tag = 0);
  Request irecv(void* buf, std::size_t bytes, int peer, int tag = 0);
  // Sends to dst and receives from src at once: a ring exchange never deadlocks, whatever the size.
  void sendrecv(const void* sendbuf, std::size_t send_bytes, int dst, void* recvbuf, std::size_t recv_bytes,
                int src, int tag = 0);

  // Collectives (every rank of this communicator must call them, in the same order).
  //   all_gather:     recv [C][n] in rank order, recv[r] = rank r's send (n bytes each).
  //   reduce_scatter: send [C][count] of dtype; recv [count] = sum over ranks of their send[rank()].
  //   all_to_all:     send [C][n]; chunk p goes to rank p; recv[p] = rank p's chunk for this rank.
  //   all_reduce:     recv[i] = op over ranks of send[i]; send may equal recv.
  void all_gather(const void* sendbuf, void* recvbuf, std::size_t bytes_per_rank);
  void reduce_scatter(const void* sendbuf, void* recvbuf, std::size_t count_per_rank, DType dtype);
  void all_to_all(const void* sendbuf, void* recvbuf, std::size_t bytes_per_rank);
  void all_reduce(const void* sendbuf, void* recvbuf, std::size_t count, DType dtype, ReduceOp op);
  void barrier();

  // Ranks with the same color form a sub-communicator, ordered by (key, old rank). Collective.
  // Its calls are counted in the same Recorder (they are this rank's calls).
  //   2-D mesh, C = A x R: split(rank / A, rank) gives the A2A groups [0,1],[2,3],...;
  //   split(rank % A, rank) the ring groups [0,2,4,6],[1,3,5,7] (C = 8, A = 2). A negative color joins no group
  // (returns null). The sub-communicator must not outlive the launch that made its parent.
  std::unique_ptr<Communicator> split(int color, int key);

 protected:
  Communicator(int rank, int size, Recorder& rec, std::vector<int> world_ranks);

  virtual void do_send(const void* buf, std::size_t bytes, int peer, int tag) = 0;
  virtual void do_recv(void* buf, std::size_t bytes, int peer, int tag) = 0;
  virtual std::unique_ptr<Request::Impl> do_isend(const void* buf, std::size_t bytes, int peer, int tag) = 0;
  virtual std::unique_ptr<Request::Impl> do_irecv(void* buf, std::size_t bytes, int peer, int tag) = 0;
  virtual void do_sendrecv(const void* sendbuf, std::size_t send_bytes, int dst, void* recvbuf,
                           std::size_t recv_bytes, int src, int tag) = 0;
  virtual void do_all_gather(const void* sendbuf, void* recvbuf, std::size_t bytes_per_rank) = 0;
  virtual void do_reduce_scatter(const void* sendbuf, void* recvbuf, std::size_t count_per_rank, DType dtype) = 0;
  virtual void do_all_to_all(const void* sendbuf, void* recvbuf, std::size_t bytes_per_rank) = 0;
  virtual void do_all_reduce(const void* sendbuf, void* recvbuf, std::size_t count, DType dtype, ReduceOp op) = 0;
  virtual void do_barrier() = 0;
  virtual std::unique_ptr<Communicator> do_split(int color, int key) = 0;

 private:
  int rank_;
  int size_;
  Recorder* rec_;
  std::vector<int> world_ranks_;
};

}  // namespace cpsim
