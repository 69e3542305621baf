// The published points every prediction is measured against (published.hpp): each within 15% of the model, the
// nearest one found by shape, and its error the model's own, computed afresh; and the published tables held as data
// (data/published/*.json), each row against the model.
#include <doctest/doctest.h>

#include <map>
#include <nlohmann/json.hpp>
#include <tuple>
#include <utility>

#include "relative_error.hpp"
#include "sim/model/cost.hpp"
#include "sim/model/predict.hpp"
#include "sim/model/published.hpp"

using namespace cpsim;
using namespace cpsim::model;

TEST_CASE("every published point is predicted within the bound it is held to; 15% but where docs say why") {
  // ring-flash-attention's Llama3-8B rows, the FlashAttention-3 sweeps, the 5-head table's CP rows, USP's table,
  // MagiAttention's H100 benchmark (4 baselines x 2 masks x 4 sizes, forward and forward+backward)
  REQUIRE(published_points().size() == 12 + 8 * 6 + 12 + 90 + 64);
  int at_15 = 0, wider = 0, unheld = 0;
  for (const PublishedPoint& pt : published_points()) {
    CAPTURE(pt.label);
    CAPTURE(pt.machine);
    if (!pt.bound) {  // USP's runs below 16K tokens per GPU: the model fast, 1.9x and more
      CHECK(published_error(pt) >= 0.9);
      ++unheld;
      continue;
    }
    CHECK(std::abs(published_error(pt)) <= *pt.bound);
    ++(*pt.bound <= 0.15 ? at_15 : wider);
  }
  CHECK(at_15 == 12 + 8 * 6 + 10 + 48);
  // the A100's two 5-head rows at 17%; USP's from 16K tokens per GPU at 2x; Transformer Engine's ring in
  // MagiAttention's benchmark at 50%
  CHECK(wider == 2 + 63 + 16);
  CHECK(unheld == 27);
}

TEST_CASE("a published shape's nearest point is itself, with the error measured there") {
  const PublishedPoint& zigzag = published_points().front();
  const Nearest n = nearest_published(zigzag.problem, zigzag.machine, zigzag.backward);
  CHECK(n.distance == 0);
  CHECK(n.how_far == "the same shape and machine");
  const Cell c = predict_cell(zigzag.problem, {StrategyKind::ring, 0}, load_machine(zigzag.machine), zigzag.backward, 1);
  CHECK(n.error == doctest::Approx(1e6 / c.time_us(zigzag.backward) / zigzag.published - 1));
}

TEST_CASE("a shape away from every published point says how far, in tokens per rank, heads and machine") {
  Problem p = ring_flash_attention_problem(8);
  p.seq = 8 * 2048;
  const Nearest n = nearest_published(p, "a100-sxm-8", true);
  REQUIRE(n.point != nullptr);
  CHECK(n.point->label == "ring-flash-attention zigzag ring, forward+backward");
  CHECK(n.point->machine == "a100-sxm-8");
  CHECK(n.distance == doctest::Approx(2));
  CHECK(n.how_far == "S/C 2K against 8K (4x fewer)");
  CHECK(n.error == doctest::Approx(published_error(*n.point)));
  const Nearest other = nearest_published(p, "h100-sxm-8", true);
  CHECK(other.distance >= n.distance);  // another machine, or a one-GPU rate, is no nearer
  p.causal = false;  // every A100 run published is causal: the same point, half a step farther, and said so
  const Nearest full = nearest_published(p, "a100-sxm-8", true);
  CHECK(full.point == n.point);
  CHECK(full.distance == doctest::Approx(2.5));
  CHECK(full.how_far == "S/C 2K against 8K (4x fewer), causal there");
}

