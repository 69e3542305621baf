#include "sim/model/plan.hpp"

#include <algorithm>
#include <cstdio>
#include <map>

#include "sim/core/error.hpp"
#include "sim/layout/documents.hpp"

namespace cpsim::model {

std::vector<Sharding> plan_shardings(const Problem& p) {
  if (p.docs.pad) return {Sharding::zigzag};  // the padding makes each document cut into 2C chunks for zigzag
  std::vector<Sharding> out = {Sharding::zigzag, Sharding::contiguous, Sharding::striped};
  if (p.docs.any() || p.window > 0) {
    if (p.docs.any()) out.push_back(Sharding::global_zigzag);
    out.push_back(Sharding::balanced);
  }
  return out;
}

std::vector<Candidate> plan_candidates(const Problem& p) {
  const int C = p.ranks;
  // Every strategy kind; the hybrid as one choice per mesh A x R with 1 < A < C. On one rank only the
  // all-gather and the ring (each the plain kernel there).
  std::vector<StrategyChoice> choices;
  for (const StrategyKind k : all_strategies()) {
    if (k == StrategyKind::hybrid) {
      for (int A = 2; A < C; ++A)
        if (C % A == 0) choices.push_back({k, A});
    } else if (C > 1 || k == StrategyKind::all_gather || k == StrategyKind::ring) {
      choices.push_back({k, 0});
    }
  }
  std::vector<Candidate> out;
  for (const Sharding sharding : plan_shardings(p))
    for (const StrategyChoice& c : choices) {
      Problem probe = problem_for(p, c);
      probe.kv_replicate = false;
      const int A = probe.a2a_size(c.kind);
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

namespace {

// One candidate counted and replayed, or why it cannot run or fit (nullopt reason: it fits).
struct Tried {
  PlanEntry entry;
  std::string refused;  // empty: it runs and fits
};

Tried try_candidate(const PlanSpec& spec, const Candidate& c, double single, std::int64_t act) {
  Problem p = spec.problem;
  p.sharding = c.sharding;
  p.kv_replicate = c.kv_replicate;
  const Counted counted = count_cell(p, c.strategy, spec.backward);
  const Cell cell = time_cell(counted, spec.machine, spec.backward, single);
  Tried t{PlanEntry{c, cell, act, std::nullopt}, ""};
  // The constraint without its fix: the plan itself is the fix (it lists what does run).
  if (!cell.valid) {
    t.refused = cell.why_not ? cell.why_not->constraint() : "not valid";
    return t;
  }
  const double limit = spec.machine.memory_gb * 1e9;
  if (static_cast<double>(t.entry.total_bytes()) > limit)
    t.refused = "needs " + gib(static_cast<double>(t.entry.total_bytes())) +
                (act > 0 ? " (attention " + gib(static_cast<double>(cell.peak_bytes)) + " + activations " +
                               gib(static_cast<double>(act)) + ")"
                         : "") +
                ", more than the " + gib(limit) + " a GPU holds";
  // The same programs on the frameworks' own stack (the kernel is the same: so is the one-GPU time), where one of
  // them runs the candidate.
  if (t.refused.empty() && spec.framework_machine) {
    const auto frameworks = framework_settings(p, c.strategy);
    if (std::any_of(frameworks.begin(), frameworks.end(), [](const FrameworkSetting& f) { return f.runs; }))
      t.entry.framework_cell = time_cell(counted, *spec.framework_machine, spec.backward, single);
  }
  return t;
}

}  // namespace

Plan plan(const PlanSpec& spec) {
  check_fits(spec.machine, spec.problem.ranks);
  check_model_shape(spec.problem);
  Plan out;
  const double single = single_gpu_us(spec.problem, spec.machine, spec.backward);
  const std::int64_t act = activation_bytes(spec);
  // (kind, reason) -> the candidates refused for it, in search order.
  std::vector<std::pair<std::pair<std::string, std::string>, std::vector<std::string>>> refused;
  auto refuse = [&](const Candidate& c, const std::string& why) {
    const auto key = std::make_pair(kind_name(c), why);
    for (auto& [k, list] : refused)
      if (k == key) {
        list.push_back(c.label);
        return;
      }
    refused.push_back({key, {c.label}});
  };
  for (const Candidate& c : plan_candidates(spec.problem)) {
    ++out.searched;
    Tried t = try_candidate(spec, c, single, act);
    if (t.refused.empty())
      out.fits.push_back(std::move(t.entry));
    else
      refuse(c, t.refused);
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

Verdict verdict(const PlanEntry& fastest, const PlanEntry& runner_up) {
  const Cell &a = fastest.cell, &b = runner_up.cell;
  Verdict v;
  const double ta = a.total_us, tb = b.total_us;  // forward alone when the programs hold no backward
  v.gap_us = tb - ta;
  v.gap = ta > 0 ? v.gap_us / ta : 0;
  v.tie = v.gap < kTie;
  v.compute_us = b.mean_compute_us - a.mean_compute_us;
  v.memory_us = b.mean_memory_us - a.mean_memory_us;
  v.imbalance_us = b.imbalance_us - a.imbalance_us;
  v.exposed_us = b.exposed_us - a.exposed_us;
  const std::pair<const char*, double> terms[] = {{"compute", v.compute_us},
                                                  {"memory ops", v.memory_us},
                                                  {"imbalance", v.imbalance_us},
                                                  {"exposed communication", v.exposed_us}};
  v.deciding = terms[0].first;
  v.deciding_us = terms[0].second;
  for (const auto& [name, us] : terms)
    if (us > v.deciding_us) {
      v.deciding = name;
      v.deciding_us = us;
    }
  return v;
}

int smallest_fitting_ranks(const PlanSpec& spec, int most) {
  const double limit = spec.machine.memory_gb * 1e9;
  int counted = 0;
  for (int R = spec.problem.ranks + 1; R <= most; ++R) {
    if (spec.problem.seq % R != 0) continue;  // no layout cuts S into R equal shards
    if (spec.machine.max_nodes > 0 && spec.machine.nodes_for(R) > spec.machine.max_nodes) break;
    PlanSpec at = spec;
    at.problem.ranks = R;
    at.framework_machine.reset();  // whether a candidate fits is all this asks
    if (!at.problem.docs.lengths.empty() && at.problem.docs.pad) {
      at.problem.seq = documents_seq(at.problem.docs, R);  // the padding to 2R changes S
    }
    const std::int64_t act = activation_bytes(at);
    if (static_cast<double>(act) > limit) continue;  // the activations alone overflow: no candidate can fit
    if (++counted > kMaxRankTries) return -1;
    const double single = single_gpu_us(at.problem, at.machine, at.backward);
    for (const Candidate& c : plan_candidates(at.problem))
      if (try_candidate(at, c, single, act).refused.empty()) return R;
  }
  return 0;
}

namespace {

// What each framework says of one candidate of the plan.
std::vector<FrameworkSetting> settings_of(const PlanSpec& spec, const PlanEntry& e) {
  Problem run = spec.problem;
  run.sharding = e.candidate.sharding;
  run.kv_replicate = e.candidate.kv_replicate;
  return framework_settings(run, e.candidate.strategy);
}

// Why framework k runs none of the candidates that fit: what it says of the fastest ring or all-gather (every
// framework runs them in some form, so the reason goes past the strategies it lacks to the mask, sharding or heads);
// without one, the reason it gives most often.
std::string refusal(const PlanSpec& spec, const Plan& plan, std::size_t k) {
  std::map<std::string, int> said;
  std::string most;
  for (const PlanEntry& e : plan.fits) {
    const FrameworkSetting f = settings_of(spec, e)[k];
    const StrategyKind kind = e.candidate.strategy.kind;
    if (kind == StrategyKind::ring || kind == StrategyKind::all_gather) return f.why_not;
    if (++said[f.why_not] > said[most]) most = f.why_not;
  }
  return most;
}

}  // namespace

std::vector<FrameworkPick> framework_picks(const PlanSpec& spec, const Plan& plan) {
  std::vector<FrameworkPick> picks;
  for (std::size_t i = 0; i < plan.fits.size(); ++i) {
    const PlanEntry& e = plan.fits[i];
    const std::vector<FrameworkSetting> settings = settings_of(spec, e);
    if (picks.empty())
      for (const FrameworkSetting& f : settings)
        picks.push_back({{f.framework, false, "", ""}, std::nullopt, 0, false});
    const double t = (e.framework_cell ? *e.framework_cell : e.cell).time_us(spec.backward);
    for (std::size_t k = 0; k < settings.size(); ++k)
      if (settings[k].runs && (!picks[k].entry || t < picks[k].time_us))
        picks[k] = FrameworkPick{settings[k], i, t, e.framework_cell.has_value()};
  }
  for (std::size_t k = 0; k < picks.size(); ++k)
    if (!picks[k].entry) picks[k].setting.why_not = refusal(spec, plan, k);
  return picks;
}

}  // namespace cpsim::model
