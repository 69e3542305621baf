#include "sim/model/predict.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <future>
#include <optional>

#include "sim/core/error.hpp"
#include "sim/model/cost.hpp"
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
  bool hybrid = false;
  try {
    hybrid = parse_strategy(name) == StrategyKind::hybrid;
  } catch (const UsageError&) {
  }
  require(hybrid && ec == std::errc() && ptr == a.data() + a.size() && A >= 1,
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
  if (A < 1 || ranks % A != 0) return "hybrid:" + std::to_string(A);
  return "hybrid " + std::to_string(A) + "x" + std::to_string(ranks / A);
}

std::vector<StrategyChoice> default_choices(int ranks) {
  std::vector<StrategyChoice> v = {{StrategyKind::all_gather, 0}, {StrategyKind::ulysses, 0}, {StrategyKind::ring, 0}};
  for (int A : {2, 4})
    if (A < ranks && ranks % A == 0) v.push_back({StrategyKind::hybrid, A});
  return v;
}

namespace {

// a * b, or nullopt when it does not fit in 63 bits.
bool mul(std::int64_t a, std::int64_t b, std::int64_t& out) {
  return !__builtin_mul_overflow(a, b, &out) && out >= 0 && out < (std::int64_t{1} << 62);
}

std::string approx(double x) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3g", x);
  return buf;
}

}  // namespace

void check_model_shape(const Problem& p) {
  const double S = static_cast<double>(p.seq);
  struct Tensor {
    const char* name;
    const char* formula;
    std::vector<std::int64_t> factors;
    double approx;
  };
  const std::int64_t bytes = static_cast<std::int64_t>(std::max<std::size_t>(8, dtype_size(p.dtype)));
  const std::vector<Tensor> tensors = {
      {"q",
       "B x S x Nq x D x 8 bytes",
       {p.batch, p.seq, p.heads, p.head_dim, bytes},
       static_cast<double>(p.batch) * S * static_cast<double>(p.heads) * static_cast<double>(p.head_dim) * 8},
      {"k",
       "B x S x Nkv x D x 8 bytes",
       {p.batch, p.seq, p.kv_heads, p.head_dim, bytes},
       static_cast<double>(p.batch) * S * static_cast<double>(p.kv_heads) * static_cast<double>(p.head_dim) * 8},
      {"the attention matrix",
       "B x Nq x S x S pairs",
       {p.batch, p.heads, p.seq, p.seq},
       static_cast<double>(p.batch) * static_cast<double>(p.heads) * S * S}};
  for (const Tensor& t : tensors) {
    std::int64_t n = 1;
    bool ok = true;
    for (std::int64_t f : t.factors) ok = ok && f >= 0 && mul(n, f, n);
    require(ok,
            std::string(t.name) + " would hold " + t.formula + " = " + approx(t.approx) +
                ", more than the model counts exactly (2^62)",
            "use a smaller batch, fewer heads, a smaller head dim or a shorter sequence (e.g. --batch 1 --heads 64 "
            "--head-dim 128 --seq 1M)");
  }
}

namespace {
// One GPU's attention over the whole sequence under the problem's mask: the square call, with the pairs and flops
// of the mask (documents, a window) counted by formula on the one run [0, S).
Op whole_sequence_attention(const Problem& p, bool backward) {
  Op op = square_attention(p.batch * p.heads, p.seq, p.head_dim, p.causal, backward);
  const Mask mask = p.mask();
  if (mask.plain()) return op;
  const Positions all = Positions::range(0, p.seq);
  const std::int64_t per_head = visible_pairs(all, all, mask), square_pairs = op.pairs;
  op.pairs = per_head * op.batch_heads;
  op.flops *= static_cast<double>(op.pairs) / static_cast<double>(square_pairs);  // flops per pair unchanged
  op.block = BlockKind::partial;
  return op;
}
}  // namespace

double single_gpu_us(const Problem& p, const Machine& m, bool backward) {
  double t = attention_us(m, whole_sequence_attention(p, false));
  if (backward) t += attention_us(m, whole_sequence_attention(p, true));
  return t;
}

double single_gpu_tflops(const Problem& p, const Machine& m, bool backward) {
  const Op op = whole_sequence_attention(p, backward);
  return op.flops / attention_us(m, op) / 1e6;
}

