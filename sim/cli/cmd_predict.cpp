// cpsim predict: modeled forward and forward+backward times of every strategy on a machine model, at any scale.
//
// With no flags it prints the benchmark table of the blog post "On Context Parallelism": 8x H100 SXM, bf16, B=1, 64
// heads, D=128, S from 16K to 256K, strategies all_gather, ulysses (A2A), ring (P2P) and the hybrids 2x4 and 4x2 (A x
// R). Each cell counts the unchanged strategy code on C counting ranks and replays it on the machine (docs/model.md).
#include <algorithm>
#include <cmath>
#include <iostream>
#include <set>
#include <utility>

#include "sim/cli/cli.hpp"
#include "sim/cli/inference_cli.hpp"
#include "sim/cli/model_options.hpp"
#include "sim/cli/model_text.hpp"
#include "sim/core/error.hpp"
#include "sim/core/json.hpp"
#include "sim/layout/layout.hpp"
#include "sim/model/clock.hpp"
#include "sim/model/count_run.hpp"
#include "sim/model/predict.hpp"
#include "sim/model/published.hpp"
#include "sim/runtime/trace.hpp"

namespace cpsim::cli {
namespace {

using model::Cell;
using model::PredictSpec;
using model::PredictTable;

// What a table shows of a cell, in its printed unit.
enum class Value { forward, total, exposed, imbalance, memory, efficiency };
double shown(const Cell& c, Value v) {
  switch (v) {
    case Value::forward:
      return c.forward_us / 1e3;  // ms
    case Value::total:
      return c.total_us / 1e3;
    case Value::exposed:
      return c.exposed_us / 1e3;
    case Value::imbalance:
      return c.imbalance_us / 1e3;
    case Value::memory:
      return static_cast<double>(c.peak_bytes) / (1 << 30);  // GiB
    case Value::efficiency:
      return c.efficiency;
  }
  return 0;
}

struct Printer {
  const PredictSpec& spec;
  const PredictTable& t;
  const model::Sensitivity* sens = nullptr;
  std::vector<std::string> labels;
  std::vector<model::Nearest> nearest;  // per length

  std::size_t cols() const { return spec.strategies.size(); }
  const Cell& cell(std::size_t i, std::size_t j) const { return t.cells[i * cols() + j]; }
  std::string label_of(int j) const { return j >= 0 ? labels[static_cast<std::size_t>(j)] : "-"; }

  // One table: a row per S, a column per strategy, the fastest marked with '*' and named at the end.
  // fastest_by: 0 forward time, 1 forward + backward time, -1 none. mark_unfit: '!' where the memory does not fit.
  void table(const std::string& title, Value value, int decimals, int fastest_by, bool mark_unfit = false) const {
    std::size_t w = 13;  // a column: 13 wide, or one more than its longest name ("mask_exchange")
    for (const auto& l : labels) w = std::max(w, l.size() + 1);
    std::cout << title << "\n" << right("S", 7);
    for (const auto& l : labels) std::cout << right(l, w);
    std::cout << (fastest_by >= 0 ? "  fastest" : "") << "\n";
    for (std::size_t i = 0; i < spec.seqs.size(); ++i) {
      std::cout << right(size_label(spec.seqs[i]), 7);
      const int best = fastest_by >= 0 ? model::fastest(t, i, cols(), fastest_by == 1) : -1;
      for (std::size_t j = 0; j < cols(); ++j) {
        const Cell& c = cell(i, j);
        std::string v = c.valid ? fixed(shown(c, value), decimals) : "n/a";
        if (c.valid && mark_unfit && !c.fits) v += "!";
        if (static_cast<int>(j) == best) v += "*";
        std::cout << right(v, w);
      }
      if (fastest_by >= 0) std::cout << "  " << label_of(best);
      std::cout << "\n";
    }
    std::cout << "\n";
  }

