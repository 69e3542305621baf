// Lesson 1: what splits along the sequence with no communication, and what does not.
//
// A per-token block (RMS norm, then a two-layer MLP with a residual) is computed by each rank on its own
// rows and compared with the same block on the whole sequence: identical, with zero bytes exchanged.
// Causal attention computed the same way (each rank alone with its own keys) is wrong on every rank whose
// queries need earlier keys; the library's all-gather strategy fixes that with communication.
#include <algorithm>
#include <cmath>
#include <iostream>

#include "lessons/common/lesson.hpp"
#include "sim/core/bytes.hpp"
#include "sim/core/random.hpp"
#include "sim/kernels/check.hpp"
#include "sim/kernels/cpu_device.hpp"
#include "sim/kernels/reference.hpp"
#include "sim/layout/layout.hpp"

using namespace cpsim;

namespace {

// Streams of the lesson's own seeded tensors (the run's q, k, v use streams 0-3).
constexpr std::uint64_t kStreamX = 20, kStreamW1 = 21, kStreamW2 = 22;

// y = x + W2 relu(W1 rmsnorm(x)) for each row of x: [rows, H]; W1: [F, H], W2: [H, F]. Each row on its own.
std::vector<double> per_token_block(const std::vector<double>& x, std::int64_t H) {
  const std::int64_t F = 2 * H, rows = static_cast<std::int64_t>(x.size()) / H;
  const auto w1 = normals(7, kStreamW1, static_cast<std::size_t>(F * H));
  const auto w2 = normals(7, kStreamW2, static_cast<std::size_t>(H * F));
  std::vector<double> y(x.size()), h(static_cast<std::size_t>(F)), n(static_cast<std::size_t>(H));
  for (std::int64_t r = 0; r < rows; ++r) {
    const double* xr = &x[static_cast<std::size_t>(r * H)];
    double ms = 0;
    for (std::int64_t i = 0; i < H; ++i) ms += xr[i] * xr[i] / static_cast<double>(H);
    for (std::int64_t i = 0; i < H; ++i) n[i] = xr[i] / std::sqrt(ms + 1e-6);
    for (std::int64_t f = 0; f < F; ++f) {
      double a = 0;
      for (std::int64_t i = 0; i < H; ++i) a += w1[static_cast<std::size_t>(f * H + i)] * n[i];
      h[f] = std::max(a, 0.0);
    }
    for (std::int64_t i = 0; i < H; ++i) {
      double a = xr[i];
      for (std::int64_t f = 0; f < F; ++f) a += w2[static_cast<std::size_t>(i * F + f)] * h[f];
      y[static_cast<std::size_t>(r * H + i)] = a;
    }
  }
  return y;
}

double max_diff_on_rows(const std::vector<double>& got, const std::vector<double>& want, const SeqLayout& L, int rank,
                        std::int64_t row_elems) {
  double e = 0;
  for (const Span& sp : L.spans(rank))
    for (std::int64_t i = sp.lo * row_elems; i < sp.hi * row_elems; ++i)
      e = std::max(e, std::abs(got[static_cast<std::size_t>(i)] - want[static_cast<std::size_t>(i)]));
  return e;
}

int run_lesson(int argc, char** argv) {
  lesson::Options o;
  Problem& p = o.config.problem;
  p.ranks = 4;
  p.seq = 16;
  p.heads = p.kv_heads = 2;
  p.head_dim = 8;
  p.sharding = Sharding::contiguous;
  if (!lesson::parse_options(argc, argv, "Lesson 1: what splits along the sequence",
                             lesson::kRanks | lesson::kSeq | lesson::kHeads | lesson::kHeadDim | lesson::kSharding |
                                 lesson::kBackend | lesson::kStep,
                             o))
    return 0;
  p.kv_heads = p.heads;
  validate(p, StrategyKind::all_gather);
  const SeqLayout L(p.ranks, p.seq, p.sharding);
  const std::int64_t H = p.heads * p.head_dim;

  lesson::title("Lesson 1: what splits along the sequence, and what does not");
  lesson::say(
      "A Transformer layer is mostly per-token work: normalisation, projections, the MLP, the loss. "
      "Context parallelism cuts the sequence into shards, one per rank. Which of these computations "
      "can each rank do alone on its shard?");

  lesson::banner(1, "cut the sequence");
  std::cout << "S=" << p.seq << " tokens, hidden size H=" << H << ", " << sharding_name(p.sharding)
            << " sharding over C=" << p.ranks << " ranks:\n";
  for (int r = 0; r < p.ranks; ++r) {
    std::string pos;
    for (const Span& sp : L.spans(r))
      pos += (pos.empty() ? "[" : " and [") + std::to_string(sp.lo) + ", " + std::to_string(sp.hi) + ")";
    std::cout << "  rank " << r << " holds the rows of positions " << pos << "\n";
  }
  std::cout << "\n";

  lesson::banner(2, "a per-token block on each rank, alone");
  lesson::say(
      "Each rank applies y = x + W2 relu(W1 rmsnorm(x)) to its own rows. Every output row depends only "
      "on the same input row, so nothing needs to move.");
  const auto x = normals(7, kStreamX, static_cast<std::size_t>(p.seq * H));
  const auto whole = per_token_block(x, H);
  LaunchOptions lo;
  lo.ranks = p.ranks;
  lo.backend = o.config.backend;
  auto outcomes = launch(lo, [&](Communicator& comm) {
    ByteWriter w;
    w.put(per_token_block(shard(L, x, 1, H, comm.rank()), H));  // this rank's rows only
    return w.take();
  });
  std::vector<std::vector<double>> locals;
  for (const auto& oc : outcomes) {
    ByteReader rd(oc.result);
    locals.emplace_back();
    rd.get(locals.back());
  }
  const auto pieced = unshard(L, locals, 1, H);
  std::cout << "  rank  rows  bytes sent  max |y_rank - y_whole| on its rows\n";
  bool per_token_ok = true;
  for (const auto& oc : outcomes) {
    const double d = max_diff_on_rows(pieced, whole, L, oc.rank, H);
    const std::int64_t sent = oc.stats.comm_counts().bytes_sent;
    per_token_ok = per_token_ok && d == 0 && sent == 0;
    std::cout << "  " << lesson::pad(std::to_string(oc.rank), 6) << lesson::pad(std::to_string(L.local_len()), 6)
              << lesson::pad(std::to_string(sent), 12) << (d == 0 ? "0 (bit for bit)" : lesson::fixed(d, 3)) << "\n";
  }
  lesson::expect(per_token_ok, "the per-token block on shards equals the block on the whole, with no bytes sent");
  std::cout << "\n";

  lesson::banner(3, "causal attention on each rank, alone");
  lesson::say(
      "Attention is different: the query at position i reads the keys and values of every position "
      "j <= i. Let each rank attend with only the keys it holds, and compare with attention over the "
      "whole sequence.");
  RunConfig cfg = o.config;
  const GlobalTensors in = make_inputs(cfg);
  const AttentionShape shape{1, p.seq, p.seq, p.heads, p.kv_heads, p.head_dim};
  const Positions all = iota_positions(0, p.seq);
  const RefForward ref = reference_forward(in.q, in.k, in.v, shape, all, all, true);
  std::cout << "  rank  keys it has  keys it needs  max error of its output\n";
  for (int r = 0; r < p.ranks; ++r) {
    const Positions pos = L.positions(r);
    const std::int64_t s = L.local_len();
    const AttentionShape local{1, s, s, p.heads, p.kv_heads, p.head_dim};
    const auto q = shard(L, in.q, 1, H, r), k = shard(L, in.k, 1, H, r), v = shard(L, in.v, 1, H, r);
    const RefForward alone = reference_forward(q, k, v, local, pos, pos, true);
    std::vector<std::vector<double>> rows(static_cast<std::size_t>(p.ranks),
                                          std::vector<double>(static_cast<std::size_t>(s * H)));
    rows[static_cast<std::size_t>(r)] = alone.out;
    const double err = max_diff_on_rows(unshard(L, rows, 1, H), ref.out, L, r, H);
    const std::int64_t needed = pos.back() + 1;  // a causal query sees every key up to itself
    std::cout << "  " << lesson::pad(std::to_string(r), 6) << lesson::pad(std::to_string(s), 13)
              << lesson::pad(std::to_string(needed), 15)
              << (err < 1e-12 ? "0 (right)" : lesson::fixed(err, 2) + " (wrong)") << "\n";
    lesson::expect((err < 1e-12) == (needed == s), "a rank alone is right exactly when it holds every key it needs");
  }
  std::cout << "\n";
  lesson::say(
      "Only a rank whose queries need no key from elsewhere gets the right answer alone. Attention is "
      "the one operation that must communicate; every context-parallel strategy is a way of bringing "
      "each query the keys and values it needs.");

  lesson::banner(4, "the same attention with communication (K/V all-gather)");
  cfg.strategy = StrategyKind::all_gather;
  const RunResult r = lesson::run_and_step(cfg, o);
  for (const RankReport& rk : r.ranks)
    std::cout << "  rank " << rk.rank << " received " << lesson::bytes(rk.stats.comm_counts().bytes_received)
              << " of K and V from the other ranks\n";
  std::cout << "\nPer-token block on shards, against the whole sequence:\n";
  for (const auto& oc : outcomes)
    std::cout << "rank " << oc.rank << ": "
              << (max_diff_on_rows(pieced, whole, L, oc.rank, H) == 0 ? "CORRECT" : "ERROR") << "\n";
  std::cout << "Attention with the all-gather, against the single-process reference:\n";
  return lesson::verdicts(r) ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  return lesson::guarded("lesson 01_sequence_split", [&] { return run_lesson(argc, argv); });
}
