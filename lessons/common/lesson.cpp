#include "lessons/common/lesson.hpp"

#include <algorithm>
#include <boost/program_options.hpp>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <map>
#include <sstream>
#include <utility>

#include "lessons/common/stepping.hpp"
#include "lessons/common/terminal.hpp"
#include "sim/cli/flag_names.hpp"
#include "sim/cli/problem_options.hpp"
#include "sim/core/error.hpp"
#include "sim/os/output_file.hpp"
#include "sim/runtime/mpi_runs.hpp"
#include "sim/runtime/report.hpp"
#include "sim/runtime/stepper.hpp"
#include "sim/runtime/trace.hpp"

namespace cpsim::lesson {

namespace po = boost::program_options;

namespace {

// A mask flag the lesson does not take (a lesson on the causal mask itself): one line saying where masks are taught.
void refuse_mask_flags(int argc, char** argv, const std::string& title, unsigned flags, const std::string& refusal) {
  const std::pair<const char*, unsigned> mask_flags[] = {{"--docs", cli::kFlagDocs},
                                                         {"--pad-docs", cli::kFlagPadDocs},
                                                         {"--window", cli::kFlagWindow},
                                                         {"--chunk", cli::kFlagChunk}};
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i], name = a.substr(0, a.find('='));
    for (const auto& [flag, bit] : mask_flags) {
      if (name != flag || (flags & bit)) continue;
      if (!refusal.empty()) throw UsageError(refusal);
      std::string lesson = title.substr(0, title.find(':'));  // "Lesson 5"
      if (!lesson.empty()) lesson[0] = 'l';
      throw UsageError(lesson + " is about the causal mask itself and takes no " + name +
                       "; documents and windows are taught in lesson 12 (lesson_12_documents, lessons/12_documents)");
    }
  }
}

}  // namespace

bool parse_options(int argc, char** argv, const std::string& title, unsigned flags, Options& o) {
  refuse_mask_flags(argc, argv, title, flags, o.mask_refusal);
  unsigned shape = (flags & cli::kAllProblemFlags) | cli::kFlagMemoryLimit;
  if (!(flags & cli::kFlagSharding)) shape &= ~cli::kFlagChunk;  // --chunk sizes balanced sharding only
  cli::ProblemOptions values = cli::problem_options(o.config);
  po::options_description desc(title);
  cli::add_problem_options(desc, values, shape);
  if (flags & kStep)
    desc.add_options()("step", "pause at every STEP and run step (any key: next, q: stop); not without a terminal")(
        "trace", po::value(&o.trace_file), "write each run's trace (Chrome trace JSON) to this file");
  po::variables_map vm;
  if (!cli::parse_program(argv[0], desc, std::vector<std::string>(argv + 1, argv + argc), vm)) return false;
  cli::apply_problem_options(values, vm, shape, o.config);
  // A --trace path that cannot be written is refused now (exit 2), as `cpsim run` does, not after the lesson ran.
  if (!o.trace_file.empty()) check_output_file("trace", o.trace_file);
  if (o.config.backend == Backend::mpi && launcher_rank() >= 0) {
    // Under mpirun rank 0 tells the lesson; the other processes only take part in its runs (mpi_runs.hpp).
    if (launcher_rank() > 0) {
      follow_runs();
      return false;  // as after --help: the lesson ends with exit code 0
    }
    lead_runs();
  }
  o.step = vm.count("step") > 0;
  if (o.step) stepping().start(stdin_is_terminal(), read_key, std::cout);
  require(o.config.problem.ranks >= 1, "--ranks must be at least 1", "use --ranks 4");
  // Documents the sharding cannot cut are refused now, before the lesson prints a line (UsageError).
  if (o.config.problem.docs.any()) (void)o.config.problem.layout();
  return true;
}

int guarded(const char* lesson, const std::function<int()>& body) {
  try {
    const int rc = body();
    return flush_stdout(lesson) || rc != 0 ? rc : 1;  // a transcript that could not be written fails
  } catch (const UsageError& e) {
    std::cout.flush();
    std::cerr << lesson << ": error: " << worded(e) << "\n";  // its fixes in this lesson's flags
    return 2;
  } catch (const std::exception& e) {
    std::cout.flush();
    std::cerr << lesson << ": " << worded(e) << "\n";
    return 1;
  }
}

