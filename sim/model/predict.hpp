// Predictions: for each sequence length and strategy, count the unchanged strategy code (count_run.hpp) and replay
// it on a machine (clock.hpp). The baseline every strategy is compared with is one device running the plain
// kernel on the whole sequence (one attention call of S x S, causal or not; no copies, no communication):
//   efficiency = T(1 device) / (C x T(C devices))       1.0 is perfect scaling.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "sim/core/error.hpp"
#include "sim/model/clock.hpp"
#include "sim/model/machine.hpp"
#include "sim/model/program.hpp"
#include "sim/strategies/strategy.hpp"

namespace cpsim::model {

struct StrategyChoice {
  StrategyKind kind = StrategyKind::ring;
  int a2a = 0;  // hybrid: the A2A group size A (C = A x R)
};
// "all_gather", "ulysses" (or "a2a"), "ring" (or "p2p"), "hybrid:A"; throws UsageError naming the accepted forms.
StrategyChoice parse_choice(std::string_view text);
// "ring", "hybrid 2x4" (A x R); "hybrid:3" where A does not divide C (such a mesh does not exist).
std::string choice_label(const StrategyChoice& c, int ranks);
// The problem a choice runs: the hybrid's A set from the choice, KV replication kept only where an A2A can use it.
Problem problem_for(const Problem& base, const StrategyChoice& c);
// The blog post's columns: all_gather, ulysses, ring, and the hybrids 2 x C/2 and 4 x C/4 when they fit.
std::vector<StrategyChoice> default_choices(int ranks);

// Refuses (UsageError, naming the tensor, its size and a fix) a shape whose element, byte or pair counts would
// not fit in 63 bits: the model counts them exactly, so they must be representable.
void check_model_shape(const Problem& p);

struct Cell {
  std::int64_t seq = 0;
  StrategyChoice strategy;
  bool valid = true;
  std::optional<UsageError> why_not;  // the constraint it breaks and its fixes, when not valid (the program words it)
  double forward_us = 0;        // the slowest rank's forward
  double total_us = 0;          // the slowest rank's forward + backward
  double compute_us = 0;        // the slowest rank's attention time
  double memory_us = 0;         // the slowest rank's copy / add / merge / fill time
  // The time T (forward + backward, or forward alone without backward) in four terms that add up to it, one meaning
  // in predict and plan (busy_r: rank r's attention + memory ops + step costs):
  //   T = mean_compute + mean_memory + imbalance + exposed
  //   mean_compute, mean_memory  the ranks' mean attention time, and mean memory-op + step time
  //   imbalance                  max_r busy_r - mean_r busy_r: time lost to uneven work
  //   exposed                    T - max_r busy_r: communication not hidden behind compute
  double mean_compute_us = 0, mean_memory_us = 0, imbalance_us = 0;
  double exposed_us = 0;
  std::int64_t peak_bytes = 0;  // the most any rank held
  bool fits = true;             // peak_bytes within the machine's memory per rank
  double efficiency = 0;        // T(1 device) / (C x T), forward + backward (forward alone without backward)
  double time_us(bool backward) const { return backward ? total_us : forward_us; }
};

// A cell's counted programs, kept to replay on other machines (the sensitivity) without counting again.
struct Counted {
  Problem problem;
  StrategyChoice strategy;
  bool valid = true;
  std::optional<UsageError> why_not;
  Programs programs;
  std::int64_t peak_bytes = 0;
};
Counted count_cell(const Problem& base, const StrategyChoice& c, bool backward);
Cell time_cell(const Counted& counted, const Machine& m, bool backward, double single_us);

struct PredictSpec {
  Problem problem;  // ranks, heads, dtype, sharding...; seq is taken from `seqs`
  std::vector<std::int64_t> seqs;
  std::vector<StrategyChoice> strategies;
  Machine machine;
  bool backward = true;
  bool keep_programs = false;  // keep every cell's Counted (for sensitivity())
};

struct PredictTable {
  std::vector<Cell> cells;              // seq-major, strategies in the order asked
  std::vector<double> single_total_us;  // per seq: the whole problem on one device (forward [+ backward])
  std::vector<double> single_forward_tflops, single_backward_tflops;  // per seq: that device's kernel rates
  std::vector<Counted> counted;         // when keep_programs: per cell
};

// One strategy at one length. Impossible shapes come back as !valid with the reason, not as an exception.
Cell predict_cell(const Problem& p, const StrategyChoice& c, const Machine& m, bool backward, double single_us);
// The whole problem on one device of the machine, the plain kernel: forward [+ backward] time.
double single_gpu_us(const Problem& p, const Machine& m, bool backward);
// That kernel's rate, useful TFLOP/s (flops / time, launch included), forward or backward.
double single_gpu_tflops(const Problem& p, const Machine& m, bool backward);
PredictTable predict(const PredictSpec& spec);

// The fastest valid cell of a row (a sequence length), by forward + backward time or by forward time; -1 if none.
int fastest(const PredictTable& t, std::size_t row, std::size_t columns, bool by_total);

// Every cost field of the machine moved by -move and +move (each alone), the table replayed on each.
struct Sensitivity {
  double move = 0.25;
  struct Param {
    std::string field;
    double value = 0;                              // the machine's value
    std::vector<double> minus_us, plus_us;         // per cell: the time (as `fastest` ranks) with the field moved
    std::vector<int> fastest_minus, fastest_plus;  // per row: the fastest column with the field moved
  };
  std::vector<Param> params;         // the fields that change at least one time
  std::vector<double> lo_us, hi_us;  // per cell: the least and most time over every move (the cell's own too)
  std::vector<int> fastest_base;     // per row
};
// spec.keep_programs must have been set for `table`.
Sensitivity sensitivity(const PredictSpec& spec, const PredictTable& table, double move = 0.25);

}  // namespace cpsim::model
