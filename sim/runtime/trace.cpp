// The trace writer: a run's per-rank TraceEvents as Chrome Trace Event Format JSON (lanes in trace.hpp).
#include "sim/runtime/trace.hpp"

#include <algorithm>
#include <cmath>

#include "sim/core/error.hpp"
#include "sim/core/json.hpp"
#include "sim/os/output_file.hpp"
#include "sim/runtime/report.hpp"

namespace cpsim {
namespace {

// Microseconds rounded to the nanosecond: the trace's resolution (a double's 17 digits would say more than the
// clock measured).
double us(double t) {
  return std::round(t * 1000) / 1000;
}

// A lane's event: the fields every event has, before its `args`.
struct Line {
  double ts = 0, dur = 0;
  int lane = 0;
  Json json;  // the whole event object
};

// Spans as runs [first, count, stride, width]: consecutive spans of one width at one distance become one run, so a
// striped rank's thousands of one-token spans are one entry.
Json span_runs(const std::vector<Span>& s) {
  std::vector<PosRun> runs;
  for (const Span& sp : s) {
    const std::int64_t w = sp.hi - sp.lo;
    if (w <= 0) continue;
    if (!runs.empty()) {
      PosRun& r = runs.back();
      const std::int64_t blocks = r.count / r.width, next = r.first + blocks * r.stride;
      if (r.width == w && (blocks == 1 ? sp.lo > r.first + w : sp.lo == next)) {
        if (blocks == 1) r.stride = sp.lo - r.first;
        r.count += w;
        continue;
      }
    }
    runs.push_back(PosRun{sp.lo, w, w, w});
  }
  return runs_json(runs);
}

// {"name", "cat", "ph":"X", "ts", "dur", "pid", "tid", "args": {phase, step, ...}} with args filled by `more`.
template <class F>
Line complete(int pid, int lane, const std::string& name, const char* cat, double ts, double dur, const TraceEvent& e,
              F&& more) {
  Json args{{"phase", e.phase}, {"step", e.step}};
  more(args);
  Json j{{"name", name},   {"cat", cat}, {"ph", "X"},   {"ts", us(ts)},
         {"dur", us(dur)}, {"pid", pid}, {"tid", lane}, {"args", std::move(args)}};
  return Line{ts, dur, lane, std::move(j)};
}

// {"name", "ph":"M", "pid", ["tid",] "args": {field: value}}: a process's or lane's name or sort index.
Json metadata(int pid, int tid, const char* what, const char* field, const Json& value) {
  Json j{{"name", what}, {"ph", "M"}, {"pid", pid}};
  if (tid >= 0) j["tid"] = tid;
  j["args"] = {{field, value}};
  return j;
}

// Where each step slice ends: at the next step mark of the same phase, else at its phase's end (or, for marks
// outside any phase, at the rank's last event).
double step_end(const std::vector<TraceEvent>& ev, std::size_t i, double rank_end) {
  const TraceEvent& s = ev[i];
  double end = rank_end;
  for (const TraceEvent& e : ev) {
    if (e.type == TraceEvent::Type::phase && e.phase == s.phase && e.start_us <= s.start_us &&
        e.start_us + e.dur_us >= s.start_us)
      end = std::min(end, e.start_us + e.dur_us);
    if (e.type == TraceEvent::Type::step && e.phase == s.phase && e.start_us > s.start_us)
      end = std::min(end, e.start_us);
  }
  return std::max(end, s.start_us);
}

std::vector<Line> rank_lines(const RankReport& rk) {
  const std::vector<TraceEvent>& ev = rk.stats.events();
  const int pid = rk.rank;
  double rank_end = 0;
  for (const TraceEvent& e : ev) rank_end = std::max(rank_end, e.start_us + e.dur_us);
  std::vector<Line> out;
  for (std::size_t i = 0; i < ev.size(); ++i) {
    const TraceEvent& e = ev[i];
    switch (e.type) {
      case TraceEvent::Type::phase:
        out.push_back(complete(pid, kLaneSteps, e.name, "phase", e.start_us, e.dur_us, e, [](Json&) {}));
        break;
      case TraceEvent::Type::step:
        out.push_back(complete(pid, kLaneSteps, e.phase + " step " + std::to_string(e.step), "step", e.start_us,
                               step_end(ev, i, rank_end) - e.start_us, e, [](Json&) {}));
        break;
      case TraceEvent::Type::compute:
        out.push_back(complete(pid, kLaneCompute, e.name, "compute", e.start_us, e.dur_us, e, [&](Json& a) {
          a["kind"] = block_kind_name(e.kind);
          a["pairs"] = e.pairs;
          a["q_runs"] = span_runs(e.q_spans);
          a["k_runs"] = span_runs(e.k_spans);
        }));
        break;
      case TraceEvent::Type::comm:
        out.push_back(complete(pid, kLaneComm, e.name, "comm", e.start_us, e.dur_us, e, [&](Json& a) {
          if (e.peer >= 0) a["peer"] = e.peer;
          if (!e.group.empty()) a["group"] = e.group;
          a["bytes_sent"] = e.bytes_sent;
          a["bytes_received"] = e.bytes_received;
        }));
        break;
      case TraceEvent::Type::wait:
        out.push_back(complete(pid, kLaneIdle, "wait " + e.name, "idle", e.start_us, e.dur_us, e, [&](Json& a) {
          a["what"] = e.name;
          if (e.peer >= 0) a["peer"] = e.peer;
        }));
        break;
    }
  }
  // Per lane in time order; a slice that starts with a longer one goes after it, so phases enclose their steps.
  std::stable_sort(out.begin(), out.end(), [](const Line& a, const Line& b) {
    if (a.lane != b.lane) return a.lane < b.lane;
    if (a.ts != b.ts) return a.ts < b.ts;
    return a.dur > b.dur;
  });
  return out;
}

}  // namespace

std::string trace_json(const RunResult& r) {
  if (!r.config.tracing)
    throw UsageError("this run was not traced, so it has no events to write; set RunConfig::tracing = true");
  return trace_json(run_json(r), r.ranks);
}

std::string trace_json(const Json& run, const std::vector<RankReport>& ranks) {
  Json meta{{"generator", "cpsim"},
            {"format_version", kTraceFormatVersion},
            {"lanes", {"phase / step", "compute", "communication", "idle"}},
            {"run", run}};
  Json events = Json::array();
  const char* lanes[] = {"phase / step", "compute", "communication", "idle"};
  for (const RankReport& rk : ranks) {
    events.push_back(metadata(rk.rank, -1, "process_name", "name", "rank " + std::to_string(rk.rank)));
    events.push_back(metadata(rk.rank, -1, "process_sort_index", "sort_index", rk.rank));
    for (int lane = 0; lane < 4; ++lane) {
      events.push_back(metadata(rk.rank, lane, "thread_name", "name", lanes[lane]));
      events.push_back(metadata(rk.rank, lane, "thread_sort_index", "sort_index", lane));
    }
    for (Line& l : rank_lines(rk)) events.push_back(std::move(l.json));
  }
  const Json trace{{"displayTimeUnit", "ms"}, {"otherData", std::move(meta)}, {"traceEvents", std::move(events)}};
  return json_text(trace) + "\n";
}

void write_trace(const std::filesystem::path& path, const RunResult& r) {
  write_file(path.string(), trace_json(r));
}

}  // namespace cpsim
