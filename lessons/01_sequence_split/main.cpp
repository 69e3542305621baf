// Lesson 1: what splits along the sequence with no communication, and what does not.
//
// A per-token block (RMS norm, then a two-layer MLP with a residual) is computed by each rank on its own
// rows and compared with the same block on the whole sequence: identical, with zero bytes exchanged.
// Causal attention computed the same way (each rank alone with its own keys) is wrong on every rank whose
// queries need earlier keys; the library's all-gather strategy fixes that with communication. Last, RoPE: the
// rotation applied to q and k before context-parallel attention must use each token's global position.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
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

// "[0, 2) and [14, 16)": the global positions of a rank's rows.
std::string chunk_positions(const SeqLayout& L, int rank) {
  std::string pos;
  for (const Span& sp : L.spans(rank))
    pos += (pos.empty() ? "[" : " and [") + std::to_string(sp.lo) + ", " + std::to_string(sp.hi) + ")";
  return pos;
}

double max_diff_on_rows(const std::vector<double>& got, const std::vector<double>& want, const SeqLayout& L, int rank,
                        std::int64_t row_elems) {
  double e = 0;
  for (const Span& sp : L.spans(rank))
    for (std::int64_t i = sp.lo * row_elems; i < sp.hi * row_elems; ++i)
      e = std::max(e, std::abs(got[static_cast<std::size_t>(i)] - want[static_cast<std::size_t>(i)]));
  return e;
}

// RoPE (rotary position embedding) on rows x: [B, rows, N, D], row i at position pos[i]. Each pair of dimensions
// (2j, 2j+1) of a head turns by the angle a = pos * 10000^(-2j/D):
//   (x_2j, x_2j+1) -> (x_2j cos a - x_2j+1 sin a,  x_2j sin a + x_2j+1 cos a)
// so that the score of query position p against key position p' depends on p - p' only.
void apply_rope(std::vector<double>& x, std::int64_t B, const Positions& pos, std::int64_t N, std::int64_t D) {
  const auto rows = static_cast<std::int64_t>(pos.size());
  for (std::int64_t b = 0; b < B; ++b)
    for (std::int64_t i = 0; i < rows; ++i)
      for (std::int64_t h = 0; h < N; ++h)
        for (std::int64_t j = 0; j < D / 2; ++j) {
          const double a = static_cast<double>(pos[static_cast<std::size_t>(i)]) *
                           std::pow(10000.0, -2.0 * static_cast<double>(j) / static_cast<double>(D));
          double* e = &x[static_cast<std::size_t>(((b * rows + i) * N + h) * D + 2 * j)];
          const double x0 = e[0], x1 = e[1];
          e[0] = x0 * std::cos(a) - x1 * std::sin(a);
          e[1] = x0 * std::sin(a) + x1 * std::cos(a);
        }
}

// The all-gather run of cfg with q and k rotated on each rank, at the positions `positions(rank)` gives, against
// attention over the whole sequence rotated at its true positions. The max error on each rank's rows.
std::vector<double> rope_errors(RunConfig cfg, const std::function<Positions(int)>& positions) {
  const Problem& p = cfg.problem;
  const SeqLayout L(p.ranks, p.seq, p.sharding);
  cfg.strategy = StrategyKind::all_gather;
  cfg.tamper = [&](int rank, std::vector<double>& q, std::vector<double>& k, std::vector<double>&) {
    apply_rope(q, p.batch, positions(rank), p.heads, p.head_dim);
    apply_rope(k, p.batch, positions(rank), p.kv_heads, p.head_dim);
  };
  const RunResult r = run(cfg);
  GlobalTensors in = make_inputs(cfg);
  const Positions all = iota_positions(0, p.seq);
  apply_rope(in.q, p.batch, all, p.heads, p.head_dim);
  apply_rope(in.k, p.batch, all, p.kv_heads, p.head_dim);
  const RefForward ref =
      reference_forward(in.q, in.k, in.v, {p.batch, p.seq, p.seq, p.heads, p.kv_heads, p.head_dim}, all, all, true);
  std::vector<double> err;
  for (int rank = 0; rank < p.ranks; ++rank)
    err.push_back(max_diff_on_rows(r.tensors.out, ref.out, L, rank, p.heads * p.head_dim));
  return err;
}

