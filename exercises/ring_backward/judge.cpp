// The ring_backward judge: runs the learner's ring_attention_backward (exercise.hpp) on simulated ranks, each
// given the forward's saved results from the f64 reference, and checks it case by case. It stops at the first
// failing case and names it, with the expected and the actual value and a hint. Exit code: 0 all cases pass, 1 a
// case failed.
//
// Checks, per shape (C = 1 .. 8, GQA, batch 2, scores scaled x30), on C thread ranks:
//   a. dq, dk, dv of every rank's rows against the f64 reference, element by element under the f64 rule
//   b. no forward pass inside the backward: the saved out and lse are all it needs
//   c. communication: point to point with one neighbour only, no collectives, and C-1 K/V hops plus C-1 dK/dV
//      hops per rank: (C-1) x 2 x the bytes of K and V sent (dQ never moves)
//   d. no masked pairs computed, from the recorded attention calls: off the diagonal, every call's rows x keys
//      are all visible pairs (judge::no_masked_calls); the ranks' visible pairs add up to S(S+1)/2 x batch x heads
#include "exercises/common/judge.hpp"

#include <optional>
#include <set>

#include "exercises/ring_backward/exercise.hpp"
#include "sim/kernels/reference.hpp"

#ifndef CPSIM_JUDGED_FILE
#define CPSIM_JUDGED_FILE "the learner's file"
#endif

using namespace cpsim;

