// Lesson 8: A2A + P2P on a 2-D mesh, C = A x R.
//
// The hybrid strategy runs twice on C=8 ranks, as 2x4 and as 4x2 (A2A group size x ring size). The groups are
// read back from the trace (the world ranks of each all-to-all call, the peers of each ring send), and so are
// the positions each rank attends for after the A2A (its attention calls' query spans).
#include <algorithm>
#include <iostream>
#include <set>

#include "lessons/common/lesson.hpp"
#include "sim/runtime/stepper.hpp"

using namespace cpsim;

namespace {

std::string ranks_text(const std::vector<int>& v) {
  std::string s = "[";
  for (std::size_t i = 0; i < v.size(); ++i) s += (i ? "," : "") + std::to_string(v[i]);
  return s + "]";
}

struct Mesh {
  std::vector<std::vector<int>> a2a_group, ring;  // per rank
};

Mesh groups_from_trace(const RunResult& r) {
  const int C = static_cast<int>(r.ranks.size());
  Mesh m;
  std::vector<int> next(static_cast<std::size_t>(C), -1);
  for (const RankReport& rk : r.ranks) {
    std::vector<int> group;
    for (const TraceEvent& e : rk.stats.events()) {
      if (e.type != TraceEvent::Type::comm || e.phase != "forward") continue;
      if (e.name == "all_to_all") group = e.group;
      if (e.name == "isend") next[static_cast<std::size_t>(rk.rank)] = e.peer;
    }
    m.a2a_group.push_back(group);
  }
  for (int r = 0; r < C; ++r) {  // follow the ring's sends from r until they come back
    std::vector<int> ring{r};
    for (int x = next[static_cast<std::size_t>(r)]; x >= 0 && x != r; x = next[static_cast<std::size_t>(x)])
      ring.push_back(x);
    std::sort(ring.begin(), ring.end());
    m.ring.push_back(ring);
  }
  return m;
}

RunResult show_mesh(const lesson::Options& o, int A) {
  RunConfig c = o.config;
  c.strategy = StrategyKind::hybrid;
  c.problem.a2a = A;
  c.tracing = true;
  validate(c.problem, StrategyKind::hybrid);
  const Problem& p = c.problem;
  const int C = p.ranks, R = C / A;
  const SeqLayout L(C, p.seq, p.sharding);
  std::cout << "C = " << C << " as A x R = " << A << " x " << R << " (A2A group size x ring size)\n\n";
  const RunResult r = lesson::run_and_step(c, o);
  const Mesh m = groups_from_trace(r);
  std::set<std::vector<int>> a2a(m.a2a_group.begin(), m.a2a_group.end()), rings(m.ring.begin(), m.ring.end());
  std::string a2a_text, ring_text;
  for (const auto& g : a2a) a2a_text += " " + ranks_text(g);
  for (const auto& g : rings) ring_text += " " + ranks_text(g);
  std::cout << "  A2A groups (ranks of each all-to-all call):" << a2a_text << "\n"
            << "  rings (following each rank's K/V sends):   " << ring_text << "\n\n";
  const std::int64_t nh = p.heads / A;
  std::cout << "  rank  heads after A2A  positions after A2A (chunks of " << L.chunk_len() << ")\n";
  // The ring's first step: the first forward frame with attention calls (the all-to-all comes before it).
  const auto frames = step_frames(r);
  const auto first = std::find_if(frames.begin(), frames.end(), [](const StepFrame& f) {
    return f.phase == "forward" &&
           std::any_of(f.ranks.begin(), f.ranks.end(), [](const RankStep& rs) { return !rs.blocks.empty(); });
  });
  lesson::expect(first != frames.end(), "the hybrid computes attention");
  std::vector<std::vector<Span>> group_rows(static_cast<std::size_t>(C / A));
  for (const RankStep& rs : first->ranks) {
    const auto& g = m.a2a_group[static_cast<std::size_t>(rs.rank)];
    const auto member = std::find(g.begin(), g.end(), rs.rank) - g.begin();
    lesson::expect(static_cast<int>(g.size()) == A && rs.rank / A == g.front() / A,
                   "A2A groups of A consecutive ranks");
    lesson::expect(static_cast<int>(m.ring[static_cast<std::size_t>(rs.rank)].size()) == R, "rings of R ranks");
    std::vector<Span> q;
    for (const BlockDone& b : rs.blocks) q.insert(q.end(), b.q.begin(), b.q.end());
    std::int64_t rows = 0;
    for (const Span& sp : q) rows += sp.hi - sp.lo;
    lesson::expect(rows == p.seq / R, "after the A2A a rank attends for S/R positions");
    auto& same = group_rows[static_cast<std::size_t>(rs.rank / A)];
    if (member == 0) same = q;
    lesson::expect(chunk_names(q, L, 'q') == chunk_names(same, L, 'q'), "a group's members attend the same rows");
    std::cout << "  " << lesson::left(std::to_string(rs.rank), 6)
              << lesson::left(
                     "h" + std::to_string(member * nh) + (nh > 1 ? "-" + std::to_string((member + 1) * nh - 1) : ""),
                     17)
              << chunk_names(q, L, 'q') << "\n";
  }
  std::cout << "  heads: group member m holds heads m N/A to (m+1) N/A - 1, by the A2A's layout\n"
               "  positions: the query rows of its attention calls at the ring's first step\n\n";
  lesson::say("Every member of an A2A group attends for the same " + std::to_string(p.seq / R) +
              " positions (S/R) "
              "but its own N/A = " +
              std::to_string(nh) + " of the heads: [B, S/C, N, D] became [B, S/R, N/A, D]. The " + std::to_string(A) +
              " rings then run ring attention side by side, one per head group, on a zigzag " + std::to_string(A) +
              " times coarser than the C-rank one.");
  return r;
}

int run_lesson(int argc, char** argv) {
  lesson::Options o;
  Problem& p = o.config.problem;
  p.ranks = 8;
  p.seq = 32;
  p.heads = p.kv_heads = 4;
  p.head_dim = 8;
  if (!lesson::parse_options(argc, argv, "Lesson 8: the 2-D mesh", lesson::kShape | lesson::kMask | lesson::kStep, o))
    return 0;
  p.sharding = Sharding::zigzag;
  require(p.ranks == 8, "this lesson lays out C = 8 as 2 x 4 and 4 x 2", "use --ranks 8");

  lesson::title("Lesson 8: A2A + P2P on a 2-D mesh");
  lesson::shape(o.config.problem, "as 2 x 4, then 4 x 2");
  lesson::say(
      "Ulysses is limited by the heads, the ring by nothing but pays C-1 exchanges. The hybrid combines "
      "them on a mesh C = A x R: ranks form groups of A consecutive ranks that all-to-all among themselves "
      "(fast links, e.g. inside a node), and rings of R ranks with stride A that pass K/V (across nodes).");
  lesson::banner(1, "2 x 4");
  const RunResult two = show_mesh(o, 2);
  lesson::banner(2, "4 x 2");
  const RunResult four = show_mesh(o, 4);
  std::cout << "The hybrid on both meshes, against the single-process reference:\n";
  const bool ok = lesson::verdicts(two, "2 x 4");
  return lesson::verdicts(four, "4 x 2") && ok ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  return lesson::guarded("lesson 08_mesh", [&] { return run_lesson(argc, argv); });
}
