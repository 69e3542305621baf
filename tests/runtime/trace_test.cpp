// The trace file: per-rank event counts follow each strategy's communication pattern, the JSON parses and follows
// the Chrome Trace Event Format, and its content agrees with the run's own counters and the layout.
#include "sim/runtime/trace.hpp"

#include <doctest/doctest.h>

#include <algorithm>

#include "json_reader.hpp"
#include "sim/core/error.hpp"

using namespace cpsim;

namespace {

RunConfig traced(StrategyKind s, Sharding sh, int C, bool backward, Backend be = Backend::threads) {
  RunConfig c;
  c.strategy = s;
  c.backend = be;
  c.backward = backward;
  c.tracing = true;
  c.timeout = std::chrono::seconds(60);
  Problem& p = c.problem;
  p.ranks = C;
  p.sharding = sh;
  p.batch = 1;
  p.seq = 16 * C;
  p.heads = 4;
  p.kv_heads = 4;
  p.head_dim = 8;
  if (s == StrategyKind::hybrid) p.a2a = 2;
  return c;
}

struct Parsed {
  Json root;
  std::vector<const Json*> events;  // the complete ("X") events
};

Parsed parse(const RunResult& r) {
  Parsed p{cpsim::test::parse_output(trace_json(r)), {}};
  for (const Json& e : p.root["traceEvents"])
    if (e["ph"].get<std::string>() == "X") p.events.push_back(&e);
  return p;
}

// Events of one rank and lane, optionally only those named `name` and of one phase.
int count(const Parsed& p, int rank, int lane, const std::string& name = "", const std::string& phase = "") {
  return static_cast<int>(std::count_if(p.events.begin(), p.events.end(), [&](const Json* e) {
    return (*e)["pid"].get<double>() == rank && (*e)["tid"].get<double>() == lane &&
           (name.empty() || (*e)["name"].get<std::string>() == name) &&
           (phase.empty() || (*e)["args"]["phase"].get<std::string>() == phase);
  }));
}

// [[first, count, stride, width], ...] back into positions.
Positions runs_of(const Json& runs) {
  Positions p;
  for (const Json& r : runs) {
    REQUIRE(r.size() == 4);
    p.append(PosRun{static_cast<std::int64_t>(r[0].get<double>()), static_cast<std::int64_t>(r[1].get<double>()),
                    static_cast<std::int64_t>(r[2].get<double>()), static_cast<std::int64_t>(r[3].get<double>())});
  }
  return p;
}

}  // namespace

TEST_CASE("a ring forward trace has C-1 isends, C-1 irecvs and a wait for each on every rank") {
  for (int C : {2, 4}) {
    const Parsed p = parse(run(traced(StrategyKind::ring, Sharding::zigzag, C, false)));
    for (int r = 0; r < C; ++r) {
      CAPTURE(C);
      CAPTURE(r);
      CHECK(count(p, r, kLaneComm, "isend") == C - 1);
      CHECK(count(p, r, kLaneComm, "irecv") == C - 1);
      CHECK(count(p, r, kLaneComm) == 2 * (C - 1));
      CHECK(count(p, r, kLaneIdle) == 2 * (C - 1));
      CHECK(count(p, r, kLaneCompute) == C);  // one block per step (contiguous skips are recorded too)
      CHECK(count(p, r, kLaneSteps, "forward step 0") == 1);
      CHECK(count(p, r, kLaneSteps, "forward") == 1);  // the phase slice
    }
  }
}

TEST_CASE("a ring backward trace adds C-1 K/V and C-1 dK/dV exchanges per rank") {
  const int C = 4;
  const Parsed p = parse(run(traced(StrategyKind::ring, Sharding::contiguous, C, true)));
  for (int r = 0; r < C; ++r) {
    CHECK(count(p, r, kLaneComm, "isend", "forward") == C - 1);
    CHECK(count(p, r, kLaneComm, "isend", "backward") == 2 * (C - 1));
    CHECK(count(p, r, kLaneComm, "irecv", "backward") == 2 * (C - 1));
    CHECK(count(p, r, kLaneCompute, "attention_backward", "backward") == C);
  }
}

