// The memory a run will hold, before it holds it: each rank's device peak (and its message buffers' part, which sizes
// the processes backend's shared heap) exactly as the run measures it, the scaled count exact, the refusal naming
// need, limit and fixes that fit, and a refused run that allocates nothing large.
#include "sim/runtime/memory_need.hpp"

#include <doctest/doctest.h>

#include <string>

#include "sim/core/error.hpp"
#include "sim/os/child_process.hpp"
#include "sim/core/sizes.hpp"
#include "sim/kernels/cpu_device.hpp"
#include "sim/kernels/single_run.hpp"
#include "sim/model/count_run.hpp"
#include "sim/os/child_process.hpp"
#include "sim/runtime/inputs.hpp"
#include "sim/runtime/rank_run.hpp"
#include "tests/sanitizer.hpp"

using namespace cpsim;

namespace {

RunConfig config(StrategyKind k, Sharding sh, DType dt, bool backward) {
  RunConfig c;
  c.strategy = k;
  c.backward = backward;
  Problem& p = c.problem;
  p.ranks = 4;
  p.sharding = sh;
  p.batch = 2;
  p.seq = 64;
  p.heads = 4;
  p.kv_heads = 2;
  p.head_dim = 8;
  p.dtype = dt;
  if (k == StrategyKind::ulysses) p.kv_replicate = true;  // Nkv = 2 < C = 4
  return c;
}

const std::string kCpsim = std::string(CPSIM_BINARY_DIR) + "/cpsim";

}  // namespace

TEST_CASE("each rank's device peak and message peak are exactly what the run's recorder measures") {
  for (StrategyKind k : all_strategies())
    for (Sharding sh : {Sharding::zigzag, Sharding::contiguous})
      for (DType dt : {DType::f64, DType::f32})
        for (bool backward : {false, true}) {
          const RunConfig c = config(k, sh, dt, backward);
          CAPTURE(strategy_name(k));
          CAPTURE(sharding_name(sh));
          CAPTURE(dtype_name(dt));
          CAPTURE(backward);
          const MemoryNeed need = memory_need(c);
          const RunResult r = run(c);
          REQUIRE(need.device_peak.size() == r.ranks.size());
          REQUIRE(need.message_peak.size() == r.ranks.size());
          for (std::size_t i = 0; i < r.ranks.size(); ++i) {
            CHECK(need.device_peak[i] == r.ranks[i].stats.peak_bytes());
            CHECK(need.message_peak[i] == r.ranks[i].stats.message_peak_bytes());
            CHECK(need.message_peak[i] > 0);  // every strategy sends at C = 4
            CHECK(need.message_peak[i] < need.device_peak[i]);
          }
          CHECK(need.total >= need.caller);
          CHECK(need.largest_process == need.total);  // threads: one process
        }
}

TEST_CASE("each rank's device peak is linear in S, so a shorter count scaled is exact") {
  for (StrategyKind k : all_strategies()) {
    CAPTURE(strategy_name(k));
    const Problem p = config(k, Sharding::zigzag, DType::f64, true).problem;
    Problem shorter = p, longer = p;
    longer.seq = 5 * p.seq;
    const model::CountResult a = model::count_run(shorter, k), b = model::count_run(longer, k);
    for (std::size_t r = 0; r < a.ranks.size(); ++r) {
      CHECK(b.ranks[r].peak_bytes() == 5 * a.ranks[r].peak_bytes());
      CHECK(b.ranks[r].message_peak_bytes() == 5 * a.ranks[r].message_peak_bytes());
    }
  }
  // Past C x S = 2^20 tokens memory_need counts at a shorter S and scales: the same bytes as a count at S.
  RunConfig c = config(StrategyKind::ring, Sharding::zigzag, DType::f32, true);
  c.problem.seq = 3 << 18;  // C x S = 3 x 2^20
  c.problem.batch = c.problem.heads = c.problem.kv_heads = c.problem.head_dim = 1;
  const MemoryNeed need = memory_need(c);
  const model::CountResult counted = model::count_run(c.problem, c.strategy);
  for (std::size_t r = 0; r < counted.ranks.size(); ++r) {
    CHECK(need.device_peak[r] == counted.ranks[r].peak_bytes());
    CHECK(need.message_peak[r] == counted.ranks[r].message_peak_bytes());
  }
}

