// The zigzag_ring judge: runs the learner's zigzag_chunks and zigzag_ring_forward (exercise.hpp) on simulated
// ranks and checks them case by case. It stops at the first failing case and names it, with the expected and the
// actual value and a hint. Exit code: 0 all cases pass, 1 a case failed.
//
// Checks, in order:
//   1. the chunk order: zigzag_chunks(r, C) == SeqLayout(C, S, zigzag).chunks(r) = {r, 2C-1-r}
//   2. per shape (C = 1 .. 8, GQA, batch 2, scores scaled x30), on C thread ranks:
//      a. out and lse against the f64 reference, element by element under the f64 rule (sim/kernels/check.hpp)
//      b. visible pairs per rank and step, from the Recorder: step 0 costs 2c^2 + c per (batch, head) for chunk
//         size c, every later step 2c^2; the ranks together cover the causal S(S+1)/2 per (batch, head)
//      c. no masked waste after step 0: the rows x keys of a step's attention calls are all visible pairs
//      d. communication: C-1 K/V blocks sent per rank, no collective calls
#include <cmath>
#include <cstdio>
#include <iostream>
#include <optional>
#include <sstream>

#include "exercises/zigzag_ring/exercise.hpp"
#include "lessons/common/lesson.hpp"
#include "sim/core/bytes.hpp"
#include "sim/core/child_process.hpp"
#include "sim/kernels/check.hpp"
#include "sim/kernels/cpu_device.hpp"
#include "sim/kernels/reference.hpp"
#include "sim/runtime/memory_need.hpp"
#include "sim/runtime/run.hpp"

#ifndef CPSIM_JUDGED_FILE
#define CPSIM_JUDGED_FILE "the learner's file"
#endif

using namespace cpsim;