  // Under the tables: each time's range with every cost moved, the costs that move it most, and any move that
  // changes the fastest choice.
  void sensitivity_text() const {
    const model::Sensitivity& s = *sens;
    const std::string move = fixed(s.move * 100, 0) + "%";
    const std::string what = spec.backward ? "forward + backward" : "forward";
    std::cout << "Sensitivity: each cost of the machine moved by -" << move << " and +" << move
              << ", one at a time\n\n";
    std::cout << "Range of the " << what << " time (ms)\n" << right("S", 7);
    for (const auto& l : labels) std::cout << right(l, 16);
    std::cout << "\n";
    for (std::size_t i = 0; i < spec.seqs.size(); ++i) {
      std::cout << right(size_label(spec.seqs[i]), 7);
      for (std::size_t j = 0; j < cols(); ++j) {
        const std::size_t k = i * cols() + j;
        const Cell& c = cell(i, j);
        std::cout << right(c.valid ? fixed(s.lo_us[k] / 1e3, 2) + "-" + fixed(s.hi_us[k] / 1e3, 2) : "n/a", 16);
      }
      std::cout << "\n";
    }
    struct Effect {
      const model::Sensitivity::Param* p;
      double lo_minus, hi_minus, lo_plus, hi_plus, most;
    };
    std::vector<Effect> effects;
    for (const auto& p : s.params) {
      Effect e{&p, 1e300, -1e300, 1e300, -1e300, 0};
      for (std::size_t k = 0; k < t.cells.size(); ++k) {
        if (!t.cells[k].valid) continue;
        const double base = t.cells[k].time_us(spec.backward);
        const double m = p.minus_us[k] / base - 1, q = p.plus_us[k] / base - 1;
        e.lo_minus = std::min(e.lo_minus, m);
        e.hi_minus = std::max(e.hi_minus, m);
        e.lo_plus = std::min(e.lo_plus, q);
        e.hi_plus = std::max(e.hi_plus, q);
        e.most = std::max({e.most, std::abs(m), std::abs(q)});
      }
      effects.push_back(e);
    }
    std::sort(effects.begin(), effects.end(), [](const Effect& a, const Effect& b) { return a.most > b.most; });
    std::cout << "\nCosts by their effect on the times (change over the cells, at -" << move << " / +" << move
              << "):\n";
    std::size_t small = 0;
    for (const Effect& e : effects) {
      if (e.most < 0.01) {
        ++small;
        continue;
      }
      std::cout << "  " << e.p->field << " (" << fixed(e.p->value, e.p->value < 10 ? 2 : 1)
                << "): " << percent(e.lo_minus) << " .. " << percent(e.hi_minus) << " / " << percent(e.lo_plus)
                << " .. " << percent(e.hi_plus) << "\n";
    }
    if (small > 0) std::cout << "  " << small << " more move every time by less than 1%\n";
    std::vector<std::string> flips;
    for (const auto& p : s.params)
      for (std::size_t i = 0; i < spec.seqs.size(); ++i)
        for (const bool plus : {false, true}) {
          const int now = (plus ? p.fastest_plus : p.fastest_minus)[i];
          if (now != s.fastest_base[i])
            flips.push_back(p.field + " " + (plus ? "+" : "-") + move + " at " + size_label(spec.seqs[i]) + ": " +
                            label_of(s.fastest_base[i]) + " -> " + label_of(now));
        }
    if (flips.empty()) {
      std::cout << "The fastest choice (" << what << ") holds under every move.\n";
    } else {
      std::cout << "The fastest choice (" << what << ") changes with:\n";
      for (const auto& f : flips) std::cout << "  " << f << "\n";
    }
  }

  void text() const {
    const Problem& p = spec.problem;
    const auto& m = spec.machine;
    std::cout << "Modeled context-parallel attention: " << p.ranks << " ranks on " << m.name << " ("
              << m.nodes_for(p.ranks) << " node(s) of " << m.ranks_per_node << "), " << dtype_name(p.dtype)
              << ", B=" << p.batch << ", Nq=" << p.heads << ", Nkv=" << p.kv_heads << ", D=" << p.head_dim << ", "
              << (p.causal ? "causal" : "full") << ", " << sharding_name(p.sharding) << "\n"
              << "(counted from the strategy code, replayed on the machine model: docs/model.md)\n\n";
    table("Forward time (ms)", Value::forward, 2, 0);
    if (spec.backward) {
      table("Forward + backward time (ms)", Value::total, 2, 1);
    }
    const std::string what = spec.backward ? "forward + backward" : "forward";
    table("Exposed communication (not hidden behind compute), " + what + " (ms)", Value::exposed, 2, -1);
    table("Imbalance (the busiest rank's work over the mean), " + what + " (ms)", Value::imbalance, 2, -1);
    table("Peak memory per GPU (GiB)", Value::memory, 1, -1, true);
    table(std::string("Efficiency: one GPU's time on the whole sequence / (C x time), ") +
              (spec.backward ? "forward + backward" : "forward"),
          Value::efficiency, 2, -1);
    std::cout << "* fastest in the row;  ! more than the " << fixed(m.memory_gb * 1e9 / (1 << 30), 1)
              << " GiB (sold as " << fixed(m.memory_gb, 0) << " GB) a GPU holds\n";
    std::set<std::string> reasons;
    for (const Cell& c : t.cells)
      if (!c.valid && c.why_not) reasons.insert(in_predict_terms(*c.why_not));
    for (const auto& r : reasons) std::cout << "n/a: " << r << "\n";
    std::cout << "\nNearest published point the model is checked against (docs/predictions.md), per length:\n";
    for (std::size_t i = 0; i < spec.seqs.size(); ++i) {
      const model::Nearest& n = nearest[i];
      std::cout << right(size_label(spec.seqs[i]), 7) << "  " << n.point->label << " on " << n.point->machine
                << "; this shape: " << n.how_far << "; off by " << percent(n.error) << " there\n";
    }
    if (sens != nullptr) {
      std::cout << "\n";
      sensitivity_text();
    }
  }

