// run(): what a run keeps of its outputs.
#include "sim/runtime/run.hpp"

#include <doctest/doctest.h>

using namespace cpsim;

namespace {

RunConfig small_run(Backend b) {
  RunConfig cfg;
  cfg.strategy = StrategyKind::ring;
  cfg.backend = b;
  cfg.problem.ranks = 4;
  cfg.problem.seq = 64;
  cfg.problem.heads = 2;
  cfg.problem.kv_heads = 2;
  cfg.problem.head_dim = 8;
  cfg.problem.dtype = DType::f32;
  cfg.backward = true;
  return cfg;
}

}  // namespace

TEST_CASE("a run that keeps no outputs sends none back, and reports the same work") {
  for (Backend b : {Backend::threads, Backend::processes}) {
    CAPTURE(backend_name(b));
    const RunResult kept = run(small_run(b));
    RunConfig lean = small_run(b);
    lean.keep_outputs = false;
    const RunResult none = run(lean);
    CHECK(kept.tensors.out.size() == 64 * 2 * 8);
    CHECK(kept.tensors.dq.size() == 64 * 2 * 8);
    CHECK(none.tensors.out.empty());
    CHECK(none.tensors.lse.empty());
    CHECK(none.tensors.dq.empty());
    REQUIRE(none.ranks.size() == kept.ranks.size());
    for (std::size_t r = 0; r < kept.ranks.size(); ++r) {
      CHECK(none.ranks[r].stats.comm_counts().bytes_sent == kept.ranks[r].stats.comm_counts().bytes_sent);
      CHECK(none.ranks[r].stats.total_work() == kept.ranks[r].stats.total_work());
    }
  }
}

TEST_CASE("a checked run keeps its outputs even when asked to keep none, and passes") {
  RunConfig cfg = small_run(Backend::processes);
  cfg.keep_outputs = false;
  cfg.check = true;
  const RunResult r = run(cfg);
  CHECK(r.tensors.out.size() == 64 * 2 * 8);
  CHECK(r.check.ran);
  CHECK(r.check.passed);
}

TEST_CASE("a run of C ranks validates its problem once, not once per rank or per step before the launch") {
  // The threads backend runs every rank in this process, so a rank's validation would be counted here too.
  for (int C : {1, 4, 8}) {
    CAPTURE(C);
    RunConfig cfg = small_run(Backend::threads);
    cfg.problem.ranks = C;
    const std::int64_t before = validations();
    const RunResult r = run(cfg);
    CHECK(r.ranks.size() == static_cast<std::size_t>(C));
    CHECK(validations() - before == 1);
    // A caller that checked the configuration already hands its validated problem on: none more.
    const ValidProblem valid = check_config(cfg);
    const std::int64_t checked = validations();
    (void)run(cfg, valid);
    CHECK(validations() == checked);
  }
}
