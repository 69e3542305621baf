// cpsim predict: modeled forward and forward+backward times of every strategy on a machine model, at any scale.
//
// With no flags it prints the seed blog's benchmark table: 8x H100 SXM, bf16, B=1, 64 heads, D=128, S from 16K
// to 256K, strategies all_gather, ulysses (A2A), ring (P2P) and the hybrids 2x4 and 4x2 (A x R). Each cell counts
// the unchanged strategy code on C counting ranks and replays it on the machine (docs/model.md).
#include <cstdio>
#include <iostream>
#include <set>
#include <sstream>

#include "sim/cli/cli.hpp"
#include "sim/core/error.hpp"
#include "sim/core/json.hpp"
#include "sim/layout/layout.hpp"
#include "sim/model/clock.hpp"
#include "sim/model/count_run.hpp"
#include "sim/model/predict.hpp"
#include "sim/runtime/trace.hpp"

namespace cpsim::cli {
namespace {

using model::Cell;
using model::PredictSpec;
using model::PredictTable;

constexpr int kMaxRanks = 1024;  // one thread each in the counting run

std::vector<std::string> split_list(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream in(s);
  for (std::string item; std::getline(in, item, ',');)
    if (!item.empty()) out.push_back(item);
  return out;
}

std::string size_label(std::int64_t n) {  // 16384 -> "16K", 1048576 -> "1M"
  if (n % (1 << 20) == 0) return std::to_string(n >> 20) + "M";
  if (n % (1 << 10) == 0) return std::to_string(n >> 10) + "K";
  return std::to_string(n);
}

std::string fixed(double v, int decimals) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", decimals, v);
  return buf;
}

std::string pad(const std::string& s, std::size_t w) {
  return s.size() >= w ? s : std::string(w - s.size(), ' ') + s;
}

// What a table shows of a cell, in its printed unit.
enum class Value { forward, total, exposed, memory, efficiency };
double shown(const Cell& c, Value v) {
  switch (v) {
    case Value::forward:
      return c.forward_us / 1e3;  // ms
    case Value::total:
      return c.total_us / 1e3;
    case Value::exposed:
      return c.exposed_us / 1e3;
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
  std::vector<std::string> labels;

  std::size_t cols() const { return spec.strategies.size(); }
  const Cell& cell(std::size_t i, std::size_t j) const { return t.cells[i * cols() + j]; }

  // One table: a row per S, a column per strategy, the fastest marked with '*' and named at the end.
  // fastest_by: 0 forward time, 1 forward + backward time, -1 none. mark_unfit: '!' where the memory does not fit.
  void table(const std::string& title, Value value, int decimals, int fastest_by, bool mark_unfit = false) const {
    std::cout << title << "\n" << pad("S", 7);
    for (const auto& l : labels) std::cout << pad(l, 13);
    std::cout << (fastest_by >= 0 ? "  fastest" : "") << "\n";
    for (std::size_t i = 0; i < spec.seqs.size(); ++i) {
      std::cout << pad(size_label(spec.seqs[i]), 7);
      const int best = fastest_by >= 0 ? model::fastest(t, i, cols(), fastest_by == 1) : -1;
      for (std::size_t j = 0; j < cols(); ++j) {
        const Cell& c = cell(i, j);
        std::string v = c.valid ? fixed(shown(c, value), decimals) : "n/a";
        if (c.valid && mark_unfit && !c.fits) v += "!";
        if (static_cast<int>(j) == best) v += "*";
        std::cout << pad(v, 13);
      }
      if (fastest_by >= 0) std::cout << "  " << (best >= 0 ? labels[static_cast<std::size_t>(best)] : "-");
      std::cout << "\n";
    }
    std::cout << "\n";
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
      table("Communication not hidden, slowest rank, forward + backward (ms)", Value::exposed, 2, -1);
    }
    table("Peak memory per GPU (GiB)", Value::memory, 1, -1, true);
    table(std::string("Efficiency: one GPU's time / (C x time), ") + (spec.backward ? "forward + backward" : "forward"),
          Value::efficiency, 2, -1);
    std::cout << "* fastest in the row;  ! more than the " << fixed(m.memory_gb, 0) << " GB a GPU holds\n";
    std::set<std::string> reasons;
    for (const Cell& c : t.cells)
      if (!c.valid) reasons.insert(c.why_not);
    for (const auto& r : reasons) std::cout << "n/a: " << r << "\n";
  }

  void json() const {
    const Problem& p = spec.problem;
    const auto& m = spec.machine;
    JsonWriter j;
    j.begin_object();
    j.key("machine").begin_object().key("name").value(m.name).key("description").value(m.description);
    j.key("ranks_per_node").value(m.ranks_per_node).key("nodes").value(m.nodes_for(p.ranks));
    j.key("memory_gb").value(m.memory_gb).end_object();
    j.key("problem").begin_object().key("ranks").value(p.ranks).key("batch").value(p.batch);
    j.key("heads").value(p.heads).key("kv_heads").value(p.kv_heads).key("head_dim").value(p.head_dim);
    j.key("dtype").value(dtype_name(p.dtype)).key("causal").value(p.causal);
    j.key("sharding").value(sharding_name(p.sharding)).key("backward").value(spec.backward).end_object();
    j.key("rows").begin_array();
    for (std::size_t i = 0; i < spec.seqs.size(); ++i) {
      j.begin_object().key("seq").value(spec.seqs[i]).key("single_gpu_ms").value(t.single_total_us[i] / 1e3);
      const int bf = model::fastest(t, i, cols(), false), bt = model::fastest(t, i, cols(), true);
      j.key("fastest_forward").value(bf >= 0 ? labels[static_cast<std::size_t>(bf)] : "");
      if (spec.backward) j.key("fastest_total").value(bt >= 0 ? labels[static_cast<std::size_t>(bt)] : "");
      j.key("cells").begin_array();
      for (std::size_t c = 0; c < cols(); ++c) {
        const Cell& x = cell(i, c);
        j.begin_object().key("strategy").value(labels[c]).key("valid").value(x.valid);
        if (!x.valid) {
          j.key("why_not").value(x.why_not).end_object();
          continue;
        }
        j.key("forward_ms").value(x.forward_us / 1e3);
        if (spec.backward) j.key("total_ms").value(x.total_us / 1e3);
        j.key("exposed_ms").value(x.exposed_us / 1e3).key("compute_ms").value(x.compute_us / 1e3);
        j.key("memory_ms").value(x.memory_us / 1e3).key("peak_bytes").value(x.peak_bytes);
        j.key("fits").value(x.fits).key("efficiency").value(x.efficiency).end_object();
      }
      j.end_array().end_object();
    }
    j.end_array().end_object();
    std::cout << j.str() << "\n";
  }
};

// One modeled run as a RunResult, so the trace writer and the visualizer take it like a measured one:
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

int cmd_predict(const std::vector<std::string>& args) {
  po::options_description desc("cpsim predict: modeled times of every strategy on a machine model (docs/model.md)");
  std::string trace_path, html_path, compare_path;
  std::string machine = "h100-sxm-8", print_machine, seqs = "16K,32K,64K,128K,256K", seq, strategies, dtype = "bf16",
              sharding = "zigzag";
  int ranks = 8;
  std::int64_t batch = 1, heads = 64, kv_heads = 0, head_dim = 128;
  desc.add_options()                                                                                              //
      ("machine", po::value(&machine)->default_value(machine), "h100-sxm-8 | h100-ib | local-cpu | FILE.json")    //
      ("print-machine", po::value(&print_machine), "print a preset's JSON (with sources) and exit")               //
      ("ranks,C", po::value(&ranks)->default_value(ranks), "context-parallel ranks C")                            //
      ("seqs", po::value(&seqs)->default_value(seqs), "sequence lengths, comma-separated (K, M = 1024, 1024^2)")  //
      ("seq,S", po::value(&seq), "one sequence length (instead of --seqs)")                                       //
      ("strategies", po::value(&strategies),
       "comma-separated: all_gather, ulysses, ring, hybrid:A (default: all_gather,ulysses,ring,hybrid:2,hybrid:4)")  //
      ("batch,B", po::value(&batch)->default_value(batch), "batch B")                                                //
      ("heads,N", po::value(&heads)->default_value(heads), "query heads Nq")                                         //
      ("kv-heads", po::value(&kv_heads)->default_value(kv_heads), "KV heads Nkv (0: same as --heads; GQA)")          //
      ("head-dim,D", po::value(&head_dim)->default_value(head_dim), "head dim D")                                    //
      ("dtype", po::value(&dtype)->default_value(dtype), "bf16 | f32 | f64")                                         //
      ("sharding", po::value(&sharding)->default_value(sharding), "zigzag | contiguous")                             //
      ("kv-replicate", "ulysses/hybrid: copy each KV head onto A/Nkv ranks when A > Nkv")                            //
      ("full", "attention without the causal mask")                                                                  //
      ("forward-only", "model the forward pass only")                                                                //
      ("json", "print one JSON object")                                                                              //
      ("trace", po::value(&trace_path),
       "one length, one strategy: write the modeled timeline as a trace (it opens "
       "in visualizer/index.html like a measured one)")                                                               //
      ("html", po::value(&html_path), "one length, one strategy: write the visualizer with the modeled run inlined")  //
      ("compare", po::value(&compare_path),
       "with --html: also inline this trace (a measured run's `cpsim run "
       "--trace`); its timeline is drawn under the modeled one");
  po::variables_map vm;
  if (!parse("predict", desc, args, vm)) return 0;
  check_output("trace", trace_path);
  check_output("html", html_path);
  if (!compare_path.empty() && html_path.empty()) throw UsageError("--compare goes into the page; add --html FILE");
  const std::string compare = compare_path.empty() ? "" : read_compare_trace(compare_path);
  if (vm.count("print-machine")) {
    std::cout << model::machine_preset_json(print_machine);
    return 0;
  }
  require(ranks >= 1 && ranks <= kMaxRanks,
          "--ranks must be between 1 and " + std::to_string(kMaxRanks) + " (got " + std::to_string(ranks) + ")",
          "use --ranks 8");
  PredictSpec spec;
  spec.machine = model::load_machine(machine);
  spec.backward = vm.count("forward-only") == 0;
  Problem& p = spec.problem;
  p.ranks = ranks;
  p.batch = batch;
  p.heads = heads;
  p.kv_heads = kv_heads == 0 ? heads : kv_heads;
  p.head_dim = head_dim;
  p.dtype = parse_dtype(dtype);
  p.sharding = parse_sharding(sharding);
  p.causal = vm.count("full") == 0;
  p.kv_replicate = vm.count("kv-replicate") > 0;
  for (const auto& s : vm.count("seq") ? std::vector<std::string>{seq} : split_list(seqs)) {
    const auto n = static_cast<std::int64_t>(parse_size(vm.count("seq") ? "seq" : "seqs", s));
    require(n >= 1, "every sequence length must be at least 1 (got " + s + ")", "use --seqs 16K,32K");
    spec.seqs.push_back(n);
  }
  require(!spec.seqs.empty(), "--seqs lists no sequence length", "use --seqs 16K,32K");
  if (vm.count("strategies")) {
    for (const auto& s : split_list(strategies)) spec.strategies.push_back(model::parse_choice(s));
    require(!spec.strategies.empty(), "--strategies lists no strategy", "use --strategies ring,ulysses");
  } else {
    spec.strategies = model::default_choices(ranks);
  }
  // Shape errors every strategy shares (a head count, a sequence the layout cannot cut) are the user's to fix.
  Problem probe = p;
  probe.kv_replicate = false;
  for (std::int64_t S : spec.seqs) {
    probe.seq = S;
    validate(probe, StrategyKind::ring);
  }
  if (!trace_path.empty() || !html_path.empty()) {
    require(spec.seqs.size() == 1 && spec.strategies.size() == 1,
            "a modeled trace shows one run: --trace and --html need one length and one strategy",
            "use --seq 16K --strategies ring");
    if (!html_path.empty()) visualizer_dir();  // the page's files must be there before the model runs
    model::check_fits(spec.machine, p.ranks);
    Problem one = model::problem_for(p, spec.strategies.front());
    one.seq = spec.seqs.front();
    validate(one, spec.strategies.front().kind);
  }
  const PredictTable table = model::predict(spec);
  Printer out{spec, table, {}};
  for (const auto& c : spec.strategies) out.labels.push_back(model::choice_label(c, ranks));
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
