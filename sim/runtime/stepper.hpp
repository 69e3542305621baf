// Stepping through a finished run, one algorithm step at a time (the lessons' --step).
//
// The run is made with RunConfig::tracing on; the stepper replays what the ranks recorded. For every
// (phase, step) and every rank it shows the K/V shards the rank held (those whose keys its attention calls read),
// the sub-blocks it computed with their kinds (diagonal / half-kv / half-q / full / skipped), the visible pairs,
// and the bytes and calls it exchanged during the step, plus a causal grid of the chunks computed at that step.
// Pausing live inside the ranks would need extra messages between them, which would change the very counts
// being shown; replaying the trace changes nothing.
#pragma once
#include <cstdint>
#include <functional>
#include <iosfwd>
#include <map>
#include <string>
#include <vector>

#include "sim/layout/grid.hpp"
#include "sim/runtime/run.hpp"

namespace cpsim {

struct BlockDone {  // one attention call
  std::vector<Span> q, k;
  BlockKind kind = BlockKind::full;
  std::int64_t pairs = 0;  // visible pairs x heads x batch
};

struct RankStep {
  int rank = 0;
  std::vector<Span> kv_read;  // the union of the key positions its attention calls read (it may hold more)
  std::vector<BlockDone> blocks;
  std::int64_t pairs = 0;
  std::int64_t bytes_sent = 0, bytes_received = 0;
  std::map<std::string, int> calls;  // communication calls made during the step
};

struct StepFrame {
  std::string phase;  // "forward" / "backward"
  int step = -1;      // -1: before the strategy's first step mark
  std::vector<RankStep> ranks;
};

// Frames in the order the ranks lived them: phases in order of appearance, steps ascending.
// Throws Error when the run was not traced (RunConfig::tracing off).
std::vector<StepFrame> step_frames(const RunResult& r);

// The chunk cells (of the 2C-chunk grid) computed during a frame, under the run's mask: a cell with no visible pair
// is masked, one the mask covers in part is marked (the causal diagonal). A cell computed by several ranks (for
// different heads, as in Ulysses) shows the lowest of them. Requires S % 2C == 0.
Grid step_grid(const StepFrame& f, const SeqLayout& L, const Mask& mask = Mask(true));

// The most lines a frame's page takes: with its leading blank line and the pause prompt, a 24-line terminal.
inline constexpr int kFrameLines = 22;

// The frame as pages of at most max_lines lines for an 80-column terminal: the step's title, one line per rank
// (more when it made several calls), the calls, a line saying what the columns count, and, when the chunk grid
// exists and has at most 16 chunks, the grid of the step with its legend. A page that continues a frame repeats
// its title with "(continued)"; a rank's lines, the notes and the grid are never split.
std::vector<std::string> frame_pages(const StepFrame& f, const RunResult& r, int max_lines = kFrameLines);

// The whole frame as one text (its pages joined), for printing without pauses.
std::string format_frame(const StepFrame& f, const RunResult& r);

// Positions as chunk names under the layout: "k3,k4" or "q0-7" (prefix "k" or "q"); spans when S % 2C != 0.
std::string chunk_names(const std::vector<Span>& spans, const SeqLayout& L, char prefix);

// Shows every frame in turn, page by page, each after a blank line, calling pause() after every page (the last
// frame's included). pause() returning false stops the replay there. Returns the number of frames shown.
int step_through(const RunResult& r, std::ostream& out, const std::function<bool()>& pause);

}  // namespace cpsim
