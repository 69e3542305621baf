// A run's trace: every rank's compute, communication and idle time, in the Chrome Trace Event Format, so the
// file opens in cpsim's visualizer (visualizer/index.html), in Perfetto and in chrome://tracing.
//
// One process row per rank (pid = rank), four lanes (tid):
//   0 "phase / step"   the forward and backward phases, and each step inside them, as nested slices
//   1 "compute"        every attention call: its query and key positions (as runs) and its sub-block kind
//   2 "communication"  every send/recv/collective: peer or group (world ranks) and bytes
//   3 "idle"           every wait: the time the rank was blocked (a request's wait or a blocking call)
// Times are microseconds since the run's shared epoch. cpsim's own fields ride in each event's `args`; the run's
// config (with its mask), layout (each rank's positions as runs) and per-rank stats ride in `otherData.run` (the
// same object as `cpsim run --json`), so the visualizer needs nothing else.
//
// Format versions (otherData.format_version):
//   1  positions and a call's q/k as spans [lo, hi), the mask only as config.causal (a striped rank's spans are one
//      per token)
//   2  positions and a call's q/k as runs [first, count, stride, width] (sim/core/positions.hpp: `count` positions
//      in blocks of `width`, block b at first + b * stride), keys `position_runs`, `q_runs`, `k_runs`; the mask as
//      config.attention_mask {kind, window, document_bounds}: a few numbers per document, never one per token
// The visualizer reads both.
#pragma once
#include <filesystem>
#include <string>
#include <vector>

#include "sim/core/json.hpp"

#include "sim/runtime/run.hpp"

namespace cpsim {

inline constexpr int kTraceFormatVersion = 2;
inline constexpr int kLaneSteps = 0, kLaneCompute = 1, kLaneComm = 2, kLaneIdle = 3;  // the tids

// The trace as JSON text: {"displayTimeUnit", "otherData", "traceEvents"}. Needs a run with RunConfig::tracing
// (throws UsageError otherwise: the events were never recorded).
std::string trace_json(const RunResult& r);
void write_trace(const std::filesystem::path& path, const RunResult& r);
// The same for a run described by its otherData.run object (config, per-rank totals) and its traced ranks: a run that
// is not a RunResult (an inference step, sim/runtime/inference_run.hpp).
std::string trace_json(const Json& run, const std::vector<RankReport>& ranks);

// The visualizer as one self-contained HTML page (page, script, style and the trace inlined) that opens with a
// double-click. bench_json, when not empty, is the output of `cpsim bench strategies --json`, inlined as well;
// compare_json, when not empty, a second trace whose timeline the page draws under this run's.
std::string html_page(const RunResult& r, const std::string& bench_json = "", const std::string& compare_json = "");
void write_html(const std::filesystem::path& path, const RunResult& r, const std::string& bench_json = "",
                const std::string& compare_json = "");
// The page with a trace's JSON text (trace_json) inlined.
std::string html_page(const std::string& trace, const std::string& bench_json = "", const std::string& compare_json = "");

// The folder of the visualizer's files: $CPSIM_VISUALIZER_DIR, else visualizer/ of the source tree cpsim was
// built from. Throws Error when index.html is not there.
std::filesystem::path visualizer_dir();

}  // namespace cpsim