TEST_CASE("a multi-node H100 shape is told MagiAttention's run with its mask, strategy and nearest ranks") {
  nlohmann::json row = {{"gpus", 32}, {"mask", "causal"}};
  Problem p = magi_problem(row);
  const StrategyChoice usp{StrategyKind::hybrid, 8};
  const Nearest same = nearest_published(p, "h100-ib", true, usp);
  REQUIRE(same.point != nullptr);
  CHECK(same.point->label == "MagiAttention's H100 benchmark, usp on 32 GPUs, causal, forward+backward");
  CHECK(same.distance == 0);
  CHECK(same.how_far == "the same shape and machine");
  CHECK(std::abs(same.error) <= 0.15);
  p.ranks = 24;  // as near in shape to the 16- and 32-GPU runs: the nearer number of ranks is named
  p.seq = 24 * 8192;
  const Nearest between = nearest_published(p, "h100-ib", true, usp);
  CHECK(between.point->label == "MagiAttention's H100 benchmark, usp on 32 GPUs, causal, forward+backward");
  CHECK(between.how_far == "ranks 24 against 32 (1.33x fewer)");
  p.causal = false;  // the full-mask runs are nearer to a full-mask shape
  const Nearest full = nearest_published(p, "h100-ib", false, StrategyChoice{StrategyKind::ring, 0});
  CHECK(full.point->label == "MagiAttention's H100 benchmark, ring_p2p on 32 GPUs, full, forward");
  CHECK(full.error > 0.15);  // Transformer Engine's ring: the model fast, and the line says so
  p.causal = true;
  const Nearest masked = nearest_published(p, "h100-ib", false, StrategyChoice{StrategyKind::ring, 0});
  CHECK(masked.point->label == "MagiAttention's H100 benchmark, ring_p2p on 32 GPUs, causal, forward");
  p.kv_heads = 64;  // MHA against its GQA: the KV heads count in the distance and are named
  const Nearest mha = nearest_published(p, "h100-ib", false, StrategyChoice{StrategyKind::ring, 0});
  CHECK(mha.point->label == "MagiAttention's H100 benchmark, ring_p2p on 32 GPUs, causal, forward");
  CHECK(mha.distance == doctest::Approx(3));
  CHECK(mha.how_far == "KV heads 64 against 8 (8x more), ranks 24 against 32 (1.33x fewer)");
}

TEST_CASE("a small A100 shape is told USP's error there, at the point that runs the strategy asked about") {
  // USP's 8K row (1K tokens per GPU), 32 heads of 32, batch 2: the model is several times fast there, and the
  // nearest point says so; asked about the 4 x 2 hybrid, the point is that hybrid's run.
  Problem p = ring_flash_attention_problem(8);
  p.seq = 8192;
  p.batch = 2;
  p.heads = p.kv_heads = 32;
  p.head_dim = 32;
  const Nearest hybrid = nearest_published(p, "a100-sxm-8", false, StrategyChoice{StrategyKind::hybrid, 4});
  REQUIRE(hybrid.point != nullptr);
  CHECK(hybrid.point->label == "USP's A100 table, Ulysses 4 x ring 2 (zigzag), forward");
  CHECK(hybrid.distance == 0);
  CHECK(hybrid.how_far == "the same shape and machine");
  CHECK(hybrid.error > 1.0);  // the model over 2x fast
  p.sharding = Sharding::contiguous;
  const Nearest ring = nearest_published(p, "a100-sxm-8", false, StrategyChoice{StrategyKind::ring, 0});
  CHECK(ring.point->label == "USP's A100 table, ring 8 (basic), forward");
  p.batch = 1;  // a batch of one is farther from the batch-2 runs, and says so
  const Nearest one = nearest_published(p, "a100-sxm-8", false, StrategyChoice{StrategyKind::ring, 0});
  CHECK(one.distance == doctest::Approx(1));
  CHECK(one.how_far == "batch 1 against 2 (2x fewer)");
}

