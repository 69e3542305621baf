#include "sim/model/inference_plan.hpp"

#include <algorithm>
#include <fmt/format.h>

#include "sim/core/error.hpp"
#include "sim/core/sizes.hpp"
#include "sim/model/clock.hpp"
#include "sim/model/inference_count.hpp"

namespace cpsim::model {

InferenceTime model_inference(const InferenceProblem& p, InferenceKind k, const Machine& m) {
  check_fits(m, p.ranks);
  const InferenceCount counted = count_inference(p, k);
  const ModeledRun run = simulate(counted.programs, m);
  InferenceTime t;
  t.kind = k;
  t.us = run.forward_us;
  for (const RankTimeline& r : run.ranks) {
    t.exposed_us = std::max(t.exposed_us, r.blocked_us);
    t.compute_us = std::max(t.compute_us, r.compute_us);
  }
  for (const Recorder& r : counted.ranks) {
    t.bytes_sent = std::max(t.bytes_sent, r.comm_counts().bytes_sent);
    t.peak_bytes = std::max(t.peak_bytes, r.peak_bytes());
  }
  return t;
}

PrefillChoice choose_prefill(const InferenceProblem& p, const Machine& m) {
  PrefillChoice c;
  c.pass_kv = model_inference(p, InferenceKind::pass_kv, m);
  c.pass_q = model_inference(p, InferenceKind::pass_q, m);
  c.choice = c.pass_q.us < c.pass_kv.us ? InferenceKind::pass_q : InferenceKind::pass_kv;
  const double Nq = static_cast<double>(p.heads), Nkv = static_cast<double>(p.kv_heads),
               D = static_cast<double>(p.head_dim);
  c.new_share = static_cast<double>(p.new_tokens) / static_cast<double>(p.seq());
  c.message_bound = 2 * Nkv / Nq;
  c.bytes_bound = 2 * Nkv * D / (Nq * (2 * D + 1));
  // 3. One ring step of pass-KV: its K/V message on the link the ring crosses (the network once it spans nodes).
  const InferenceLayout L = p.layout(InferenceKind::pass_kv);
  const double kv_bytes = 2.0 * static_cast<double>(p.batch * L.max_kv() * p.kv_heads * p.head_dim) *
                          static_cast<double>(dtype_size(p.dtype));
  const Link& link = m.nodes_for(p.ranks) > 1 ? m.inter : m.intra;
  c.kv_step_us = p.ranks > 1 ? link.latency_us + kv_bytes / (link.p2p_gbps * 1e3) : 0;
  c.block_us = c.pass_kv.compute_us / p.ranks;
  const double F = m.curves_for(p.head_dim).forward_full.tflops * 1e12, BW = link.p2p_gbps * 1e9;
  c.peak_tokens = p.ranks > 1 ? p.ranks * Nkv * static_cast<double>(dtype_size(p.dtype)) * F / (2 * Nq * BW) : 0;
  const auto pct = [](double x) { return fmt::format("{:.1f}%", 100 * x); };
  const auto ms = [](double us) { return fmt::format("{:.3f} ms", us / 1e3); };
  c.reasons.push_back("message size: the new tokens are " + pct(c.new_share) +
                      " of the K/V; a Q message is smaller than a K/V message below 2 Nkv/Nq = " +
                      pct(c.message_bound) + (c.new_share < c.message_bound ? " (here it is)" : " (here it is not)"));
  c.reasons.push_back("bytes with the partials: pass-Q also sends out and LSE home, fewer bytes in all below "
                      "2 Nkv D / (Nq (2D+1)) = " + pct(c.bytes_bound) + "; per rank pass-KV sends " +
                      format_bytes(static_cast<double>(c.pass_kv.bytes_sent)) + ", pass-Q " +
                      format_bytes(static_cast<double>(c.pass_q.bytes_sent)));
  c.reasons.push_back("overlap: a pass-KV step sends its K/V in " + ms(c.kv_step_us) + " behind a block of " +
                      ms(c.block_us) + (c.kv_step_us <= c.block_us ? " (hidden)" : " (not hidden)") +
                      "; pass-Q's all-to-all of the partials hides behind nothing (exposed " +
                      ms(c.pass_q.exposed_us) + ", pass-KV " + ms(c.pass_kv.exposed_us) + ")");
  c.reasons.push_back("overlap at the kernel's peak rate (F = " + fmt::format("{:.0f}", F / 1e12) +
                      " TFLOP/s, BW = " + fmt::format("{:.1f}", BW / 1e9) + " GB/s): pass-KV hides its transfer from T >= C Nkv e F / (2 Nq BW) = " +
                      fmt::format("{:.0f}", c.peak_tokens) + " new tokens (" +
                      pct(c.peak_tokens / static_cast<double>(p.seq())) + " of T+P); here T = " +
                      std::to_string(p.new_tokens));
  c.reasons.push_back("modeled on " + m.name + ": pass-KV " + ms(c.pass_kv.us) + ", pass-Q " + ms(c.pass_q.us) +
                      ": " + std::string(inference_name(c.choice)) + " is faster");
  // 5. Memory: a strategy whose peak does not fit a GPU is no choice, however fast.
  const bool kv_fits = fits(m, c.pass_kv), q_fits = fits(m, c.pass_q);
  if (kv_fits != q_fits) {
    const InferenceTime& other = kv_fits ? c.pass_q : c.pass_kv;
    c.choice = kv_fits ? InferenceKind::pass_kv : InferenceKind::pass_q;
    c.reasons.push_back("memory: " + std::string(inference_name(other.kind)) + " needs " +
                        format_bytes(static_cast<double>(other.peak_bytes)) + " per GPU, more than the " +
                        format_bytes(m.memory_gb * 1e9) + " one holds: " + std::string(inference_name(c.choice)));
  }
  return c;
}

bool fits(const Machine& m, const InferenceTime& t) {
  return static_cast<double>(t.peak_bytes) <= m.memory_gb * 1e9;
}

int fewest_ranks_that_fit(const InferenceProblem& p, const Machine& m, int most) {
  InferenceProblem q = p;
  for (std::int64_t C = 2 * static_cast<std::int64_t>(p.ranks); C <= most; C *= 2) {
    q.ranks = static_cast<int>(C);
    try {
      if (fits(m, model_inference(q, InferenceKind::pass_kv, m)) || fits(m, model_inference(q, InferenceKind::pass_q, m)))
        return q.ranks;
    } catch (const UsageError&) {
      // C ranks cannot run this step (too few new tokens to split, more nodes than the machine has): go on.
    }
  }
  return 0;
}

Machine with_ranks_per_node(Machine m, int ranks) {
  require(ranks >= 1, "--ranks-per-node must be at least 1 (got " + std::to_string(ranks) + ")",
          Fix{{"--ranks-per-node 1"}});
  if (ranks == m.ranks_per_node) return m;
  m.name += ", " + std::to_string(ranks) + " rank" + (ranks == 1 ? "" : "s") + " per node";
  m.ranks_per_node = ranks;
  m.nics_per_node = std::min(m.nics_per_node, ranks);
  return m;
}

Machine paper_machine() { return with_ranks_per_node(load_machine("h100-ib"), 1); }

InferenceProblem paper_problem(std::int64_t new_tokens, std::int64_t cached, int ranks) {
  InferenceProblem p;
  p.batch = 1;
  p.new_tokens = new_tokens;
  p.cached = cached;
  p.heads = 128 / 8;
  p.kv_heads = 8 / 8;
  p.head_dim = 128;
  p.dtype = DType::bf16;
  p.ranks = ranks;
  return p;
}

}  // namespace cpsim::model
