// Which inference strategy, and its cost (sim/model/inference_plan.cpp), on the setting of Meta's measurements
// (arXiv 2411.01783: Llama 3 405B, TP8 inside a node, CP across nodes, 128K tokens).
#include <doctest/doctest.h>

#include "sim/core/error.hpp"
#include "sim/model/inference_plan.hpp"

using namespace cpsim;
using namespace cpsim::model;

namespace {
// T new tokens of 128000 in all (the paper's rows are shares of its 128K context).
PrefillChoice at_share(double share) {
  const auto T = static_cast<std::int64_t>(128000 * share);
  return choose_prefill(paper_problem(T, 128000 - T, 4), paper_machine());
}
}  // namespace

TEST_CASE("the paper's overlap condition on its setting falls between its 2.5% and 10% rows") {
  const PrefillChoice c = at_share(0.05);
  const double share = c.peak_tokens / 128000;
  CHECK(share > 0.025);
  CHECK(share < 0.10);
  CHECK(c.message_bound == doctest::Approx(2.0 / 16));       // 2 Nkv / Nq
  CHECK(c.bytes_bound == doctest::Approx(2.0 * 128 / (16 * 257)));  // 2 Nkv D / (Nq (2D+1))
  CHECK(c.reasons.size() == 5);
}

TEST_CASE("pass-Q is modeled faster for a few new tokens after a long cache, pass-KV for a large share") {
  const PrefillChoice few = at_share(0.001), many = at_share(0.10), most = at_share(0.5);
  CHECK(few.choice == InferenceKind::pass_q);
  CHECK(few.pass_q.bytes_sent < few.pass_kv.bytes_sent);
  CHECK(many.choice == InferenceKind::pass_kv);
  CHECK(most.choice == InferenceKind::pass_kv);
  CHECK(most.pass_q.bytes_sent > most.pass_kv.bytes_sent);
  // pass-Q's all-to-all of the partials is never hidden; pass-KV's transfer is once the blocks outlast it.
  CHECK(many.pass_q.exposed_us > 0);
  CHECK(many.kv_step_us <= many.block_us);
  CHECK(many.pass_kv.exposed_us == doctest::Approx(0).epsilon(1e-9));
}

TEST_CASE("modeled decode time per token grows with the CP degree at 128K, batch 1, as the paper measured") {
  const Machine m = paper_machine();
  double last = 0;
  for (int C : {1, 2, 4}) {
    const InferenceTime t = model_inference(paper_problem(1, 128 * 1024, C), InferenceKind::decode, m);
    INFO("C=", C, " decode ", t.us, " us");
    CHECK(t.us > last);
    last = t.us;
  }
}

TEST_CASE("a CP group of one rank per node puts every rank on its own node and NIC") {
  const Machine m = with_ranks_per_node(load_machine("h100-ib"), 1);
  CHECK(m.ranks_per_node == 1);
  CHECK(m.nics_per_node == 1);
  CHECK(m.nodes_for(4) == 4);
  CHECK_THROWS_AS(with_ranks_per_node(m, 0), UsageError);
}

TEST_CASE("on a network of 30 GB/s per NIC the modeled crossover falls inside the paper's band") {
  // docs/predictions.md: on the preset's 48.5 GB/s pass-KV leads from about 1.8% on; at 30 GB/s its transfer is
  // exposed at 2.5% and hidden again at 5%.
  const Machine slow = scaled(paper_machine(), "inter.gbps", 30 / 48.5);
  const auto choose = [&](double share) {
    const auto T = static_cast<std::int64_t>(128000 * share);
    return choose_prefill(paper_problem(T, 128000 - T, 4), slow);
  };
  CHECK(choose(0.025).choice == InferenceKind::pass_q);
  CHECK(choose(0.05).choice == InferenceKind::pass_kv);
  CHECK(choose(0.10).choice == InferenceKind::pass_kv);
  // On the preset itself pass-Q leads at 1% and pass-KV at 2.5%: the model's crossover lies below the paper's
  // band there.
  CHECK(at_share(0.01).choice == InferenceKind::pass_q);
  CHECK(at_share(0.025).choice == InferenceKind::pass_kv);
}

TEST_CASE("a small prefill block splits its keys over the idle SMs, so pass-KV's transfer is exposed at 1%") {
  // 1% of 128000: 320 new tokens a rank, 16 query heads on one KV head: packed, 40 tiles of 128 rows for 132 SMs;
  // FlashAttention splits the 32000 keys, the block takes less than the K/V step it would hide.
  const PrefillChoice c = at_share(0.01);
  CHECK(c.block_us < c.kv_step_us);
  CHECK(c.pass_kv.exposed_us > 0);
  Machine unsplit = paper_machine();
  unsplit.max_kv_splits = 1;
  unsplit.pack_gqa = false;
  const auto T = static_cast<std::int64_t>(128000 * 0.01);
  const PrefillChoice idle = choose_prefill(paper_problem(T, 128000 - T, 4), unsplit);
  CHECK(idle.block_us > c.block_us * 2);  // the SMs the unsplit call leaves idle
  CHECK(idle.choice == InferenceKind::pass_kv);
}

TEST_CASE("a prefill that fits no GPU names the fewest ranks on which it does, and that count fits") {
  const Machine m = load_machine("h100-ib");
  InferenceProblem p = paper_problem(1 << 20, 64 << 20, 4);  // 1M new tokens after 64M cached
  p.heads = p.kv_heads = 32;
  const PrefillChoice here = choose_prefill(p, m);
  CHECK_FALSE(fits(m, here.pass_kv));
  CHECK_FALSE(fits(m, here.pass_q));
  const int fewest = fewest_ranks_that_fit(p, m, 1024);
  REQUIRE(fewest > p.ranks);
  InferenceProblem there = p, below = p;
  there.ranks = fewest;
  below.ranks = fewest / 2;
  const PrefillChoice at = choose_prefill(there, m), under = choose_prefill(below, m);
  CHECK((fits(m, at.pass_kv) || fits(m, at.pass_q)));
  CHECK_FALSE((fits(m, under.pass_kv) || fits(m, under.pass_q)));
  // There only pass-Q fits, so it is the choice whatever the times say.
  CHECK(fits(m, at.pass_q));
  CHECK_FALSE(fits(m, at.pass_kv));
  CHECK(at.choice == InferenceKind::pass_q);
  // A machine too small for any count: none.
  CHECK(fewest_ranks_that_fit(p, m, fewest / 2) == 0);
}