namespace {

// A published CP table held as data (data/published/*.json, published_table): its rows' model rates, computed
// afresh.
struct Row {
  std::string machine, run;
  bool backward = false;
  double published = 0, model = 0;
};

// Every row within 2x of its published rate, and within `bound` (a relative error) when one is given.
void check_rows(const std::vector<Row>& rows, double bound = 0) {
  for (const Row& r : rows) {
    CAPTURE(r.machine);
    CAPTURE(r.run);
    CAPTURE(r.backward);
    CHECK(r.model / r.published < 2);
    CHECK(r.published / r.model < 2);
    if (bound > 0) CHECK(relative_error(r.model, r.published) <= bound);
  }
}

std::vector<Row> five_head_rows() {
  const auto j = published_table("ring_flash_attention_5_heads.json");
  std::vector<Row> rows;
  for (const auto& r : j["rows"]) {
    Row row{r["machine"], r["run"], r["backward"], r["per_s"], 0};
    const Machine m = load_machine(row.machine);
    Problem p = ring_flash_attention_problem(8);
    p.heads = p.kv_heads = 5;  // the older benchmark: qkv packed, 5 heads of 128
    if (row.run == "one_gpu") {
      p.ranks = 1;
      p.seq = 8192;
      row.model = 1e6 / single_gpu_us(p, m, row.backward);
    } else {
      p.sharding = parse_sharding(row.run);
      row.model = 1e6 / predict_cell(p, {StrategyKind::ring, 0}, m, row.backward, 1).time_us(row.backward);
    }
    rows.push_back(row);
  }
  return rows;
}

}  // namespace

TEST_CASE("ring-flash-attention's 5-head table: no prediction off by 2x, the fastest sharding right or a tie") {
  const std::vector<Row> rows = five_head_rows();
  REQUIRE(rows.size() == 16);
  check_rows(rows);
  // Per machine and direction: the sharding the model ranks fastest is the published fastest, or within 2% of it
  // in the published figures (a tie the model does not claim to resolve).
  for (const char* machine : {"h800-sxm-8", "a100-sxm-8"})
    for (const bool backward : {false, true}) {
      const Row *model_best = nullptr, *published_best = nullptr;
      for (const Row& r : rows) {
        if (r.machine != machine || r.backward != backward || r.run == "one_gpu") continue;
        if (!model_best || r.model > model_best->model) model_best = &r;
        if (!published_best || r.published > published_best->published) published_best = &r;
      }
      CAPTURE(machine);
      CAPTURE(backward);
      REQUIRE(model_best != nullptr);
      CHECK(model_best->published >= 0.98 * published_best->published);
    }
}

TEST_CASE("ring-flash-attention's 5-head table: the one-GPU rows within 15%, every H800 row within 10%") {
  // Few tiles per SM (5 heads x 64 row tiles on 132 or 108 SMs): the tiles handed out in FlashAttention-2's order
  // (cost.hpp) and a step cost per element of the output (clock.hpp) are what the model needs here. Its CP rows
  // are published points, held to their bounds with the others (the first test case: 15%, the A100's contiguous
  // and zigzag forward+backward at 17%, docs/predictions.md, section 2).
  for (const Row& r : five_head_rows()) {
    CAPTURE(r.machine);
    CAPTURE(r.run);
    CAPTURE(r.backward);
    if (r.run == "one_gpu") CHECK(relative_error(r.model, r.published) <= 0.15);
    if (r.machine == "h800-sxm-8") CHECK(relative_error(r.model, r.published) <= 0.10);
  }
}

TEST_CASE("the 5-head table tells a per-step cost per element from a constant: the constant makes its rings slow") {
  // The 32-head fit's cost as a constant: what the stored bytes per element come to on a 32-head step.
  const Machine per_element = load_machine("h800-sxm-8");
  Machine constant = per_element;
  constant.step_us = step_cost_us(per_element, ring_flash_attention_out_elements());
  constant.step_bytes_per_element = 0;
  CHECK(constant.step_us == doctest::Approx(134.6).epsilon(0.01));
  for (const Row& r : five_head_rows()) {
    if (r.machine != "h800-sxm-8" || r.backward || r.run == "one_gpu") continue;
    CAPTURE(r.run);
    Problem p = ring_flash_attention_problem(8);
    p.heads = p.kv_heads = 5;
    p.sharding = parse_sharding(r.run);
    const double slow = 1e6 / predict_cell(p, {StrategyKind::ring, 0}, constant, false, 1).forward_us;
    CHECK(slow / r.published - 1 < -0.15);                   // a constant: every ring forward over 15% slow
    CHECK(relative_error(r.model, r.published) <= 0.05);     // per element: within 5%
  }
}