std::string wrap(const std::string& paragraph, int width, const std::string& indent) {
  std::ostringstream out;
  std::istringstream lines(paragraph);
  for (std::string line; std::getline(lines, line);) {
    // A line keeps its own leading spaces; its continuation lines get them too.
    const std::size_t lead = line.find_first_not_of(' ');
    const std::string prefix = indent + std::string(lead == std::string::npos ? 0 : lead, ' ');
    std::istringstream words(line);
    std::string cur = prefix;
    for (std::string w; words >> w;) {
      if (cur.size() > prefix.size() && static_cast<int>(cur.size() + 1 + w.size()) > width) {
        out << cur << "\n";
        cur = prefix;
      }
      cur += (cur.size() > prefix.size() ? " " : "") + w;
    }
    out << cur << "\n";
  }
  return out.str();
}

std::string indent(const std::string& text, const std::string& prefix) {
  std::ostringstream out;
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) out << (line.empty() ? "" : prefix) << line << "\n";
  return out.str();
}

void title(const std::string& text) {
  std::cout << text << "\n" << std::string(std::min<std::size_t>(text.size(), 78), '=') << "\n\n";
}

void banner(int step, const std::string& text) {
  stepping().pause();
  std::cout << "STEP " << step << ": " << text << "\n\n";
}

void shape(const Problem& p, const std::string& note) {
  std::cout << "Shape: B=" << p.batch << " S=" << p.seq << " Nq=" << p.heads << " Nkv=" << p.kv_heads
            << " D=" << p.head_dim << ", C=" << p.ranks << " ranks, " << sharding_name(p.sharding) << " sharding\n";
  const Mask mask = p.mask();
  if (!mask.plain()) {  // --docs or --window: the mask every run and check of the lesson takes
    const Documents docs = p.documents();
    std::cout << wrap("Mask: " + std::string(mask.causal() ? "causal" : "full") +
                          (docs.empty() ? "" : ", " + docs.describe()) +
                          (mask.window() > 0 ? ", window " + std::to_string(mask.window()) : ""),
                      78, "       ");
  }
  std::cout << wrap("(" + (note.empty() ? "" : note + "; ") + "--help lists the flags that change it)", 78, "       ")
            << "\n";
}

void say(const std::string& paragraph) {
  std::cout << wrap(paragraph) << "\n";
}

std::string ms(double milliseconds) {
  return fixed(milliseconds, 2) + " ms";
}

std::string fixed(double v, int digits) {
  if (std::isinf(v)) return v < 0 ? "-inf" : "inf";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", digits, v);
  return buf;
}

std::string bytes(std::int64_t n) {
  return format_bytes(static_cast<double>(n));
}

