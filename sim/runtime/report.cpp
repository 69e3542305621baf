#include "sim/runtime/report.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <sstream>

#include "sim/core/columns.hpp"
#include "sim/strategies/kv_traffic.hpp"

namespace cpsim {

namespace {

std::string fmt(const char* f, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, f, v);
  return buf;
}


std::string calls_text(const CommCounts& c) {
  std::string s;
  for (const auto& [k, n] : c.calls) s += (s.empty() ? "" : ", ") + k + " " + std::to_string(n);
  return s.empty() ? "-" : s;
}

WorkCounts phase_work(const Recorder& rec, const std::string& phase) {
  WorkCounts w;
  for (const auto& s : rec.step_work())
    if (s.phase == phase) w += s.work;
  return w;
}

double phase_ms(const Recorder& rec, const std::string& phase) {
  auto it = rec.phase_us().find(phase);
  return it == rec.phase_us().end() ? 0.0 : it->second / 1000.0;
}

}  // namespace

std::string format_need(const RunResult& r) {
  const RunConfig& cfg = r.config;
  const std::vector<KvNeed> need = kv_need(cfg.problem);
  const bool compared = moves_only_kv(cfg.strategy);
  std::ostringstream os;
  os << "K/V each rank needs: the rows of other ranks its queries see"
     << (cfg.backward ? " (the backward: again, and the dK/dV of its\nown rows from the ranks that see them)" : "")
     << (compared ? "; and the bytes the strategy sent it:\n" : ":\n");
  os << "  rank  need        " << (compared ? "sent to it  redundancy (sent/need - 1)" : "") << "\n";
  std::int64_t all_need = 0, all_sent = 0;
  for (const RankReport& rk : r.ranks) {
    const std::int64_t n = need[static_cast<std::size_t>(rk.rank)].total(cfg.backward);
    const std::int64_t sent = rk.stats.comm_counts().bytes_received;
    all_need += n;
    all_sent += sent;
    os << "  " << left(std::to_string(rk.rank), 6) << left(format_bytes(static_cast<double>(n)), 12);
    if (compared) os << left(format_bytes(static_cast<double>(sent)), 12) << redundancy_text(redundancy(sent, n));
    os << "\n";
  }
  if (compared)
    os << "  all   " << left(format_bytes(static_cast<double>(all_need)), 12)
       << left(format_bytes(static_cast<double>(all_sent)), 12) << redundancy_text(redundancy(all_sent, all_need))
       << "\n";
  else
    os << "  (" << strategy_name(cfg.strategy) << " moves Q and outputs as well: its bytes are not compared)\n";
  return os.str();
}

std::string redundancy_text(double x) {
  if (std::isinf(x)) return "all redundant (need 0)";
  return fmt("%.1f%%", 100.0 * x);
}

std::string format_check(const RunResult& r) {
  const CheckReport& c = r.check;
  std::ostringstream os;
  os << "Check against the single-process f64 reference (" << c.rule << "):\n";
  auto line = [&](const char* name, double e, double a, double worst) {
    os << "  " << left(name, 4) << " max abs error " << fmt("%.3e", e) << "  allowed " << fmt("%.3e", a) << "  "
       << (worst <= 1 ? "ok" : "FAIL") << "\n";
  };
  line("out", c.err.out, c.allowed.out, c.worst.out);
  line("lse", c.err.lse, c.allowed.lse, c.worst.lse);
  if (c.backward) {
    line("dq", c.err.dq, c.allowed.dq, c.worst.dq);
    line("dk", c.err.dk, c.allowed.dk, c.worst.dk);
    line("dv", c.err.dv, c.allowed.dv, c.worst.dv);
  }
  for (std::size_t i = 0; i < c.per_rank.size(); ++i)
    os << "rank " << i << ": " << (c.per_rank[i].correct ? "CORRECT" : "ERROR") << "  (max abs error on its rows "
       << fmt("%.1e", c.per_rank[i].err) << ")\n";
  os << (c.passed ? "PASSED" : "FAILED") << "\n";
  return os.str();
}

