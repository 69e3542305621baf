// The trace writer: a run's per-rank TraceEvents as Chrome Trace Event Format JSON (lanes in trace.hpp).
#include "sim/runtime/trace.hpp"

#include <algorithm>
#include <cstdio>

#include "sim/core/error.hpp"
#include "sim/core/json.hpp"
#include "sim/os/output_file.hpp"
#include "sim/runtime/report.hpp"

namespace cpsim {
namespace {

// Microseconds to a nanosecond resolution, without the 17 digits a double would get.
std::string us(double t) {
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.3f", t);
  return buf;
}

// A lane's event: the fields every event has, before its `args`.
struct Line {
  double ts = 0, dur = 0;
  int lane = 0;
  std::string json;  // the whole event object
};

// Spans as runs [first, count, stride, width]: consecutive spans of one width at one distance become one run, so a
// striped rank's thousands of one-token spans are one entry.
void span_runs(JsonWriter& j, const std::vector<Span>& s) {
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
  write_runs(j, runs);
}

// {"name", "cat", "ph":"X", "ts", "dur", "pid", "tid", "args": {phase, step, ...}} with args filled by `more`.
template <class F>
Line complete(int pid, int lane, const std::string& name, const char* cat, double ts, double dur, const TraceEvent& e,
              F&& more) {
  JsonWriter j;
  j.begin_object().key("name").value(name).key("cat").value(cat).key("ph").value("X");
  j.key("ts").raw(us(ts)).key("dur").raw(us(dur)).key("pid").value(pid).key("tid").value(lane);
  j.key("args").begin_object().key("phase").value(e.phase).key("step").value(e.step);
  more(j);
  j.end_object().end_object();
  return Line{ts, dur, lane, j.str()};
}

std::string metadata(int pid, int tid, const char* what, const char* field, const std::string& value) {
  JsonWriter j;
  j.begin_object().key("name").value(what).key("ph").value("M").key("pid").value(pid);
  if (tid >= 0) j.key("tid").value(tid);
  j.key("args").begin_object().key(field).value(value).end_object().end_object();
  return j.str();
}

std::string sort_index(int pid, int tid, const char* what, int index) {
  JsonWriter j;
  j.begin_object().key("name").value(what).key("ph").value("M").key("pid").value(pid);
  if (tid >= 0) j.key("tid").value(tid);
  j.key("args").begin_object().key("sort_index").value(index).end_object().end_object();
  return j.str();
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
        out.push_back(complete(pid, kLaneSteps, e.name, "phase", e.start_us, e.dur_us, e, [](JsonWriter&) {}));
        break;
      case TraceEvent::Type::step:
        out.push_back(complete(pid, kLaneSteps, e.phase + " step " + std::to_string(e.step), "step", e.start_us,
                               step_end(ev, i, rank_end) - e.start_us, e, [](JsonWriter&) {}));
        break;
      case TraceEvent::Type::compute:
        out.push_back(complete(pid, kLaneCompute, e.name, "compute", e.start_us, e.dur_us, e, [&](JsonWriter& j) {
          j.key("kind").value(block_kind_name(e.kind)).key("pairs").value(e.pairs);
          j.key("q_runs");
          span_runs(j, e.q_spans);
          j.key("k_runs");
          span_runs(j, e.k_spans);
        }));
        break;
      case TraceEvent::Type::comm:
        out.push_back(complete(pid, kLaneComm, e.name, "comm", e.start_us, e.dur_us, e, [&](JsonWriter& j) {
          if (e.peer >= 0) j.key("peer").value(e.peer);
          if (!e.group.empty()) j.key("group").array(e.group);
          j.key("bytes_sent").value(e.bytes_sent).key("bytes_received").value(e.bytes_received);
        }));
        break;
      case TraceEvent::Type::wait:
        out.push_back(complete(pid, kLaneIdle, "wait " + e.name, "idle", e.start_us, e.dur_us, e, [&](JsonWriter& j) {
          j.key("what").value(e.name);
          if (e.peer >= 0) j.key("peer").value(e.peer);
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
  JsonWriter meta;
  meta.begin_object().key("generator").value("cpsim").key("format_version").value(kTraceFormatVersion);
  meta.key("lanes").begin_array().value("phase / step").value("compute").value("communication").value("idle");
  meta.end_array().key("run");
  write_json(meta, r);
  meta.end_object();

  std::vector<std::string> events;
  const char* lanes[] = {"phase / step", "compute", "communication", "idle"};
  for (const RankReport& rk : r.ranks) {
    events.push_back(metadata(rk.rank, -1, "process_name", "name", "rank " + std::to_string(rk.rank)));
    events.push_back(sort_index(rk.rank, -1, "process_sort_index", rk.rank));
    for (int lane = 0; lane < 4; ++lane) {
      events.push_back(metadata(rk.rank, lane, "thread_name", "name", lanes[lane]));
      events.push_back(sort_index(rk.rank, lane, "thread_sort_index", lane));
    }
    for (Line& l : rank_lines(rk)) events.push_back(std::move(l.json));
  }
  std::string out = "{\"displayTimeUnit\":\"ms\",\n\"otherData\":" + meta.str() + ",\n\"traceEvents\":[\n";
  for (std::size_t i = 0; i < events.size(); ++i) out += events[i] + (i + 1 < events.size() ? ",\n" : "\n");
  out += "]}\n";
  return out;
}

void write_trace(const std::filesystem::path& path, const RunResult& r) {
  write_file(path.string(), trace_json(r));
}

}  // namespace cpsim