namespace {

// ring-flash-attention's varlen table (data/published/ring_flash_attention_varlen.json): each iteration runs
// one of four document layouts in turn, so a run's rate is 4 / (sum of the four layouts' times). ring_attn cuts every
// document into 8 contiguous pieces (doc-contiguous), zigzag_ring_attn into 16 chunks (zigzag per document).
std::vector<Row> varlen_rows() {
  const auto j = published_table("ring_flash_attention_varlen.json");
  const auto layouts = j["local_docs"].get<std::vector<std::vector<std::int64_t>>>();
  std::vector<Row> rows;
  for (const auto& r : j["rows"]) {
    Row row{r["machine"], r["run"], r["backward"], r["per_s"], 0};
    const Machine m = load_machine(row.machine);
    double total_us = 0;
    for (const auto& local : layouts) {
      Problem p = ring_flash_attention_problem(8);  // Llama3-8B attention, S = 8 x 8K
      if (row.run == "one_gpu") {
        p.ranks = 1;
        p.seq = 8192;
        p.docs.lengths = local;  // the 8K local tokens with the local documents
        total_us += single_gpu_us(p, m, row.backward);
        continue;
      }
      for (const std::int64_t len : local) p.docs.lengths.push_back(8 * len);  // a document cut across all 8 ranks
      const bool zigzag = row.run == "zigzag", ring = row.run == "ring";
      p.sharding = zigzag ? Sharding::zigzag : ring ? Sharding::doc_contiguous : Sharding::contiguous;  // per document
      const StrategyKind kind = zigzag || ring ? StrategyKind::ring : StrategyKind::all_gather;
      const Cell c = predict_cell(p, {kind, 0}, m, row.backward, 1);
      REQUIRE(c.valid);
      total_us += c.time_us(row.backward);
    }
    row.model = 1e6 * static_cast<double>(layouts.size()) / total_us;
    rows.push_back(row);
  }
  return rows;
}

}  // namespace

TEST_CASE("ring-flash-attention's varlen table: every row within 15%, zigzag above the K/V all-gather and ring_attn") {
  const std::vector<Row> rows = varlen_rows();
  REQUIRE(rows.size() == 16);
  check_rows(rows, 0.15);  // the largest today: zigzag forward+backward on the H800
  // Per machine and direction the published zigzag beats llama3_attn's all-gather by 14-40% and ring_attn's
  // contiguous pieces (whose causal work piles up on the last rank) by 43-54%: the model must say so.
  for (const char* machine : {"h800-sxm-8", "a100-sxm-8"})
    for (const bool backward : {false, true}) {
      const Row *zigzag = nullptr, *gather = nullptr, *ring = nullptr;
      for (const Row& r : rows)
        if (r.machine == machine && r.backward == backward) {
          if (r.run == "zigzag") zigzag = &r;
          if (r.run == "llama3") gather = &r;
          if (r.run == "ring") ring = &r;
        }
      CAPTURE(machine);
      CAPTURE(backward);
      REQUIRE((zigzag != nullptr && gather != nullptr && ring != nullptr));
      REQUIRE(zigzag->published > gather->published);
      CHECK(zigzag->model > gather->model);
      REQUIRE(zigzag->published > ring->published);
      CHECK(zigzag->model > ring->model);
    }
}

