#include "sim/comm/p2p_communicator.hpp"

#include <algorithm>
#include <cstdint>
#include <utility>

#include "sim/comm/collectives/collectives.hpp"

namespace cpsim {

using collectives::Chunks;
using collectives::Port;

P2pCommunicator::P2pCommunicator(int rank, int size, Recorder& rec, std::vector<int> world_ranks, std::uint64_t context)
    : Communicator(rank, size, rec, std::move(world_ranks)), context_(context) {}

Pending P2pCommunicator::post_send(const Envelope& env, const void* buf, std::size_t bytes, int peer) {
  return start_send(env, buf, bytes, world_ranks()[peer]);
}

Pending P2pCommunicator::post_recv(const Envelope& env, void* buf, std::size_t bytes, int peer, Landing how) {
  return start_recv(env, buf, bytes, world_ranks()[peer], how);
}

std::byte* P2pCommunicator::scratch(std::size_t bytes) {
  if (scratch_.size() < bytes) scratch_.resize(bytes);
  return scratch_.data();
}

Envelope P2pCommunicator::p2p(int tag) const {
  return Envelope{context_, Channel::p2p, CollectiveKind::none, tag, 0};
}

Envelope P2pCommunicator::next_collective(CollectiveKind kind) {
  return Envelope{context_, Channel::collective, kind, 0, collectives_++};
}

void P2pCommunicator::do_send(const void* buf, std::size_t bytes, int peer, int tag) {
  Pending p = post_send(p2p(tag), buf, bytes, peer);
  wait(p);
}

void P2pCommunicator::do_recv(void* buf, std::size_t bytes, int peer, int tag) {
  Pending p = post_recv(p2p(tag), buf, bytes, peer);
  wait(p);
}

std::unique_ptr<Request::Impl> P2pCommunicator::do_isend(const void* buf, std::size_t bytes, int peer, int tag) {
  return post_send(p2p(tag), buf, bytes, peer);
}

std::unique_ptr<Request::Impl> P2pCommunicator::do_irecv(void* buf, std::size_t bytes, int peer, int tag) {
  return post_recv(p2p(tag), buf, bytes, peer);
}

void P2pCommunicator::do_sendrecv(const void* sendbuf, std::size_t send_bytes, int dst, void* recvbuf,
                                  std::size_t recv_bytes, int src, int tag) {
  // Both posted before either is waited: every rank of a ring can send first and still never deadlock.
  Pending s = post_send(p2p(tag), sendbuf, send_bytes, dst);
  Pending r = post_recv(p2p(tag), recvbuf, recv_bytes, src);
  wait(r);
  wait(s);
}

void P2pCommunicator::do_all_gather(const void* sendbuf, void* recvbuf, std::size_t bytes_per_rank) {
  const Port port{*this, next_collective(CollectiveKind::all_gather)};
  const Chunks chunks = Chunks::equal(size(), bytes_per_rank);
  if (algorithm(bytes_per_rank) == CollectiveAlgorithm::direct)
    return collectives::direct_all_gather(port, sendbuf, recvbuf, chunks);
  collectives::ring_all_gather(port, sendbuf, recvbuf, chunks);
}

void P2pCommunicator::do_reduce_scatter(const void* sendbuf, void* recvbuf, std::size_t count_per_rank, DType dtype) {
  const Port port{*this, next_collective(CollectiveKind::reduce_scatter)};
  const Chunks chunks = Chunks::equal(size(), count_per_rank * dtype_size(dtype));
  if (algorithm(chunks.largest()) == CollectiveAlgorithm::direct)
    return collectives::direct_reduce_scatter(port, sendbuf, recvbuf, chunks, dtype, ReduceOp::sum);
  collectives::ring_reduce_scatter(port, sendbuf, recvbuf, chunks, dtype, ReduceOp::sum);
}

void P2pCommunicator::do_all_to_all(const void* sendbuf, void* recvbuf, std::size_t bytes_per_rank) {
  collectives::pairwise_all_to_all(Port{*this, next_collective(CollectiveKind::all_to_all)}, sendbuf, recvbuf,
                                   bytes_per_rank);
}

void P2pCommunicator::do_all_reduce(const void* sendbuf, void* recvbuf, std::size_t count, DType dtype, ReduceOp op) {
  collectives::all_reduce(Port{*this, next_collective(CollectiveKind::all_reduce)}, sendbuf, recvbuf, count, dtype, op,
                          algorithm((count + size() - 1) / size() * dtype_size(dtype)));
}

void P2pCommunicator::do_barrier() {
  collectives::dissemination_barrier(Port{*this, next_collective(CollectiveKind::barrier)});
}

std::unique_ptr<Communicator> P2pCommunicator::do_split(int color, int key) {
  // STEP 1: every rank learns every rank's (color, key).
  struct Entry {
    std::int32_t color, key;
  };
  std::vector<Entry> all(size());
  const Entry mine{color, key};
  collectives::ring_all_gather(Port{*this, next_collective(CollectiveKind::split)}, &mine, all.data(),
                               Chunks::equal(size(), sizeof(Entry)));
  const std::uint64_t split_index = splits_++;
  if (color < 0) return nullptr;
  // STEP 2: our group, ordered by (key, old rank).
  std::vector<int> members;
  for (int r = 0; r < size(); ++r)
    if (all[r].color == color) members.push_back(r);
  std::stable_sort(members.begin(), members.end(), [&](int a, int b) { return all[a].key < all[b].key; });
  // STEP 3: its world ranks, our place in it, and a context id every member derives alike.
  std::vector<int> world;
  int new_rank = 0;
  for (std::size_t i = 0; i < members.size(); ++i) {
    world.push_back(world_ranks()[members[i]]);
    if (members[i] == rank()) new_rank = static_cast<int>(i);
  }
  std::uint64_t ctx = mix64(mix64(mix64(context_) ^ split_index) ^ static_cast<std::uint32_t>(color));
  if (ctx == kControlContext || ctx == kWorldContext) ctx += 2;
  std::unique_ptr<P2pCommunicator> sub = make_sub(new_rank, std::move(world), ctx);
  sub->impose(imposed_);
  return sub;
}

}  // namespace cpsim