  Json sensitivity_json() const {
    const model::Sensitivity& s = *sens;
    Json cells = Json::array();
    for (std::size_t k = 0; k < t.cells.size(); ++k) {
      if (!t.cells[k].valid) continue;
      cells.push_back({{"seq", t.cells[k].seq},
                       {"strategy", labels[k % cols()]},
                       {"low_ms", s.lo_us[k] / 1e3},
                       {"high_ms", s.hi_us[k] / 1e3}});
    }
    Json params = Json::array();
    for (const auto& p : s.params) {
      Json param{{"field", p.field}, {"value", p.value}};
      for (const bool plus : {false, true}) {
        Json& ms = param[plus ? "plus" : "minus"] = Json::array();
        const auto& us = plus ? p.plus_us : p.minus_us;
        for (std::size_t k = 0; k < t.cells.size(); ++k)
          if (t.cells[k].valid) ms.push_back(us[k] / 1e3);
      }
      Json& changes = param["fastest_changes"] = Json::array();
      for (std::size_t i = 0; i < spec.seqs.size(); ++i)
        for (const bool plus : {false, true}) {
          const int now = (plus ? p.fastest_plus : p.fastest_minus)[i];
          if (now == s.fastest_base[i]) continue;
          changes.push_back({{"seq", spec.seqs[i]},
                             {"move", plus ? s.move : -s.move},
                             {"fastest", label_of(now)},
                             {"was", label_of(s.fastest_base[i])}});
        }
      params.push_back(std::move(param));
    }
    return {{"move", s.move}, {"cells", std::move(cells)}, {"parameters", std::move(params)}};
  }

