// Lesson 4: merging partial attention results by their log-sum-exp.
//
// One query and four keys, with scores chosen by hand (D = 1, q = 1, k_j = s_j, scale 1): the device computes
// attention over keys {0, 1} and {2, 3} separately and merges them (Device::merge); the lesson recomputes every
// number of the merge by hand beside it, shows the two scale factors summing to 1, the -inf case, and why the
// merge is written as max + log1p(exp(min - max)). It ends with a ring run, which merges this way at every step,
// and follows one query row of it step by step: its out and lse after each merge, converging to the reference.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <iostream>

#include "lessons/common/lesson.hpp"
#include "sim/kernels/cpu_device.hpp"
#include "sim/kernels/reference.hpp"

using namespace cpsim;

namespace {

struct Partial {
  double out, lse;
};

// Attention of the one query over the given keys, on the device: out and lse of a [1, 1, 1, 1] block.
class OneQuery {
 public:
  OneQuery(const std::vector<double>& scores, const std::vector<double>& values)
      : dev_(rec_), scores_(scores), values_(values) {}

  // Keys [first, first + n); the query sits at position q_pos (causal: keys at positions <= q_pos are seen).
  Partial attend(std::int64_t first, std::int64_t n, std::int64_t q_pos = 100) {
    const Buffer q = buf({1, 1, 1, 1}, {1.0}), k = buf({1, n, 1, 1}, slice(scores_, first, n)),
                 v = buf({1, n, 1, 1}, slice(values_, first, n));
    const Buffer out = dev_.alloc({1, 1, 1, 1}, DType::f64, Layout::bsnd, "out");
    const Buffer lse = dev_.alloc({1, 1, 1, 1}, DType::f64, Layout::bns, "lse");
    dev_.attention_forward(View(q), {q_pos}, View(k), View(v), iota_positions(first, n), View(out), View(lse),
                           AttentionOptions{true, 1.0, std::nullopt});
    return {get(out), get(lse)};
  }

  // Device::merge of two partials held in fresh buffers.
  Partial merge(Partial a, Partial b) {
    const Buffer oa = buf({1, 1, 1, 1}, {a.out}), ob = buf({1, 1, 1, 1}, {b.out});
    const Buffer la = lse_buf(a.lse), lb = lse_buf(b.lse);
    dev_.merge(View(oa), View(la), View(ob), View(lb));
    return {get(oa), get(la)};
  }

 private:
  static std::vector<double> slice(const std::vector<double>& x, std::int64_t first, std::int64_t n) {
    return {x.begin() + first, x.begin() + first + n};
  }
  Buffer buf(Dims d, const std::vector<double>& host) {
    Buffer b = dev_.alloc(d, DType::f64, Layout::bsnd, "x");
    dev_.upload(b, host.data());
    return b;
  }
  Buffer lse_buf(double x) {
    Buffer b = dev_.alloc({1, 1, 1, 1}, DType::f64, Layout::bns, "lse");
    dev_.upload(b, &x);
    return b;
  }
  double get(const Buffer& b) {
    double x = 0;
    dev_.download(b, &x);
    return x;
  }