std::string format_report(const RunResult& r) {
  const RunConfig& cfg = r.config;
  const Problem& p = cfg.problem;
  std::ostringstream os;
  os << "cpsim run: " << strategy_name(cfg.strategy);
  if (cfg.strategy == StrategyKind::hybrid) {
    const int A = p.a2a_size(cfg.strategy);
    os << " (A2A " << A << " x ring " << p.ranks / A << ")";
  }
  const Documents docs = p.documents();
  os << ", " << p.layout().describe() << " sharding, C=" << p.ranks << " ranks on " << backend_name(cfg.backend)
     << "\n  B=" << p.batch << " S=" << p.seq << " Nq=" << p.heads << " Nkv=" << p.kv_heads << " D=" << p.head_dim
     << " " << dtype_name(p.dtype) << " " << describe_mask(p.mask(), docs)
     << (cfg.backward ? ", forward+backward" : ", forward")
     << (p.replicates_kv(cfg.strategy) ? ", KV heads replicated" : "") << ", seed " << cfg.seed << "\n";
  if (!docs.empty())
    os << "  " << docs.describe() << (docs.padding() > 0 ? "; padding left out of the check" : "") << "\n";
  os << "\n";

  std::size_t pos_w = 19;  // wide enough for the longest positions text, and at least the header's width
  for (const RankReport& rk : r.ranks) pos_w = std::max(pos_w, rk.positions.text().size() + 1);
  os << "rank  " << left("positions", pos_w) << "fwd pairs    " << (cfg.backward ? "bwd pairs    " : "")
     << "sent        received    peak held   fwd ms   " << (cfg.backward ? "bwd ms   " : "") << "wait ms\n";
  for (const RankReport& rk : r.ranks) {
    const Recorder& s = rk.stats;
    os << left(std::to_string(rk.rank), 6) << left(rk.positions.text(), pos_w)
       << left(std::to_string(phase_work(s, "forward").pairs), 13);
    if (cfg.backward) os << left(std::to_string(phase_work(s, "backward").pairs), 13);
    os << left(format_bytes(static_cast<double>(s.comm_counts().bytes_sent)), 12)
       << left(format_bytes(static_cast<double>(s.comm_counts().bytes_received)), 12)
       << left(format_bytes(static_cast<double>(s.peak_bytes())), 12) << left(fmt("%.2f", phase_ms(s, "forward")), 9);
    if (cfg.backward) os << left(fmt("%.2f", phase_ms(s, "backward")), 9);
    os << fmt("%.2f", s.idle_us() / 1000.0) << "\n";
  }
  os << "pairs: visible query-key pairs x heads x batch, the unit cpsim counts work in\n"
     << "wait ms: time stopped waiting for a transfer or a collective; part of "
     << (cfg.backward ? "fwd ms and bwd ms" : "fwd ms") << " (and of the set-up), not added\n";
  os << "\n" << format_need(r);
  os << "\nCalls per rank:\n";
  for (const RankReport& rk : r.ranks) os << "  rank " << rk.rank << ": " << calls_text(rk.stats.comm_counts()) << "\n";

  // Work per step: visible (query, key) pairs summed over batch and heads, and the block kinds.
  for (const char* phase : {"forward", "backward"}) {
    if (std::string(phase) == "backward" && !cfg.backward) continue;
    int steps = 0;
    for (const RankReport& rk : r.ranks)
      for (const auto& sw : rk.stats.step_work())
        if (sw.phase == phase) steps = std::max(steps, sw.step + 1);
    if (steps == 0) continue;
    os << "\nWork per " << phase << " step (visible query-key pairs x heads x batch):\n  rank";
    for (int i = 0; i < steps; ++i) os << "  " << left("step " + std::to_string(i), 10);
    os << "  total\n";
    for (const RankReport& rk : r.ranks) {
      os << "  " << left(std::to_string(rk.rank), 4);
      for (int i = 0; i < steps; ++i) {
        std::int64_t pairs = 0;
        for (const auto& sw : rk.stats.step_work())
          if (sw.phase == phase && sw.step == i) pairs += sw.work.pairs;
        os << "  " << left(std::to_string(pairs), 10);
      }
      os << "  " << phase_work(rk.stats, phase).pairs << "\n";
    }
    std::int64_t most = 0, all = 0;
    for (const RankReport& rk : r.ranks) {
      most = std::max(most, phase_work(rk.stats, phase).pairs);
      all += phase_work(rk.stats, phase).pairs;
    }
    if (all > 0)
      os << "  imbalance (max/mean of the totals): "
         << fmt("%.2f", static_cast<double>(most) * static_cast<double>(r.ranks.size()) / static_cast<double>(all))
         << "\n";
  }
  if (r.check.ran) os << "\n" << format_check(r);
  return os.str();
}

Json runs_json(std::span<const PosRun> runs) {
  Json j = Json::array();
  for (const PosRun& r : runs) {
    const bool one_block = r.count == r.width;
    j.push_back(Json::array({r.first, r.count, one_block ? 1 : r.stride, one_block ? 1 : r.width}));
  }
  return j;
}

