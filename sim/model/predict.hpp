// Predictions: for each sequence length and strategy, count the unchanged strategy code (count_run.hpp) and replay
// it on a machine (clock.hpp). Also models the whole problem on one GPU, the rate every strategy is compared with:
//   efficiency = T(1 GPU) / (C x T(C GPUs))       1.0 is perfect scaling.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "sim/model/clock.hpp"
#include "sim/model/machine.hpp"
#include "sim/strategies/strategy.hpp"

namespace cpsim::model {

struct StrategyChoice {
  StrategyKind kind = StrategyKind::ring;
  int a2a = 0;  // hybrid: the A2A group size A (C = A x R)
};
// "all_gather", "ulysses" (or "a2a"), "ring" (or "p2p"), "hybrid:A"; throws UsageError naming the accepted forms.
StrategyChoice parse_choice(std::string_view text);
std::string choice_label(const StrategyChoice& c, int ranks);  // "ring", "hybrid 2x4"
// The problem a choice runs: the hybrid's A set from the choice, KV replication kept only where an A2A can use it.
Problem problem_for(const Problem& base, const StrategyChoice& c);
// The columns of the blog post "On Context Parallelism": all_gather, ulysses, ring, and the hybrids 2 x C/2 and
// 4 x C/4 when they fit.
std::vector<StrategyChoice> default_choices(int ranks);

struct Cell {
  std::int64_t seq = 0;
  StrategyChoice strategy;
  bool valid = true;
  std::string why_not;          // the constraint it breaks, when not valid
  double forward_us = 0;        // the slowest rank's forward
  double total_us = 0;          // the slowest rank's forward + backward
  double exposed_us = 0;        // the slowest rank's time blocked on communication
  double compute_us = 0;        // the slowest rank's attention time
  double memory_us = 0;         // the slowest rank's copy / add / merge / fill time
  std::int64_t peak_bytes = 0;  // the most any rank held
  bool fits = true;             // peak_bytes within the machine's memory per rank
  double efficiency = 0;        // T(1 GPU) / (C x T), forward + backward (forward alone without backward)
};

struct PredictSpec {
  Problem problem;  // ranks, heads, dtype, sharding...; seq is taken from `seqs`
  std::vector<std::int64_t> seqs;
  std::vector<StrategyChoice> strategies;
  Machine machine;
  bool backward = true;
};

struct PredictTable {
  std::vector<Cell> cells;              // seq-major, strategies in the order asked
  std::vector<double> single_total_us;  // per seq: the whole problem on one GPU (forward [+ backward])
};

// One strategy at one length. Impossible shapes come back as !valid with the reason, not as an exception.
Cell predict_cell(const Problem& p, const StrategyChoice& c, const Machine& m, bool backward, double single_us);
// The whole problem on one GPU of the machine: forward [+ backward] time.
double single_gpu_us(const Problem& p, const Machine& m, bool backward);
PredictTable predict(const PredictSpec& spec);

// The fastest valid cell of a row (a sequence length), by forward + backward time or by forward time; -1 if none.
int fastest(const PredictTable& t, std::size_t row, std::size_t columns, bool by_total);

}  // namespace cpsim::model
