// A plan: every way to run one model shape's attention on C ranks of a machine, searched, kept where it fits the
// memory of a GPU, and ranked by modeled time (`cpsim plan`).
//
// The search: strategy (every kind of all_strategies(); the hybrid as A x R for every A dividing C with 1 < A < C)
// x sharding (plan_shardings: zigzag, contiguous and striped; with documents or a window also global-zigzag and
// balanced; with --pad-docs zigzag alone, which the padding is for) x KV replication (for the all-to-all
// strategies, where A > Nkv and Nkv divides A). Each
// candidate is counted on the counting device (its attention buffers, exactly: the peak the strategy reaches) and
// replayed on the machine (predict.hpp). With --layers and --hidden the activations a transformer layer keeps
// for its backward are added (Korthikanti et al. 2022, "Reducing Activation Recomputation in Large Transformer
// Models", eq. 1: s b h (34 + 5 a s / h) bytes per layer in 16-bit, the 5 a s / h term being the attention scores
// FlashAttention never stores), with s the rank's S / C tokens:
//   activations = layers x 34 x (S / C) x B x hidden bytes
// A candidate fits when attention peak + activations <= the machine's memory per GPU.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "sim/model/frameworks.hpp"
#include "sim/model/machine.hpp"
#include "sim/model/predict.hpp"

namespace cpsim::model {

struct PlanSpec {
  Problem problem;  // ranks, shape, dtype, causal; sharding and KV replication are searched
  Machine machine;
  bool backward = true;
  int layers = 0;           // 0: attention buffers only
  std::int64_t hidden = 0;  // the model's hidden size (with layers)
  // The machine with the frameworks' own software stack (with_stack(machine, pytorch)), when `machine` counts only
  // the strategy code's own costs: every candidate that fits and a framework runs is timed on it too, from the same
  // count.
  std::optional<Machine> framework_machine;
};

struct Candidate {
  StrategyChoice strategy;
  Sharding sharding = Sharding::zigzag;
  bool kv_replicate = false;
  std::string label;  // "hybrid 2x4, zigzag, KV replicated"
};

struct PlanEntry {
  Candidate candidate;
  Cell cell;                           // times, exposed communication, attention peak (peak_bytes)
  std::int64_t activation_bytes = 0;   // per rank
  std::optional<Cell> framework_cell;  // on PlanSpec::framework_machine, when it is given and a framework runs it
  std::int64_t total_bytes() const { return cell.peak_bytes + activation_bytes; }
};

// Candidates refused for one reason, one line each: "ulysses (zigzag, contiguous): splits the 32 KV heads ...".
struct Rejection {
  std::string kind;     // "ulysses", "hybrid", "all_gather", ...
  std::string configs;  // the candidates, "hybrid 16x4 zigzag, hybrid 16x4 contiguous"
  std::string why;
};

struct Plan {
  std::vector<PlanEntry> fits;  // fastest first
  std::vector<Rejection> rejected;
  int searched = 0;
};

std::vector<Sharding> plan_shardings(const Problem& p);
std::vector<Candidate> plan_candidates(const Problem& p);
// activations = layers x 34 x (S / C) x B x hidden bytes (0 without layers).
std::int64_t activation_bytes(const PlanSpec& spec);
Plan plan(const PlanSpec& spec);

// The fastest against the runner-up, term by term (predict.hpp: T = compute + memory ops + imbalance + exposed):
// each term's difference (runner-up - fastest, us), the term with the largest, and whether the two tie.
struct Verdict {
  double gap_us = 0, gap = 0;  // runner-up - fastest, and as a fraction of the fastest
  bool tie = false;            // gap < kTie
  double compute_us = 0, memory_us = 0, imbalance_us = 0, exposed_us = 0;
  std::string deciding;  // "compute", "memory ops", "imbalance", "exposed communication"
  double deciding_us = 0;
};
constexpr double kTie = 0.02;
Verdict verdict(const PlanEntry& fastest, const PlanEntry& runner_up);

// A fix re-checked before it is printed: the fewest ranks above spec's C (up to `most`) on which a candidate fits,
// found by planning again; 0 when none up to `most` does, -1 when none of the first kMaxRankTries counted does. Rank
// counts the sequence cannot be cut into (S % C) or whose activations alone overflow the GPU are skipped without
// counting.
int smallest_fitting_ranks(const PlanSpec& spec, int most);
constexpr int kMaxRankTries = 6;  // rank counts counted before giving up (each is a whole plan)

// Each framework of framework_settings(), in its order: the fastest candidate that fits and it can run, timed on the
// spec's framework_machine where it has one (the framework's own stack), else on its machine; or, where it runs
// none, why (what it says of the fastest ring or all-gather, which every framework runs in some form, past the
// strategies it lacks; without one, the reason it gives most often). Empty when nothing fits.
struct FrameworkPick {
  FrameworkSetting setting;          // of the pick; when it runs none, its name and why_not
  std::optional<std::size_t> entry;  // index into Plan::fits; none: it runs no candidate that fits
  double time_us = 0;
  bool own_stack = false;  // timed on the framework machine
};
std::vector<FrameworkPick> framework_picks(const PlanSpec& spec, const Plan& plan);

}  // namespace cpsim::model