namespace {

const CheckRule kRule = check_rule(DType::f64, false, false);  // the f64 rule every check uses

struct Case {
  int C;
  std::int64_t S, B, Nq, Nkv, D;
  double sharpen;  // scale = sharpen / sqrt(D)
  std::string name() const {
    std::ostringstream os;
    os << "C=" << C << " S=" << S << " B=" << B << " Nq=" << Nq << " Nkv=" << Nkv << " D=" << D;
    if (sharpen != 1) os << ", scores x" << sharpen;
    return os.str();
  }
};

struct Failure {
  std::string what, expected, actual, hint;
};

std::string num(double v) {
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.10g", v);
  return buf;
}

std::string ints(const std::vector<int>& v) {
  std::string s = "[";
  for (std::size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
  return s + "]";
}

// 1. The chunk order.
std::optional<Failure> check_chunks() {
  for (int C : {1, 2, 3, 4, 8}) {
    const SeqLayout L(C, 2 * C, Sharding::zigzag);
    for (int r = 0; r < C; ++r) {
      const std::vector<int> want = L.chunks(r), got = exercise::zigzag_chunks(r, C);
      if (got != want)
        return Failure{"C=" + std::to_string(C) + ", rank " + std::to_string(r), ints(want), ints(got),
                       "cut the sequence into 2C chunks; rank r owns one early chunk, r, and one late chunk, "
                       "2C-1-r, early first (lesson 5)"};
    }
  }
  return std::nullopt;
}

struct RankRun {
  std::vector<double> out, lse;
  Recorder stats;
};

std::vector<RankRun> run_case(const Case& c, const GlobalTensors& in, double scale) {
  const SeqLayout L(c.C, c.S, Sharding::zigzag);
  const std::int64_t s = L.local_len();
  LaunchOptions lo;
  lo.ranks = c.C;
  lo.tracing = true;
  lo.timeout = std::chrono::seconds(20);
  auto outcomes = launch(lo, [&](Communicator& comm) {
    CpuDevice dev(comm.recorder());
    const int r = comm.rank();
    auto upload = [&](const std::vector<double>& global, std::int64_t n, const char* name) {
      const auto rows = shard(L, global, c.B, n * c.D, r);
      Buffer b = dev.alloc({c.B, s, n, c.D}, DType::f64, Layout::bsnd, name);
      dev.upload(b, rows.data());
      return b;
    };
    const Buffer q = upload(in.q, c.Nq, "q"), k = upload(in.k, c.Nkv, "k"), v = upload(in.v, c.Nkv, "v");
    const Buffer out = dev.alloc(q.dims(), DType::f64, Layout::bsnd, "out");
    const Buffer lse = dev.alloc({c.B, s, c.Nq, 1}, DType::f64, Layout::bns, "lse");
    comm.recorder().begin_phase("forward");
    exercise::zigzag_ring_forward(comm, dev, L, q, k, v, out, lse, scale);
    comm.recorder().end_phase();
    std::vector<double> o(static_cast<std::size_t>(out.numel())), l(static_cast<std::size_t>(lse.numel()));
    dev.download(out, o.data());
    dev.download(lse, l.data());
    ByteWriter w;
    w.put(o);
    w.put(l);
    return w.take();
  });
  std::vector<RankRun> runs;
  for (auto& oc : outcomes) {
    ByteReader rd(oc.result);
    RankRun rr;
    rd.get(rr.out);
    rd.get(rr.lse);
    rr.stats = std::move(oc.stats);
    runs.push_back(std::move(rr));
  }
  return runs;
}

std::string hint_for_row(const Case& c, std::int64_t row, std::int64_t t) {
  if (c.sharpen != 1)
    return "the scores are " + num(c.sharpen) +
           " times sharper here: pass `scale` to every attention_forward "
           "and combine partials only with dev.merge, which works in log space";
  if (c.C == 1) return "with one rank, step 0 alone is causal attention of the rank's rows against its own keys";
  if (row < t)
    return "this row is in the early chunk: it sees the owners before this rank, in the 'lower' steps (both "
           "query chunks x the owner's early chunk), each merged into out and lse with dev.merge";
  return "this row is in the late chunk: it sees every owner; check the 'upper' steps (the late query chunk x "
         "both of the owner's chunks) and that they merge into rows [t, 2t) of out and lse";
}

// 2a. Outputs and LSE against the reference.
std::optional<Failure> check_values(const Case& c, const std::vector<RankRun>& runs, const RefForward& ref) {
  const SeqLayout L(c.C, c.S, Sharding::zigzag);
  const std::int64_t s = L.local_len(), t = L.chunk_len();
  for (int r = 0; r < c.C; ++r) {
    const Positions pos = L.positions(r);
    const RankRun& rr = runs[static_cast<std::size_t>(r)];
    for (std::int64_t b = 0; b < c.B; ++b)
      for (std::int64_t i = 0; i < s; ++i)
        for (std::int64_t h = 0; h < c.Nq; ++h) {
          for (std::int64_t d = 0; d < c.D; ++d) {
            const double got = rr.out[static_cast<std::size_t>(((b * s + i) * c.Nq + h) * c.D + d)];
            const double want = ref.out[static_cast<std::size_t>(((b * c.S + pos[i]) * c.Nq + h) * c.D + d)];
            if (!within(got, want, kRule))
              return Failure{"out, rank " + std::to_string(r) + ", batch " + std::to_string(b) + ", position " +
                                 std::to_string(pos[i]) + ", head " + std::to_string(h) + ", dim " + std::to_string(d),
                             num(want) + " (" + kRule.words + ")", num(got), hint_for_row(c, i, t)};
          }
          const double got = rr.lse[static_cast<std::size_t>((b * c.Nq + h) * s + i)];
          const double want = ref.lse[static_cast<std::size_t>((b * c.Nq + h) * c.S + pos[i])];
          if (!within(got, want, kRule))
            return Failure{"lse, rank " + std::to_string(r) + ", batch " + std::to_string(b) + ", position " +
                               std::to_string(pos[i]) + ", head " + std::to_string(h),
                           num(want) + " (" + kRule.words + ")", num(got),
                           c.sharpen != 1 ? hint_for_row(c, i, t)
                                          : "the lse is merged together with out: pass the same rows of out and lse "
                                            "(and of the tile's out and lse) to dev.merge"};
        }
  }
  return std::nullopt;
}

// 2b-d. Work per step, masked waste, communication.
std::optional<Failure> check_counts(const Case& c, const std::vector<RankRun>& runs) {
  const SeqLayout L(c.C, c.S, Sharding::zigzag);
  const std::int64_t t = L.chunk_len(), bh = c.B * c.Nq;
  std::int64_t total = 0;
  for (int r = 0; r < c.C; ++r) {
    const Recorder& rec = runs[static_cast<std::size_t>(r)].stats;
    const std::string who = "rank " + std::to_string(r);
    for (int i = -1; i < c.C; ++i) {
      std::int64_t pairs = 0, area = 0;
      for (const auto& sw : rec.step_work())
        if (sw.phase == "forward" && sw.step == i) pairs += sw.work.pairs;
      for (const TraceEvent& e : rec.events()) {
        if (e.type != TraceEvent::Type::compute || e.step != i || e.kind == BlockKind::skipped) continue;
        std::int64_t rows = 0, keys = 0;
        for (const Span& sp : e.q_spans) rows += sp.hi - sp.lo;
        for (const Span& sp : e.k_spans) keys += sp.hi - sp.lo;
        area += rows * keys;
      }
      if (i < 0) {
        if (pairs > 0)
          return Failure{who + ", work outside any step", "0 pairs before step 0", std::to_string(pairs) + " pairs",
                         "call comm.recorder().step(i) at the start of each step i, before its attention calls"};
        continue;
      }
      const std::int64_t want = bh * (i == 0 ? 2 * t * t + t : 2 * t * t);
      if (pairs != want)
        return Failure{who + ", visible pairs at step " + std::to_string(i) + " (x batch x heads)",
                       std::to_string(want), std::to_string(pairs),
                       i == 0 ? "step 0 is the diagonal: all local queries against the rank's own K/V, causal"
                              : "every step after 0 costs two t x t blocks: o < r: both query chunks x the owner's "
                                "early chunk; o > r: the late query chunk x both owner chunks"};
      if (i > 0 && area * bh != pairs)
        return Failure{who + ", query-key pairs computed at step " + std::to_string(i) + " (per batch and head)",
                       std::to_string(pairs / bh) + " (all of them visible)", std::to_string(area),
                       "a call over whole Q x whole K/V also computes the masked half; pass only the visible rows "
                       "of Q and of the K/V (View::rows) to attention_forward"};
      total += pairs;
    }
    const CommCounts& cc = rec.comm_counts();
    const std::int64_t kv_bytes = 2 * c.B * L.local_len() * c.Nkv * c.D * 8;
    for (const char* coll : {"all_gather", "reduce_scatter", "all_to_all", "all_reduce"})
      if (cc.count(coll) > 0)
        return Failure{who + ", collective calls", "none (a ring only talks to its neighbours)",
                       std::string(coll) + " " + std::to_string(cc.count(coll)),
                       "pass K/V with isend/irecv (or sendrecv) to rank r+1 and from rank r-1"};
    if (cc.bytes_sent != (c.C - 1) * kv_bytes)
      return Failure{who + ", bytes sent", std::to_string((c.C - 1) * kv_bytes) + " (C-1 K/V blocks)",
                     std::to_string(cc.bytes_sent),
                     "send the K and V you hold (" + std::to_string(kv_bytes) +
                         " bytes) once per step except the "
                         "last: C-1 times in all"};
  }
  const std::int64_t causal = bh * c.S * (c.S + 1) / 2;
  if (total != causal)
    return Failure{"visible pairs over all ranks", std::to_string(causal) + " (S(S+1)/2 x batch x heads)",
                   std::to_string(total), "every causal pair must be computed exactly once"};
  return std::nullopt;
}

// The case as a run of the ring (its shape, seeded per C).
RunConfig case_config(const Case& c) {
  RunConfig cfg;
  cfg.problem.ranks = c.C;
  cfg.problem.seq = c.S;
  cfg.problem.batch = c.B;
  cfg.problem.heads = c.Nq;
  cfg.problem.kv_heads = c.Nkv;
  cfg.problem.head_dim = c.D;
  cfg.seed = 11 + static_cast<std::uint64_t>(c.C);
  cfg.check = true;
  return cfg;
}

std::optional<Failure> judge_case(const Case& c) {
  const RunConfig cfg = case_config(c);
  const GlobalTensors in = make_inputs(cfg);
  const double scale = c.sharpen / std::sqrt(static_cast<double>(c.D));
  const Positions all = iota_positions(0, c.S);
  const RefForward ref = reference_forward(in.q, in.k, in.v, {c.B, c.S, c.S, c.Nq, c.Nkv, c.D}, all, all, true, scale);
  std::vector<RankRun> runs;
  try {
    runs = run_case(c, in, scale);
  } catch (const std::exception& e) {
    return Failure{"running the forward", "every rank returns", e.what(),
                   "a rank threw, or waited too long: every isend needs the neighbour's matching irecv, and "
                   "both requests must be waited before their buffers are reused"};
  }
  if (auto f = check_values(c, runs, ref)) return f;
  return check_counts(c, runs);
}

int judge() {
  std::cout << "Judging zigzag_ring: " << CPSIM_JUDGED_FILE << "\n";
  const std::vector<Case> cases{{1, 8, 1, 2, 2, 4, 1},  {2, 8, 1, 2, 2, 4, 1},  {4, 16, 1, 2, 2, 4, 1},
                                {3, 24, 1, 1, 1, 4, 1}, {4, 32, 2, 4, 2, 8, 1}, {4, 16, 1, 2, 2, 4, 30},
                                {8, 32, 1, 1, 1, 4, 1}};
  for (const Case& c : cases) check_memory(case_config(c));  // what a run of the case holds (memory_need.hpp)
  int passed = 0;
  const int checks = 1 + static_cast<int>(cases.size());
  auto report = [&](const std::string& name, const std::optional<Failure>& f) {
    if (!f) {
      std::cout << "  ok    " << name << "\n";
      ++passed;
      return true;
    }
    std::cout << "  FAIL  " << name << "\n"
              << "        " << f->what << "\n"
              << "        expected " << f->expected << "\n"
              << "        actual   " << f->actual << "\n"
              << lesson::wrap("hint: " + f->hint, 78, "        ") << passed << " of " << checks
              << " checks passed; fix the first failure and judge again.\n";
    return false;
  };
  tell_parent("chunk order");  // cpsim judge names the case a crash or a hang happened in
  if (!report("chunk order, C = 1, 2, 3, 4, 8", check_chunks())) return 1;
  for (const Case& c : cases) {
    tell_parent(c.name());
    if (!report(c.name(), judge_case(c))) return 1;
  }
  std::cout << "All " << checks << " checks passed: zigzag ring attention, balanced step by step.\n";
  return 0;
}

}  // namespace

int main() { return lesson::guarded("judge_zigzag_ring", judge); }