TEST_CASE("a ulysses trace has 4 all-to-alls forward and 4 backward on every rank") {
  const Parsed p = parse(run(traced(StrategyKind::ulysses, Sharding::zigzag, 4, true)));
  for (int r = 0; r < 4; ++r) {
    CHECK(count(p, r, kLaneComm, "all_to_all", "forward") == 4);
    CHECK(count(p, r, kLaneComm, "all_to_all", "backward") == 4);
    CHECK(count(p, r, kLaneComm, "isend") == 0);
    CHECK(count(p, r, kLaneIdle, "wait all_to_all") == 8);  // a blocking collective is idle time too
  }
}

TEST_CASE("an all-gather trace has 2 all-gathers forward, 2 all-gathers and 2 reduce-scatters backward") {
  const Parsed p = parse(run(traced(StrategyKind::all_gather, Sharding::zigzag, 4, true)));
  for (int r = 0; r < 4; ++r) {
    CHECK(count(p, r, kLaneComm, "all_gather", "forward") == 2);
    CHECK(count(p, r, kLaneComm, "all_gather", "backward") == 2);
    CHECK(count(p, r, kLaneComm, "reduce_scatter", "backward") == 2);
    // One call per run of local rows: two zigzag chunks, one where they touch (rank C-1 holds chunks C-1 and C).
    CHECK(count(p, r, kLaneCompute, "attention_forward") == (r == 3 ? 1 : 2));
  }
}

TEST_CASE("a hybrid trace has 4 all-to-alls in its group and R-1 ring isends forward") {
  const Parsed p = parse(run(traced(StrategyKind::hybrid, Sharding::zigzag, 8, false)));
  for (int r = 0; r < 8; ++r) {
    CHECK(count(p, r, kLaneComm, "all_to_all", "forward") == 4);
    CHECK(count(p, r, kLaneComm, "isend", "forward") == 8 / 2 - 1);
  }
}

// A rank's events of one type in one phase, from its Recorder, in the order recorded.
std::vector<TraceEvent> events_of(const RunResult& r, int rank, TraceEvent::Type type, const std::string& phase) {
  std::vector<TraceEvent> out;
  for (const TraceEvent& e : r.ranks[static_cast<std::size_t>(rank)].stats.events())
    if (e.type == type && e.phase == phase) out.push_back(e);
  return out;
}

TEST_CASE("the ring backward waits for each dK/dV accumulator only after computing the next block") {
  for (Sharding sh : {Sharding::zigzag, Sharding::contiguous}) {
    const int C = 4;
    const RunResult r = run(traced(StrategyKind::ring, sh, C, true));
    for (int rank = 0; rank < C; ++rank) {
      CAPTURE(sharding_name(sh));
      CAPTURE(rank);
      const auto posted = events_of(r, rank, TraceEvent::Type::comm, "backward");
      const auto waits = events_of(r, rank, TraceEvent::Type::wait, "backward");
      const auto blocks = events_of(r, rank, TraceEvent::Type::compute, "backward");
      auto at_step = [](const std::vector<TraceEvent>& v, int step) {
        return std::count_if(v.begin(), v.end(), [&](const TraceEvent& e) { return e.step == step; });
      };
      // Step 0 posts the K/V exchange and, after its block, the accumulator's: four requests, two waited there.
      CHECK(at_step(posted, 0) == 4);
      CHECK(at_step(waits, 0) == 2);
      for (int i = 1; i < C; ++i) {
        CAPTURE(i);
        // Every later step first computes its block, then waits for the accumulator posted the step before.
        const auto block = std::find_if(blocks.begin(), blocks.end(), [&](const TraceEvent& e) { return e.step == i; });
        REQUIRE(block != blocks.end());
        const auto first_wait =
            std::find_if(waits.begin(), waits.end(), [&](const TraceEvent& e) { return e.step == i; });
        REQUIRE(first_wait != waits.end());
        CHECK(first_wait->start_us >= block->start_us + block->dur_us);
        CHECK(at_step(posted, i) == (i + 1 < C ? 4 : 0));
        CHECK(at_step(waits, i) == (i + 1 < C ? 4 : 2));
      }
      CHECK(posted.size() == waits.size());  // every request waited, none left open
    }
  }
}