void add_rank_counts(Json& rank, const Recorder& s) {
  rank["bytes_sent"] = s.comm_counts().bytes_sent;
  rank["bytes_received"] = s.comm_counts().bytes_received;
  rank["messages_sent"] = s.comm_counts().messages_sent;
  Json& calls = rank["calls"] = Json::object();
  for (const auto& [k, n] : s.comm_counts().calls) calls[k] = n;
  rank["peak_bytes"] = s.peak_bytes();
  Json& time = rank["time_ms"] = Json::object();
  for (const auto& [k, us] : s.phase_us()) time[k] = us / 1000.0;
  time["idle"] = s.idle_us() / 1000.0;
}

Json run_json(const RunResult& r) {
  const RunConfig& cfg = r.config;
  const Problem& p = cfg.problem;
  Json c;
  c["strategy"] = strategy_name(cfg.strategy);
  c["sharding"] = sharding_name(p.sharding);
  c["ranks"] = p.ranks;
  c["a2a"] = p.a2a_size(cfg.strategy);
  c["kv_replicate"] = p.kv_replicate;
  c["batch"] = p.batch;
  c["seq"] = p.seq;
  c["heads"] = p.heads;
  c["kv_heads"] = p.kv_heads;
  c["head_dim"] = p.head_dim;
  c["dtype"] = dtype_name(p.dtype);
  c["causal"] = p.causal;
  const Documents docs = p.documents();
  c["mask"] = p.mask().describe();
  c["window"] = p.window;
  const Mask mask = p.mask();
  Json& am = c["attention_mask"] = {{"kind", mask.causal() ? "causal" : "full"}, {"window", mask.window()}};
  if (mask.has_documents()) am["document_bounds"] = mask.bounds();  // cu_seqlens: [0, L1, L1 + L2, ..., S]
  c["layout"] = p.layout().describe();
  if (p.sharding == Sharding::balanced) c["chunk"] = p.layout().balance_chunk();
  if (!docs.empty()) {
    c["documents"] = docs.lengths;
    c["padded_documents"] = docs.padded;
    c["padding"] = docs.padding();
  }
  c["backend"] = backend_name(cfg.backend);
  c["backward"] = cfg.backward;
  c["seed"] = static_cast<std::int64_t>(cfg.seed);
  if (!cfg.machine.empty()) c["machine"] = cfg.machine;  // modeled, not measured
  Json j{{"config", std::move(c)}, {"ranks", Json::array()}};
  // The K/V need and, per owner, the rows needed and sent in the forward (kv_traffic.hpp), up to 64 ranks.
  const std::vector<KvNeed> need = kv_need(p);
  const bool per_owner = p.ranks <= 64;
  const auto needed = per_owner ? kv_rows_needed(p) : std::vector<std::vector<std::int64_t>>{};
  const auto sent = per_owner ? kv_rows_sent(p, cfg.strategy) : std::vector<std::vector<std::int64_t>>{};
  for (const RankReport& rk : r.ranks) {
    const Recorder& s = rk.stats;
    Json rank{{"rank", rk.rank}, {"position_runs", runs_json(rk.positions.runs())}};
    const auto i = static_cast<std::size_t>(rk.rank);
    rank["kv_need_bytes"] = need[i].total(cfg.backward);
    if (per_owner) {
      rank["kv_rows_needed"] = needed[i];
      if (moves_only_kv(cfg.strategy)) rank["kv_rows_sent"] = sent[i];
    }
    rank["positions_text"] = rk.positions.text();
    Json& work = rank["work"] = Json::object();
    for (const char* phase : {"forward", "backward"}) {
      const WorkCounts w = phase_work(s, phase);
      Json per_step = Json::array();
      for (const auto& sw : s.step_work())
        if (sw.phase == phase) per_step.push_back({{"step", sw.step}, {"pairs", sw.work.pairs}});
      work[phase] = {{"pairs", w.pairs},
                     {"flops", w.flops},
                     {"blocks", w.calls},
                     {"skipped_blocks", w.skipped_calls},
                     {"tiles_computed", w.tiles_computed},
                     {"tiles_skipped", w.tiles_skipped},
                     {"per_step", std::move(per_step)}};
    }
    add_rank_counts(rank, s);
    j["ranks"].push_back(std::move(rank));
  }
  if (r.check.ran) j["check"] = check_json(r.check);
  j["wall_ms"] = r.wall_ms;
  return j;
}

}  // namespace cpsim