TEST_CASE("a ring forward's message buffers are its two travelling K/V blocks, and nothing else") {
  // kv and kv_next: [2B, s, Nkv, D] each (ring.cpp), sent and received as they are; q, k, v, out, lse and the
  // block's partial result stay the rank's own.
  const RunConfig c = config(StrategyKind::ring, Sharding::zigzag, DType::f32, false);
  const Problem& p = c.problem;
  const std::int64_t kv_block = 2 * p.batch * (p.seq / p.ranks) * p.kv_heads * p.head_dim * 4;
  const MemoryNeed need = memory_need(c);
  for (std::int64_t m : need.message_peak) CHECK(m == 2 * kv_block);
  // One rank sends nothing: no message buffers.
  RunConfig one = c;
  one.problem.ranks = 1;
  for (std::int64_t m : memory_need(one).message_peak) CHECK(m == 0);
}

TEST_CASE("a run beyond the limit is refused naming its need, the limit and a fix that makes it fit") {
  RunConfig c = config(StrategyKind::all_gather, Sharding::zigzag, DType::f64, true);
  c.problem.seq = 4096;
  c.check = true;
  const MemoryNeed need = memory_need(c);
  c.memory_limit = need.total - 1;
  std::string message;
  try {
    check_memory(c);
  } catch (const UsageError& e) {
    message = e.what();
  }
  CAPTURE(message);
  CHECK(message.rfind("the run needs " + format_bytes(static_cast<double>(need.total)) + " of memory (4 ranks of up to",
                      0) == 0);
  CHECK(message.find("more than the " + format_bytes(static_cast<double>(need.total - 1)) +
                     " that --memory-limit allows") != std::string::npos);
  // Every fix offered makes the run fit: the shorter sequence it names, and each other flag.
  const auto at = message.find("--seq ");
  REQUIRE(at != std::string::npos);
  RunConfig shorter = c;
  shorter.problem.seq = std::stoll(message.substr(at + 6));
  CHECK(shorter.problem.seq < c.problem.seq);
  CHECK_NOTHROW(check_memory(shorter));
  for (const char* fix : {"--strategy ring", "--dtype f32", "drop --check"})
    if (message.find(fix) != std::string::npos) {
      RunConfig f = c;
      if (fix[2] == 's') f.strategy = StrategyKind::ring;
      if (fix[2] == 'd') f.problem.dtype = DType::f32;
      if (fix[0] == 'd') f.check = false;
      CHECK_NOTHROW(check_memory(f));
    }
  CHECK(message.find("or set the limit with --memory-limit BYTES") != std::string::npos);
  c.memory_limit = need.total;
  CHECK_NOTHROW(check_memory(c));
}

TEST_CASE("a run far beyond any machine is refused without counting its ranks") {
  RunConfig c = config(StrategyKind::ring, Sharding::zigzag, DType::f64, false);
  c.problem.seq = std::int64_t{1} << 36;  // 2^36 tokens: terabytes of doubles
  c.memory_limit = std::int64_t{1} << 30;
  const MemoryNeed need = memory_need(c, c.memory_limit);
  CHECK(need.lower_bound);
  CHECK(need.device_peak.empty());
  CHECK_THROWS_WITH_AS(check_memory(c), doctest::Contains("the run needs at least"), UsageError);
}

TEST_CASE("one device's peak is exactly what the device measures, and the need covers it and the host copies") {
  const AttentionShape sh{2, 96, 96, 4, 2, 8};
  for (DType dt : {DType::f32, DType::f64})
    for (bool backward : {false, true}) {
      const AttentionProblem p = attention_problem(sh, true, dt, 3);
      Recorder rec;
      CpuDevice dev(rec);
      CHECK(run_single_device(dev, p, dt, backward).peak_bytes == single_device_peak(sh, dt, backward));
      // The host holds the inputs and results as doubles besides: more than the device.
      CHECK(single_device_need(sh, dt, backward, false) > 2 * single_device_peak(sh, dt, backward));
      CHECK(single_device_need(sh, dt, backward, true) > single_device_need(sh, dt, backward, false));
    }
  CHECK_THROWS_WITH_AS(check_single_device_memory(sh, DType::f64, true, true, 1000),
                       doctest::Contains("that --memory-limit allows"), UsageError);
}

// The two cases that measure a child's memory need a plain build (tests/sanitizer.hpp).
using cpsim::test::kShadowMemory;

