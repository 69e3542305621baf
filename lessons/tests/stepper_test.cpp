// The stepper replays a traced run step by step: what each rank held, computed and exchanged.
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include "sim/runtime/stepper.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <sstream>

#include "lessons/common/lesson.hpp"
#include "lessons/common/stepping.hpp"
#include "sim/core/error.hpp"
#include "sim/layout/work_table.hpp"

using namespace cpsim;

namespace {

RunResult traced(StrategyKind k, Sharding sh, int C, std::int64_t S = 16) {
  RunConfig c;
  c.strategy = k;
  c.problem.ranks = C;
  c.problem.seq = S;
  c.problem.heads = c.problem.kv_heads = 4;
  c.problem.head_dim = 4;
  c.problem.sharding = sh;
  c.tracing = true;
  return run(c);
}

const RankStep& at(const std::vector<StepFrame>& frames, const std::string& phase, int step, int rank) {
  for (const StepFrame& f : frames)
    if (f.phase == phase && f.step == step) return f.ranks.at(static_cast<std::size_t>(rank));
  FAIL("no frame " << phase << " step " << step);
  throw Error("unreachable");
}

}  // namespace

TEST_CASE("a zigzag ring has one frame per step and every rank holds the K/V of rank r - i at step i") {
  const RunResult r = traced(StrategyKind::ring, Sharding::zigzag, 4);
  const auto frames = step_frames(r);
  REQUIRE(frames.size() == 4);
  const SeqLayout L(4, 16, Sharding::zigzag);
  for (int i = 0; i < 4; ++i)
    for (int rank = 0; rank < 4; ++rank) {
      const int owner = ((rank - i) % 4 + 4) % 4;
      const RankStep& rs = at(frames, "forward", i, rank);
      std::vector<Span> want = to_spans(L.positions(owner));
      if (i > 0 && owner < rank) want = {Span{2 * owner, 2 * owner + 2}};  // half-kv: the owner's early chunk only
      REQUIRE(rs.kv_read.size() == want.size());
      for (std::size_t j = 0; j < want.size(); ++j) {
        CHECK(rs.kv_read[j].lo == want[j].lo);
        CHECK(rs.kv_read[j].hi == want[j].hi);
      }
      CHECK(rs.blocks.front().kind == (i == 0         ? BlockKind::diagonal
                                       : owner < rank ? BlockKind::half_kv
                                                      : BlockKind::half_q));
      CHECK(rs.pairs == r.config.problem.heads * ring_step_pairs(L)[rank][i]);
    }
}

TEST_CASE("the frame bytes of a ring step are one K/V block each way, except at the last step") {
  const RunResult r = traced(StrategyKind::ring, Sharding::contiguous, 4);
  const auto frames = step_frames(r);
  const std::int64_t kv_bytes = 2 * 4 * 4 * 4 * 8;  // k and v: [1, s=4, Nkv=4, D=4] doubles
  for (int i = 0; i < 4; ++i) {
    CHECK(at(frames, "forward", i, 1).bytes_sent == (i < 3 ? kv_bytes : 0));
    CHECK(at(frames, "forward", i, 1).calls.count("isend") == (i < 3 ? 1u : 0u));
  }
}

TEST_CASE("the step grid of a contiguous ring marks the blocks each rank computes and leaves skipped ones blank") {
  const RunResult r = traced(StrategyKind::ring, Sharding::contiguous, 2, 8);
  const auto frames = step_frames(r);
  const SeqLayout L(2, 8, Sharding::contiguous);
  const Grid g0 = step_grid(frames.at(0), L), g1 = step_grid(frames.at(1), L);
  CHECK(g0[3][2].rank == 1);  // step 0: rank 1's own diagonal block
  CHECK(g0[3][3].diagonal);
  CHECK(g0[2][0].rank == -1);
  CHECK(g1[2][0].rank == 1);  // step 1: rank 1 reads rank 0's K/V, fully visible
  CHECK(!g1[2][0].diagonal);
  CHECK(g1[0][0].rank == -1);  // rank 0 skips rank 1's K/V: nothing is drawn
}

TEST_CASE("the step grid of Ulysses marks every cell as computed by every rank, and draws it as *") {
  const RunResult r = traced(StrategyKind::ulysses, Sharding::contiguous, 2, 8);
  const SeqLayout L(2, 8, Sharding::contiguous);
  for (const StepFrame& f : step_frames(r)) {
    bool computed = false;
    for (const RankStep& rs : f.ranks) computed = computed || !rs.blocks.empty();
    if (!computed) continue;  // the all-to-all steps
    const Grid g = step_grid(f, L);
    CHECK(g[3][0].ranks == 2);  // both ranks compute it, each for its own heads
    CHECK(g[3][3].ranks == 2);
    CHECK(g[0][3].ranks == 0);  // masked
    const std::string drawn = draw_grid(g);
    CHECK(drawn.find("q3    *  *  *  *\\") != std::string::npos);
    std::istringstream lines(drawn);
    for (std::string line; std::getline(lines, line);)  // no rank number in any cell of a query row
      if (line.rfind("q", 0) == 0) CHECK(line.substr(6).find_first_of("0123456789") == std::string::npos);
    const std::string page = frame_pages(f, r, 24).front();
    CHECK(page.find("* = every rank computes the block, each for its own heads") != std::string::npos);
  }
}

