#include "sim/model/predict.hpp"

#include <algorithm>
#include <charconv>

#include "sim/core/error.hpp"
#include "sim/model/count_run.hpp"

namespace cpsim::model {

StrategyChoice parse_choice(std::string_view text) {
  const auto colon = text.find(':');
  if (colon == std::string_view::npos) {
    try {
      return {parse_strategy(text), 0};
    } catch (const UsageError&) {
      throw UsageError("unknown strategy '" + std::string(text) +
                       "' in --strategies; use all_gather, ulysses (a2a), ring (p2p) or hybrid:A");
    }
  }
  const std::string_view name = text.substr(0, colon), a = text.substr(colon + 1);
  int A = 0;
  const auto [ptr, ec] = std::from_chars(a.data(), a.data() + a.size(), A);
  require(parse_strategy(name) == StrategyKind::hybrid && ec == std::errc() && ptr == a.data() + a.size() && A >= 1,
          "'" + std::string(text) + "' in --strategies is not a strategy",
          "use all_gather, ulysses, ring, or hybrid:A (A2A group size A)");
  return {StrategyKind::hybrid, A};
}

std::string choice_label(const StrategyChoice& c, int ranks) {
  if (c.kind != StrategyKind::hybrid) return std::string(strategy_name(c.kind));
  Problem p;
  p.ranks = ranks;
  p.a2a = c.a2a;
  const int A = p.a2a_size(StrategyKind::hybrid);
  return "hybrid " + std::to_string(A) + "x" + std::to_string(A > 0 ? ranks / A : 0);
}

std::vector<StrategyChoice> default_choices(int ranks) {
  std::vector<StrategyChoice> v = {{StrategyKind::all_gather, 0}, {StrategyKind::ulysses, 0}, {StrategyKind::ring, 0}};
  for (int A : {2, 4})
    if (A < ranks && ranks % A == 0) v.push_back({StrategyKind::hybrid, A});
  return v;
}

double single_gpu_us(const Problem& p, const Machine& m, bool backward) {
  Problem one = p;
  one.ranks = 1;
  one.a2a = 0;
  one.kv_replicate = false;
  const CountResult counted = count_run(one, StrategyKind::ring, {.backward = backward, .slots = 1});
  const ModeledRun run = simulate(counted.programs, m);
  return backward ? run.total_us : run.forward_us;
}

Problem problem_for(const Problem& base, const StrategyChoice& c) {
  Problem p = base;
  p.a2a = c.kind == StrategyKind::hybrid ? c.a2a : 0;
  p.kv_replicate = base.kv_replicate && (c.kind == StrategyKind::hybrid || c.kind == StrategyKind::ulysses);
  return p;
}

Cell predict_cell(const Problem& base, const StrategyChoice& c, const Machine& m, bool backward, double single_us) {
  Cell cell;
  cell.seq = base.seq;
  cell.strategy = c;
  const Problem p = problem_for(base, c);
  try {
    validate(p, c.kind);
  } catch (const UsageError& e) {
    cell.valid = false;
    cell.why_not = e.what();
    return cell;
  }
  const CountResult counted = count_run(p, c.kind, {.backward = backward, .slots = 0});
  const ModeledRun run = simulate(counted.programs, m);
  cell.forward_us = run.forward_us;
  cell.total_us = run.total_us;
  const RankTimeline* slowest = &run.ranks.front();  // the rank that finishes last
  for (const auto& r : run.ranks)
    if (r.end_us > slowest->end_us) slowest = &r;
  cell.exposed_us = slowest->blocked_us;
  cell.compute_us = slowest->compute_us;
  cell.memory_us = slowest->memory_us;
  for (const auto& r : counted.ranks) cell.peak_bytes = std::max(cell.peak_bytes, r.peak_bytes());
  cell.fits = static_cast<double>(cell.peak_bytes) <= m.memory_gb * 1e9;
  const double t = backward ? cell.total_us : cell.forward_us;
  cell.efficiency = t > 0 ? single_us / (p.ranks * t) : 0;
  return cell;
}

PredictTable predict(const PredictSpec& spec) {
  check_fits(spec.machine, spec.problem.ranks);
  PredictTable t;
  for (std::int64_t S : spec.seqs) {
    Problem p = spec.problem;
    p.seq = S;
    const double single = single_gpu_us(p, spec.machine, spec.backward);
    t.single_total_us.push_back(single);
    for (const auto& c : spec.strategies) t.cells.push_back(predict_cell(p, c, spec.machine, spec.backward, single));
  }
  return t;
}

int fastest(const PredictTable& t, std::size_t row, std::size_t columns, bool by_total) {
  int best = -1;
  double best_us = 0;
  for (std::size_t j = 0; j < columns; ++j) {
    const Cell& c = t.cells[row * columns + j];
    if (!c.valid) continue;
    const double us = by_total ? c.total_us : c.forward_us;
    if (best < 0 || us < best_us) {
      best = static_cast<int>(j);
      best_us = us;
    }
  }
  return best;
}

}  // namespace cpsim::model
