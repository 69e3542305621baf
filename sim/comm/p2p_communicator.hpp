// A communicator whose backend provides only non-blocking point-to-point messages (threads, processes).
// Everything else is written once, here and in collectives/: blocking calls are a post and a wait, the
// collectives are the algorithms in collectives/*.cpp, split is an all-gather of (color, key).
//
// Every message carries an Envelope (envelope.hpp): the communicator's context id, the channel, the tag, and
// for collectives the call's kind and sequence number on this communicator, so a receive can tell a message of
// a different call (or a different size) from the one it expects.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "sim/comm/communicator.hpp"
#include "sim/comm/envelope.hpp"
#include "sim/comm/fold.hpp"
#include "sim/core/host_arena.hpp"

namespace cpsim {

// A posted send or receive, waited with wait(p) below. Destroying one that is not done cancels it.
using Pending = std::unique_ptr<Request::Impl>;
inline void wait(Pending& p) {
  if (!p) return;
  p->wait();
  p.reset();
}

class P2pCommunicator : public Communicator {
 public:
  // Posts a message of this communicator to / from `peer` (a rank of this communicator). A receive lands its
  // message as `how` says (fold.hpp): a copy, or a fold, buf = op(message, fold.own).
  Pending post_send(const Envelope& env, const void* buf, std::size_t bytes, int peer);
  Pending post_recv(const Envelope& env, void* buf, std::size_t bytes, int peer, Landing how = {});
  std::uint64_t context() const { return context_; }
  // Scratch memory for collectives (reduce-scatter's partial sums), kept between calls so that repeated
  // calls do not allocate; host memory from the process's arena when it has one (sim/core/host_arena.hpp: the
  // processes backend's shared heap), so that partial sums sent on are copied once too.
  std::byte* scratch(std::size_t bytes);
  // The form all_gather, reduce_scatter and all_reduce take for chunks of this size (collectives.hpp): the
  // backend's choice, unless the launch imposed one (LaunchOptions::collectives, `bench comm --collectives`).
  // Communicators made by split keep what was imposed. Every rank of a call derives the same form: the sizes
  // of a call and the launch options are the same on all of them.
  CollectiveAlgorithm algorithm(std::size_t chunk_bytes) const {
    return imposed_ ? *imposed_ : backend_algorithm(chunk_bytes);
  }
  void impose(std::optional<CollectiveAlgorithm> a) { imposed_ = a; }

 protected:
  P2pCommunicator(int rank, int size, Recorder& rec, std::vector<int> world_ranks, std::uint64_t context);

  // The backend: messages to / from a world rank.
  virtual Pending start_send(const Envelope& env, const void* buf, std::size_t bytes, int peer_world) = 0;
  virtual Pending start_recv(const Envelope& env, void* buf, std::size_t bytes, int peer_world, const Landing& how) = 0;
  // The backend's choice of form for chunks of this size.
  virtual CollectiveAlgorithm backend_algorithm(std::size_t chunk_bytes) const = 0;
  // A communicator of the same backend over the given world ranks, this rank being `rank` of them.
  virtual std::unique_ptr<P2pCommunicator> make_sub(int rank, std::vector<int> world_ranks, std::uint64_t context) = 0;

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
  Envelope p2p(int tag) const;
  Envelope next_collective(CollectiveKind kind);

  std::uint64_t context_;
  std::uint64_t collectives_ = 0;  // collective calls so far (the next one's sequence number)
  std::uint64_t splits_ = 0;       // split calls so far (part of the child's context id)
  std::vector<std::byte, ArenaAllocator<std::byte>> scratch_;
  std::optional<CollectiveAlgorithm> imposed_;
};

}  // namespace cpsim
