// Direct reduce-scatter: the threads and processes backends' form.
//
// Algorithm: rank r posts, all at once, chunk p of its input to every rank p != r. It then receives chunk r
// of every other rank in ring order, folding each into its result as it arrives (a receive-and-reduce,
// fold.hpp), and adds its own chunk last:
//   1. acc = x[r+1]                          (a plain receive)
//   2. acc = op(acc, x[r+k]), k = 2..C-1     (folded receives, one at a time: acc is their shared target)
//   3. out = op(acc, x[r])                   (local)
// (indices mod C; x[p] is chunk r of rank p's input). That is the ring's order of operations exactly
// (ring_reduce_scatter.cpp: the partial of chunk r starts at rank r+1 and picks up r+2, ..., r last), so
// both algorithms, and the mpi backend, give bitwise the same result. With C = 2 steps 1 and 3 are one
// folded receive, out = op(x[r+1], x[r]).
//
// Every message is read from its sender's input, which no step writes: with ranks that share memory the ring's
// forwarding only makes each pass read data another core has just written, and chains the steps
// (docs/performance/comm.md has the measurements).
//
// Cost: the receives are C-1 dependent steps, the sends one round; each rank sends (C-1) n and receives
// (C-1) n bytes, the same as the ring. algbw = C n / time; busbw = algbw x (C-1)/C (nccl-tests).
#include <vector>

#include "sim/comm/collectives/collectives.hpp"
#include "sim/comm/collectives/reduce.hpp"

namespace cpsim::collectives {

void direct_reduce_scatter(const Port& port, const void* send, void* recv, const Chunks& chunks, DType dtype,
                           ReduceOp op) {
  const int c = port.size(), r = port.rank();
  const auto* in = static_cast<const std::byte*>(send);
  const std::byte* own = in + chunks.offset[r];
  const std::size_t n = chunks.bytes[r];
  if (c == 1) return ring_reduce_scatter(port, send, recv, chunks, dtype, op);  // a copy
  std::vector<Pending> sends;
  sends.reserve(static_cast<std::size_t>(c));
  for (int k = 1; k < c; ++k) {
    const int to = (r - k + c) % c;  // r-1 first: it receives from r first (r = its r+1)
    sends.push_back(port.send(in + chunks.offset[to], chunks.bytes[to], to));
  }
  auto* out = static_cast<std::byte*>(recv);
  if (c == 2) {
    Pending p = port.recv_fold(out, n, (r + 1) % c, Fold{own, dtype, op});
    wait(p);
  } else {
    // The partial result may not sit on our own chunk (in place): x[r] is added last.
    const bool overlaps = out < own + n && own < out + n;
    std::byte* acc = overlaps ? port.comm.scratch(n) : out;
    Pending first = port.recv(acc, n, (r + 1) % c);  // STEP 1
    wait(first);
    for (int k = 2; k < c; ++k) {  // STEP 2
      Pending p = port.recv_fold(acc, n, (r + k) % c, Fold{acc, dtype, op, true});
      wait(p);
    }
    combine(out, acc, own, n / dtype_size(dtype), dtype, op);  // STEP 3
  }
  for (Pending& s : sends) wait(s);
}

}  // namespace cpsim::collectives
