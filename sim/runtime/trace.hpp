// A run's trace: every rank's compute, communication and idle time, in the Chrome Trace Event Format, so the
// file opens in cpsim's visualizer (visualizer/index.html), in Perfetto and in chrome://tracing.
//
// One process row per rank (pid = rank), four lanes (tid):
//   0 "phase / step"   the forward and backward phases, and each step inside them, as nested slices
//   1 "compute"        every attention call: its query and key position spans and its sub-block kind
//   2 "communication"  every send/recv/collective: peer or group (world ranks) and bytes
//   3 "idle"           every wait: the time the rank was blocked (a request's wait or a blocking call)
// Times are microseconds since the run's shared epoch. cpsim's own fields ride in each event's `args`; the run's
// config, layout (each rank's spans) and per-rank stats ride in `otherData.run` (the same object as
// `cpsim run --json`), so the visualizer needs nothing else.
#pragma once
#include <filesystem>
#include <string>

#include "sim/runtime/run.hpp"

namespace cpsim {

inline constexpr int kTraceFormatVersion = 1;
inline constexpr int kLaneSteps = 0, kLaneCompute = 1, kLaneComm = 2, kLaneIdle = 3;  // the tids

// The trace as JSON text: {"displayTimeUnit", "otherData", "traceEvents"}. Needs a run with RunConfig::tracing
// (throws UsageError otherwise: the events were never recorded).
std::string trace_json(const RunResult& r);
void write_trace(const std::filesystem::path& path, const RunResult& r);

// The visualizer as one self-contained HTML page (page, script, style and the trace inlined) that opens with a
// double-click. bench_json, when not empty, is the output of `cpsim bench strategies --json`, inlined as well;
// compare_json, when not empty, a second trace whose timeline the page draws under this run's.
std::string html_page(const RunResult& r, const std::string& bench_json = "", const std::string& compare_json = "");
void write_html(const std::filesystem::path& path, const RunResult& r, const std::string& bench_json = "",
                const std::string& compare_json = "");

// The folder of the visualizer's files: $CPSIM_VISUALIZER_DIR, else visualizer/ of the source tree cpsim was
// built from. Throws Error when index.html is not there.
std::filesystem::path visualizer_dir();

}  // namespace cpsim
