// What every lesson shares: its command-line options, narration, the run it makes, and the verdicts it ends with.
//
// A lesson is a short narrated program: `STEP n:` banners, paragraphs wrapped to 78 columns, tables that fit an
// 80-column terminal, and per-rank CORRECT/ERROR lines against the single-process reference at the end.
// Times are printed in one form only, "12.34 ms" (lesson::ms), so the transcript test can mask them.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "sim/cli/problem_flags.hpp"
#include "sim/core/columns.hpp"
#include "sim/runtime/run.hpp"

namespace cpsim::lesson {

// Which shape flags a lesson accepts: those of `cpsim run`, from the same table (sim/cli/problem_options.hpp, with
// its one --kv-heads rule), plus --step. Each lesson picks its defaults (small: they finish in seconds).
enum Flag : unsigned {
  kRanks = cli::kFlagRanks,
  kSeq = cli::kFlagSeq,
  kHeads = cli::kFlagHeads,
  kKvHeads = cli::kFlagKvHeads,
  kHeadDim = cli::kFlagHeadDim,
  kBatch = cli::kFlagBatch,
  kSharding = cli::kFlagSharding,
  kBackend = cli::kFlagBackend,
  // --docs, --pad-docs, --window (and --chunk for balanced sharding): the lesson's runs and checks take the mask.
  // A lesson without them refuses the flags with one line naming lesson 12, where masks are taught.
  kMask = cli::kFlagsMask,
  kWindow = cli::kFlagWindow,  // --window alone (a lesson whose pictures name the chunks of one sequence)
  kStep = cli::kAllProblemFlags +
          1,  // --step: pause at every STEP and replay each run step by step (stepping.hpp); --trace FILE
  kShape = kRanks | kSeq | kHeads | kKvHeads | kHeadDim | kBatch | kBackend,
};

struct Options {
  RunConfig config;        // the lesson's defaults before parsing, the learner's shape after
  bool step = false;       // --step given
  std::string trace_file;  // --trace FILE given: every run of the lesson writes its trace
  // The line that refuses a mask flag the lesson does not take (empty: the lesson is about the causal mask; see
  // lesson 12).
  std::string mask_refusal;
  mutable int traces_written = 0;
  mutable bool last_run_replayed = false;  // run_and_step replayed its run step by step (the lesson need not print it)
};

// Parses argv into o; o.config holds the lesson's defaults on entry. Only the flags in `flags` are accepted.
// Prints --help and returns false when asked for help. Throws UsageError for bad input.
bool parse_options(int argc, char** argv, const std::string& title, unsigned flags, Options& o);

// Runs body; UsageError becomes one line on stderr and exit 2, any other error one line and exit 1, and so does a
// transcript that could not be written to stdout (a full disk).
int guarded(const char* lesson, const std::function<int()>& body);

// Narration.
void title(const std::string& text);             // the lesson's first line, underlined
void banner(int step, const std::string& text);  // "STEP n: text"; with --step it pauses first
// Printed right after the title: "Shape: B=1 S=16 Nq=2 Nkv=2 D=8, C=4 ranks, contiguous sharding", then
// "(note; --help lists the flags that change it)" under it. (Not the backend: a transcript is the same on each.)
// Under --docs or --window a "Mask: causal, 2 documents; ..." line comes between them.
void shape(const Problem& p, const std::string& note = "");
void say(const std::string& paragraph);  // wrapped to 78 columns, blank line after
std::string wrap(const std::string& paragraph, int width = 78, const std::string& indent = "");
std::string indent(const std::string& text, const std::string& prefix);  // every line prefixed, spacing kept
std::string ms(double milliseconds);                                     // "12.34 ms": the one form times take
std::string fixed(double v, int digits);                                 // fixed(1.5, 2) = "1.50"; "-inf", "inf"
std::string bytes(std::int64_t n);                                       // "4.0 KiB"
std::string list(const std::vector<std::int64_t>& v);                    // "[1, 2, 3, 4]"
std::string list(const std::vector<double>& v);                          // "[2, 6, 10, 14]" (shortest exact form)
using cpsim::left;  // a cell padded to its column (sim/core/columns.hpp)
void row(std::string line);                                              // prints a table row, trailing spaces dropped

// Throws Error("lesson check failed: what") unless ok: a lesson asserts what it prints.
void expect(bool ok, const std::string& what);

// Runs the configuration (checked against the reference, traced when stepping or writing a trace).
// While stepping (and with `replay`) the run is replayed one step at a time, pausing after every page (only when
// stdin is a terminal); o.last_run_replayed says whether it was. With --trace FILE the first run's trace goes to
// FILE, later runs' to FILE with ".2", ".3", ... before its extension.
RunResult run_and_step(RunConfig config, const Options& o, bool replay = true);

// Per-rank verdicts on the rows each rank owns: "rank 2: CORRECT" or "rank 2: ERROR (max abs error 3.1e-01 ...)",
// one per line; with a label ("ring"), after the label and as many per line as fit in 80 columns.
// Returns whether the whole check passed.
bool verdicts(const RunResult& r, const std::string& label = "");
// The labelled form for verdicts computed elsewhere: entries like "rank 0: CORRECT", packed after the label.
void verdict_lines(const std::string& label, const std::vector<std::string>& entries);

// Per-phase communication calls of one rank, from its trace (the run must be traced): "all_to_all 4".
std::string phase_calls(const RunResult& r, int rank, const std::string& phase);

// What one rank did in one step of a phase, in the order it recorded it (the run must be traced):
// "start isend -> start irecv -> attention_forward -> wait isend -> wait irecv".
std::string step_order(const RunResult& r, int rank, const std::string& phase, int step);

// The same events, one labelled line each (indented by `indent`): every request numbered in the order the phase
// started them (#1, #2, ...), with what it carries, its peer, and, on a wait, the step that started it when that
// was an earlier one. What a request carries is named by its place in its step: `before` for one started before
// the step's first attention call, `after` for one started after it (a ring strategy's K/V and dK/dV).
//   start isend  #3  K/V to rank 0
//   attention_backward
//   wait irecv   #2  dK/dV from rank 2, started at step 0
std::vector<std::string> step_events(const RunResult& r, int rank, const std::string& phase, int step,
                                     const std::string& before, const std::string& after,
                                     const std::string& indent = "    ");

}  // namespace cpsim::lesson