TEST_CASE("the hybrid records no event outside a step: its all-to-alls in steps of their own, the ring's between") {
  const int C = 8, A = 2, R = C / A;
  const RunResult r = run(traced(StrategyKind::hybrid, Sharding::zigzag, C, true));
  for (int rank = 0; rank < C; ++rank)
    for (const std::string phase : {"forward", "backward"}) {
      CAPTURE(rank);
      CAPTURE(phase);
      for (TraceEvent::Type type : {TraceEvent::Type::compute, TraceEvent::Type::comm, TraceEvent::Type::wait})
        for (const TraceEvent& e : events_of(r, rank, type, phase)) {
          CAPTURE(e.name);
          CHECK(e.step >= 0);
          if (e.name == "all_to_all") CHECK((e.step == 0 || e.step == R + 1));
          if (type == TraceEvent::Type::compute) CHECK((e.step >= 1 && e.step <= R));
        }
      const auto steps = events_of(r, rank, TraceEvent::Type::step, phase);
      REQUIRE(steps.size() == static_cast<std::size_t>(R + 2));
      for (int i = 0; i < R + 2; ++i) CHECK(steps[static_cast<std::size_t>(i)].step == i);
    }
}

TEST_CASE("every trace event has the fields of the Chrome trace event format") {
  const RunResult r = run(traced(StrategyKind::hybrid, Sharding::zigzag, 4, true));
  const Json root = cpsim::test::parse_output(trace_json(r));
  CHECK(root["displayTimeUnit"].get<std::string>() == "ms");
  int complete = 0, names = 0;
  for (const Json& e : root["traceEvents"]) {
    REQUIRE(e["name"].is_string());
    REQUIRE(e["pid"].is_number());
    const std::string& ph = e["ph"].get<std::string>();
    CHECK((ph == "X" || ph == "M"));
    CHECK(e["args"].is_object());
    if (ph == "X") {
      ++complete;
      CHECK(e["tid"].get<double>() >= 0);
      CHECK(e["tid"].get<double>() <= 3);
      CHECK(e["ts"].get<double>() >= 0);
      CHECK(e["dur"].get<double>() >= 0);
      CHECK(e["cat"].is_string());
    } else if (e["name"].get<std::string>() == "process_name" || e["name"].get<std::string>() == "thread_name") {
      ++names;
      CHECK(e["args"]["name"].is_string());
    }
  }
  CHECK(complete > 0);
  CHECK(names == 4 * (1 + 4));  // a process name per rank and a name per lane
}

TEST_CASE("compute events carry position runs, kind and pairs that add up to the recorder's work") {
  const RunResult r = run(traced(StrategyKind::ring, Sharding::zigzag, 4, false));
  const Parsed p = parse(r);
  const Problem& pr = r.config.problem;
  std::int64_t all = 0;
  for (const RankReport& rk : r.ranks) {
    std::int64_t pairs = 0;
    for (const Json* e : p.events) {
      if ((*e)["pid"].get<double>() != rk.rank || (*e)["tid"].get<double>() != kLaneCompute) continue;
      const Json& a = (*e)["args"];
      CHECK(!a["q_runs"].empty());
      CHECK(!a["k_runs"].empty());
      CHECK(a["kind"].is_string());
      pairs += static_cast<std::int64_t>(a["pairs"].get<double>());
    }
    CHECK(pairs == rk.stats.total_work().pairs);
    all += pairs;
  }
  CHECK(all == pr.batch * pr.heads * pr.seq * (pr.seq + 1) / 2);  // the causal triangle, once
}

TEST_CASE("step slices lie inside their phase and end where the next step starts") {
  const Parsed p = parse(run(traced(StrategyKind::ring, Sharding::zigzag, 4, true)));
  for (int r = 0; r < 4; ++r) {
    for (const std::string phase : {"forward", "backward"}) {
      const Json* ph = nullptr;
      std::vector<const Json*> steps;
      for (const Json* e : p.events)
        if ((*e)["pid"].get<double>() == r && (*e)["tid"].get<double>() == kLaneSteps &&
            (*e)["args"]["phase"].get<std::string>() == phase) {
          if ((*e)["cat"].get<std::string>() == "phase")
            ph = e;
          else
            steps.push_back(e);
        }
      REQUIRE(ph != nullptr);
      REQUIRE(steps.size() == 4);
      const double lo = (*ph)["ts"].get<double>(), hi = lo + (*ph)["dur"].get<double>();
      for (std::size_t i = 0; i < steps.size(); ++i) {
        const double s = (*steps[i])["ts"].get<double>(), end = s + (*steps[i])["dur"].get<double>();
        CHECK((*steps[i])["args"]["step"].get<double>() == static_cast<double>(i));
        CHECK(s >= lo);
        CHECK(end <= hi + 0.002);  // times are written to the nanosecond
        if (i + 1 < steps.size()) CHECK(end == doctest::Approx((*steps[i + 1])["ts"].get<double>()).epsilon(1e-9));
      }
    }
  }
}

