// A context-parallel attention strategy, as one rank runs it.
//
// Each strategy is written once against the two seams: Communicator (bytes between ranks) and Device (math on
// this rank's buffers). It includes neither Eigen nor Boost nor CUDA, so the same file runs on threads,
// processes, MPI, NCCL and the counting device.
//
// Inputs are sequence-sharded as the layout says: rank r holds the rows of SeqLayout::positions(r), ascending
// (Problem::layout()), and every attention call applies the problem's mask (Problem::mask()).
//   q: [B, s, Nq, D]   k, v: [B, s, Nkv, D]   (s = S/C)
// forward() returns the output in the same sharding, and the log-sum-exp where the strategy computed it
// (ring and all-gather: all heads of the local rows; ulysses: Nq/C heads of every row; hybrid: in between).
// backward(dout) uses what forward saved and returns dq, dk, dv in the input sharding.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "sim/comm/communicator.hpp"
#include "sim/core/buffer.hpp"
#include "sim/core/positions.hpp"
#include "sim/kernels/device.hpp"
#include "sim/layout/documents.hpp"
#include "sim/layout/layout.hpp"

namespace cpsim {

// pruned_ring: the ring that forwards a K/V block only as far as some rank still sees it (pruned_ring.hpp);
// mask_exchange: each rank receives exactly the K/V rows its queries see, from their owners (mask_exchange.hpp).
enum class StrategyKind { all_gather, ulysses, ring, hybrid, pruned_ring, mask_exchange };
std::string_view strategy_name(StrategyKind k);
StrategyKind parse_strategy(std::string_view s);  // throws UsageError listing the accepted names
std::vector<StrategyKind> all_strategies();

struct Problem {
  std::int64_t batch = 1, seq = 64, heads = 4, kv_heads = 4, head_dim = 16;
  bool causal = true;
  DocSpec docs;             // documents packed into the sequence (--docs, --pad-docs); none: one sequence
  std::int64_t window = 0;  // sliding window W (--window): keys fewer than W positions back; 0: none
  std::int64_t chunk = 0;   // balanced sharding: tokens per chunk (--chunk); 0: S/(4C)
  double scale = 0;  // 0: 1/sqrt(D)
  DType dtype = DType::f64;
  Sharding sharding = Sharding::zigzag;
  int ranks = 1;
  int a2a = 0;               // hybrid: the A2A group size A (C = A x R); 0 picks 2 when C is even
  bool kv_replicate = false;  // ulysses/hybrid: replicate KV heads onto A/Nkv ranks when A > Nkv
  // Gradient accumulators: f32 for bf16 inputs, else the input dtype.
  DType accum_dtype() const { return dtype == DType::bf16 ? DType::f32 : dtype; }
  int a2a_size(StrategyKind k) const;  // A: C for ulysses, 1 for ring/all_gather, the hybrid's A
  // The most LSE merges a row's result goes through: the ring (alone or in the hybrid) merges one partial per step
  // after its first, C/A - 1; all-gather and Ulysses compute each row in one call.
  int lse_merges(StrategyKind k) const;
  // Whether the strategy's A2A group copies KV heads: --kv-replicate, and Nkv does not split A ways.
  bool replicates_kv(StrategyKind k) const { return kv_replicate && kv_heads % a2a_size(k) != 0; }
  // The documents for this S and C (empty without --docs), the mask, and the C-rank layout the inputs are sharded
  // by. Each throws UsageError for what cannot be (lengths that do not sum to S, a document zigzag cannot cut).
  Documents documents() const;
  Mask mask() const;
  SeqLayout layout() const;
};

// A problem that validation accepted for a strategy. Only validated() makes one, so code that takes a ValidProblem
// (the run, its memory count, the counting run, each rank's strategy) need not check again: a run validates once.
class ValidProblem {
 public:
  const Problem& problem() const { return problem_; }
  StrategyKind kind() const { return kind_; }

 private:
  friend ValidProblem validated(const Problem& p, StrategyKind kind);
  ValidProblem(const Problem& p, StrategyKind kind) : problem_(p), kind_(kind) {}
  Problem problem_;
  StrategyKind kind_;
};

// The problem, validated for the strategy: throws UsageError naming the constraint and a fix for every impossible
// configuration.
ValidProblem validated(const Problem& p, StrategyKind kind);
// validated(), for a caller that only asks whether the problem is possible.
void validate(const Problem& p, StrategyKind kind);
// How many times validated() has run in this process (tests count a run's validations).
std::int64_t validations();

struct LocalOutput {
  Buffer out;                  // [B, s, Nq, D], this rank's rows (input sharding)
  Buffer lse;                  // [B, nh, n]: the heads [lse_head0, lse_head0 + nh) of the rows at lse_positions
  std::int64_t lse_head0 = 0;
  Positions lse_positions;
};

struct LocalGrads {
  Buffer dq;  // [B, s, Nq, D]
  Buffer dk;  // [B, s, Nkv, D]
  Buffer dv;  // [B, s, Nkv, D]
};

class Strategy {
 public:
  virtual ~Strategy() = default;
  virtual LocalOutput forward(const Buffer& q, const Buffer& k, const Buffer& v) = 0;
  virtual LocalGrads backward(const Buffer& dout) = 0;  // after forward, on the same object
};

// What the K and V shards given to forward() are used for (device.hpp): BufferUse::message where the strategy sends
// them as they are (the all-gather gathers straight from them, when C > 1), else work: the ring packs them into its
// travelling kv, Ulysses and the hybrid into all-to-all buffers. Q and dout are never sent as they are.
BufferUse kv_input_use(StrategyKind kind, int ranks);

// The strategy of the problem on this rank (comm must have the problem's C ranks).
std::unique_ptr<Strategy> make_strategy(const ValidProblem& p, Communicator& comm, Device& dev);
// validated(), then the above.
std::unique_ptr<Strategy> make_strategy(StrategyKind kind, Communicator& comm, Device& dev, const Problem& p);

}  // namespace cpsim