TEST_CASE("FlashAttention-2's own A100 and H100 forward+backward figures: every bar within 15%") {
  // The A100 preset's curves are the H100's FlashAttention-2 curves scaled by one factor from ring-flash-attention's
  // one-GPU A100 run (the shape over S assumed as on the H100); FlashAttention's own A100 figure checks that shape
  // at head dims 64 and 128, causal and full, from S = 512 to 16K. The H100 figure checks the h800-sxm-8 preset's
  // forward and backward curves (fitted separately) together.
  const auto j = published_table("flash_attention_2_fwd_bwd.json");
  int checked = 0;
  for (const auto& r : j["rows"]) {
    const Machine m = load_machine(r["machine"]);
    for (std::size_t i = 0; i < j["seqs"].size(); ++i) {
      if (r["tflops"][i].is_null()) continue;  // hidden by the figure's legend
      Problem p;
      p.dtype = DType::bf16;
      p.seq = j["seqs"][i];
      p.batch = 16384 / p.seq;
      p.head_dim = r["head_dim"];
      p.heads = p.kv_heads = 2048 / p.head_dim;
      p.causal = r["causal"];
      // FlashAttention's benchmark counts 3.5 x the forward's 4 B S^2 Nq D flops, halved under the causal mask.
      const double flops = 3.5 * 4.0 * static_cast<double>(p.batch * p.seq) * static_cast<double>(p.seq) *
                           static_cast<double>(p.heads * p.head_dim) / (p.causal ? 2 : 1);
      const double model = flops / single_gpu_us(p, m, true) / 1e6;
      const double published = r["tflops"][i];
      CAPTURE(r.dump());
      CAPTURE(p.seq);
      CHECK(relative_error(model, published) <= 0.15);
      ++checked;
    }
  }
  CHECK(checked == 46);
}

TEST_CASE("USP's A100 table: within 2x from 16K tokens per GPU; below, the model is at least 1.9x fast") {
  // feifeibear/long-context-attention's forward table (data/published/usp_a100.json): ulysses degree U,
  // ring degree 8/U, every ring implementation and both packings. From 16K tokens per GPU the model is within 2x
  // (docs/predictions.md, section 2). At 64 to 4K tokens per GPU the published times are not the kernels' work
  // (Ulysses' 32 heads of 32 imply 8 TFLOP/s at 1K tokens per GPU, 48 at 4K, 140 at 16K), so the model, which
  // counts the kernels, comes out fast by 1.9x and more there: held, so that a model which learns those costs says so.
  const auto j = published_table("usp_a100.json");
  const Machine m = load_machine("a100-sxm-8");
  int long_rows = 0, short_rows = 0;
  for (const auto& r : j["forward_rows"]) {
    Problem p = usp_problem(r);
    const StrategyChoice c = usp_strategy(r["ulysses"]);
    for (const auto& [impl, sharding] : kUspRings) {
      p.sharding = sharding;
      const double model = 1e6 / predict_cell(p, c, m, false, 1).time_us(false);
      for (const char* packing : {"qkvpack", "no_packed"}) {
        if (r[impl][packing].is_null()) continue;
        const double published = r[impl][packing];
        CAPTURE(r.dump());
        CAPTURE(impl);
        CAPTURE(packing);
        if (p.seq / p.ranks >= 16384) {
          CHECK(model / published < 2);
          CHECK(published / model < 2);
          ++long_rows;
        } else {
          CHECK(model / published >= 1.9);
          ++short_rows;
        }
      }
    }
  }
  // 17 MHA rows with both packings (but one run out of memory), 4 GQA rows with one
  CHECK(long_rows == 3 * 2 * 17 - 1 + 3 * 4);
  CHECK(short_rows == 3 * 2 * 9);
}

namespace {

// Over candidates with a modeled and a published rate (.model, .published): the one the model puts fastest, and
// the published fastest rate.
template <class C>
std::pair<const C*, double> model_pick(const std::vector<C>& candidates) {
  const C* pick = &candidates.front();
  double published_best = 0;
  for (const C& c : candidates) {
    if (c.model > pick->model) pick = &c;
    published_best = std::max(published_best, c.published);
  }
  return {pick, published_best};
}

}  // namespace