namespace {

using judge::Case;
using judge::Failure;
using judge::num;
using judge::RankRun;

// Every rank gets its rows of q, out, lse and dout, and rank r+1's rows of k and v, then runs the learner's code:
// dq, dk and dv come back.
std::optional<Failure> run_case(const Case& c, const GlobalTensors& in, const RefForward& fwd,
                                std::vector<RankRun>& runs) {
  const SeqLayout L(c.C, c.S, Sharding::zigzag);
  return judge::run_ranks(
      c, "the backward",
      [&](Communicator& comm, Device& dev) {
        const int r = comm.rank(), next = (r + 1) % c.C;
        const Buffer q = judge::upload_rows(dev, L, in.q, c.B, c.Nq, c.D, r, "q"),
                     k_last = judge::upload_rows(dev, L, in.k, c.B, c.Nkv, c.D, next, "k_last"),
                     v_last = judge::upload_rows(dev, L, in.v, c.B, c.Nkv, c.D, next, "v_last"),
                     out = judge::upload_rows(dev, L, fwd.out, c.B, c.Nq, c.D, r, "out"),
                     dout = judge::upload_rows(dev, L, in.dout, c.B, c.Nq, c.D, r, "dout");
        // lse: [B, Nq, s], this rank's positions of the reference's [B, Nq, S].
        std::vector<double> lse_rows;
        for (std::int64_t bh = 0; bh < c.B * c.Nq; ++bh)
          for (std::int64_t x : L.positions(r)) lse_rows.push_back(fwd.lse[static_cast<std::size_t>(bh * c.S + x)]);
        const Buffer lse = dev.alloc({c.B, L.local_len(), c.Nq, 1}, DType::f64, Layout::bns, "lse");
        dev.upload(lse, lse_rows.data());
        const Buffer dq = dev.alloc(q.dims(), DType::f64, Layout::bsnd, "dq");
        const Buffer dk = dev.alloc(k_last.dims(), DType::f64, Layout::bsnd, "dk");
        const Buffer dv = dev.alloc(k_last.dims(), DType::f64, Layout::bsnd, "dv");
        comm.recorder().begin_phase("backward");
        exercise::ring_attention_backward(comm, dev, L, q, k_last, v_last, out, lse, dout, dq, dk, dv, c.scale());
        comm.recorder().end_phase();
        return std::vector<std::vector<double>>{judge::download(dev, dq), judge::download(dev, dk),
                                                judge::download(dev, dv)};
      },
      runs);
}

std::string hint_dq(const Case& c) {
  if (c.sharpen != 1)
    return "the scores are " + num(c.sharpen) +
           " times sharper here: pass `scale` to every attention_backward; the saved lse already "
           "includes it (lesson 7, STEP 1)";
  if (c.C == 1)
    return "with one rank, one attention_backward of q against k_last, v_last (this rank's own K/V) "
           "writes all of dq, dk and dv";
  return "dQ of a row sums the gradients of every block its queries see, one block per step: add each step's "
         "attention_backward into dq, which never leaves the rank; at step i you hold the K/V of rank r+1+i "
         "(lesson 7, STEP 3)";
}

std::string hint_dkv(const Case& c) {
  if (c.sharpen != 1) return hint_dq(c);
  if (c.C == 1) return hint_dq(c);
  return "dK and dV of a key gather a piece from every rank whose queries see it. Keep an accumulator beside the "
         "K/V you hold, add each block's dk, dv into it, and pass both to rank r-1 (taking the next pair from "
         "r+1): after C-1 hops the accumulator of your own keys is home, complete; copy it into dk and dv "
         "(lesson 7, STEP 3)";
}

// a. The gradients against the reference.
std::optional<Failure> check_values(const Case& c, const std::vector<RankRun>& runs, const RefBackward& ref) {
  const SeqLayout L(c.C, c.S, Sharding::zigzag);
  for (int r = 0; r < c.C; ++r) {
    const auto& got = runs[static_cast<std::size_t>(r)].tensors;  // dq, dk, dv
    const std::string who = ", rank " + std::to_string(r) + ", ";
    if (const auto m = judge::first_mismatch(got.at(0), ref.dq, L, r, c.B, c.Nq, c.D))
      return Failure{"dq" + who + m->where, judge::expected(m->want), num(m->got), hint_dq(c)};
    if (const auto m = judge::first_mismatch(got.at(1), ref.dk, L, r, c.B, c.Nkv, c.D))
      return Failure{"dk" + who + m->where, judge::expected(m->want), num(m->got), hint_dkv(c)};
    if (const auto m = judge::first_mismatch(got.at(2), ref.dv, L, r, c.B, c.Nkv, c.D))
      return Failure{"dv" + who + m->where, judge::expected(m->want), num(m->got), hint_dkv(c)};
  }
  return std::nullopt;
}

// b, c. No forward pass; the messages.
std::optional<Failure> check_counts(const Case& c, const std::vector<RankRun>& runs) {
  const SeqLayout L(c.C, c.S, Sharding::zigzag);
  const std::int64_t kv_bytes = 2 * c.B * L.local_len() * c.Nkv * c.D * 8;  // K and V of one rank, f64
  const std::int64_t bh = c.B * c.Nq;
  std::int64_t total = 0;
  for (int r = 0; r < c.C; ++r) {
    const Recorder& rec = runs[static_cast<std::size_t>(r)].stats;
    const std::string who = "rank " + std::to_string(r);
    int forwards = 0;
    std::set<int> peers;
    for (const TraceEvent& e : rec.events()) {
      if (e.type == TraceEvent::Type::compute && e.name == "attention_forward") ++forwards;
      if (e.type == TraceEvent::Type::comm && e.bytes_sent > 0 && e.peer >= 0) peers.insert(e.peer);
    }
    if (forwards > 0)
      return Failure{who + ", attention_forward calls in the backward", "0", std::to_string(forwards),
                     "the backward needs no forward pass: with the saved final out and lse, attention_backward "
                     "recomputes p = exp(s - lse) and D = rowsum(dout * out) itself (lesson 7, STEP 1)"};
    if (auto f = judge::no_collectives(
            rec, who, "pass K/V and the accumulator with isend/irecv (or sendrecv) to rank r-1, from rank r+1"))
      return f;
    const CommCounts& cc = rec.comm_counts();
    if (peers.size() > 1)
      return Failure{who + ", ranks it sent to", "one (rank r-1)", judge::ints({peers.begin(), peers.end()}),
                     "every hop goes the same way round the ring: send to r-1, receive from r+1"};
    const std::int64_t want = (c.C - 1) * 2 * kv_bytes;
    if (cc.bytes_sent != want)
      return Failure{who + ", bytes sent", std::to_string(want) + " (C-1 K/V hops and C-1 dK/dV hops)",
                     std::to_string(cc.bytes_sent),
                     "K and V (" + std::to_string(kv_bytes) +
                         " bytes) and their accumulator (as many) each move "
                         "once per step except the last: start from k_last, v_last (rank r+1's), pass toward r-1, and "
                         "after C-1 hops both are home; dq is never sent (lesson 7, STEP 3)"};
    if (auto f = judge::no_masked_calls(
            rec, L.positions(r), bh, who,
            "a call over whole Q x whole K/V also computes the masked pairs. Off the diagonal pass only the "
            "visible sub-block (View::rows, with the matching rows of out, lse, dout, dq and the accumulator): "
            "owner o < r: both query chunks x o's early chunk; o > r: the late query chunk x both of o's chunks "
            "(lesson 5)"))
      return f;
    total += rec.total_work().pairs;
  }
  const std::int64_t causal = bh * c.S * (c.S + 1) / 2;
  if (total != causal)
    return Failure{"visible pairs over all ranks", std::to_string(causal) + " (S(S+1)/2 x batch x heads)",
                   std::to_string(total), "every causal pair's gradient must be computed exactly once"};
  return std::nullopt;
}

// The case as a run: its shape, forward and backward.
RunConfig case_config(const Case& c) {
  RunConfig cfg = c.config();
  cfg.backward = true;
  return cfg;
}

std::optional<Failure> judge_case(const Case& c) {
  const GlobalTensors in = make_inputs(case_config(c));
  const Positions all = iota_positions(0, c.S);
  const AttentionShape shape{c.B, c.S, c.S, c.Nq, c.Nkv, c.D};
  const RefForward fwd = reference_forward(in.q, in.k, in.v, shape, all, all, true, c.scale());
  const RefBackward ref = reference_backward(in.q, in.k, in.v, in.dout, shape, all, all, true, c.scale());
  std::vector<RankRun> runs;
  if (auto f = run_case(c, in, fwd, runs)) return f;
  if (auto f = check_values(c, runs, ref)) return f;
  return check_counts(c, runs);
}

}  // namespace

int main() {
  std::vector<judge::NamedCheck> checks;
  for (const Case& c : judge::standard_cases())
    checks.push_back({c.name(), [c] { return judge_case(c); }, case_config(c)});
  return judge::run_checks("ring_backward", CPSIM_JUDGED_FILE, checks,
                           "ring attention backward, dK/dV home in C-1 hops.");
}
