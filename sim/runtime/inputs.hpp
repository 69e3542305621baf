// The seeded inputs: the one definition of the values every run, check, benchmark and test computes on.
//
//   element i of tensor X, in global [B, S, N, D] order, = normal_at(seed, stream(X), i) rounded to the dtype
//   streams: q = 0, k = 1, v = 2, dout = 3                   (sim/core/random.hpp: any element is made on its own)
// A rank's shard of X is the global tensor's rows at the rank's positions (SeqLayout::positions), in local-row
// order: q, dout [B, s, Nq, D], k, v [B, s, Nkv, D] with s = S/C. A rank makes exactly its own elements; the caller
// makes the global tensors only when it checks or dumps them. Either way the values are the same, bit for bit.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "sim/kernels/check.hpp"
#include "sim/kernels/device.hpp"
#include "sim/strategies/strategy.hpp"

namespace cpsim {

enum class Input : std::uint64_t { q = 0, k = 1, v = 2, dout = 3 };  // the value is the stream

struct Inputs {
  std::vector<double> q, k, v, dout;  // dout is empty unless asked for
};

// Rank `rank`'s shard of one input of the problem, rounded to p.dtype.
std::vector<double> rank_input(const Problem& p, std::uint64_t seed, Input which, int rank);
// The same shard made straight into a buffer of dev ([B, s, N, D] of p.dtype, named `name`, for `use`), a chunk at a
// time (upload_made in sim/kernels/host_io.hpp): what a rank of a run does.
Buffer rank_input_buffer(Device& dev, const Problem& p, std::uint64_t seed, Input which, int rank,
                         const std::string& name, BufferUse use = BufferUse::work);
// Its shards of q, k, v (and dout when with_dout).
Inputs rank_inputs(const Problem& p, std::uint64_t seed, int rank, bool with_dout);
// The whole tensors, in global sequence order: q, dout [B, S, Nq, D]; k, v [B, S, Nkv, D].
Inputs global_inputs(const Problem& p, std::uint64_t seed, bool with_dout);

// A run's whole problem as one device sees it: these global inputs at positions 0..S-1 on both sides, with the
// run's mask and scale and its document padding left out (what a run's check compares with the reference).
AttentionProblem whole_problem(const Problem& p, Inputs global);

// A single-device problem (`cpsim attention`, the kernel tests and benchmarks): q, dout [B, Sq, Nq, D] and
// k, v [B, Sk, Nkv, D] by the same definition (Sq rows for q, Sk for k), positions 0.. on both sides.
AttentionProblem attention_problem(const AttentionShape& shape, const Mask& mask, DType dtype, std::uint64_t seed,
                                   double scale = 0);

}  // namespace cpsim
