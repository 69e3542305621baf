#include "sim/runtime/report.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <sstream>

namespace cpsim {

namespace {

std::string fmt(const char* f, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, f, v);
  return buf;
}

std::string pad(std::string s, std::size_t w) {
  if (s.size() < w) s.append(w - s.size(), ' ');
  return s;
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

std::string format_check(const RunResult& r) {
  const CheckReport& c = r.check;
  std::ostringstream os;
  os << "Check against the single-process f64 reference (" << c.rule << "):\n";
  auto line = [&](const char* name, double e, double a, double worst) {
    os << "  " << pad(name, 4) << " max abs error " << fmt("%.3e", e) << "  allowed " << fmt("%.3e", a) << "  "
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
  os << "rank  " << pad("positions", pos_w) << "fwd pairs    " << (cfg.backward ? "bwd pairs    " : "")
     << "sent        received    peak held   fwd ms   " << (cfg.backward ? "bwd ms   " : "") << "wait ms\n";
  for (const RankReport& rk : r.ranks) {
    const Recorder& s = rk.stats;
    os << pad(std::to_string(rk.rank), 6) << pad(rk.positions.text(), pos_w)
       << pad(std::to_string(phase_work(s, "forward").pairs), 13);
    if (cfg.backward) os << pad(std::to_string(phase_work(s, "backward").pairs), 13);
    os << pad(format_bytes(static_cast<double>(s.comm_counts().bytes_sent)), 12)
       << pad(format_bytes(static_cast<double>(s.comm_counts().bytes_received)), 12)
       << pad(format_bytes(static_cast<double>(s.peak_bytes())), 12) << pad(fmt("%.2f", phase_ms(s, "forward")), 9);
    if (cfg.backward) os << pad(fmt("%.2f", phase_ms(s, "backward")), 9);
    os << fmt("%.2f", s.idle_us() / 1000.0) << "\n";
  }
  os << "pairs: visible query-key pairs x heads x batch, the unit cpsim counts work in\n"
     << "wait ms: time stopped waiting for a transfer or a collective; part of "
     << (cfg.backward ? "fwd ms and bwd ms" : "fwd ms") << " (and of the set-up), not added\n";
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
    for (int i = 0; i < steps; ++i) os << "  " << pad("step " + std::to_string(i), 10);
    os << "  total\n";
    for (const RankReport& rk : r.ranks) {
      os << "  " << pad(std::to_string(rk.rank), 4);
      for (int i = 0; i < steps; ++i) {
        std::int64_t pairs = 0;
        for (const auto& sw : rk.stats.step_work())
          if (sw.phase == phase && sw.step == i) pairs += sw.work.pairs;
        os << "  " << pad(std::to_string(pairs), 10);
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

void write_runs(JsonWriter& j, std::span<const PosRun> runs) {
  j.begin_array();
  for (const PosRun& r : runs) {
    const bool one_block = r.count == r.width;
    j.begin_array().value(r.first).value(r.count).value(one_block ? 1 : r.stride).value(one_block ? 1 : r.width);
    j.end_array();
  }
  j.end_array();
}

void write_json(JsonWriter& j, const RunResult& r) {
  const RunConfig& cfg = r.config;
  const Problem& p = cfg.problem;
  j.begin_object();
  j.key("config").begin_object();
  j.key("strategy").value(strategy_name(cfg.strategy)).key("sharding").value(sharding_name(p.sharding));
  j.key("ranks").value(p.ranks).key("a2a").value(p.a2a_size(cfg.strategy)).key("kv_replicate").value(p.kv_replicate);
  j.key("batch").value(p.batch).key("seq").value(p.seq).key("heads").value(p.heads).key("kv_heads").value(p.kv_heads);
  j.key("head_dim").value(p.head_dim).key("dtype").value(dtype_name(p.dtype)).key("causal").value(p.causal);
  const Documents docs = p.documents();
  j.key("mask").value(p.mask().describe()).key("window").value(p.window);
  const Mask mask = p.mask();
  j.key("attention_mask").begin_object().key("kind").value(mask.causal() ? "causal" : "full");
  j.key("window").value(mask.window());
  if (mask.has_documents()) j.key("document_bounds").array(mask.bounds());  // cu_seqlens: [0, L1, L1 + L2, ..., S]
  j.end_object();
  j.key("layout").value(p.layout().describe());
  if (p.sharding == Sharding::balanced) j.key("chunk").value(p.layout().balance_chunk());
  if (!docs.empty()) {
    j.key("documents").array(docs.lengths).key("padded_documents").array(docs.padded);
    j.key("padding").value(docs.padding());
  }
  j.key("backend").value(backend_name(cfg.backend)).key("backward").value(cfg.backward);
  j.key("seed").value(static_cast<std::int64_t>(cfg.seed));
  if (!cfg.machine.empty()) j.key("machine").value(cfg.machine);  // modeled, not measured
  j.end_object();
  j.key("ranks").begin_array();
  for (const RankReport& rk : r.ranks) {
    const Recorder& s = rk.stats;
    j.begin_object().key("rank").value(rk.rank);
    j.key("position_runs");
    write_runs(j, rk.positions.runs());
    j.key("positions_text").value(rk.positions.text());
    j.key("work").begin_object();
    for (const char* phase : {"forward", "backward"}) {
      const WorkCounts w = phase_work(s, phase);
      j.key(phase).begin_object().key("pairs").value(w.pairs).key("flops").value(w.flops);
      j.key("blocks").value(w.calls).key("skipped_blocks").value(w.skipped_calls);
      j.key("tiles_computed").value(w.tiles_computed).key("tiles_skipped").value(w.tiles_skipped);
      j.key("per_step").begin_array();
      for (const auto& sw : s.step_work())
        if (sw.phase == phase)
          j.begin_object().key("step").value(sw.step).key("pairs").value(sw.work.pairs).end_object();
      j.end_array().end_object();
    }
    j.end_object();
    j.key("bytes_sent").value(s.comm_counts().bytes_sent).key("bytes_received").value(s.comm_counts().bytes_received);
    j.key("messages_sent").value(s.comm_counts().messages_sent);
    j.key("calls").begin_object();
    for (const auto& [k, n] : s.comm_counts().calls) j.key(k).value(n);
    j.end_object();
    j.key("peak_bytes").value(s.peak_bytes());
    j.key("time_ms").begin_object();
    for (const auto& [k, us] : s.phase_us()) j.key(k).value(us / 1000.0);
    j.key("idle").value(s.idle_us() / 1000.0).end_object();
    j.end_object();
  }
  j.end_array();
  if (r.check.ran) {
    const CheckReport& c = r.check;
    j.key("check");
    write_check_json(j, c);
  }
  j.key("wall_ms").value(r.wall_ms);
  j.end_object();
}

}  // namespace cpsim