TEST_CASE("USP's A100 table: from 16K tokens per GPU the published fastest is one of the model's ties") {
  // Per shape (S, Nq, D), over the Ulysses degrees and ring implementations: the candidates the model puts within
  // 2% of its fastest (what plan calls a tie) include one within 2% of the published fastest. At 1K and 4K tokens
  // per GPU, where its times are far off, the model's fastest is the published one at 1K and within 2.3% at 4K.
  const auto j = published_table("usp_a100.json");
  const Machine m = load_machine("a100-sxm-8");
  struct Candidate {
    double published, model;
  };
  std::map<std::tuple<std::int64_t, std::int64_t, std::int64_t>, std::vector<Candidate>> shapes, small;
  for (const auto& r : j["forward_rows"]) {
    Problem p = usp_problem(r);
    if (p.seq / p.ranks < 16384) {
      if (p.seq / p.ranks < 1024) continue;  // the 512-token row has one Ulysses degree only
      const StrategyChoice c = usp_strategy(r["ulysses"]);
      for (const auto& [impl, sharding] : kUspRings) {
        p.sharding = sharding;
        small[{p.seq, p.heads, p.head_dim}].push_back(
            {r[impl]["qkvpack"].get<double>(), 1e6 / predict_cell(p, c, m, false, 1).time_us(false)});
      }
      continue;
    }
    const StrategyChoice c = usp_strategy(r["ulysses"]);
    for (const auto& [impl, sharding] : kUspRings) {
      const auto& cell = r[impl]["qkvpack"].is_null() ? r[impl]["no_packed"] : r[impl]["qkvpack"];
      if (cell.is_null()) continue;
      p.sharding = sharding;
      shapes[{p.seq, p.heads, p.head_dim}].push_back(
          {cell.get<double>(), 1e6 / predict_cell(p, c, m, false, 1).time_us(false)});
    }
  }
  CHECK(shapes.size() == 6);
  for (const auto& [shape, candidates] : shapes) {
    double model_best = 0, published_best = 0;
    for (const Candidate& c : candidates) {
      model_best = std::max(model_best, c.model);
      published_best = std::max(published_best, c.published);
    }
    bool found = false;
    for (const Candidate& c : candidates)
      found = found || (c.model >= 0.98 * model_best && c.published >= 0.98 * published_best);
    CAPTURE(std::get<0>(shape));
    CAPTURE(std::get<1>(shape));
    CAPTURE(std::get<2>(shape));
    CHECK(found);
  }
  REQUIRE(small.size() == 2);
  for (const auto& [shape, candidates] : small) {
    const auto [first, published_best] = model_pick(candidates);
    CAPTURE(std::get<0>(shape));
    CHECK(first->published >= (std::get<0>(shape) == 8192 ? 1.0 : 0.977) * published_best);
  }
}