int run_lesson(int argc, char** argv) {
  lesson::Options o;
  o.mask_refusal =
      "lesson 1 measures the weight of earlier keys a rank lacks under the causal mask and takes no "
      "--docs or --window; documents and windows are taught in lesson 12 (lessons/12_documents)";
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
  require(p.head_dim % 2 == 0, "RoPE (STEP 5) turns pairs of dimensions, so --head-dim must be even",
          "use --head-dim " + std::to_string(p.head_dim + 1));
  const SeqLayout L(p.ranks, p.seq, p.sharding);
  const std::int64_t H = p.heads * p.head_dim;

  lesson::title("Lesson 1: what splits along the sequence, and what does not");
  lesson::shape(o.config.problem);
  lesson::say(
      "A Transformer layer is mostly per-token work: normalisation, projections, the MLP, the loss. "
      "Context parallelism cuts the sequence into shards, one per rank. Which of these computations "
      "can each rank do alone on its shard?");

  lesson::banner(1, "cut the sequence");
  std::cout << "S=" << p.seq << " tokens, hidden size H=" << H << ", " << sharding_name(p.sharding)
            << " sharding over C=" << p.ranks << " ranks:\n";
  for (int r = 0; r < p.ranks; ++r) {
    std::cout << "  rank " << r << " holds the rows of positions " << chunk_positions(L, r) << "\n";
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
    std::cout << "  " << lesson::left(std::to_string(oc.rank), 6) << lesson::left(std::to_string(L.local_len()), 6)
              << lesson::left(std::to_string(sent), 12) << (d == 0 ? "0 (bit for bit)" : lesson::fixed(d, 3)) << "\n";
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
  std::cout << "  rank  keys it has  keys it needs  weight it misses  max error of its output\n";
  std::vector<std::int64_t> missing;
  std::vector<double> errors;
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
    // The share of a row's softmax weight on keys the rank lacks: 1 - exp(lse_alone - lse_whole), its largest.
    double missed = 0;
    for (std::int64_t h = 0; h < p.heads; ++h)
      for (std::int64_t i = 0; i < s; ++i)
        missed = std::max(missed, 1 - std::exp(alone.lse[static_cast<std::size_t>(h * s + i)] -
                                               ref.lse[static_cast<std::size_t>(h * p.seq + pos[i])]));
    const std::int64_t needed = pos.back() + 1;  // a causal query sees every key up to itself
    std::cout << "  " << lesson::left(std::to_string(r), 6) << lesson::left(std::to_string(s), 13)
              << lesson::left(std::to_string(needed), 15) << lesson::left(lesson::fixed(100 * missed, 0) + "%", 18)
              << (err < 1e-12 ? "0 (right)" : lesson::fixed(err, 2) + " (wrong)") << "\n";
    lesson::expect((err < 1e-12) == (needed == s), "a rank alone is right exactly when it holds every key it needs");
    lesson::expect((err < 1e-12) == (missed < 1e-12), "a rank alone is wrong exactly when it misses softmax weight");
    missing.push_back(needed - s);
    errors.push_back(err);
  }
  std::cout << "  weight it misses: the largest share of a row's softmax weight that falls on\n"
               "  keys the rank lacks, 1 - exp(lse alone - lse whole)\n\n";
  lesson::say(
      "Only a rank whose queries need no key from elsewhere gets the right answer alone. Attention is "
      "the one operation that must communicate; every context-parallel strategy is a way of bringing "
      "each query the keys and values it needs.");
  // The size of the error follows the missing weight and the missing values, not the count of missing keys.
  for (int a = 0; a < p.ranks; ++a)
    for (int b = 0; b < p.ranks; ++b)
      if (missing[a] > 0 && missing[b] > missing[a] && errors[b] < errors[a]) {
        lesson::say("How wrong a rank is does not follow how many keys it lacks: rank " + std::to_string(b) +
                    " lacks " + std::to_string(missing[b]) + " keys, rank " + std::to_string(a) + " " +
                    std::to_string(missing[a]) + ", yet rank " + std::to_string(b) +
                    "'s error is the smaller. A row's error is w x (the mean of the values it saw - the mean of "
                    "those it missed), w the weight it misses and each mean weighted by the softmax: it depends on "
                    "the weight and on the values, not on the count.");
        a = b = p.ranks;  // one example is enough
      }

  lesson::banner(4, "the same attention with communication (K/V all-gather)");
  cfg.strategy = StrategyKind::all_gather;
  const RunResult r = lesson::run_and_step(cfg, o);
  const std::int64_t kv_all = 2 * p.seq * p.kv_heads * p.head_dim * 8;  // K and V of the whole sequence, f64
  for (const RankReport& rk : r.ranks) {
    lesson::expect(rk.stats.comm_counts().bytes_received == kv_all * (p.ranks - 1) / p.ranks,
                   "each rank receives the other ranks' K and V");
    std::cout << "  rank " << rk.rank << " received " << lesson::bytes(rk.stats.comm_counts().bytes_received)
              << " of K and V from the other ranks\n";
  }
  std::cout << "\n";

  lesson::banner(5, "RoPE: rotate with each token's global position");
  RunConfig zz = o.config;
  zz.problem.sharding = Sharding::zigzag;
  const SeqLayout Z(p.ranks, p.seq, Sharding::zigzag);
  lesson::say(
      "The blog post On Context Parallelism applies RoPE (rotary position embeddings) to q and k in its "
      "attention block, on each rank's own rows, just before context-parallel attention. RoPE turns each pair "
      "of dimensions (2j, 2j+1) of a head by the angle p x 10000^(-2j/D), p the token's position, so that a "
      "score depends on how far apart query and key are. A rank must use each row's global position: under "
      "zigzag sharding its local row i is not position i.");
  std::cout << "  zigzag, C=" << p.ranks << ": rank 0's local rows 0.." << Z.local_len() - 1 << " are positions "
            << chunk_positions(Z, 0) << "\n\n";
  const auto local = rope_errors(zz, [&](int) { return iota_positions(0, Z.local_len()); });
  const auto global = rope_errors(zz, [&](int rank) { return Z.positions(rank); });
  const auto rope_lines = [&](const std::string& label, const std::vector<double>& err) {
    std::vector<std::string> entries;
    for (int rank = 0; rank < p.ranks; ++rank) {
      char buf[32];
      std::snprintf(buf, sizeof buf, "%.1e", err[static_cast<std::size_t>(rank)]);
      entries.push_back("rank " + std::to_string(rank) + ": " +
                        (err[static_cast<std::size_t>(rank)] <= 1e-12 ? "CORRECT" : std::string("ERROR ") + buf));
    }
    lesson::verdict_lines(label, entries);
  };
  std::cout << "The all-gather on rotated q and k, against the whole sequence rotated at the\n"
               "true positions:\n";
  rope_lines("local pos.", local);
  rope_lines("global pos.", global);
  std::cout << "\n";
  for (int rank = 0; rank < p.ranks; ++rank) {
    lesson::expect(global[static_cast<std::size_t>(rank)] <= 1e-12, "RoPE at global positions matches the reference");
    lesson::expect((local[static_cast<std::size_t>(rank)] > 1e-12) == (p.ranks > 1),
                   "RoPE at local positions is wrong on every rank when there are several");
  }
  lesson::say(p.ranks > 1 ? "With local positions every rank is wrong: the rows of all ranks are rotated as if "
                            "they sat at the same few positions 0.." +
                                std::to_string(Z.local_len() - 1) +
                                ", so query-key distances come out wrong. With global positions (the layout's "
                                "positions of each row, sliced the zigzag way) every rank matches. The same holds "
                                "for every strategy: the rotation happens before any of them runs."
                          : "With one rank local and global positions are the same; try --ranks 4.");

  std::cout << "Per-token block on shards, against the whole sequence:\n";
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
