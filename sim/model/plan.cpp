#include "sim/model/plan.hpp"

#include <algorithm>
#include <cstdio>
#include <map>

#include "sim/core/error.hpp"

namespace cpsim::model {

std::vector<Candidate> plan_candidates(const Problem& p) {
  const int C = p.ranks;
  std::vector<StrategyChoice> choices = {{StrategyKind::all_gather, 0}, {StrategyKind::ring, 0}};
  if (C > 1) choices.push_back({StrategyKind::ulysses, 0});
  for (int A = 2; A < C; ++A)
    if (C % A == 0) choices.push_back({StrategyKind::hybrid, A});
  // Every other strategy (the pruned ring, the mask exchange, ...), after the ones above.
  for (StrategyKind k : all_strategies())
    if (k != StrategyKind::all_gather && k != StrategyKind::ring && k != StrategyKind::ulysses &&
        k != StrategyKind::hybrid && C > 1)
      choices.push_back({k, 0});
  std::vector<Candidate> out;
  for (const Sharding sharding : {Sharding::zigzag, Sharding::contiguous})
    for (const StrategyChoice& c : choices) {
      const int A = c.kind == StrategyKind::ulysses ? C : c.kind == StrategyKind::hybrid ? c.a2a : 1;
      // KV replication helps where the A2A group is wider than the KV heads and a multiple of them.
      const bool can_replicate = A > 1 && p.kv_heads % A != 0 && A % p.kv_heads == 0;
      for (const bool replicate : {false, true}) {
        if (replicate && !can_replicate) continue;
        Candidate cand{c, sharding, replicate, ""};
        cand.label =
            choice_label(c, C) + ", " + std::string(sharding_name(sharding)) + (replicate ? ", KV replicated" : "");
        out.push_back(cand);
      }
    }
  return out;
}

std::int64_t activation_bytes(const PlanSpec& spec) {
  if (spec.layers <= 0 || spec.hidden <= 0) return 0;
  const double s = static_cast<double>(spec.problem.seq) / spec.problem.ranks;
  return static_cast<std::int64_t>(spec.layers * 34.0 * s * static_cast<double>(spec.problem.batch) *
                                   static_cast<double>(spec.hidden));
}

namespace {

std::string gib(double bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f GiB", bytes / (1 << 30));
  return buf;
}

std::string kind_name(const Candidate& c) {
  return std::string(strategy_name(c.strategy.kind));
}

}  // namespace

Plan plan(const PlanSpec& spec) {
  check_fits(spec.machine, spec.problem.ranks);
  check_model_shape(spec.problem);
  Plan out;
  const double single = single_gpu_us(spec.problem, spec.machine, spec.backward);
  const std::int64_t act = activation_bytes(spec);
  const double limit = spec.machine.memory_gb * 1e9;
  // (kind, reason) -> the candidates refused for it, in search order.
  std::vector<std::pair<std::pair<std::string, std::string>, std::vector<std::string>>> refused;
  auto refuse = [&](const Candidate& c, const std::string& why, const std::string& detail) {
    const auto key = std::make_pair(kind_name(c), why);
    const std::string item = c.label + detail;
    for (auto& [k, list] : refused)
      if (k == key) {
        list.push_back(item);
        return;
      }
    refused.push_back({key, {item}});
  };
  for (const Candidate& c : plan_candidates(spec.problem)) {
    ++out.searched;
    Problem p = spec.problem;
    p.sharding = c.sharding;
    p.kv_replicate = c.kv_replicate;
    const Cell cell = predict_cell(p, c.strategy, spec.machine, spec.backward, single);
    if (!cell.valid) {
      // The constraint without its fix: the plan itself is the fix (it lists what does run).
      refuse(c, cell.why_not ? cell.why_not->constraint() : "not valid", "");
      continue;
    }
    PlanEntry e{c, cell, act};
    if (static_cast<double>(e.total_bytes()) > limit) {
      refuse(c,
             "needs " + gib(static_cast<double>(e.total_bytes())) +
                 (act > 0 ? " (attention " + gib(static_cast<double>(cell.peak_bytes)) + " + activations " +
                                gib(static_cast<double>(act)) + ")"
                          : "") +
                 ", more than the " + gib(limit) + " a GPU holds",
             "");
      continue;
    }
    out.fits.push_back(e);
  }
  std::stable_sort(out.fits.begin(), out.fits.end(), [&](const PlanEntry& a, const PlanEntry& b) {
    return a.cell.time_us(spec.backward) < b.cell.time_us(spec.backward);
  });
  for (auto& [key, list] : refused) {
    std::string configs;
    for (const auto& l : list) configs += (configs.empty() ? "" : "; ") + l;
    out.rejected.push_back({key.first, configs, key.second});
  }
  return out;
}

}  // namespace cpsim::model
