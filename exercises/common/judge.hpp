// What the exercises' judges share: the shapes they run, a failure with its hint, the report, and rank rows.
//
// A judge is a list of named checks run in order; it stops at the first failure and prints it as
//   FAIL  <check>
//         <what failed>
//         expected <value>
//         actual   <value>
//         hint: <what to look at, and the lesson that shows it>
//   n of m checks passed; fix the first failure and judge again.
// Exit code: 0 every check passed, 1 a check failed.
#pragma once
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "sim/comm/communicator.hpp"
#include "sim/core/recorder.hpp"
#include "sim/kernels/check.hpp"
#include "sim/kernels/device.hpp"
#include "sim/layout/layout.hpp"
#include "sim/runtime/run.hpp"

namespace cpsim::judge {

// The f64 rule every check uses (sim/kernels/check.hpp), and a reference value with the rule in words beside it,
// as a failure prints its expected value.
const CheckRule& rule();
std::string expected(double want);

struct Case {
  int C;
  std::int64_t S, B, Nq, Nkv, D;
  double sharpen;            // scale = sharpen / sqrt(D): x30 makes large logits
  std::string name() const;  // "C=4 S=16 B=1 Nq=2 Nkv=2 D=4, scores x30"
  double scale() const;
  RunConfig config() const;  // the shape, zigzag, seeded per C (inputs from make_inputs), checked
};

// The shapes every judge runs, in order: C = 1, 2 and 4; 3 ranks with one head; 4 with GQA (4 query heads on 2 KV
// heads) and batch 2; 4 with scores x30; 8 ranks.
std::vector<Case> standard_cases();

struct Failure {
  std::string what, expected, actual, hint;
};

// One rank's results as the judge's body returned them, and what the rank recorded (traced).
struct RankRun {
  std::vector<std::vector<double>> tensors;
  Recorder stats;
};
using RankBody = std::function<std::vector<std::vector<double>>(Communicator& comm, Device& dev)>;

// Runs body on c.C traced thread ranks, each with its own CPU device, 20 s at most. A rank that throws or waits too
// long becomes the Failure "running <what>"; otherwise runs holds every rank's results, in rank order.
std::optional<Failure> run_ranks(const Case& c, const std::string& what, const RankBody& body,
                                 std::vector<RankRun>& runs);

// A ring talks to its neighbours only: the first collective call the rank made, as a Failure with `hint`.
std::optional<Failure> no_collectives(const Recorder& rec, const std::string& who, const std::string& hint);

// Communication hidden behind computation, from the order of the rank's recorded events: every point-to-point
// request (isend, irecv) must have an attention call recorded between its start and its wait, and no blocking
// call (send, recv, sendrecv) may move the blocks, since nothing computes while one runs. The first request
// waited with no attention call beside it, or the first blocking call, as a Failure.
std::optional<Failure> overlapped(const Recorder& rec, const std::string& who);

// Attention calls that compute masked pairs: every call whose keys are not the rank's own (`own`: the positions
// of its rows; the diagonal block is partly masked by nature) must cover visible pairs only, rows x keys x
// `batch_heads` == the visible pairs it recorded. The first call that does not, as a Failure with `hint`.
std::optional<Failure> no_masked_calls(const Recorder& rec, const Positions& own, std::int64_t batch_heads,
                                       const std::string& who, const std::string& hint);

using Check = std::function<std::optional<Failure>()>;

struct NamedCheck {
  std::string name;
  Check check;
  std::optional<RunConfig> run;  // the run the check makes, when it makes one: its memory is checked first
};

// Prints "Judging <exercise>: <file>", runs the checks in order and reports; returns the exit code.
// 1. Every check's run is held against the memory available (sim/runtime/memory_need.hpp) before any runs: a case
//    too large is refused, exit 2, before it allocates.
// 2. Before each check, its name goes to `cpsim judge` (tell_parent), which names it when the judge crashes or hangs.
// 3. An error outside the checks is one line and exit 1 (a UsageError: exit 2), as a lesson's (lesson::guarded).
// 4. Its end goes to `cpsim judge` with the exit code (tell_parent_end): an exit without it, such as an exit(0) in the
//    learner's code, is no verdict, and cpsim judge fails it.
int run_checks(const std::string& exercise, const std::string& file, const std::vector<NamedCheck>& checks,
               const std::string& success);

std::string num(double v);                    // "%.10g"
std::string ints(const std::vector<int>& v);  // "[0, 3]"

// Rank `rank`'s rows of a global [B, S, n, D] tensor, uploaded as a [B, s, n, D] buffer.
Buffer upload_rows(Device& dev, const SeqLayout& L, const std::vector<double>& global, std::int64_t B, std::int64_t n,
                   std::int64_t D, int rank, const char* name);
std::vector<double> download(Device& dev, const Buffer& b);

// The first element of a rank's rows of a [B, s, n, D] tensor outside the rule() of the global reference
// [B, S, n, D]: "batch b, position p, head h, dim d" with both values. nullopt when all are close.
struct Mismatch {
  std::string where;
  double want, got;
  std::int64_t row;   // the local row
  std::size_t index;  // the element's index in `got`
};
std::optional<Mismatch> first_mismatch(const std::vector<double>& got, const std::vector<double>& want,
                                       const SeqLayout& L, int rank, std::int64_t B, std::int64_t n, std::int64_t D);

}  // namespace cpsim::judge