TEST_CASE("USP's case study: the model 1.1x to 2.9x fast on every figure") {
  // The case study's forward+backward at 8K tokens per GPU (8 heads of 128, batch 2) and its figure of
  // ring-flash-attention's functions on the same shape: the model comes out fast, up to 2.8x. The same zigzag ring
  // forward, per unit of work (batch x heads of 8K rows per GPU), ran 2.16x slower in USP's figure than in
  // ring-flash-attention's own 5-head table, which the model meets within 15% (the tests above): the two
  // publications disagree by more than the model misses either (docs/predictions.md, section 2).
  const auto j = published_table("usp_a100.json")["case_study"];
  const Machine m = load_machine("a100-sxm-8");
  Problem p = ring_flash_attention_problem(8);
  p.batch = 2;
  p.heads = p.kv_heads = 8;
  for (const auto& r : j["longctx_forward_backward"]) {
    const int u = r["ulysses"];
    const StrategyChoice c = usp_strategy(u);
    for (const auto& [impl, sharding] : kUspRings) {
      p.sharding = sharding;
      const double ratio = 1e6 / predict_cell(p, c, m, true, 1).time_us(true) / r[impl].get<double>();
      CAPTURE(u);
      CAPTURE(impl);
      CHECK(ratio >= 1.1);
      CHECK(ratio <= 2.9);
    }
  }
  const std::pair<const char*, Sharding> rings[] = {
      {"ring", Sharding::contiguous}, {"zigzag_ring", Sharding::zigzag}, {"stripe_ring", Sharding::striped}};
  for (const auto& [name, sharding] : rings) {
    p.sharding = sharding;
    const Cell cell = predict_cell(p, {StrategyKind::ring, 0}, m, true, 1);
    CAPTURE(name);
    for (const bool backward : {false, true}) {
      const double ratio = 1e6 / cell.time_us(backward) /
                           j["ring_flash_attention"][name][backward ? "forward_backward" : "forward"].get<double>();
      CHECK(ratio >= 1.1);
      CHECK(ratio <= 2.9);
    }
  }
}

namespace {

// MagiAttention's H100 benchmark, one figure: the published and the modeled TFLOP/s per GPU of a baseline.
struct MagiFigure {
  std::string mask, direction, method;
  int gpus = 0;
  double published = 0, model = 0;
};

std::vector<MagiFigure> magi_figures(const Machine& m = load_machine("h100-ib")) {
  std::vector<MagiFigure> out;
  for (const auto& r : published_table("magi_attention_h100.json")["rows"]) {
    const Problem p = magi_problem(r);
    const bool backward = r["direction"] == "backward";
    for (const auto& [name, strategy] : kMagiMethods) {
      const Cell c = predict_cell(p, strategy, m, backward, 1);
      REQUIRE(c.valid);
      const double us = backward ? c.total_us - c.forward_us : c.forward_us;  // each pass timed alone
      out.push_back({r["mask"], r["direction"], name, p.ranks, r[name].get<double>(),
                     magi_flops(p, backward) / (us * 1e-6 * p.ranks) / 1e12});
    }
  }
  return out;
}

}  // namespace

TEST_CASE("MagiAttention's H100 benchmark: Ulysses, the K/V all-gather and USP within 15% at 8 to 64 GPUs") {
  // data/published/magi_attention_h100.json: 8K tokens per GPU, 64 query and 8 KV heads of 128, full and causal,
  // forward and backward each timed alone, 8 to 64 GPUs over nodes of 8 (docs/predictions.md, section 2).
  int checked = 0;
  for (const MagiFigure& f : magi_figures()) {
    if (f.method == "ring_p2p") continue;
    CAPTURE(f.mask);
    CAPTURE(f.direction);
    CAPTURE(f.method);
    CAPTURE(f.gpus);
    CAPTURE(f.model);
    CHECK(relative_error(f.model, f.published) <= 0.15);
    ++checked;
  }
  CHECK(checked == 3 * 2 * 2 * 4);
}

TEST_CASE("MagiAttention's H100 benchmark: Transformer Engine's ring runs 5% to 50% slower than the model's ring") {
  // Its ring_p2p baseline is Transformer Engine's design (every block first, the outputs corrected after); the
  // model's ring is ring-flash-attention's, which it meets within 15% on that project's own tables. Held, so that
  // a model which learns the difference says so.
  int checked = 0;
  for (const MagiFigure& f : magi_figures()) {
    if (f.method != "ring_p2p") continue;
    CAPTURE(f.mask);
    CAPTURE(f.direction);
    CAPTURE(f.gpus);
    CHECK(f.model / f.published >= 1.05);
    CHECK(f.model / f.published <= 1.5);
    ++checked;
  }
  CHECK(checked == 2 * 2 * 4);
}