Problem problem_for(const Problem& base, const StrategyChoice& c) {
  Problem p = base;
  p.a2a = c.kind == StrategyKind::hybrid ? c.a2a : 0;
  p.kv_replicate = base.kv_replicate && (c.kind == StrategyKind::hybrid || c.kind == StrategyKind::ulysses);
  return p;
}

Counted count_cell(const Problem& base, const StrategyChoice& c, bool backward) {
  Counted out;
  out.problem = problem_for(base, c);
  out.strategy = c;
  std::optional<ValidProblem> valid;
  try {
    valid = validated(out.problem, c.kind);
  } catch (const UsageError& e) {
    out.valid = false;
    out.why_not = e;
    return out;
  }
  CountResult counted = count_run(*valid, {.backward = backward, .slots = 0, .step_work = false});
  out.programs = std::move(counted.programs);
  for (const auto& r : counted.ranks) out.peak_bytes = std::max(out.peak_bytes, r.peak_bytes());
  return out;
}

Cell time_cell(const Counted& counted, const Machine& m, bool backward, double single_us) {
  Cell cell;
  cell.seq = counted.problem.seq;
  cell.strategy = counted.strategy;
  cell.valid = counted.valid;
  cell.why_not = counted.why_not;
  if (!cell.valid) return cell;
  const ModeledRun run = simulate(counted.programs, m);
  cell.forward_us = run.forward_us;
  cell.total_us = run.total_us;
  const RankTimeline* slowest = &run.ranks.front();  // the rank that finishes last
  for (const auto& r : run.ranks)
    if (r.end_us > slowest->end_us) slowest = &r;
  cell.compute_us = slowest->compute_us;
  cell.memory_us = slowest->memory_us;
  // The four terms of the time (predict.hpp): means over the ranks, the busiest rank, and what is left.
  double busiest = 0;
  for (const auto& r : run.ranks) {
    const double busy = r.compute_us + r.memory_us + r.overhead_us;
    busiest = std::max(busiest, busy);
    cell.mean_compute_us += r.compute_us / static_cast<double>(run.ranks.size());
    cell.mean_memory_us += (r.memory_us + r.overhead_us) / static_cast<double>(run.ranks.size());
  }
  cell.imbalance_us = std::max(0.0, busiest - cell.mean_compute_us - cell.mean_memory_us);
  cell.exposed_us = std::max(0.0, (backward ? run.total_us : run.forward_us) - busiest);
  cell.peak_bytes = counted.peak_bytes;
  cell.fits = static_cast<double>(cell.peak_bytes) <= m.memory_gb * 1e9;
  const double t = cell.time_us(backward);
  cell.efficiency = t > 0 ? single_us / (counted.problem.ranks * t) : 0;
  return cell;
}

Cell predict_cell(const Problem& base, const StrategyChoice& c, const Machine& m, bool backward, double single_us) {
  return time_cell(count_cell(base, c, backward), m, backward, single_us);
}

// Each cell is counted (its rank threads on every core) while the clock replays the cell before it on a thread of
// its own: the clock is serial, and the counting keeps the other cores busy meanwhile. Each cell is computed as it
// would be alone, and they come out in order; at most two cells' programs are held at once.
PredictTable predict(const PredictSpec& spec) {
  check_fits(spec.machine, spec.problem.ranks);
  PredictTable t;
  std::optional<Counted> previous;  // the cell being timed
  std::future<Cell> timing;
  auto finish = [&] {
    t.cells.push_back(timing.get());
    if (spec.keep_programs) t.counted.push_back(std::move(*previous));
    previous.reset();
  };
  for (std::int64_t S : spec.seqs) {
    Problem p = spec.problem;
    p.seq = S;
    check_model_shape(p);
    const double single = single_gpu_us(p, spec.machine, spec.backward);
    t.single_total_us.push_back(single);
    t.single_forward_tflops.push_back(single_gpu_tflops(p, spec.machine, false));
    t.single_backward_tflops.push_back(single_gpu_tflops(p, spec.machine, true));
    for (const auto& c : spec.strategies) {
      Counted counted = [&] {
        try {
          return count_cell(p, c, spec.backward);
        } catch (...) {
          if (timing.valid()) timing.get();  // the cell before fails first, as in order
          throw;
        }
      }();
      if (timing.valid()) finish();
      const Counted& cell = previous.emplace(std::move(counted));
      timing = std::async(std::launch::async,
                          [&spec, &cell, single] { return time_cell(cell, spec.machine, spec.backward, single); });
    }
  }
  if (timing.valid()) finish();
  return t;
}