std::string list(const std::vector<std::int64_t>& v) {
  std::string s = "[";
  for (std::size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
  return s + "]";
}

std::string list(const std::vector<double>& v) {
  std::string s = "[";
  for (std::size_t i = 0; i < v.size(); ++i) {
    std::ostringstream x;
    x << v[i];
    s += (i ? ", " : "") + x.str();
  }
  return s + "]";
}


void row(std::string line) {
  while (!line.empty() && line.back() == ' ') line.pop_back();
  std::cout << line << "\n";
}

void expect(bool ok, const std::string& what) {
  if (!ok) throw Error("lesson check failed: " + what);
}

RunResult run_and_step(RunConfig config, const Options& o, bool replay) {
  config.check = true;
  replay = replay && stepping().active();
  config.tracing = config.tracing || replay || !o.trace_file.empty();
  RunResult r = run(config);
  if (!o.trace_file.empty()) {
    std::filesystem::path path(o.trace_file);
    if (++o.traces_written > 1)
      path.replace_extension("." + std::to_string(o.traces_written) + path.extension().string());
    write_trace(path, r);
    std::cout << "Wrote the trace of the " << strategy_name(config.strategy) << " run to " << path.string() << "\n\n";
  }
  o.last_run_replayed = replay;
  if (replay) {
    std::cout << "Stepping through the " << strategy_name(config.strategy) << " run"
              << (stepping().interactive() ? " (a key: next, q: stop stepping):\n"
                                           : " (no terminal: straight through):\n");
    step_through(r, std::cout, [] { return stepping().pause(); });
    std::cout << "\n";
  }
  return r;
}

bool verdicts(const RunResult& r, const std::string& label) {
  const CheckReport& c = r.check;
  expect(c.ran, "the run was checked against the reference");
  std::vector<std::string> entries;
  for (std::size_t i = 0; i < c.per_rank.size(); ++i) {
    std::string e = "rank " + std::to_string(i) + ": ";
    if (c.per_rank[i].correct) {
      e += "CORRECT";
    } else {
      char buf[32];
      std::snprintf(buf, sizeof buf, "%.1e", c.per_rank[i].err);
      e += std::string("ERROR (max abs error ") + buf + " on its rows)";
    }
    entries.push_back(e);
  }
  if (label.empty())
    for (const std::string& e : entries) std::cout << e << "\n";
  else
    verdict_lines(label, entries);
  return c.passed;
}

void verdict_lines(const std::string& label, const std::vector<std::string>& entries) {
  // As many ranks per line as fit in 80 columns, continuation lines indented under the first.
  std::string line = left(label, 11);
  bool first = true;
  for (const std::string& e : entries) {
    if (!first && line.size() + 2 + e.size() > 80) {
      std::cout << line << "\n";
      line = std::string(11, ' ');
      first = true;
    }
    line += (first ? " " : "  ") + e;
    first = false;
  }
  std::cout << line << "\n";
}

std::string step_order(const RunResult& r, int rank, const std::string& phase, int step) {
  std::string order;
  for (const TraceEvent& e : r.ranks.at(static_cast<std::size_t>(rank)).stats.events()) {
    if (e.phase != phase || e.step != step || e.type == TraceEvent::Type::step) continue;
    const std::string what = e.type == TraceEvent::Type::wait   ? "wait " + e.name
                             : e.type == TraceEvent::Type::comm ? "start " + e.name
                                                                : e.name;
    order += (order.empty() ? "" : " -> ") + what;
  }
  return order;
}

std::vector<std::string> step_events(const RunResult& r, int rank, const std::string& phase, int step,
                                     const std::string& before, const std::string& after, const std::string& indent) {
  struct Started {
    int id;
    std::string kind, carries;
    int peer, step;
  };
  std::vector<Started> open;     // started, not yet waited for
  std::map<int, bool> computed;  // per step: an attention call recorded already
  int next_id = 0;
  std::vector<std::string> lines;
  const auto line = [&](const std::string& what, const Started& s, int at) {
    const std::string where = (s.kind == "isend" ? " to rank " : " from rank ") + std::to_string(s.peer);
    const std::string when = s.step != at ? ", started at step " + std::to_string(s.step) : "";
    return indent + left(what + " " + s.kind, 13) + left("#" + std::to_string(s.id), 4) + s.carries + where + when;
  };
  for (const TraceEvent& e : r.ranks.at(static_cast<std::size_t>(rank)).stats.events()) {
    if (e.phase != phase || e.type == TraceEvent::Type::step) continue;
    const bool here = e.step == step;
    if (e.type == TraceEvent::Type::compute) {
      computed[e.step] = true;
      if (here) lines.push_back(indent + e.name);
    } else if (e.type == TraceEvent::Type::comm && (e.name == "isend" || e.name == "irecv")) {
      open.push_back({++next_id, e.name, computed[e.step] ? after : before, e.peer, e.step});
      if (here) lines.push_back(line("start", open.back(), step));
    } else if (e.type == TraceEvent::Type::wait && (e.name == "isend" || e.name == "irecv")) {
      const auto it = std::find_if(open.begin(), open.end(),
                                   [&](const Started& s) { return s.kind == e.name && s.peer == e.peer; });
      if (it == open.end()) continue;
      if (here) lines.push_back(line("wait", *it, step));
      open.erase(it);
    } else if (here) {
      lines.push_back(indent + (e.type == TraceEvent::Type::wait ? "wait " : "") + e.name);
    }
  }
  return lines;
}

std::string phase_calls(const RunResult& r, int rank, const std::string& phase) {
  std::map<std::string, int> calls;
  for (const TraceEvent& e : r.ranks.at(static_cast<std::size_t>(rank)).stats.events())
    if (e.type == TraceEvent::Type::comm && e.phase == phase) calls[e.name] += 1;
  std::string s;
  for (const auto& [k, n] : calls) s += (s.empty() ? "" : ", ") + k + " " + std::to_string(n);
  return s.empty() ? "none" : s;
}

}  // namespace cpsim::lesson