TEST_CASE("a refused run allocates nothing large: under a 1 GiB address-space limit it still refuses, exit 2" *
          doctest::skip(kShadowMemory)) {
  // 2^30 tokens of 4 heads of 16: 512 GiB of q alone. Anything large allocated before the refusal would fail under
  // RLIMIT_AS with std::bad_alloc (exit 1) instead.
  ChildOptions o;
  o.address_space_limit = std::int64_t{1} << 30;
  o.stdout_path = o.stderr_path = "/dev/null";
  for (const char* args : {"--seq 1073741824 --memory-limit 1G", "--seq 1073741824",
                           "--strategy all_gather --ranks 8 --seq 65536 --heads 8 --head-dim 64 --backward"}) {
    CAPTURE(args);
    std::vector<std::string> argv{kCpsim, "run"};
    for (std::string a = args; !a.empty();) {
      const auto sp = a.find(' ');
      argv.push_back(a.substr(0, sp));
      a = sp == std::string::npos ? "" : a.substr(sp + 1);
    }
    const ChildResult r = run_child(argv, o);
    CHECK(r.exit_code == 2);
    CHECK(r.peak_rss_bytes < (std::int64_t{64} << 20));
  }
}

TEST_CASE("a run's estimated memory is its peak resident memory, within 15% and the program's own 64 MiB" *
          doctest::skip(kShadowMemory)) {
  // Shapes of little compute and much memory (S = 32, 16 heads of 1024), each run as a child process whose peak
  // resident memory the kernel reports. What a rank holds beside its device is its results, as doubles and
  // serialised once; the caller keeps the global inputs only to check them.
  struct Case {
    StrategyKind strategy;
    DType dtype;
    int kv_heads;
    bool backward, check;
    // Every rank's peak buffers are live at one moment: no rank gets through the exchanges they serve (the ring's
    // steps, the all-gather) before every rank has allocated them. See the last check.
    bool peaks_meet;
  };
  for (const Case& k : {Case{StrategyKind::ring, DType::f64, 16, true, false, true},
                        Case{StrategyKind::ring, DType::f64, 16, true, true, true},
                        Case{StrategyKind::all_gather, DType::f32, 4, false, true, true},
                        Case{StrategyKind::ulysses, DType::f64, 16, false, false, false}}) {
    RunConfig c;
    c.strategy = k.strategy;
    c.backward = k.backward;
    c.check = k.check;
    c.keep_outputs = false;  // as `cpsim run` without --dump
    Problem& p = c.problem;
    p.ranks = 4;
    p.seq = 32;
    p.batch = 4;
    p.heads = 16;
    p.kv_heads = k.kv_heads;
    p.head_dim = 1024;
    p.dtype = k.dtype;
    std::vector<std::string> argv{kCpsim,       "run",
                                  "--strategy", std::string(strategy_name(k.strategy)),
                                  "--ranks",    "4",
                                  "--seq",      "32",
                                  "--batch",    "4",
                                  "--heads",    "16",
                                  "--kv-heads", std::to_string(k.kv_heads),
                                  "--head-dim", "1024",
                                  "--dtype",    std::string(dtype_name(k.dtype))};
    if (k.backward) argv.push_back("--backward");
    if (k.check) argv.push_back("--check");
    CAPTURE(argv);
    const MemoryNeed need = memory_need(c);
    ChildOptions o;
    o.stdout_path = o.stderr_path = "/dev/null";
    const ChildResult r = run_child(argv, o);
    REQUIRE(r.exit_code == 0);
    const double rss = static_cast<double>(r.peak_rss_bytes), est = static_cast<double>(need.total);
    MESSAGE("estimated " << est / (1 << 20) << " MiB, peak RSS " << rss / (1 << 20) << " MiB");
    CHECK(rss <= est * 1.15 + (64 << 20));
    // The estimate adds every rank's peak as if they were reached together, so this side has more room. Ulysses'
    // ranks reach theirs one by one, each around its own all-to-alls, and the ranks (threads of one process) reuse
    // the blocks others gave back (host_pool), so how low the process's peak falls depends on the scheduling (seen:
    // 160 MiB estimated against 137 MiB in one run and 120 MiB in another): it is not held to this side.
    if (k.peaks_meet) CHECK(est <= rss * 1.3);
  }
}