TEST_CASE("the trace's metadata holds the config, each rank's spans and stats matching its events") {
  const RunResult r = run(traced(StrategyKind::ring, Sharding::zigzag, 4, true));
  const Parsed p = parse(r);
  const Json& other = p.root["otherData"];
  CHECK(other["generator"].get<std::string>() == "cpsim");
  CHECK(other["format_version"].get<double>() == kTraceFormatVersion);
  const Json& run_meta = other["run"];
  CHECK(run_meta["config"]["strategy"].get<std::string>() == "ring");
  CHECK(run_meta["config"]["ranks"].get<double>() == 4);
  CHECK(run_meta["config"]["sharding"].get<std::string>() == "zigzag");
  for (const RankReport& rk : r.ranks) {
    const Json& m = run_meta["ranks"][static_cast<std::size_t>(rk.rank)];
    CHECK(runs_of(m["position_runs"]) == rk.positions);
    CHECK(m["positions_text"].get<std::string>() == rk.positions.text());
    double sent = 0;
    for (const Json* e : p.events)
      if ((*e)["pid"].get<double>() == rk.rank && (*e)["tid"].get<double>() == kLaneComm)
        sent += (*e)["args"]["bytes_sent"].get<double>();
    CHECK(m["bytes_sent"].get<double>() == sent);
    CHECK(m["peak_bytes"].get<double>() == rk.stats.peak_bytes());
    CHECK(m["peak_bytes"].get<double>() > 0);
  }
}

TEST_CASE("a processes-backend trace has the same events per rank as a threads trace") {
  const Parsed t = parse(run(traced(StrategyKind::ring, Sharding::zigzag, 2, true)));
  const Parsed p = parse(run(traced(StrategyKind::ring, Sharding::zigzag, 2, true, Backend::processes)));
  for (int r = 0; r < 2; ++r)
    for (int lane = 0; lane < 4; ++lane) CHECK(count(t, r, lane) == count(p, r, lane));
}

TEST_CASE("a run that was not traced cannot be written as a trace") {
  RunConfig c = traced(StrategyKind::ring, Sharding::zigzag, 2, false);
  c.tracing = false;
  const RunResult r = run(c);
  CHECK_THROWS_AS(trace_json(r), UsageError);
}

TEST_CASE("a striped trace under documents and a window stays small: positions and calls are runs, the mask is named") {
  RunConfig c = traced(StrategyKind::ring, Sharding::striped, 4, true);
  c.problem.seq = 4096;
  c.problem.heads = c.problem.kv_heads = 1;
  c.problem.head_dim = 4;
  c.problem.docs.lengths = {1024, 2048, 1024};
  c.problem.window = 300;
  const RunResult r = run(c);
  const Parsed p = parse(r);
  const Json& cfg = p.root["otherData"]["run"]["config"];
  CHECK(cfg["attention_mask"]["kind"].get<std::string>() == "causal");
  CHECK(cfg["attention_mask"]["window"].get<double>() == 300);
  REQUIRE(cfg["attention_mask"]["document_bounds"].size() == 4);
  CHECK(cfg["attention_mask"]["document_bounds"][1].get<double>() == 1024);
  CHECK(cfg["attention_mask"]["document_bounds"][3].get<double>() == 4096);
  for (const RankReport& rk : r.ranks) {
    const Json& m = p.root["otherData"]["run"]["ranks"][static_cast<std::size_t>(rk.rank)];
    CHECK(m["position_runs"].size() == 1);  // 1024 positions r, r+4, ...: one strided run
    CHECK(runs_of(m["position_runs"]) == rk.positions);
  }
  std::size_t calls = 0;
  for (const Json* e : p.events) {
    if ((*e)["tid"].get<double>() != kLaneCompute) continue;
    ++calls;
    const Json& a = (*e)["args"];
    CHECK(a["q_runs"].size() <= 2);  // a strided run (or the rows of it that see a key), never one per token
    CHECK(a["k_runs"].size() <= 2);
  }
  CHECK(calls > 0);
  CHECK(trace_json(r).size() < 64 * 1024);
}
