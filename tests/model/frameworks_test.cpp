// The settings plan prints for each framework: the flag names of each project's own source (frameworks.hpp
// names the files), and a plain "cannot" where a framework lacks the strategy, sharding or mask.
#include "sim/model/frameworks.hpp"

#include <doctest/doctest.h>

using namespace cpsim;
using namespace cpsim::model;

namespace {

Problem shape(Sharding s) {
  Problem p;
  p.ranks = 8;
  p.heads = 32;
  p.kv_heads = 8;
  p.head_dim = 128;
  p.seq = 64 << 10;
  p.sharding = s;
  return p;
}

const FrameworkSetting& named(const std::vector<FrameworkSetting>& v, const std::string& name) {
  for (const auto& f : v)
    if (f.framework == name) return f;
  FAIL("no framework " << name);
  return v.front();
}

}  // namespace

TEST_CASE("each strategy maps onto Megatron-LM's --cp-comm-type and Transformer Engine's cp_comm_type") {
  struct Row {
    StrategyChoice c;
    const char* megatron;
    const char* te;
  };
  for (const Row& r : {Row{{StrategyKind::ring, 0}, "--cp-comm-type p2p", "cp_comm_type=\"p2p\""},
                       Row{{StrategyKind::ulysses, 0}, "--cp-comm-type a2a", "cp_comm_type=\"a2a\""},
                       Row{{StrategyKind::all_gather, 0}, "--cp-comm-type allgather", "cp_comm_type=\"all_gather\""},
                       Row{{StrategyKind::hybrid, 2},
                           "--cp-comm-type a2a+p2p --hierarchical-context-parallel-sizes 2 4",
                           "cp_comm_type=\"a2a+p2p\""}}) {
    CAPTURE(r.megatron);
    const auto v = framework_settings(shape(Sharding::zigzag), r.c);
    const auto& m = named(v, "Megatron-LM");
    const auto& te = named(v, "Transformer Engine");
    CHECK(m.runs);
    CHECK(m.settings.find("--context-parallel-size 8 ") != std::string::npos);
    CHECK(m.settings.find(r.megatron) != std::string::npos);
    CHECK(te.runs);
    CHECK(te.settings.find(r.te) != std::string::npos);
  }
}

TEST_CASE(
    "PyTorch's context_parallel runs the ring, not the all-gather (its allgather rotate is that ring) nor Ulysses") {
  const auto ring =
      named(framework_settings(shape(Sharding::zigzag), {StrategyKind::ring, 0}), "PyTorch context_parallel");
  CHECK(ring.runs);
  CHECK(ring.settings.find("set_rotate_method(\"alltoall\")") != std::string::npos);
  const auto contiguous =
      named(framework_settings(shape(Sharding::contiguous), {StrategyKind::ring, 0}), "PyTorch context_parallel");
  CHECK(contiguous.settings.find("enable_load_balance = False") != std::string::npos);
  // its allgather rotate still runs the ring's blocks and merges: not the all-gather's one call per chunk
  const auto ag =
      named(framework_settings(shape(Sharding::contiguous), {StrategyKind::all_gather, 0}), "PyTorch context_parallel");
  CHECK_FALSE(ag.runs);
  CHECK(ag.why_not.find("the ring's settings with set_rotate_method(\"allgather\") run that") != std::string::npos);
  const auto u =
      named(framework_settings(shape(Sharding::zigzag), {StrategyKind::ulysses, 0}), "PyTorch context_parallel");
  CHECK_FALSE(u.runs);
  CHECK(u.why_not.find("ring attention only") != std::string::npos);
}

TEST_CASE("a sharding or a mask a framework lacks is said plainly") {
  const auto striped = framework_settings(shape(Sharding::striped), {StrategyKind::ring, 0});
  for (const auto& f : striped) {
    CAPTURE(f.framework);
    CHECK_FALSE(f.runs);
    CHECK(f.why_not.find("striped") != std::string::npos);
  }
  Problem windowed = shape(Sharding::zigzag);
  windowed.window = 4096;
  CHECK_FALSE(named(framework_settings(windowed, {StrategyKind::ring, 0}), "Transformer Engine").runs);
  CHECK(named(framework_settings(windowed, {StrategyKind::ulysses, 0}), "Transformer Engine").runs);
  Problem replicated = shape(Sharding::zigzag);
  replicated.kv_heads = 4;  // 4 KV heads over an 8-rank all-to-all: each copied onto two ranks
  replicated.kv_replicate = true;
  CHECK_FALSE(named(framework_settings(replicated, {StrategyKind::ulysses, 0}), "Transformer Engine").runs);
}

TEST_CASE("on one rank every framework runs the shape without context parallelism, whatever the sharding") {
  Problem one = shape(Sharding::striped);
  one.ranks = 1;
  for (const auto& f : framework_settings(one, {StrategyKind::ring, 0})) {
    CAPTURE(f.framework);
    CHECK(f.runs);
    CHECK(f.settings.find("no context") != std::string::npos);
  }
  CHECK(named(framework_settings(one, {StrategyKind::ring, 0}), "Megatron-LM")
            .settings.rfind("--context-parallel-size 1 ", 0) == 0);
}
