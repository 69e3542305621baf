// Published measurements the presets are fitted to (fit.hpp) and the model is held against
// (docs/predictions.md), each with its source. The figures are written down here and, for the tables held as data,
// in data/published/*.json; nowhere else.
#pragma once
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "sim/model/predict.hpp"
#include "sim/strategies/strategy.hpp"

namespace cpsim::model {

// One published kernel sweep: TFLOP/s at S = 512, 1K, 2K, 4K, 8K, 16K on a benchmark that keeps batch x S at
// `tokens` and heads x D at `width` (the FlashAttention-3 paper's Fig. 5 and 6: 16K tokens, 2048), so that one
// call of batch x heads causal (or full) squares of side S is timed at each S.
struct KernelSweep {
  std::string source;  // publication, figure, curve
  int head_dim = 0;
  bool causal = false, backward = false;
  std::vector<double> seqs, tflops;
  std::int64_t tokens = 16384, width = 2048;
  std::vector<std::int64_t> point_tokens;  // per point, for a benchmark that varies batch x S (else `tokens`)
  int ctas_per_sm = 1;         // tiles resident on one SM at once in the measured kernel (cost.hpp's occupancy)
  bool longest_first = false;  // the measured forward hands out its longest tiles first (cost.hpp's occupancy)
  std::int64_t batch_heads(std::size_t i) const {
    const std::int64_t t = point_tokens.empty() ? tokens : point_tokens[i];
    return t / static_cast<std::int64_t>(seqs[i]) * (width / head_dim);
  }
};

// FlashAttention-3 on one H100 SXM5, BF16 (Shah et al. 2024): forward causal and non-causal at d = 64, 128, 256
// (Fig. 5), backward non-causal at d = 64, 128 (Fig. 6; the paper plots no causal backward and no d = 256 one).
const std::vector<KernelSweep>& flash_attention_3_sweeps();
// FlashAttention-2 on the same H100, the same figures' FlashAttention-2 bars.
const std::vector<KernelSweep>& flash_attention_2_sweeps();
// The sweep of `sweeps` with that head dim, direction and masking; throws Error when there is none.
const KernelSweep& find_sweep(const std::vector<KernelSweep>& sweeps, int head_dim, bool causal, bool backward);

// zhuzilin/ring-flash-attention's README ("batch api" table): Llama3-8B attention, 8K tokens per GPU on 8 GPUs,
// iterations per second of the whole attention, forward or forward + backward.
struct PublishedRingRun {
  std::string machine;                   // the preset that describes the GPUs and the stack: "h800-sxm-8", "a100-sxm-8"
  Sharding sharding = Sharding::zigzag;  // zigzag_ring_flash_attn, ring_flash_attn (contiguous), stripe_flash_attn
  bool backward = false;
  double per_s = 0;
};
const std::vector<PublishedRingRun>& ring_flash_attention_runs();
// The same table's stripe_flash_attn column (Striped Attention: token i on rank i mod C, cpsim's `striped`
// sharding): no fit uses them, so they check the fitted step cost out of sample.
const std::vector<PublishedRingRun>& ring_flash_attention_stripe_runs();
// The same table's one-GPU runs (flash_attn on 8K tokens): it/s forward and forward + backward.
struct PublishedOneGpu {
  std::string machine;
  double forward_per_s = 0, total_per_s = 0;
};
const PublishedOneGpu& ring_flash_attention_one_gpu(const std::string& machine);
// Its benchmark's shape (benchmark/benchmark_kvpacked_func.py): bf16, batch 1, 32 query heads, 8 KV heads, D = 128,
// causal, 8K tokens per rank on `ranks` ranks.
Problem ring_flash_attention_problem(int ranks);
// The elements of one rank's output in it (B x 8K x Nq x D): what a step's per-element cost moves (clock.hpp).
std::int64_t ring_flash_attention_out_elements();

// A published table held as data: data/published/NAME (its source, shape and rows; docs/predictions.md prints
// it), parsed once. Throws Error when the file is missing or is not JSON.
const nlohmann::json& published_table(const std::string& name);

// USP's A100 forward table (data/published/usp_a100.json): a row's problem (bf16, causal, 8 ranks); the ring
// implementations under USP's names, each with cpsim's sharding; the run of Ulysses degree u (ring degree 8 / u):
// ulysses (u = 8), the ring (u = 1), else the hybrid of all-to-all group u.
Problem usp_problem(const nlohmann::json& row);
struct UspRing {
  const char* name;  // "basic", "zigzag", "strip"
  Sharding sharding;
};
extern const UspRing kUspRings[3];
StrategyChoice usp_strategy(int ulysses);

// MagiAttention's H100 benchmark (data/published/magi_attention_h100.json): 8 to 64 GPUs, 8K tokens per GPU, each
// pass timed alone, in TFLOP/s per GPU. A row's problem (bf16, batch 1, 64 query and 8 KV heads of 128, causal
// or full; KV heads copied onto the Ulysses ranks when they outnumber them, as its Ulysses does), the baselines
// cpsim models under the benchmark's names, and the flops its rates count (forward 4 area Nq D, area S^2 or
// S (S + 1) / 2; backward 2.5x that).
Problem magi_problem(const nlohmann::json& row);
struct MagiMethod {
  const char* name;  // "ulysses", "ring_p2p", "ring_allgather", "usp"
  StrategyChoice strategy;
};
extern const MagiMethod kMagiMethods[4];
double magi_flops(const Problem& p, bool backward);

// Transformer Engine's ring (MagiAttention's ring_p2p baseline) against the model's ring on h100-ib, which counts
// the strategy code's own costs only: the least and the most of published time over modeled time at its ring_p2p
// points (published_points(), forward and forward+backward; tests/model/published_test.cpp computes them afresh).
// plan quotes them where it times the frameworks' candidates on their own stack (with_stack, pytorch), as the
// reason to.
inline constexpr double kTransformerEngineRingSlower[2] = {1.13, 1.44};

// The published points the model is checked against (the rows above; ring-flash-attention's 5-head table, USP's
// A100 forward table and MagiAttention's H100 benchmark from data/published/), for saying how far a prediction's
// shape is from the nearest one and how far off the model is there.
struct PublishedPoint {
  std::string label;        // "ring-flash-attention zigzag ring, forward+backward"
  std::string machine;      // the preset that describes its machine
  Problem problem;          // ranks, S, heads, head dim, sharding as published
  StrategyChoice strategy;  // what ran (the ring, unless a table says otherwise)
  bool backward = false;
  bool one_gpu_rate = false;  // a one-GPU kernel rate (TFLOP/s) rather than a CP run's rate (it/s)
  double published = 0;       // it/s, or TFLOP/s for a one-GPU rate
  // The largest |model / published - 1| tests/model/published_test.cpp holds it to; none where the model misses
  // it for a reason docs/predictions.md gives (USP's runs below 16K tokens per GPU).
  std::optional<double> bound = 0.15;
};
const std::vector<PublishedPoint>& published_points();
// model / published - 1 at the point, the model run afresh.
double published_error(const PublishedPoint& point);

struct Nearest {
  const PublishedPoint* point = nullptr;
  double distance = 0;  // sum of |log2| of the ratios (S/C, D, Nq, Nkv, B) + 1 for another machine, + 1 for one GPU
                        // against a CP run, + 0.5 for the other direction (a forward rate for a backward), + 0.5
                        // for the other mask (causal or full)
  std::string how_far;  // "S/C 2K against 8K (4x fewer), heads 64 against 32 (2x more), another machine (h800-sxm-8)"
  double error = 0;     // published_error there
};
// The nearest published point to the shape p on `machine`; among points as near, one that runs `strategy` when one
// is given, then one with p's sharding, then one with the nearest number of ranks.
Nearest nearest_published(const Problem& p, const std::string& machine, bool backward,
                          std::optional<StrategyChoice> strategy = std::nullopt);

}  // namespace cpsim::model