TEST_CASE("chunk names compress runs of chunks and fall back to spans off the chunk grid") {
  const SeqLayout L(4, 16, Sharding::zigzag);
  CHECK(chunk_names({{0, 16}}, L, 'q') == "q0-7");
  CHECK(chunk_names({{0, 2}, {14, 16}}, L, 'k') == "k0,7");
  CHECK(chunk_names({{6, 10}}, L, 'k') == "k3,4");
  CHECK(chunk_names({{1, 3}}, L, 'k') == "[1,3)");
  CHECK(chunk_names({}, L, 'k') == "-");
}

TEST_CASE("a replay pauses after every page, the last frame's included, and stops when pause says so") {
  const RunResult r = traced(StrategyKind::ring, Sharding::zigzag, 4);
  int pauses = 0;
  std::ostringstream out;
  CHECK(step_through(r, out, [&] { return ++pauses < 2; }) == 2);
  CHECK(pauses == 2);
  pauses = 0;
  std::ostringstream all;
  CHECK(step_through(r, all, [&] { return ++pauses > 0; }) == 4);
  CHECK(pauses == 4);  // one page per frame at C=4, and a pause after the last
  CHECK(all.str().find("step 3 of 4") != std::string::npos);
}

TEST_CASE("every page of a frame fits a 24-line terminal: C=8 frames split into pages, C=4 ones do not") {
  for (StrategyKind k : {StrategyKind::ring, StrategyKind::hybrid, StrategyKind::ulysses, StrategyKind::all_gather}) {
    RunConfig c;
    c.strategy = k;
    c.problem.ranks = 8;
    c.problem.seq = 32;
    c.problem.heads = c.problem.kv_heads = 8;
    c.problem.head_dim = 4;
    c.backward = true;
    c.tracing = true;
    const RunResult r = run(c);
    for (const StepFrame& f : step_frames(r)) {
      const auto pages = frame_pages(f, r);
      for (const std::string& page : pages) {
        const auto lines = std::count(page.begin(), page.end(), '\n');
        CHECK(lines <= kFrameLines);
        std::istringstream in(page);
        for (std::string line; std::getline(in, line);) CHECK(line.size() <= 80);
      }
      if (k == StrategyKind::ring) CHECK(pages.size() == 2);  // 8 ranks and a 16-chunk grid: two pages
      if (pages.size() > 1) CHECK(pages[1].find("(continued)") != std::string::npos);
    }
  }
  const RunResult small = traced(StrategyKind::ring, Sharding::zigzag, 4);
  for (const StepFrame& f : step_frames(small)) CHECK(frame_pages(f, small).size() == 1);
}

TEST_CASE("a grid printed in a frame has its legend under it") {
  const RunResult r = traced(StrategyKind::ring, Sharding::contiguous, 4);
  const std::string text = format_frame(step_frames(r).at(1), r);
  const auto grid = text.find("chunks computed at this step"), legend = text.find("legend: r = rank r computes");
  REQUIRE(grid != std::string::npos);
  CHECK(legend > grid);
  CHECK(text.find("blank = visible, not computed now") > legend);
}

TEST_CASE("stepping an untraced run is an error that names the fix") {
  RunConfig c;
  c.problem.ranks = 2;
  c.problem.seq = 8;
  const RunResult r = run(c);
  CHECK_THROWS_WITH_AS(step_frames(r), doctest::Contains("tracing"), Error);
}

TEST_CASE("lesson text wraps at 78 columns and keeps a line's indent on its continuation lines") {
  const std::string w = lesson::wrap(std::string(40, 'a') + " " + std::string(40, 'b') + "\n  " + std::string(50, 'c') +
                                     " " + std::string(30, 'd'));
  CHECK(w == std::string(40, 'a') + "\n" + std::string(40, 'b') + "\n  " + std::string(50, 'c') + "\n  " +
                 std::string(30, 'd') + "\n");
  CHECK(lesson::ms(12.345) == "12.35 ms");
  CHECK(lesson::list(std::vector<double>{2, 6, 10, 14}) == "[2, 6, 10, 14]");
}

TEST_CASE("stepping at a terminal goes on at any key and ends for the whole lesson at q") {
  std::string keys = " xq";
  std::size_t next = 0;
  std::ostringstream out;
  lesson::Stepping s;
  s.start(
      true, [&] { return next < keys.size() ? keys[next++] : -1; }, out);
  CHECK(s.pause());
  CHECK(s.pause());
  CHECK_FALSE(s.pause());  // q
  CHECK_FALSE(s.active());
  CHECK_FALSE(s.pause());  // no more waiting: the key source is not asked again
  CHECK(next == 3);
  CHECK(out.str().find("q: stop stepping") != std::string::npos);
}

TEST_CASE("stepping without a terminal never waits for a key") {
  lesson::Stepping s;
  std::ostringstream out;
  int asked = 0;
  s.start(
      false, [&] { return ++asked, ' '; }, out);
  CHECK(s.pause());
  CHECK(asked == 0);
  CHECK(out.str().empty());
}

TEST_CASE("the end of input at a prompt ends stepping, as q does") {
  lesson::Stepping s;
  std::ostringstream out;
  s.start(
      true, [] { return -1; }, out);
  CHECK_FALSE(s.pause());
}

TEST_CASE("a half-kv frame shows the whole shard a rank holds beside the one chunk its call reads") {
  const RunResult r = traced(StrategyKind::ring, Sharding::zigzag, 4);
  const std::string step1 = format_frame(step_frames(r).at(1), r);
  CHECK(step1.find("  1    k0,7      half-kv: q1,6 x k0 ") != std::string::npos);
  CHECK(step1.find("  0    k3,4      half-q: q7 x k3,4 ") != std::string::npos);
}
