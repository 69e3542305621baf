// The ceiling `cpsim bench comm` compares its busbw with: the same call's data movement, with no messages.
//
// C threads, one per rank, each do exactly what their rank's receives do in one call (`bare_call_us`):
//   sendrecv        out_r = in_{r-1}                                      1 copy of n bytes
//   all_gather      out_r[j] = in_j, for every j (its own chunk too)      C copies
//   all_to_all      out_r[j] = in_j[r], for every j                       C copies
//   reduce_scatter  acc_r = in_{r+1}[r], then acc_r = acc_r + in_{r+k}[r]  1 copy, C-1 adds (f32), in the
//                   for k = 2..C (the direct form's order, fold.hpp)     order the direct form uses
// from buffers laid out as the ranks' are (each rank's own input and output), and then meet at a barrier,
// call after call. A waiting thread sleeps (std::barrier) and leaves the core to the others. No send, no
// receive, no matching, no mailbox: the rest of a call is what a communicator adds on top.
//
// Why it is the ceiling: a backend that copies each message once into memory its receiver owns does at
// least this work per call, and at least this much waiting (a rank cannot finish a call before every peer has
// supplied its data). With C ranks on fewer cores the ranks share the cores, so on 4 ranks and 2 cores
// bus/mem cannot exceed about cores / C = 0.5 even here, and only reaches that if two cores copy as fast as
// one copying alone.
#pragma once
#include <cstddef>
#include <vector>

namespace cpsim::cli {

enum class CommOp { sendrecv, all_gather, reduce_scatter, all_to_all };

// Every rank's input and output, laid out as the bench's ranks have them (n-byte chunks, C ranks):
//   in[r]:  [n] for sendrecv and all_gather, [C n] otherwise
//   out[r]: [n] for sendrecv and reduce_scatter, [C n] otherwise
struct BareBuffers {
  std::vector<std::vector<std::byte>> in, out;
};
BareBuffers bare_buffers(CommOp op, std::size_t n, int ranks);  // inputs zero (f32 0.0)

// Rank r's share of one call, done on b by the calling thread (the table above).
void bare_call(CommOp op, std::size_t n, int r, BareBuffers& b);

// Mean microseconds per call of the bare copies of `op` with n-byte chunks on `ranks` threads: the best of 3
// runs of `iters` calls each.
double bare_call_us(CommOp op, std::size_t n, int ranks, int iters);

}  // namespace cpsim::cli
