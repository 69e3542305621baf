// Lesson 7: the backward pass. Where dQ, dK and dV are produced, and how they reach the ranks that own them.
//
// Three strategies run forward and backward with tracing on. From each rank's recorded events the lesson reads
// which positions its backward attention calls covered (so where partial gradients appear) and which calls
// carried them home: a reduce-scatter (all-gather), a travelling accumulator (ring), all-to-alls (Ulysses).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <utility>

#include "lessons/common/lesson.hpp"
#include "sim/kernels/check.hpp"
#include "sim/kernels/cpu_device.hpp"
#include "sim/kernels/reference.hpp"
#include "sim/runtime/stepper.hpp"

using namespace cpsim;

namespace {

bool inside(const std::vector<Span>& spans, const SeqLayout& L, int rank) {
  const Positions mine = L.positions(rank);
  for (const Span& sp : spans)
    for (std::int64_t x = sp.lo; x < sp.hi; ++x)
      if (!std::binary_search(mine.begin(), mine.end(), x)) return false;
  return true;
}

RunResult traced(const lesson::Options& o, StrategyKind k) {
  RunConfig c = o.config;
  c.strategy = k;
  c.backward = true;
  c.tracing = true;
  return lesson::run_and_step(c, o);
}

// Max |a - b| over two equal-length vectors.
double max_diff(const std::vector<double>& a, const std::vector<double>& b) {
  double e = 0;
  for (std::size_t i = 0; i < a.size(); ++i) e = std::max(e, std::abs(a[i] - b[i]));
  return e;
}

struct Grads {
  std::vector<double> dq, dk, dv;
};

// Attention over the whole sequence split into two key blocks, [0, S/2) and [S/2, S), on one device: each
// block's forward, their merge, then each block's backward, summed, once with the merged (final) out and lse
// and once with each block's own. q: [B, S, Nq, D], k, v: [B, S, Nkv, D].
std::pair<Grads, Grads> two_block_backward(const Problem& p, const GlobalTensors& in) {
  Recorder rec;
  CpuDevice dev(rec);
  const std::int64_t S = p.seq, h = S / 2;
  auto up = [&](const std::vector<double>& x, std::int64_t n, const char* name) {
    Buffer b = dev.alloc({p.batch, S, n, p.head_dim}, DType::f64, Layout::bsnd, name);
    dev.upload(b, x.data());
    return b;
  };
  const Buffer q = up(in.q, p.heads, "q"), k = up(in.k, p.kv_heads, "k"), v = up(in.v, p.kv_heads, "v"),
               dout = up(in.dout, p.heads, "dout");
  const Positions all = iota_positions(0, S), first = iota_positions(0, h), second = iota_positions(h, S - h);
  const Dims od = q.dims(), ld{p.batch, S, p.heads, 1};
  Buffer out_a = dev.alloc(od, DType::f64, Layout::bsnd, "out_a"), out_b = dev.alloc(od, DType::f64, Layout::bsnd, "b");
  Buffer lse_a = dev.alloc(ld, DType::f64, Layout::bns, "lse_a"), lse_b = dev.alloc(ld, DType::f64, Layout::bns, "b");
  dev.attention_forward(View(q), all, View(k).rows(0, h), View(v).rows(0, h), first, View(out_a), View(lse_a));
  dev.attention_forward(View(q), all, View(k).rows(h, S - h), View(v).rows(h, S - h), second, View(out_b), View(lse_b));
  Buffer out = dev.alloc(od, DType::f64, Layout::bsnd, "out"), lse = dev.alloc(ld, DType::f64, Layout::bns, "lse");
  dev.copy(View(out), View(out_a));
  dev.copy(View(lse), View(lse_a));
  dev.merge(View(out), View(lse), View(out_b), View(lse_b));  // the final (out, lse), as forward saves them
  auto backward = [&](const Buffer& oa, const Buffer& la, const Buffer& ob, const Buffer& lb) {
    Buffer dq = dev.alloc(od, DType::f64, Layout::bsnd, "dq"), dk = dev.alloc(k.dims(), DType::f64, Layout::bsnd, "dk"),
           dv = dev.alloc(v.dims(), DType::f64, Layout::bsnd, "dv");
    dev.attention_backward(View(q), all, View(k).rows(0, h), View(v).rows(0, h), first, View(oa), View(la), View(dout),
                           View(dq), View(dk).rows(0, h), View(dv).rows(0, h));
    dev.attention_backward(View(q), all, View(k).rows(h, S - h), View(v).rows(h, S - h), second, View(ob), View(lb),
                           View(dout), View(dq), View(dk).rows(h, S - h), View(dv).rows(h, S - h));
    Grads g;
    for (auto [buf, host] : {std::pair{&dq, &g.dq}, std::pair{&dk, &g.dk}, std::pair{&dv, &g.dv}}) {
      host->resize(static_cast<std::size_t>(buf->numel()));
      dev.download(*buf, host->data());
    }
    return g;
  };
  return {backward(out, lse, out, lse), backward(out_a, lse_a, out_b, lse_b)};
}

void show_calls(const RunResult& r) {
  std::cout << "  calls on rank 0, forward:  " << lesson::phase_calls(r, 0, "forward") << "\n"
            << "                   backward: " << lesson::phase_calls(r, 0, "backward") << "\n\n";
}

int run_lesson(int argc, char** argv) {
  lesson::Options o;
  o.mask_refusal =
      "lesson 7 follows the ring backward's blocks under the causal mask and takes no --docs or "
      "--window; `cpsim run --strategy ring --backward --docs ... --check` runs it under a mask, and "
      "lesson 12 (lessons/12_documents) teaches masks";
  Problem& p = o.config.problem;
  p.ranks = 4;
  p.seq = 16;
  p.heads = p.kv_heads = 4;
  p.head_dim = 8;
  if (!lesson::parse_options(argc, argv, "Lesson 7: the backward pass", lesson::kShape | lesson::kStep, o)) return 0;
  p.sharding = Sharding::zigzag;
  for (StrategyKind k : {StrategyKind::all_gather, StrategyKind::ring, StrategyKind::ulysses}) validate(p, k);
  const SeqLayout L(p.ranks, p.seq, p.sharding);
  const int C = p.ranks;

  lesson::title("Lesson 7: the backward pass");
  lesson::shape(o.config.problem, "forward and backward");
  lesson::say(
      "Backward turns dout into dQ, dK and dV. A query's gradient dQ comes from the attention calls its "
      "rank ran, so it stays where it is. dK and dV are different: a key was read by queries on many "
      "ranks, and each of them produces a piece of its gradient that must reach the key's owner.");

  lesson::banner(1, "what backward needs from the forward: the final out and lse");
  lesson::say(
      "Every strategy computes a block's gradients from the forward's saved results, per query row i and "
      "key j of the block (s = scale q.k):");
  std::cout << "  p_ij  = exp(s_ij - lse_i)        the final lse: p is the row's true softmax\n"
               "  D_i   = sum_d dout_id out_id    the final out: D belongs to the whole row\n"
               "  dv_j += sum_i p_ij dout_i       ds_ij = p_ij (dout_i . v_j - D_i)\n"
               "  dq_i += scale sum_j ds_ij k_j   dk_j += scale sum_i ds_ij q_i\n\n";
  lesson::say(
      "So the forward saves q, k, v, out and lse (the ring also the last K/V it held), and a block's "
      "backward needs no forward pass of its own. Split the keys into two blocks and add the two blocks' "
      "gradients, once with the saved final out and lse, once with each block's own:");
  {
    RunConfig c = o.config;
    c.backward = true;
    const GlobalTensors in = make_inputs(c);
    const Positions all = iota_positions(0, p.seq);
    const RefBackward ref = reference_backward(
        in.q, in.k, in.v, in.dout, {p.batch, p.seq, p.seq, p.heads, p.kv_heads, p.head_dim}, all, all, true);
    const auto [saved, own] = two_block_backward(p, in);
    const auto line = [&](const char* what, const Grads& g) {
      const double e = std::max({max_diff(g.dq, ref.dq), max_diff(g.dk, ref.dk), max_diff(g.dv, ref.dv)});
      char buf[32];
      std::snprintf(buf, sizeof buf, e < 1e-12 ? "< 1e-12" : "%.1e", e);  // rounding's last digits vary by build
      std::cout << "  " << lesson::left(what, 36) << "max error of dq, dk, dv " << buf << "\n";
      return e;
    };
    const double e_saved = line("with the final out and lse:", saved);
    const double e_own = line("with each block's own out and lse:", own);
    std::cout << "\n";
    lesson::expect(e_saved <= kF64Tolerance && e_own > 1e-3,
                   "the final out and lse give the gradients; a block's own do not");
    lesson::say(
        "With its own out and lse a block's softmax is normalised over its keys alone and its D comes from "
        "its partial output, so the sum of the blocks' gradients comes out wrong. The strategies below give "
        "every block the saved final out and lse of its query rows.");
  }

  lesson::banner(2, "all-gather: partial dK/dV over the whole prefix, then a reduce-scatter");
  const RunResult ag = traced(o, StrategyKind::all_gather);
  std::cout << "  rank  dQ rows        partial dK/dV for keys\n";
  for (const StepFrame& f : step_frames(ag)) {
    if (f.phase != "backward" || f.step != 1) continue;
    for (const RankStep& rs : f.ranks) {
      std::vector<Span> q;
      for (const BlockDone& b : rs.blocks) q.insert(q.end(), b.q.begin(), b.q.end());
      lesson::expect(inside(q, L, rs.rank), "dQ is computed on the query's own rank");
      std::cout << "  " << lesson::left(std::to_string(rs.rank), 6) << lesson::left(chunk_names(q, L, 'q'), 15)
                << chunk_names(rs.kv_read, L, 'k') << "\n";
    }
  }
  std::cout << "\n";
  lesson::say(
      "Each rank accumulates partial dK/dV into full-length buffers (a key gets a piece from every "
      "local query at or after it), reorders them to rank order and reduce-scatters: each rank receives "
      "the sum of every rank's pieces for its own rows. Backward re-gathers K and V first.");
  show_calls(ag);
  lesson::expect(lesson::phase_calls(ag, 0, "backward") == "all_gather 2, reduce_scatter 2",
                 "all-gather backward: 2 all-gathers (K, V) and 2 reduce-scatters (dK, dV)");

  lesson::banner(3, "ring: the dK/dV accumulator travels with its K/V");
  const RunResult ring = traced(o, StrategyKind::ring);
  std::cout << "  Whose dK/dV accumulator each rank adds to at each backward step:\n";
  std::string header = "  step";
  for (int r = 0; r < C; ++r) header += "  rank " + std::to_string(r);
  lesson::row(header);
  for (const StepFrame& f : step_frames(ring)) {
    if (f.phase != "backward") continue;
    std::string line = "  " + lesson::left(std::to_string(f.step), 4);
    for (const RankStep& rs : f.ranks) {
      const int owner = L.owner(rs.kv_read.front().lo);
      lesson::expect(owner == (rs.rank + 1 + f.step) % C, "backward step i holds the K/V of rank r + 1 + i");
      for (const BlockDone& b : rs.blocks) lesson::expect(inside(b.q, L, rs.rank), "dQ stays on its rank");
      line += "  " + lesson::left(std::to_string(owner), 6);
    }
    lesson::row(line);
  }
  std::cout << "\n";
  for (const RankReport& rk : ring.ranks)
    for (const TraceEvent& e : rk.stats.events())
      if (e.type == TraceEvent::Type::comm && e.phase == "backward" && e.name == "isend")
        lesson::expect(e.peer == (rk.rank - 1 + C) % C, "the backward ring sends to r-1");
  lesson::say(
      "The backward ring runs the other way (send to r-1), starting from the last K/V the forward held "
      "(rank r+1's, step 0 above). "
      "At every step a rank adds its block's dK/dV into the accumulator of the K/V it holds, then passes "
      "K/V and accumulator on together. After C-1 hops each accumulator is back at its owner, complete: "
      "C-1 K/V messages and C-1 dK/dV messages per rank.");
  show_calls(ring);
  const std::string hops = std::to_string(2 * (C - 1));
  lesson::expect(lesson::phase_calls(ring, 0, "backward") == (C > 1 ? "irecv " + hops + ", isend " + hops : "none"),
                 "ring backward: C-1 K/V and C-1 dK/dV messages each way");
  if (C > 2) {
    const std::string order = lesson::step_order(ring, 1, "backward", 1);
    std::cout << "  Rank 1, backward step 1, the events it recorded, in order (#n: the n-th\n"
                 "  request of the backward; K/V: started before the step's attention call,\n"
                 "  dK/dV: after it):\n";
    for (const std::string& line : lesson::step_events(ring, 1, "backward", 1, "K/V", "dK/dV"))
      std::cout << line << "\n";
    std::cout << "\n";
    lesson::expect(order.rfind("start isend -> start irecv -> attention_backward -> wait irecv -> wait isend -> "
                               "start isend -> start irecv",
                               0) == 0,
                   "the accumulator is waited for after the next block, then passed on");
    lesson::say(
        "The first isend/irecv pair moves the next K/V, started before the block. The accumulator cannot leave "
        "before its block is added, so a rank posts it at the end of a step and waits for the one coming to it "
        "only after its next attention_backward (the dK/dV requests above started at step 0), just before adding that "
        "block's dK/dV to it: the dK/dV transfer hides behind the next block's compute. Lesson 10 asks when "
        "such a transfer can hide.");
  }

  lesson::banner(4, "Ulysses: all-to-alls around a local backward");
  const RunResult ul = traced(o, StrategyKind::ulysses);
  lesson::say(
      "dout goes through the same all-to-all as q (sequence sharding to head sharding); each rank runs "
      "an ordinary attention backward over all positions for its " +
      std::to_string(p.heads / C) + " of the " + std::to_string(p.heads) +
      " heads, producing complete dQ, dK, dV for those heads; three inverse all-to-alls return them to "
      "sequence sharding.");
  show_calls(ul);
  lesson::expect(lesson::phase_calls(ul, 0, "backward") == "all_to_all 4",
                 "ulysses backward: 4 all-to-alls (dout, dq, dk, dv)");

  std::cout << "Forward and backward (out, dq, dk, dv), " << C << " ranks, against the reference:\n";
  bool ok = lesson::verdicts(ag, "all_gather");
  ok = lesson::verdicts(ring, "ring") && ok;
  ok = lesson::verdicts(ul, "ulysses") && ok;
  return ok ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  return lesson::guarded("lesson 07_backward", [&] { return run_lesson(argc, argv); });
}
