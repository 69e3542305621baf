#include "sim/runtime/stepper.hpp"

#include <unistd.h>

#include <algorithm>
#include <istream>
#include <ostream>
#include <set>
#include <sstream>

#include "sim/core/error.hpp"
#include "sim/runtime/report.hpp"

namespace cpsim {

namespace {

std::string pad(std::string s, std::size_t w) {
  if (s.size() < w) s.append(w - s.size(), ' ');
  return s + " ";
}

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
        std::vector<Span> held = rs.kv_held;
        held.insert(held.end(), e.k_spans.begin(), e.k_spans.end());
        rs.kv_held = merge_spans(held);
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

Grid step_grid(const StepFrame& f, const SeqLayout& L) {
  const int n = 2 * L.ranks();
  Grid g(static_cast<std::size_t>(n), std::vector<GridCell>(static_cast<std::size_t>(n)));
  for (int qc = 0; qc < n; ++qc)
    for (int kc = qc + 1; kc < n; ++kc) g[static_cast<std::size_t>(qc)][static_cast<std::size_t>(kc)].masked = true;
  for (const RankStep& rs : f.ranks)
    for (const BlockDone& b : rs.blocks) {
      if (b.kind == BlockKind::skipped) continue;
      for (int qc : chunks_of(b.q, L))
        for (int kc : chunks_of(b.k, L)) {
          if (kc > qc) continue;
          GridCell& cell = g[static_cast<std::size_t>(qc)][static_cast<std::size_t>(kc)];
          if (cell.rank < 0 || rs.rank < cell.rank) cell.rank = rs.rank;
          cell.diagonal = kc == qc;
        }
    }
  return g;
}

std::string format_frame(const StepFrame& f, const RunResult& r) {
  const SeqLayout L = r.config.problem.layout();
  int steps = 0;  // the phase's step marks, whether or not a step computed anything
  for (const RankReport& rk : r.ranks)
    for (const TraceEvent& e : rk.stats.events())
      if (e.type == TraceEvent::Type::step && e.phase == f.phase) steps = std::max(steps, e.step + 1);
  std::ostringstream os;
  os << f.phase << ", "
     << (f.step < 0 ? "before the first step"
                    : "step " + std::to_string(f.step) + " of " + std::to_string(std::max(steps, f.step + 1)))
     << "\n";
  os << "  " << pad("rank", 4) << pad("K/V held", 9) << pad("computes (kind: query x key chunks)", 33)
     << pad("pairs", 7) << pad("sent", 9) << "received\n";
  bool same_calls = true;
  for (const RankStep& rs : f.ranks) same_calls = same_calls && rs.calls == f.ranks.front().calls;
  for (const RankStep& rs : f.ranks) {
    const std::string head = "  " + pad(std::to_string(rs.rank), 4) + pad(chunk_names(rs.kv_held, L, 'k'), 9);
    const std::string tail = pad(std::to_string(rs.pairs), 7) + pad(format_bytes(double(rs.bytes_sent)), 9) +
                             format_bytes(double(rs.bytes_received));
    if (rs.blocks.empty()) {
      os << head << pad("-", 33) << tail << "\n";
      continue;
    }
    for (std::size_t i = 0; i < rs.blocks.size(); ++i) {
      const BlockDone& b = rs.blocks[i];
      const std::string what =
          std::string(block_kind_name(b.kind)) + ": " + chunk_names(b.q, L, 'q') + " x " + chunk_names(b.k, L, 'k');
      if (i == 0)
        os << head << pad(what, 33) << tail << "\n";
      else
        os << std::string(head.size(), ' ') << what << "\n";
    }
  }
  if (same_calls)
    os << "  calls during this step, on every rank: " << calls_text(f.ranks.front().calls) << "\n";
  else
    for (const RankStep& rs : f.ranks)
      os << "  calls during this step, rank " << rs.rank << ": " << calls_text(rs.calls) << "\n";
  bool computed = false;
  for (const RankStep& rs : f.ranks) computed = computed || !rs.blocks.empty();
  if (computed && has_chunk_grid(L) && 2 * L.ranks() <= 16) {
    os << "  chunks computed at this step (cell: the rank computing it, '\\' half masked):\n";
    std::istringstream grid(draw_grid(step_grid(f, L)));
    for (std::string line; std::getline(grid, line);) os << "    " << line << "\n";
    if (shared_cells(f, L)) os << "  (a cell several ranks compute, each for its own heads, shows the lowest)\n";
  }
  return os.str();
}

int step_through(const RunResult& r, std::istream& in, std::ostream& out, bool interactive) {
  const std::vector<StepFrame> frames = step_frames(r);
  int shown = 0;
  for (const StepFrame& f : frames) {
    out << "\n" << format_frame(f, r);
    ++shown;
    if (!interactive || shown == static_cast<int>(frames.size())) continue;
    out << "-- Enter: next step, q: quit -- " << std::flush;
    std::string line;
    if (!std::getline(in, line) || line == "q" || line == "Q") {
      out << "\n";
      break;
    }
  }
  return shown;
}

bool stdin_is_terminal() {
  return ::isatty(STDIN_FILENO) == 1;
}

}  // namespace cpsim