  void json() const {
    const Problem& p = spec.problem;
    const auto& m = spec.machine;
    Json rows = Json::array();
    for (std::size_t i = 0; i < spec.seqs.size(); ++i) {
      Json row{{"seq", spec.seqs[i]},
               {"single_gpu_ms", t.single_total_us[i] / 1e3},
               {"single_gpu_forward_tflops", t.single_forward_tflops[i]},
               {"single_gpu_backward_tflops", t.single_backward_tflops[i]}};
      const int bf = model::fastest(t, i, cols(), false), bt = model::fastest(t, i, cols(), true);
      row["nearest_published"] = {{"point", nearest[i].point->label},
                                   {"machine", nearest[i].point->machine},
                                   {"how_far", nearest[i].how_far},
                                   {"error", nearest[i].error}};
      row["fastest_forward"] = bf >= 0 ? labels[static_cast<std::size_t>(bf)] : "";
      if (spec.backward) row["fastest_total"] = bt >= 0 ? labels[static_cast<std::size_t>(bt)] : "";
      Json& cells = row["cells"] = Json::array();
      for (std::size_t c = 0; c < cols(); ++c) {
        const Cell& x = cell(i, c);
        Json cj{{"strategy", labels[c]}, {"valid", x.valid}};
        if (!x.valid) {
          cj["why_not"] = x.why_not ? in_predict_terms(*x.why_not) : "";
          cells.push_back(std::move(cj));
          continue;
        }
        cj["forward_ms"] = x.forward_us / 1e3;
        if (spec.backward) cj["total_ms"] = x.total_us / 1e3;
        cj["exposed_ms"] = x.exposed_us / 1e3;
        cj["imbalance_ms"] = x.imbalance_us / 1e3;
        cj["mean_compute_ms"] = x.mean_compute_us / 1e3;
        cj["mean_memory_ops_ms"] = x.mean_memory_us / 1e3;
        cj["compute_ms"] = x.compute_us / 1e3;
        cj["memory_ms"] = x.memory_us / 1e3;
        cj["peak_bytes"] = x.peak_bytes;
        cj["fits"] = x.fits;
        cj["efficiency"] = x.efficiency;
        cells.push_back(std::move(cj));
      }
      rows.push_back(std::move(row));
    }
    Json j{{"machine",
            {{"name", m.name},
             {"description", m.description},
             {"ranks_per_node", m.ranks_per_node},
             {"nodes", m.nodes_for(p.ranks)},
             {"memory_gb", m.memory_gb}}},
           {"problem",
            {{"ranks", p.ranks},
             {"batch", p.batch},
             {"heads", p.heads},
             {"kv_heads", p.kv_heads},
             {"head_dim", p.head_dim},
             {"dtype", dtype_name(p.dtype)},
             {"causal", p.causal},
             {"sharding", sharding_name(p.sharding)},
             {"backward", spec.backward}}},
           {"rows", std::move(rows)}};
    if (sens != nullptr) j["sensitivity"] = sensitivity_json();
    std::cout << json_text(j) << "\n";
  }
};

}  // namespace

// One modeled run as a RunResult (model_options.hpp):
//   1. count the unchanged strategy code, keeping every attention op's positions
//   2. replay it on the machine with the clock's tracing on: each rank's events on modeled time
//   3. each rank's report: its spans, the modeled Recorder, and the peak memory the counting run measured
RunResult modeled_run(const Problem& base, const model::StrategyChoice& c, const model::Machine& m, bool backward) {
  const Problem p = model::problem_for(base, c);
  const model::CountResult counted = model::count_run(p, c.kind, {.backward = backward, .slots = 0, .spans = true});
  model::ModeledRun run = model::simulate(counted.programs, m, {.tracing = true});
  RunResult r;
  r.config.strategy = c.kind;
  r.config.problem = p;
  r.config.backward = backward;
  r.config.tracing = true;
  r.config.machine = m.name;
  const SeqLayout L = p.layout();
  for (int k = 0; k < p.ranks; ++k) {
    Recorder& rec = run.ranks[static_cast<std::size_t>(k)].trace;
    const std::int64_t peak = counted.ranks[static_cast<std::size_t>(k)].peak_bytes();
    rec.memory()->add(peak);  // the counted peak, so the per-rank memory bars show it
    rec.memory()->sub(peak);
    r.ranks.push_back(RankReport{k, L.positions(k), std::move(rec)});
  }
  r.wall_ms = run.total_us / 1e3;
  return r;
}

namespace {

int cmd_predict(const std::vector<std::string>& args) {
  po::options_description desc("cpsim predict: modeled times of every strategy on a machine model (docs/model.md)");
  std::string trace_path, html_path, compare_path;
  std::string print_machine, seqs = "16K,32K,64K,128K,256K", seq, strategies;
  ModelShapeOptions shape;
  add_model_shape_options(desc, shape, kFlagSharding | kFlagKvReplicate);
  InferenceFlags inference;
  add_inference_options(desc, inference, true);
  desc.add_options()                                                                                              //
      ("print-machine", po::value(&print_machine), "print a preset's JSON (with sources) and exit")               //
      ("seqs", po::value(&seqs)->default_value(seqs), "sequence lengths, comma-separated (K, M = 1024, 1024^2)")  //
      ("seq,S", po::value(&seq), "one sequence length (instead of --seqs)")                                       //
      ("strategies", po::value(&strategies),
       "comma-separated: all_gather, ulysses, ring, hybrid:A (default: all_gather,ulysses,ring,hybrid:2,hybrid:4)")  //
      ("json", "print one JSON object")                                                                              //
      ("sensitivity",
       "under the table: each machine cost moved by -25% and +25%, the range of every time and "
       "whether the fastest choice changes")  //
      ("trace", po::value(&trace_path),
       "one length, one strategy: write the modeled timeline as a trace (it opens "
       "in visualizer/index.html like a measured one)")                                                               //
      ("html", po::value(&html_path), "one length, one strategy: write the visualizer with the modeled run inlined")  //
      ("compare", po::value(&compare_path),
       "with --html: also inline this trace (a measured run's `cpsim run "
       "--trace`); its timeline is drawn under the modeled one");
  po::variables_map vm;
  if (!parse("predict", desc, args, vm)) return 0;
  const std::pair<std::string, const std::string*> paths[] = {
      {"trace ring.json", &trace_path}, {"html ring.html", &html_path}, {"compare measured.json", &compare_path}};
  for (const auto& [example, path] : paths) {
    const std::string flag = example.substr(0, example.find(' '));
    require(!vm.count(flag) || !path->empty(), "--" + flag + " names no file", "use --" + example);
  }
  check_output("trace", trace_path);
  check_output("html", html_path);
  if (!compare_path.empty() && html_path.empty()) throw UsageError("--compare goes into the page; add --html FILE");
  const std::string compare = compare_path.empty() ? "" : read_compare_trace(compare_path);
  if (vm.count("print-machine")) {
    std::cout << model::machine_preset_json(print_machine);
    return 0;
  }
  if (inference_asked(vm, "")) return predict_inference_command(shape, inference, vm);  // inference_cli.hpp
  require(!(vm.count("seq") && !vm["seqs"].defaulted()), "--seq and --seqs both name the lengths",
          "give one: --seq 16K, or --seqs 16K,32K");
  PredictSpec spec;
  spec.machine = model_machine(shape);
  spec.keep_programs = vm.count("sensitivity") > 0;
  spec.backward = vm.count("forward-only") == 0;
  spec.problem = model_problem(shape, vm, kFlagSharding | kFlagKvReplicate, spec.machine);
  Problem& p = spec.problem;
  const int ranks = p.ranks;
  for (const auto& s : vm.count("seq") ? std::vector<std::string>{seq} : split_list("seqs", seqs)) {
    const std::int64_t n = parse_seq(vm.count("seq") ? "seq" : "seqs", s);
    require(n >= 1, "every sequence length must be at least 1 (got " + s + ")", "use --seqs 16K,32K");
    spec.seqs.push_back(n);
  }
  require(!spec.seqs.empty(), "--seqs lists no sequence length", "use --seqs 16K,32K");
  if (vm.count("strategies")) {
    for (const auto& s : split_list("strategies", strategies)) spec.strategies.push_back(model::parse_choice(s));
    require(!spec.strategies.empty(), "--strategies lists no strategy", "use --strategies ring,ulysses");
  } else {
    spec.strategies = model::default_choices(ranks);
  }
  // --kv-replicate where no column's all-to-all group is wider than its KV heads would copy nothing.
  if (p.kv_replicate) {
    bool copies = false;
    for (const auto& c : spec.strategies) copies = copies || model::problem_for(p, c).replicates_kv(c.kind);
    require(copies,
            "--kv-replicate copies KV heads where an all-to-all group is wider than Nkv (" +
                std::to_string(p.kv_heads) + "), and no column's group is",
            "drop --kv-replicate");
  }
  // Shape errors every strategy shares (a head count, a sequence the layout cannot cut) are the user's to fix.
  Problem probe = p;
  probe.kv_replicate = false;
  for (std::int64_t S : spec.seqs) {
    probe.seq = S;
    validate_model_problem(probe, StrategyKind::ring);
  }
  if (!trace_path.empty() || !html_path.empty()) {
    require(spec.seqs.size() == 1 && spec.strategies.size() == 1,
            "a modeled trace shows one run: --trace and --html need one length and one strategy",
            "use --seq 16K --strategies ring");
    if (!html_path.empty()) visualizer_dir();  // the page's files must be there before the model runs
    Problem one = model::problem_for(p, spec.strategies.front());
    one.seq = spec.seqs.front();
    validate_model_problem(one, spec.strategies.front().kind);
  }
  const PredictTable table = model::predict(spec);
  const model::Sensitivity sens = spec.keep_programs ? model::sensitivity(spec, table) : model::Sensitivity{};
  Printer out{spec, table, spec.keep_programs ? &sens : nullptr, {}, {}};
  for (const auto& c : spec.strategies) out.labels.push_back(model::choice_label(c, ranks));
  for (std::int64_t S : spec.seqs) {
    Problem at = p;
    at.seq = S;
    out.nearest.push_back(model::nearest_published(at, spec.machine.name, spec.backward));
  }
  if (vm.count("json"))
    out.json();
  else
    out.text();
  if (!trace_path.empty() || !html_path.empty()) {
    Problem one = p;
    one.seq = spec.seqs.front();
    const RunResult r = modeled_run(one, spec.strategies.front(), spec.machine, spec.backward);
    if (!trace_path.empty()) write_trace(trace_path, r);
    if (!html_path.empty()) write_html(html_path, r, "", compare);
    if (!vm.count("json")) {
      if (!trace_path.empty())
        std::cout << "\nWrote the modeled trace to " << trace_path << " (open it in visualizer/index.html)\n";
      if (!html_path.empty())
        std::cout << "\nWrote the visualizer page to " << html_path << " (open it in a browser)\n";
    }
  }
  return 0;
}

}  // namespace

CPSIM_COMMAND(predict, "modeled times of every strategy on a machine model (8x H100 by default), at any scale",
              cmd_predict);

}  // namespace cpsim::cli