int fastest(const PredictTable& t, std::size_t row, std::size_t columns, bool by_total) {
  int best = -1;
  double best_us = 0;
  for (std::size_t j = 0; j < columns; ++j) {
    const Cell& c = t.cells[row * columns + j];
    if (!c.valid) continue;
    const double us = c.time_us(by_total);
    if (best < 0 || us < best_us) {
      best = static_cast<int>(j);
      best_us = us;
    }
  }
  return best;
}

namespace {

// The cost fields of a machine: the general ones it has, every level's (a machine with levels: intra and inter
// would only name its lowest and highest), and the kernel sections' for the head dims it lists.
std::vector<std::string> cost_fields(const Machine& m) {
  std::vector<std::string> out;
  Machine probe = m;
  const bool levels = !m.levels.empty();
  for (const auto& f : machine_fields()) {
    if (levels && (f.name.starts_with("intra.") || f.name.starts_with("inter."))) continue;
    if (f.cost && machine_value(probe, f.name) != nullptr) out.push_back(f.name);
  }
  for (const Level& l : m.levels)
    for (const auto& f : level_fields())
      if (f.cost && machine_value(probe, "levels." + l.name + "." + f.name) != nullptr)
        out.push_back("levels." + l.name + "." + f.name);
  for (const auto& k : m.kernels)
    if (k.head_dim > 0)
      for (const auto& f : kernel_fields()) out.push_back("kernel_d" + std::to_string(k.head_dim) + "." + f.name);
  return out;
}

}  // namespace

Sensitivity sensitivity(const PredictSpec& spec, const PredictTable& table, double move) {
  if (table.counted.size() != table.cells.size()) throw Error("sensitivity needs the table's counted programs");
  const std::size_t cols = spec.strategies.size(), rows = spec.seqs.size();
  Sensitivity out;
  out.move = move;
  for (const Cell& c : table.cells) {
    out.lo_us.push_back(c.time_us(spec.backward));
    out.hi_us.push_back(c.time_us(spec.backward));
  }
  for (std::size_t i = 0; i < rows; ++i) out.fastest_base.push_back(fastest(table, i, cols, spec.backward));
  for (const std::string& field : cost_fields(spec.machine)) {
    Sensitivity::Param param;
    param.field = field;
    Machine probe = spec.machine;
    param.value = *machine_value(probe, field);
    bool changes = false;
    for (const double factor : {1 - move, 1 + move}) {
      const Machine m = scaled(spec.machine, field, factor);
      PredictTable moved;
      for (std::size_t i = 0; i < rows; ++i) {
        Problem p = spec.problem;
        p.seq = spec.seqs[i];
        const double single = single_gpu_us(p, m, spec.backward);
        for (std::size_t j = 0; j < cols; ++j)
          moved.cells.push_back(time_cell(table.counted[i * cols + j], m, spec.backward, single));
      }
      auto& times = factor < 1 ? param.minus_us : param.plus_us;
      auto& best = factor < 1 ? param.fastest_minus : param.fastest_plus;
      for (std::size_t k = 0; k < moved.cells.size(); ++k) {
        const double us = moved.cells[k].time_us(spec.backward);
        times.push_back(us);
        if (!moved.cells[k].valid) continue;
        changes = changes || std::abs(us - table.cells[k].time_us(spec.backward)) > 1e-9 * (1 + us);
        out.lo_us[k] = std::min(out.lo_us[k], us);
        out.hi_us[k] = std::max(out.hi_us[k], us);
      }
      for (std::size_t i = 0; i < rows; ++i) best.push_back(fastest(moved, i, cols, spec.backward));
    }
    if (changes) out.params.push_back(std::move(param));
  }
  return out;
}

}  // namespace cpsim::model
