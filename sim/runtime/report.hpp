// How a run is shown: the per-rank table, the work per step, the check, and the same as one JSON object.
#pragma once
#include <string>

#include "sim/core/json.hpp"
#include "sim/core/positions.hpp"
#include "sim/core/sizes.hpp"  // format_bytes
#include "sim/runtime/run.hpp"

namespace cpsim {

std::string format_report(const RunResult& r);  // text for an 80..120-column terminal
std::string format_check(const RunResult& r);   // the check section alone (with per-rank CORRECT/ERROR)
// Per rank: the K/V bytes it needs (kv_traffic.hpp), the bytes sent to it, and the redundancy.
std::string format_need(const RunResult& r);
std::string redundancy_text(double redundancy);  // "33.3%", or "all redundant (need 0)"
Json run_json(const RunResult& r);              // {config, ranks, check, wall_ms}
// A rank's bytes, messages, calls, peak memory and phase times, as run_json writes them.
void add_rank_counts(Json& rank, const Recorder& stats);
// Position runs as [[first, count, stride, width], ...] (one block written as [first, count, 1, 1]).
Json runs_json(std::span<const PosRun> runs);

}  // namespace cpsim
