// The collective algorithms, written once on top of point-to-point messages. Each lives in its own file
// whose header comment gives the algorithm and its cost. Terms: C ranks, n bytes per rank (one chunk).
//
//   ring_all_gather       C-1 steps, each rank sends and receives (C-1) n      busbw factor (C-1)/C
//   direct_all_gather     1 round, the same bytes
//   ring_reduce_scatter   C-1 steps, each rank sends and receives (C-1) n      busbw factor (C-1)/C
//   direct_reduce_scatter C-1 dependent receives, the same bytes
//   pairwise_all_to_all   C-1 steps, each rank sends and receives (C-1) n      busbw factor (C-1)/C
//   all_reduce            reduce-scatter + all-gather: 2 (C-1)/C of the buffer each way,
//                                                                              busbw factor 2 (C-1)/C
//   dissemination_barrier ceil(log2 C) rounds of empty messages
// The ring forwards what a rank received at one step at the next: on links it keeps every link busy, but where
// ranks share memory (the threads backend) each pass then reads data another core has just written, and the
// direct forms, which read every message from its sender's untouched input, took about half the time
// (docs/performance/comm.md). Both CPU backends use the direct forms unless a launch imposes the ring.
// (busbw factors as nccl-tests defines them: busbw = algbw x factor, algbw = total buffer bytes / time.)
#pragma once
#include <cstddef>
#include <vector>

#include "sim/comm/collectives/port.hpp"
#include "sim/core/dtype.hpp"

namespace cpsim::collectives {

// Where chunk c of a buffer of C chunks lives (bytes). Chunks may differ in size (all-reduce of a count that C
// does not divide).
struct Chunks {
  std::vector<std::size_t> offset, bytes;
  static Chunks equal(int c, std::size_t bytes_each);
  // `count` elements of `elem` bytes cut into c runs whose lengths differ by at most one element.
  static Chunks balanced(int c, std::size_t count, std::size_t elem);
  std::size_t largest() const;
  std::size_t total() const;
  // Where chunk c starts in `buf`.
  std::byte* at(void* buf, int c) const { return static_cast<std::byte*>(buf) + offset[c]; }
  // All-gather's first step: rank r's own chunk, read from `send`, into its place in `recv` (nothing when it
  // already sits there).
  void place_own(const void* send, void* recv, int r) const;
};

// recv[c] = rank c's chunk, for every c. Rank r's own chunk is read from `send` (may already sit at recv[r]).
void ring_all_gather(const Port& port, const void* send, void* recv, const Chunks& chunks);
void direct_all_gather(const Port& port, const void* send, void* recv, const Chunks& chunks);

// recv = op over ranks of their chunk `rank()` of `send` (send holds all C chunks). `recv` may alias `send`'s
// own chunk.
void ring_reduce_scatter(const Port& port, const void* send, void* recv, const Chunks& chunks, DType dtype,
                         ReduceOp op);
void direct_reduce_scatter(const Port& port, const void* send, void* recv, const Chunks& chunks, DType dtype,
                           ReduceOp op);

// recv[p] = rank p's chunk for this rank; send[p] goes to rank p.
void pairwise_all_to_all(const Port& port, const void* send, void* recv, std::size_t bytes_per_rank);

// recv[i] = op over ranks of send[i]; send may equal recv.
void all_reduce(const Port& port, const void* send, void* recv, std::size_t count, DType dtype, ReduceOp op,
                CollectiveAlgorithm algorithm);

void dissemination_barrier(const Port& port);

}  // namespace cpsim::collectives
