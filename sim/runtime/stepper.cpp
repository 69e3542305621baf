#include "sim/runtime/stepper.hpp"

#include <algorithm>
#include <ostream>
#include <set>
#include <sstream>

#include "sim/core/columns.hpp"
#include "sim/core/error.hpp"
#include "sim/runtime/report.hpp"

namespace cpsim {

namespace {

// A cell in a column of `w` and one space after it.
std::string cell(const std::string& s, std::size_t w) { return left(s, w) + " "; }

std::string spans_text(const std::vector<Span>& spans) {
  std::string s;
  for (const Span& sp : spans)
    s += (s.empty() ? "" : " ") + ("[" + std::to_string(sp.lo) + "," + std::to_string(sp.hi) + ")");
  return s;
}

// Union of spans, sorted and merged.
std::vector<Span> merge_spans(std::vector<Span> spans) {
  std::sort(spans.begin(), spans.end(), [](const Span& a, const Span& b) { return a.lo < b.lo; });
  std::vector<Span> out;
  for (const Span& s : spans) {
    if (!out.empty() && s.lo <= out.back().hi)
      out.back().hi = std::max(out.back().hi, s.hi);
    else
      out.push_back(s);
  }
  return out;
}

bool has_chunk_grid(const SeqLayout& L) {
  return L.seq() % (2 * L.ranks()) == 0;
}

// Chunk indices covered by the spans; empty when a span does not fall on chunk boundaries.
std::vector<int> chunks_of(const std::vector<Span>& spans, const SeqLayout& L) {
  if (!has_chunk_grid(L)) return {};
  const std::int64_t t = L.chunk_len();
  std::set<int> chunks;
  for (const Span& sp : spans) {
    if (sp.lo % t != 0 || sp.hi % t != 0) return {};
    for (std::int64_t c = sp.lo / t; c < sp.hi / t; ++c) chunks.insert(static_cast<int>(c));
  }
  return {chunks.begin(), chunks.end()};
}

RankStep& rank_step(StepFrame& f, int rank) {
  for (RankStep& rs : f.ranks)
    if (rs.rank == rank) return rs;
  f.ranks.push_back(RankStep{});
  f.ranks.back().rank = rank;
  return f.ranks.back();
}

std::string calls_text(const std::map<std::string, int>& calls) {
  std::string s;
  for (const auto& [k, n] : calls) s += (s.empty() ? "" : ", ") + k + " " + std::to_string(n);
  return s.empty() ? "none" : s;
}

// Whether two ranks compute the same chunk cell during the frame (for different heads, as in Ulysses).
bool shared_cells(const StepFrame& f, const SeqLayout& L) {
  std::set<std::pair<int, int>> seen;
  for (const RankStep& rs : f.ranks) {
    std::set<std::pair<int, int>> mine;
    for (const BlockDone& b : rs.blocks)
      if (b.kind != BlockKind::skipped)
        for (int qc : chunks_of(b.q, L))
          for (int kc : chunks_of(b.k, L))
            if (kc <= qc) mine.insert({qc, kc});
    for (const auto& cell : mine)
      if (!seen.insert(cell).second) return true;
  }
  return false;
}

// The whole shards of the ranks whose positions the spans touch: what a rank holds when it read those keys (every
// strategy moves K/V a rank's shard at a time), e.g. k0,7 for a zigzag rank that read only k0.
std::vector<Span> shards_of(const std::vector<Span>& spans, const SeqLayout& L) {
  std::set<int> owners;
  for (const Span& sp : spans)
    for (std::int64_t x = sp.lo; x < sp.hi; ++x) owners.insert(L.owner(x));
  std::vector<Span> held;
  for (int o : owners)
    for (const Span& sp : L.spans(o)) held.push_back(sp);
  return merge_spans(held);
}

}  // namespace

std::string chunk_names(const std::vector<Span>& spans, const SeqLayout& L, char prefix) {
  if (spans.empty()) return "-";
  const std::vector<int> c = chunks_of(spans, L);
  if (c.empty()) return spans_text(spans);
  std::string s(1, prefix);
  for (std::size_t i = 0; i < c.size();) {
    std::size_t j = i;
    while (j + 1 < c.size() && c[j + 1] == c[j] + 1) ++j;
    if (i > 0) s += ",";
    if (j >= i + 2)
      s += std::to_string(c[i]) + "-" + std::to_string(c[j]);
    else
      s += std::to_string(c[i]) + (j == i + 1 ? "," + std::to_string(c[j]) : "");
    i = j + 1;
  }
  return s;
}

std::vector<StepFrame> step_frames(const RunResult& r) {
  if (!r.config.tracing) throw Error("stepping needs a traced run: set RunConfig::tracing");
  std::vector<std::string> phases;
  std::vector<StepFrame> frames;
  auto frame = [&](const std::string& phase, int step) -> StepFrame& {
    if (std::find(phases.begin(), phases.end(), phase) == phases.end()) phases.push_back(phase);
    for (StepFrame& f : frames)
      if (f.phase == phase && f.step == step) return f;
    frames.push_back(StepFrame{phase, step, {}});
    return frames.back();
  };
  for (const RankReport& rk : r.ranks)
    for (const TraceEvent& e : rk.stats.events()) {
      if (e.phase.empty()) continue;  // before the first phase: setting up communicators
      if (e.type == TraceEvent::Type::step) {
        rank_step(frame(e.phase, e.step), rk.rank);
      } else if (e.type == TraceEvent::Type::compute) {
        RankStep& rs = rank_step(frame(e.phase, e.step), rk.rank);
        rs.blocks.push_back(BlockDone{e.q_spans, e.k_spans, e.kind, e.pairs});
        rs.pairs += e.pairs;
        std::vector<Span> held = rs.kv_read;
        held.insert(held.end(), e.k_spans.begin(), e.k_spans.end());
        rs.kv_read = merge_spans(held);
      } else if (e.type == TraceEvent::Type::comm) {
        RankStep& rs = rank_step(frame(e.phase, e.step), rk.rank);
        rs.bytes_sent += e.bytes_sent;
        rs.bytes_received += e.bytes_received;
        rs.calls[e.name] += 1;
      }
    }
  for (StepFrame& f : frames) {
    for (const RankReport& rk : r.ranks) rank_step(f, rk.rank);  // every rank appears, idle or not
    std::sort(f.ranks.begin(), f.ranks.end(), [](const RankStep& a, const RankStep& b) { return a.rank < b.rank; });
  }
  auto phase_index = [&](const std::string& p) { return std::find(phases.begin(), phases.end(), p) - phases.begin(); };
  std::stable_sort(frames.begin(), frames.end(), [&](const StepFrame& a, const StepFrame& b) {
    const auto pa = phase_index(a.phase), pb = phase_index(b.phase);
    return pa != pb ? pa < pb : a.step < b.step;
  });
  return frames;
}

Grid step_grid(const StepFrame& f, const SeqLayout& L, const Mask& mask) {
  const int n = 2 * L.ranks();
  const std::int64_t t = L.chunk_len();
  Grid g(static_cast<std::size_t>(n), std::vector<GridCell>(static_cast<std::size_t>(n)));
  // What the mask leaves of each chunk cell: none (masked), part (drawn r\), all. Causal: above the diagonal, on it.
  std::vector<std::vector<std::int64_t>> pairs(static_cast<std::size_t>(n), std::vector<std::int64_t>(n));
  for (int qc = 0; qc < n; ++qc)
    for (int kc = 0; kc < n; ++kc) {
      const std::int64_t v = visible_pairs(Positions::range(qc * t, t), Positions::range(kc * t, t), mask);
      pairs[static_cast<std::size_t>(qc)][static_cast<std::size_t>(kc)] = v;
      g[static_cast<std::size_t>(qc)][static_cast<std::size_t>(kc)].masked = v == 0;
    }
  std::vector<std::vector<int>> last(static_cast<std::size_t>(n), std::vector<int>(n, -1));  // last rank counted
  for (const RankStep& rs : f.ranks)
    for (const BlockDone& b : rs.blocks) {
      if (b.kind == BlockKind::skipped) continue;
      for (int qc : chunks_of(b.q, L))
        for (int kc : chunks_of(b.k, L)) {
          const std::int64_t v = pairs[static_cast<std::size_t>(qc)][static_cast<std::size_t>(kc)];
          if (v == 0) continue;
          GridCell& cell = g[static_cast<std::size_t>(qc)][static_cast<std::size_t>(kc)];
          int& seen = last[static_cast<std::size_t>(qc)][static_cast<std::size_t>(kc)];
          if (seen != rs.rank) ++cell.ranks;  // f.ranks is in rank order: a rank's blocks come together
          seen = rs.rank;
          if (cell.rank < 0 || rs.rank < cell.rank) cell.rank = rs.rank;
          cell.diagonal = v < t * t;
        }
    }
  return g;
}

std::vector<std::string> frame_pages(const StepFrame& f, const RunResult& r, int max_lines) {
  const SeqLayout L = r.config.problem.layout();
  int steps = 0;  // the phase's step marks, whether or not a step computed anything
  for (const RankReport& rk : r.ranks)
    for (const TraceEvent& e : rk.stats.events())
      if (e.type == TraceEvent::Type::step && e.phase == f.phase) steps = std::max(steps, e.step + 1);
  const std::string title =
      f.phase + ", " +
      (f.step < 0 ? "before the first step"
                  : "step " + std::to_string(f.step) + " of " + std::to_string(std::max(steps, f.step + 1)));
  const std::string header = "  " + cell("rank", 4) + cell("K/V held", 9) +
                             cell("computes (kind: query x key chunks)", 33) + cell("pairs", 7) + cell("sent", 9) +
                             "received";

  // 1. The table: one group of lines per rank (one line per attention call), kept together on a page.
  std::vector<std::vector<std::string>> groups;
  for (const RankStep& rs : f.ranks) {
    const std::string head =
        "  " + cell(std::to_string(rs.rank), 4) + cell(chunk_names(shards_of(rs.kv_read, L), L, 'k'), 9);
    const std::string tail = cell(std::to_string(rs.pairs), 7) + cell(format_bytes(double(rs.bytes_sent)), 9) +
                             format_bytes(double(rs.bytes_received));
    std::vector<std::string> g;
    if (rs.blocks.empty()) g.push_back(head + cell("-", 33) + tail);
    for (std::size_t i = 0; i < rs.blocks.size(); ++i) {
      const BlockDone& b = rs.blocks[i];
      const std::string what =
          std::string(block_kind_name(b.kind)) + ": " + chunk_names(b.q, L, 'q') + " x " + chunk_names(b.k, L, 'k');
      g.push_back(i == 0 ? head + cell(what, 33) + tail : std::string(head.size(), ' ') + what);
    }
    groups.push_back(g);
  }
  // 2. The calls, and what the columns count.
  std::vector<std::string> notes;
  bool same_calls = true;
  for (const RankStep& rs : f.ranks) same_calls = same_calls && rs.calls == f.ranks.front().calls;
  if (same_calls)
    notes.push_back("  calls during this step, on every rank: " + calls_text(f.ranks.front().calls));
  else
    for (const RankStep& rs : f.ranks)
      notes.push_back("  calls during this step, rank " + std::to_string(rs.rank) + ": " + calls_text(rs.calls));
  notes.push_back("  K/V held: the shards whose keys it read; pairs: visible pairs x heads x batch");
  // 3. The grid of the chunks computed at this step, with its legend (16 chunks at most: 80 columns).
  std::vector<std::string> grid;
  bool computed = false;
  for (const RankStep& rs : f.ranks) computed = computed || !rs.blocks.empty();
  if (computed && has_chunk_grid(L) && 2 * L.ranks() <= 16) {
    grid.push_back("  chunks computed at this step (rows: query chunks, columns: key chunks):");
    const Mask mask = r.config.problem.mask();
    const Grid g = step_grid(f, L, mask);
    std::istringstream cells(draw_grid(g)),
        legend(grid_legend("computes the block", true, "  ", !mask.plain() || !mask.causal()));
    for (std::string line; std::getline(cells, line);) grid.push_back("    " + line);
    for (std::string line; std::getline(legend, line);) grid.push_back(line);
    if (shared_cells(f, L)) {
      bool every = true;  // every computed cell computed by every rank (Ulysses)
      for (const auto& row : g)
        for (const GridCell& c : row) every = every && (c.rank < 0 || c.ranks == L.ranks());
      grid.push_back(every ? "  * = every rank computes the block, each for its own heads"
                           : "  * = several ranks compute the block, each for its own heads");
    }
  }

  // 4. Pages of at most max_lines lines: the table's rank groups, the notes and the grid each kept whole.
  std::vector<std::string> pages;
  std::vector<std::string> page{title};
  const auto flush = [&](bool table_continues) {
    std::string text;
    for (const std::string& line : page) text += line + "\n";
    pages.push_back(text);
    page = {title + " (continued)"};
    if (table_continues) page.push_back(header);
  };
  const auto fits = [&](std::size_t n) { return static_cast<int>(page.size() + n) <= max_lines; };
  page.push_back(header);
  for (const auto& g : groups) {
    if (!fits(g.size()) && page.size() > 2) flush(true);
    page.insert(page.end(), g.begin(), g.end());
  }
  if (!fits(notes.size())) flush(false);
  page.insert(page.end(), notes.begin(), notes.end());
  if (!grid.empty()) {
    if (!fits(grid.size())) flush(false);
    page.insert(page.end(), grid.begin(), grid.end());
  }
  std::string text;
  for (const std::string& line : page) text += line + "\n";
  pages.push_back(text);
  return pages;
}

std::string format_frame(const StepFrame& f, const RunResult& r) {
  std::string s;
  for (const std::string& page : frame_pages(f, r, 1 << 20)) s += page;
  return s;
}

int step_through(const RunResult& r, std::ostream& out, const std::function<bool()>& pause) {
  int shown = 0;
  for (const StepFrame& f : step_frames(r)) {
    ++shown;
    for (const std::string& page : frame_pages(f, r, kFrameLines)) {
      out << "\n" << page;
      if (!pause()) return shown;
    }
  }
  return shown;
}

}  // namespace cpsim