  Recorder rec_;
  CpuDevice dev_;
  std::vector<double> scores_, values_;
};

// One row of a ring run replayed step by step: at step i its rank holds the K/V of owner o = r - i; the row's
// attention over the keys of o it can see is merged into (out, lse) by Device::merge, as the ring merges it.
struct RowStep {
  int owner;
  std::int64_t keys;            // keys of the owner the row sees
  double block_lse, lse, out0;  // the block's lse; the row's lse and out[0] after the merge
  double weight_seen;           // exp(lse - lse of the whole row): its share of the total softmax weight so far
  double max_err;               // max over d of |out_d - reference out_d|
};

std::vector<RowStep> trace_row(const Problem& p, const GlobalTensors& in, const RefForward& ref, std::int64_t pos,
                               std::int64_t head) {
  const SeqLayout L(p.ranks, p.seq, p.sharding);
  const int r = L.owner(pos), C = p.ranks;
  const std::int64_t D = p.head_dim, g = head / (p.heads / p.kv_heads);
  Recorder rec;
  CpuDevice dev(rec);
  auto upload = [&](std::int64_t rows, const std::vector<double>& host) {
    Buffer b = dev.alloc({1, rows, 1, D}, DType::f64, Layout::bsnd, "x");
    dev.upload(b, host.data());
    return b;
  };
  // q: [1, 1, 1, D], the row's query for this head; out, lse: its accumulators.
  std::vector<double> qh(&in.q[static_cast<std::size_t>((pos * p.heads + head) * D)],
                         &in.q[static_cast<std::size_t>((pos * p.heads + head + 1) * D)]);
  const Buffer q = upload(1, qh);
  const Buffer out = dev.alloc({1, 1, 1, D}, DType::f64, Layout::bsnd, "out"),
               tile = dev.alloc({1, 1, 1, D}, DType::f64, Layout::bsnd, "tile");
  const Buffer lse = dev.alloc({1, 1, 1, 1}, DType::f64, Layout::bns, "lse"),
               tile_lse = dev.alloc({1, 1, 1, 1}, DType::f64, Layout::bns, "tile_lse");
  dev.fill(View(lse), -INFINITY);
  const double ref_lse = ref.lse[static_cast<std::size_t>(head * p.seq + pos)];
  std::vector<RowStep> steps;
  for (int i = 0; i < C; ++i) {
    const int owner = ((r - i) % C + C) % C;
    Positions keys;  // the owner's positions this row sees (causal)
    for (std::int64_t x : L.positions(owner))
      if (x <= pos) keys.append(Positions::range(x, 1));
    std::vector<double> kh, vh;
    for (std::int64_t x : keys)
      for (std::int64_t d = 0; d < D; ++d) {
        kh.push_back(in.k[static_cast<std::size_t>((x * p.kv_heads + g) * D + d)]);
        vh.push_back(in.v[static_cast<std::size_t>((x * p.kv_heads + g) * D + d)]);
      }
    RowStep st{owner, static_cast<std::int64_t>(keys.size()), -INFINITY, 0, 0, 0, 0};
    if (!keys.empty()) {
      const auto n = static_cast<std::int64_t>(keys.size());
      dev.attention_forward(View(q), {pos}, View(upload(n, kh)), View(upload(n, vh)), keys, View(tile), View(tile_lse));
      dev.download(tile_lse, &st.block_lse);
      dev.merge(View(out), View(lse), View(tile), View(tile_lse));
    }
    std::vector<double> o(static_cast<std::size_t>(D));
    dev.download(out, o.data());
    dev.download(lse, &st.lse);
    st.out0 = o[0];
    st.weight_seen = std::exp(st.lse - ref_lse);
    for (std::int64_t d = 0; d < D; ++d)
      st.max_err = std::max(st.max_err, std::abs(o[static_cast<std::size_t>(d)] -
                                                 ref.out[static_cast<std::size_t>((pos * p.heads + head) * D + d)]));
    steps.push_back(st);
  }
  return steps;
}

int run_lesson(int argc, char** argv) {
  lesson::Options o;
  o.mask_refusal =
      "lesson 4 replays one row's merge under the causal mask and takes no --docs or --window; `cpsim "
      "run --docs ... --check` merges under a mask, and lesson 12 (lessons/12_documents) teaches masks";
  Problem& p = o.config.problem;
  p.ranks = 4;
  p.seq = 16;
  p.heads = p.kv_heads = 2;
  p.head_dim = 8;
  if (!lesson::parse_options(argc, argv, "Lesson 4: the LSE merge", lesson::kShape | lesson::kSharding | lesson::kStep,
                             o))
    return 0;
  o.config.strategy = StrategyKind::ring;
  validate(p, StrategyKind::ring);

  lesson::title("Lesson 4: merging partial attention by its log-sum-exp");
  lesson::shape(o.config.problem, "the worked example below is one query and four keys");
  lesson::say(
      "A ring step gives each query the attention over one block of keys only: an output normalised "
      "within that block, and the block's log-sum-exp lse = log(sum_j exp(s_j)), the log of its total "
      "softmax weight. Two such partials merge exactly:\n"
      "  lse = logaddexp(lse_a, lse_b) = log(exp(lse_a) + exp(lse_b))\n"
      "  out = exp(lse_a - lse) out_a + exp(lse_b - lse) out_b");

  lesson::banner(1, "a worked example: one query, four keys");
  const std::vector<double> s{1.0, 2.0, 0.5, 3.0}, v{10, 20, 30, 40};
  OneQuery dev(s, v);
  std::cout << "  scores s = [1, 2, 0.5, 3], values v = [10, 20, 30, 40]\n"
               "  block a = keys 0 and 1, block b = keys 2 and 3\n\n";
  const Partial a = dev.attend(0, 2), b = dev.attend(2, 2), whole = dev.attend(0, 4);
  const double lse_a = std::log(std::exp(1.0) + std::exp(2.0)), lse_b = std::log(std::exp(0.5) + std::exp(3.0));
  const double out_a = (std::exp(1.0) * 10 + std::exp(2.0) * 20) / std::exp(lse_a);
  const double out_b = (std::exp(0.5) * 30 + std::exp(3.0) * 40) / std::exp(lse_b);
  std::cout << "                          by hand     from the device\n";
  std::cout << "  lse_a = log(e^1 + e^2)  " << lesson::left(lesson::fixed(lse_a, 4), 12) << lesson::fixed(a.lse, 4)
            << "\n";
  std::cout << "  out_a                   " << lesson::left(lesson::fixed(out_a, 4), 12) << lesson::fixed(a.out, 4)
            << "\n";
  std::cout << "  lse_b = log(e^.5 + e^3) " << lesson::left(lesson::fixed(lse_b, 4), 12) << lesson::fixed(b.lse, 4)
            << "\n";
  std::cout << "  out_b                   " << lesson::left(lesson::fixed(out_b, 4), 12) << lesson::fixed(b.out, 4)
            << "\n\n";
  lesson::expect(std::abs(lse_a - a.lse) < 1e-12 && std::abs(out_b - b.out) < 1e-12, "the device agrees by hand");

  lesson::banner(2, "merge them");
  const double lse = std::log(std::exp(lse_a) + std::exp(lse_b));
  const double wa = std::exp(lse_a - lse), wb = std::exp(lse_b - lse);
  const Partial m = dev.merge(a, b);
  std::cout << "  lse = logaddexp(lse_a, lse_b)   = " << lesson::fixed(lse, 4) << "\n";
  std::cout << "  scale_a = exp(lse_a - lse)      = " << lesson::fixed(wa, 4) << "   (block a's share of the weight)\n";
  std::cout << "  scale_b = exp(lse_b - lse)      = " << lesson::fixed(wb, 4) << "\n";
  std::cout << "  scale_a + scale_b               = " << lesson::fixed(wa + wb, 4) << "\n";
  std::cout << "  out = scale_a out_a + scale_b out_b = " << lesson::fixed(wa * out_a + wb * out_b, 4) << "\n\n";
  std::cout << "  Device::merge gives      out " << lesson::fixed(m.out, 4) << ", lse " << lesson::fixed(m.lse, 4)
            << "\n";
  std::cout << "  attention over all four: out " << lesson::fixed(whole.out, 4) << ", lse "
            << lesson::fixed(whole.lse, 4) << "\n\n";
  lesson::expect(std::abs(wa + wb - 1) < 1e-12, "the scale factors sum to 1");
  lesson::expect(std::abs(m.out - whole.out) < 1e-12 && std::abs(m.lse - whole.lse) < 1e-12,
                 "the merged partials equal attention over all keys");
  lesson::expect(wb > wa, "block b, with the strongest match, gets the larger share");
  lesson::say(
      "The scales are each block's share of the total softmax weight, so they sum to 1: block b holds "
      "the strongest match (s = 3) and gets the larger share.");

  lesson::banner(3, "a block with no visible key: lse = -inf");
  lesson::say(
      "Under a causal mask a block can hold only keys later than the query. Its attention is empty: "
      "out = 0, lse = log(0) = -inf. Merging it must leave the other partial unchanged.");
  const Partial none = dev.attend(2, 2, /*q_pos=*/1);  // keys at positions 2, 3; the query at position 1
  const Partial m1 = dev.merge(a, none), m2 = dev.merge(none, none);
  std::cout << "  empty block:           out " << lesson::fixed(none.out, 4) << ", lse " << lesson::fixed(none.lse, 4)
            << "\n";
  std::cout << "  merge(a, empty):       out " << lesson::fixed(m1.out, 4) << ", lse " << lesson::fixed(m1.lse, 4)
            << "\n"
            << "                         (scale_a = 1, scale_empty = exp(-inf) = 0)\n";
  std::cout << "  merge(empty, empty):   out " << lesson::fixed(m2.out, 4) << ", lse " << lesson::fixed(m2.lse, 4)
            << "\n"
            << "                         (no NaN: the merge never computes -inf - -inf)\n\n";
  lesson::expect(none.lse == -INFINITY && m1.out == a.out && m1.lse == a.lse && m2.out == 0 && m2.lse == -INFINITY,
                 "the -inf cases");

  lesson::banner(4, "why logaddexp is written as max + log1p(exp(min - max))");
  const double big_a = 800, big_b = 799;
  const double naive = std::log(std::exp(big_a) + std::exp(big_b));
  const Partial big = dev.merge({1.0, big_a}, {2.0, big_b});
  std::cout << "  lse_a = 800, lse_b = 799 (large scores, e.g. a sharp softmax):\n";
  std::cout << "  log(exp(800) + exp(799))     = " << lesson::fixed(naive, 4) << "   (exp(800) overflows a double)\n";
  std::cout << "  800 + log1p(exp(799 - 800))  = " << lesson::fixed(big_a + std::log1p(std::exp(big_b - big_a)), 4)
            << "\n";
  std::cout << "  Device::merge                = " << lesson::fixed(big.lse, 4) << "\n\n";
  lesson::expect(std::isinf(naive) && std::abs(big.lse - 800.3133) < 1e-4, "the stable form survives large scores");

  lesson::banner(5, "the ring uses this merge at every step");
  const RunResult r = lesson::run_and_step(o.config, o);
  const std::int64_t pos = p.seq - 1, head = 0;  // the last query sees a block of every owner
  const SeqLayout L(p.ranks, p.seq, p.sharding);
  const GlobalTensors in = make_inputs(o.config);
  const Positions all = iota_positions(0, p.seq);
  const RefForward ref =
      reference_forward(in.q, in.k, in.v, {p.batch, p.seq, p.seq, p.heads, p.kv_heads, p.head_dim}, all, all, true);
  lesson::say("Follow one query row through the ring: position " + std::to_string(pos) + ", head " +
              std::to_string(head) + ", owned by rank " + std::to_string(L.owner(pos)) +
              ". After each step its rank has merged one more block of keys into the row's (out, lse):");
  const auto steps = trace_row(p, in, ref, pos, head);
  std::cout << "  step  K/V of  keys  block lse  lse      weight seen  out[0]     |out - ref|\n";
  double last_weight = 0;
  for (std::size_t i = 0; i < steps.size(); ++i) {
    const RowStep& st = steps[i];
    char err[32];  // below 1e-12 only rounding is left, and its last digits differ between builds
    std::snprintf(err, sizeof err, st.max_err < 1e-12 ? "< 1e-12" : "%.1e", st.max_err);
    std::cout << "  " << lesson::left(std::to_string(i), 6) << lesson::left("rank " + std::to_string(st.owner), 8)
              << lesson::left(std::to_string(st.keys), 6) << lesson::left(lesson::fixed(st.block_lse, 4), 11)
              << lesson::left(lesson::fixed(st.lse, 4), 9) << lesson::left(lesson::fixed(st.weight_seen, 4), 13)
              << lesson::left(lesson::fixed(st.out0, 4), 11) << err << "\n";
    lesson::expect(st.weight_seen >= last_weight - 1e-12, "the weight seen only grows");
    last_weight = st.weight_seen;
  }
  const RowStep& end = steps.back();
  const double ring_out0 = r.tensors.out[static_cast<std::size_t>((pos * p.heads + head) * p.head_dim)];
  const double ref_lse = ref.lse[static_cast<std::size_t>(head * p.seq + pos)];
  std::cout << "  reference (attention over all " << pos + 1 << " keys): lse " << lesson::fixed(ref_lse, 4)
            << ", out[0] " << lesson::fixed(ref.out[static_cast<std::size_t>((pos * p.heads + head) * p.head_dim)], 4)
            << "\n  the library's ring run, same row: out[0] " << lesson::fixed(ring_out0, 4) << "\n\n";
  lesson::expect(std::abs(end.lse - ref_lse) < 1e-12 && end.max_err < 1e-12 && std::abs(end.weight_seen - 1) < 1e-12,
                 "after the last step the row equals the reference");
  lesson::expect(std::abs(ring_out0 - end.out0) < 1e-12, "the ring run agrees with the replay");
  bool falling = true;
  for (std::size_t i = 1; i < steps.size(); ++i) falling = falling && steps[i].max_err < steps[i - 1].max_err;
  lesson::say(
      "The lse only grows: each block adds its softmax weight, and the share of the row's total weight seen "
      "so far, exp(lse - lse of the whole row), climbs to 1. " +
      std::string(falling ? "Here the output's error falls at every step, "
                          : "The output's error need not fall at every step (a block can pull the row away "
                            "from where the remaining keys will take it), ") +
      "and after the last step the row equals attention over every key (to rounding), as in the library's run.");
  std::cout << "Ring attention, " << p.ranks << " ranks, against the single-process reference:\n";
  return lesson::verdicts(r) ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  return lesson::guarded("lesson 04_lse_merge", [&] { return run_lesson(argc, argv); });
}
