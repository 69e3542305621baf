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
//      e. overlap, from the order of the recorded events: every isend/irecv has an attention call between its
//         start and its wait; no blocking sendrecv (judge::overlapped)
// A wrong out that equals the plain sum of the blocks' partial outputs (out += tile instead of the log-sum-exp
// merge) is named as such.
#include "exercises/common/judge.hpp"

#include <cmath>
#include <optional>

#include "exercises/zigzag_ring/exercise.hpp"
#include "sim/kernels/reference.hpp"
#include "sim/runtime/run.hpp"

#ifndef CPSIM_JUDGED_FILE
#define CPSIM_JUDGED_FILE "the learner's file"
#endif

using namespace cpsim;

namespace {

using judge::Case;
using judge::Failure;
using judge::num;
using judge::RankRun;

// 1. The chunk order.
std::optional<Failure> check_chunks() {
  for (int C : {1, 2, 3, 4, 8}) {
    const SeqLayout L(C, 2 * C, Sharding::zigzag);
    for (int r = 0; r < C; ++r) {
      const std::vector<int> want = L.chunks(r), got = exercise::zigzag_chunks(r, C);
      if (got != want)
        return Failure{"C=" + std::to_string(C) + ", rank " + std::to_string(r), judge::ints(want), judge::ints(got),
                       "cut the sequence into 2C chunks; rank r owns one early chunk, r, and one late chunk, "
                       "2C-1-r, early first (lesson 5)"};
    }
  }
  return std::nullopt;
}

// Every rank gets its rows of q, k and v and runs the learner's forward: out and lse come back.
std::optional<Failure> run_case(const Case& c, const GlobalTensors& in, double scale, std::vector<RankRun>& runs) {
  const SeqLayout L(c.C, c.S, Sharding::zigzag);
  return judge::run_ranks(
      c, "the forward",
      [&](Communicator& comm, Device& dev) {
        const int r = comm.rank();
        const Buffer q = judge::upload_rows(dev, L, in.q, c.B, c.Nq, c.D, r, "q"),
                     k = judge::upload_rows(dev, L, in.k, c.B, c.Nkv, c.D, r, "k"),
                     v = judge::upload_rows(dev, L, in.v, c.B, c.Nkv, c.D, r, "v");
        const Buffer out = dev.alloc(q.dims(), DType::f64, Layout::bsnd, "out");
        const Buffer lse = dev.alloc({c.B, L.local_len(), c.Nq, 1}, DType::f64, Layout::bns, "lse");
        comm.recorder().begin_phase("forward");
        exercise::zigzag_ring_forward(comm, dev, L, q, k, v, out, lse, scale);
        comm.recorder().end_phase();
        return std::vector<std::vector<double>>{judge::download(dev, out), judge::download(dev, lse)};
      },
      runs);
}

// Rank r's out if every block's partial output were added with weight 1 instead of merged by its lse:
// sum over owners o of attention(Q_r, KV_o) normalised over KV_o's visible keys alone. [B, s, Nq, D]
std::vector<double> plain_sum(const Case& c, const GlobalTensors& in, double scale, int r) {
  const SeqLayout L(c.C, c.S, Sharding::zigzag);
  const std::int64_t s = L.local_len();
  const std::vector<double> q = shard(L, in.q, c.B, c.Nq * c.D, r);
  std::vector<double> sum(q.size(), 0.0);
  for (int o = 0; o < c.C; ++o) {
    const RefForward part =
        reference_forward(q, shard(L, in.k, c.B, c.Nkv * c.D, o), shard(L, in.v, c.B, c.Nkv * c.D, o),
                          {c.B, s, s, c.Nq, c.Nkv, c.D}, L.positions(r), L.positions(o), true, scale);
    for (std::size_t x = 0; x < sum.size(); ++x) sum[x] += part.out[x];  // a row that sees no key adds 0
  }
  return sum;
}

std::string hint_for_row(const Case& c, std::int64_t row, std::int64_t t) {
  if (c.sharpen != 1)
    return "the scores are " + num(c.sharpen) +
           " times sharper here: pass `scale` to every attention_forward "
           "and combine partials only with dev.merge, which works in log space";
  if (c.C == 1) return "with one rank, step 0 alone is causal attention of the rank's rows against its own keys";
  if (row < t)
    return "this row is in the early chunk: it sees the owners before this rank, in the half-kv steps (both "
           "query chunks x the owner's early chunk), each merged into out and lse with dev.merge";
  return "this row is in the late chunk: it sees every owner; check the half-q steps (the late query chunk x "
         "both of the owner's chunks) and that they merge into rows [t, 2t) of out and lse";
}

// 2a. Outputs and LSE against the reference.
std::optional<Failure> check_values(const Case& c, const GlobalTensors& in, double scale,
                                    const std::vector<RankRun>& runs, const RefForward& ref) {
  const SeqLayout L(c.C, c.S, Sharding::zigzag);
  const std::int64_t s = L.local_len(), t = L.chunk_len();
  for (int r = 0; r < c.C; ++r) {
    const Positions pos = L.positions(r);
    const std::vector<double>&out = runs[static_cast<std::size_t>(r)].tensors.at(0),
          &lse = runs[static_cast<std::size_t>(r)].tensors.at(1);
    if (const auto m = judge::first_mismatch(out, ref.out, L, r, c.B, c.Nq, c.D)) {
      const std::vector<double> plain = plain_sum(c, in, scale, r);
      if (c.C > 1 && within(m->got, plain[m->index], judge::rule()))
        return Failure{"out, rank " + std::to_string(r) + ", " + m->where, judge::expected(m->want),
                       num(m->got) + ", the plain sum of the blocks' partial outputs",
                       "each block's partial output is normalised over that block's keys only, so adding them "
                       "weights every block as 1 whatever its share of the row's softmax. Fold each tile in with "
                       "dev.merge(out rows, lse rows, tile out, tile lse): it weights the accumulator by "
                       "exp(lse_acc - lse) and the tile by exp(lse_tile - lse), lse = logaddexp(lse_acc, lse_tile) "
                       "(lesson 4)"};
      return Failure{"out, rank " + std::to_string(r) + ", " + m->where, judge::expected(m->want), num(m->got),
                     hint_for_row(c, m->row, t)};
    }
    for (std::int64_t b = 0; b < c.B; ++b)
      for (std::int64_t i = 0; i < s; ++i)
        for (std::int64_t h = 0; h < c.Nq; ++h) {
          const double got = lse[static_cast<std::size_t>((b * c.Nq + h) * s + i)];
          const double want = ref.lse[static_cast<std::size_t>((b * c.Nq + h) * c.S + pos[i])];
          if (!within(got, want, judge::rule()))
            return Failure{"lse, rank " + std::to_string(r) + ", batch " + std::to_string(b) + ", position " +
                               std::to_string(pos[i]) + ", head " + std::to_string(h),
                           judge::expected(want), num(got),
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
    if (auto f =
            judge::no_collectives(rec, who, "pass K/V with isend/irecv (or sendrecv) to rank r+1 and from rank r-1"))
      return f;
    if (cc.bytes_sent != (c.C - 1) * kv_bytes)
      return Failure{who + ", bytes sent", std::to_string((c.C - 1) * kv_bytes) + " (C-1 K/V blocks)",
                     std::to_string(cc.bytes_sent),
                     "send the K and V you hold (" + std::to_string(kv_bytes) +
                         " bytes) once per step except the "
                         "last: C-1 times in all"};
    if (auto f = judge::overlapped(rec, who)) return f;
  }
  const std::int64_t causal = bh * c.S * (c.S + 1) / 2;
  if (total != causal)
    return Failure{"visible pairs over all ranks", std::to_string(causal) + " (S(S+1)/2 x batch x heads)",
                   std::to_string(total), "every causal pair must be computed exactly once"};
  return std::nullopt;
}

std::optional<Failure> judge_case(const Case& c) {
  const GlobalTensors in = make_inputs(c.config());
  const double scale = c.scale();
  const Positions all = iota_positions(0, c.S);
  const RefForward ref = reference_forward(in.q, in.k, in.v, {c.B, c.S, c.S, c.Nq, c.Nkv, c.D}, all, all, true, scale);
  std::vector<RankRun> runs;
  if (auto f = run_case(c, in, scale, runs)) return f;
  if (auto f = check_values(c, in, scale, runs, ref)) return f;
  return check_counts(c, runs);
}

}  // namespace

int main() {
  std::vector<judge::NamedCheck> checks{{"chunk order, C = 1, 2, 3, 4, 8", check_chunks, std::nullopt}};
  for (const Case& c : judge::standard_cases()) checks.push_back({c.name(), [c] { return judge_case(c); }, c.config()});
  return judge::run_checks("zigzag_ring", CPSIM_JUDGED_FILE, checks, "zigzag ring attention, balanced step by step.");
}