namespace {

// The comparisons (mask, pass, GPUs) where the baseline the model puts fastest ran, as published, more than 3% slower
// than the published fastest; with the model's pick.
std::vector<std::tuple<std::string, std::string, int, std::string>> picks_off(const std::vector<MagiFigure>& all) {
  std::map<std::tuple<std::string, std::string, int>, std::vector<MagiFigure>> groups;
  for (const MagiFigure& f : all) groups[{f.mask, f.direction, f.gpus}].push_back(f);
  REQUIRE(groups.size() == 16);
  std::vector<std::tuple<std::string, std::string, int, std::string>> off;
  for (const auto& [key, figures] : groups) {
    const auto [pick, published_best] = model_pick(figures);
    if (pick->published < 0.97 * published_best)
      off.emplace_back(std::get<0>(key), std::get<1>(key), std::get<2>(key), pick->method);
  }
  return off;
}

}  // namespace

TEST_CASE("MagiAttention's H100 benchmark with ring-flash-attention's stack costs: every baseline within 16%") {
  // The benchmark's baselines are PyTorch-level implementations, like ring-flash-attention's: with that stack's
  // costs (--stack pytorch: every block a kernel call, the merges and gradient sums outside it; fitted to
  // ring-flash-attention's own tables, to no figure of this benchmark), the ring comes within 15.4% too, and the
  // other three stay within 9% (docs/predictions.md, section 2).
  const auto figures = magi_figures(with_stack(load_machine("h100-ib"), SoftwareStack::pytorch));
  std::map<std::string, double> worst;
  for (const MagiFigure& f : figures) {
    CAPTURE(f.mask);
    CAPTURE(f.direction);
    CAPTURE(f.method);
    CAPTURE(f.gpus);
    CAPTURE(f.model);
    worst[f.method] = std::max(worst[f.method], relative_error(f.model, f.published));
  }
  REQUIRE(worst.size() == 4);
  CHECK(worst["ring_p2p"] <= 0.16);
  CHECK(worst["ring_p2p"] >= 0.15);  // its causal backward on 8 GPUs, 15.4%: the one figure over 15%
  for (const char* other : {"ulysses", "ring_allgather", "usp"}) {
    CAPTURE(other);
    CHECK(worst[other] <= 0.09);
  }
  CHECK(picks_off(figures).empty());  // and the fastest choice within 3% in all 16 comparisons
}

TEST_CASE("MagiAttention's H100 benchmark: the model's fastest runs within 3% of the published fastest but once") {
  // Per mask, pass and size, over the four baselines: the one the model puts fastest, at its published rate, is
  // within 3% of the published fastest, in 15 of the 16 comparisons. The one left is the full mask's forward on 8
  // GPUs, where the four are within 1.5% of each other in the model and its ring comes first, the ring the benchmark
  // measured slowest (the Transformer Engine ring's test says why; with ring-flash-attention's stack costs none is
  // left: the test before this one).
  const auto off = picks_off(magi_figures());
  REQUIRE(off.size() == 1);
  CHECK(off.front() == std::make_tuple(std::string("full"), std::string("forward"), 8, std::string("ring_p2p")));
}

TEST_CASE("the Transformer Engine ring's slowdown plan quotes is the model's own at MagiAttention's ring points") {
  // plan prints kTransformerEngineRingSlower under the settings of a framework that runs the ring: the least and the
  // most of published time over modeled time at the benchmark's ring_p2p points, forward and forward+backward.
  double least = 1e9, most = 0;
  int points = 0;
  for (const PublishedPoint& pt : published_points())
    if (pt.label.find(", ring_p2p on ") != std::string::npos) {
      least = std::min(least, 1 + published_error(pt));
      most = std::max(most, 1 + published_error(pt));
      ++points;
    }
  CHECK(points == 16);
  CHECK(least == doctest::Approx(kTransformerEngineRingSlower[0]).epsilon(0.005));
  CHECK(most == doctest::Approx(kTransformerEngineRingSlower[1]).epsilon(0.005));
}
