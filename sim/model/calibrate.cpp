#include "sim/model/calibrate.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <set>
#include <sstream>

#include "sim/core/error.hpp"
#include "sim/core/json.hpp"
#include "sim/model/cost.hpp"
#include "sim/model/counting_device.hpp"

namespace cpsim::model {

namespace {

std::string num(double x) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.4g", x);
  return buf;
}

// A relative error as a percentage with one decimal: "5.2%", with its sign when `sign`: "+1.0%".
std::string pct(double fraction, bool sign = false) {
  char buf[32];
  std::snprintf(buf, sizeof buf, sign ? "%+.1f%%" : "%.1f%%", fraction * 100);
  return buf;
}

// t ~ a + b x, weighted by 1/t^2 (relative error); returns the rms relative error.
struct Line {
  double a = 0, b = 0, rms = 0;
};
Line fit_line(const std::vector<double>& x, const std::vector<double>& t) {
  double sw = 0, sx = 0, sy = 0, sxx = 0, sxy = 0;
  for (std::size_t i = 0; i < x.size(); ++i) {
    const double w = 1 / (t[i] * t[i]);
    sw += w;
    sx += w * x[i];
    sy += w * t[i];
    sxx += w * x[i] * x[i];
    sxy += w * x[i] * t[i];
  }
  Line l;
  const double det = sw * sxx - sx * sx;
  l.b = det != 0 ? (sw * sxy - sx * sy) / det : 0;
  l.a = (sy - l.b * sx) / sw;
  double e = 0;
  for (std::size_t i = 0; i < x.size(); ++i) e += std::pow((l.a + l.b * x[i]) / t[i] - 1, 2);
  l.rms = std::sqrt(e / static_cast<double>(x.size()));
  return l;
}

class Fitter {
 public:
  explicit Fitter(const Machine& base) : m_(base) {}

  // A latency may be 0 (a clamped fit); a rate must be above 0.
  void set(const std::string& field, double value, const std::string& source, double residual = -1,
           const std::string& sizes = "") {
    double* v = machine_value(m_, field);
    if (v == nullptr) throw Error("calibrate: no field " + field);
    const bool latency = field.ends_with("_us");
    require(std::isfinite(value) && (value > 0 || (latency && value == 0)),
            "the fit gives " + field + " = " + num(value) + ", which no machine has (" + source + ")",
            "check that the tables come from the machine and the test named");
    const double before = field.ends_with("step_latency_us") && *v < 0 ? link_latency(field) : *v;
    fitted_.push_back({field, before, value, residual, sizes, "cpsim calibrate: " + source});
    *v = value;
    m_.sources[field] = "cpsim calibrate: " + source + (sizes.empty() ? "" : ", rows " + sizes);
    done_.insert(field);
  }
  bool has(const std::string& field) const { return done_.count(field) > 0; }
  void warn(const std::string& w) { warnings_.push_back(w); }
  Machine& m() { return m_; }
  std::vector<FitLine> fitted() const { return fitted_; }
  std::vector<std::string> warnings() const { return warnings_; }

 private:
  // "intra.step_latency_us" not given: the step costs the link's message latency.
  double link_latency(const std::string& field) { return *machine_value(m_, field.substr(0, 6) + "latency_us"); }
  Machine m_;
  std::vector<FitLine> fitted_;
  std::set<std::string> done_;
  std::vector<std::string> warnings_;
};

// "ag.txt: all_gather_perf on 8 ranks / 1 node(s)"
std::string table_name(const NcclTable& t) {
  return t.origin + ": " + nccl_test_name(t.test) + " on " + std::to_string(t.ranks) + " ranks / " +
         std::to_string(t.nodes) + " node(s)";
}

// x / size: the bytes the model's equation for the test divides by the bandwidth, per byte of nccl-tests' size.
double x_per_byte(const NcclTable& t) {
  const double C = t.ranks, members = static_cast<double>(t.ranks / t.nodes);
  if (t.test == NcclTest::sendrecv) return 1;
  if (t.test == NcclTest::all_to_all && t.nodes > 1) return (C - members) / C;
  return (C - 1) / C;
}

struct Fitted {
  const NcclTable* table;
  Regimes regimes;
};

// A latency the data ask to be negative: 0, and one warning saying so.
double non_negative(Fitter& f, double us, const std::string& field, const std::string& why) {
  if (us >= 0) return us;
  f.warn(field + ": the data ask for " + num(us) + " us (" + why + "); clamped to 0");
  return 0;
}

std::string floor_text(const NcclTable& t, const RegimeFit& r) {
  return table_name(t) + ": the small-message floor " + num(r.intercept_us) + " us" +
         (r.line ? " (intercept of the LL rows' line)" : " (mean of its rows)");
}

std::string plateau_text(const NcclTable& t, const RegimeFit& r) {
  return table_name(t) + ": the busbw plateau" + (r.line ? " (1 / slope of its rows' line)" : " (mean of its rows)");
}

// sendrecv: the floor is a message's latency, the plateau the link's point-to-point rate.
void fit_sendrecv(Fitter& f, const Fitted& x) {
  const NcclTable& t = *x.table;
  require(t.ranks == 2, t.origin + ": sendrecv_perf is fitted on 2 ranks (it names " + std::to_string(t.ranks) + ")",
          "run sendrecv_perf -g 2 (one node) or on two nodes with one GPU each");
  const std::string link = t.nodes == 1 ? "intra" : "inter";
  const RegimeFit &fl = x.regimes.floor, &pl = x.regimes.plateau;
  if (!fl.empty())
    f.set(link + ".latency_us", non_negative(f, fl.intercept_us, link + ".latency_us", floor_text(t, fl)),
          floor_text(t, fl), fl.rms, rows_text(t, fl.begin, fl.end));
  if (!pl.empty())
    f.set(link == "intra" ? "intra.p2p_gbps" : "inter.gbps", pl.gbps, plateau_text(t, pl), pl.rms,
          rows_text(t, pl.begin, pl.end));
}

// One node: the bandwidth from the plateau of the widest group's table; base and step from the floors
// F_i = base + (C_i - 1) step: both by least squares (weights 1 / F_i^2) with two group sizes or more, else the
// step alone, base the base machine's.
void fit_one_node(Fitter& f, const std::vector<Fitted>& fits) {
  std::vector<const Fitted*> use;
  for (const NcclTest test : {NcclTest::all_gather, NcclTest::all_to_all}) {
    for (const Fitted& x : fits)
      if (x.table->test == test && x.table->nodes == 1) use.push_back(&x);
    if (!use.empty()) break;  // the all_gather tables when there are any
  }
  if (use.empty()) return;
  // 1. The bandwidth.
  const Fitted* widest = nullptr;
  for (const Fitted* x : use)
    if (!x->regimes.plateau.empty() && (widest == nullptr || x->table->ranks > widest->table->ranks)) widest = x;
  if (widest != nullptr) {
    const RegimeFit& pl = widest->regimes.plateau;
    f.set("intra.gbps", pl.gbps, plateau_text(*widest->table, pl), pl.rms, rows_text(*widest->table, pl.begin, pl.end));
  }
  // 2. The floors.
  std::vector<const Fitted*> floors;
  std::set<int> sizes;
  for (const Fitted* x : use)
    if (!x->regimes.floor.empty()) floors.push_back(x), sizes.insert(x->table->ranks);
  if (floors.empty()) return;
  Machine& m = f.m();
  double s0 = 0, s1 = 0, s2 = 0, r0 = 0, r1 = 0;  // weighted normal equations of F = base + (C - 1) step
  std::string from, rows;
  for (const Fitted* x : floors) {
    const double F = x->regimes.floor.intercept_us, c = x->table->ranks - 1.0, w = 1 / (F * F);
    s0 += w, s1 += w * c, s2 += w * c * c, r0 += w * F, r1 += w * c * F;
    from += (from.empty() ? "" : "; ") + floor_text(*x->table, x->regimes.floor);
    rows += (rows.empty() ? "" : "; ") + rows_text(*x->table, x->regimes.floor.begin, x->regimes.floor.end);
  }
  const std::string step_field = "intra.step_latency_us", base_field = "collective.base_latency_us";
  double base = m.collective_base_us, step = 0;
  if (sizes.size() >= 2) {
    const double det = s0 * s2 - s1 * s1;
    base = (r0 * s2 - r1 * s1) / det;
    step = (s0 * r1 - s1 * r0) / det;
    if (base < 0) {
      f.warn(base_field + ": the floors ask for " + num(base) + " us; clamped to 0, the step refitted");
      base = 0;
      step = r1 / s2;
    }
    if (step < 0) {
      f.warn(step_field + ": the floors ask for " + num(step) + " us; clamped to 0, base their weighted mean");
      step = 0;
      base = r0 / s0;
    }
  } else {
    const double F = r0 / s0, c = *sizes.begin() - 1.0;
    step = (F - base) / c;
    if (step < 0) {
      f.warn(step_field + ": the floor " + num(F) + " us is below " + m.name + "'s base latency " + num(base) +
             " us, so the data ask for a step of " + num(step) + " us; clamped to 0, the base set to the floor");
      step = 0;
      base = F;
    } else {
      f.warn(base_field + ": kept at " + m.name + "'s " + num(base) +
             " us (tables of one group size cannot split the floor into base and steps; give tables at two, e.g. "
             "-g 4 and -g 8, to fit both)");
    }
  }
  // The residual: the floors' rms relative error on the fitted line, with each floor's own over its rows.
  double e = 0;
  for (const Fitted* x : floors) {
    const double F = x->regimes.floor.intercept_us;
    e += std::pow((base + (x->table->ranks - 1) * step) / F - 1, 2) + std::pow(x->regimes.floor.rms, 2);
  }
  const double rms = std::sqrt(e / static_cast<double>(floors.size()));
  if (base != m.collective_base_us) f.set(base_field, base, "F = base + (C-1) step over " + from, rms, rows);
  f.set(step_field, step, "F = base + (C-1) step over " + from, rms, rows);
}

// G nodes, all_gather: the plateau's busbw, when below NVLink's, is k NIC rates; the floor gives the network step.
void fit_all_gather_nodes(Fitter& f, const Fitted& x) {
  const NcclTable& t = *x.table;
  const int C = t.ranks, G = t.nodes;
  Machine& m = f.m();
  const RegimeFit &fl = x.regimes.floor, &pl = x.regimes.plateau;
  if (!pl.empty()) {
    const int k = std::min(C / G, level_links(m, 1));
    const double nvlink = level_link(m, 0).collective_gbps;
    require(pl.gbps < nvlink,
            t.origin + ": the multi-node all-gather runs at " + num(pl.gbps) + " GB/s, no slower than NVLink (" +
                num(nvlink) + "), so the network's rate cannot be told from it",
            "fit intra.gbps from a one-node all_gather_perf table first (give it before this one)");
    f.set("inter.collective_gbps", pl.gbps / k, plateau_text(t, pl) + " / " + std::to_string(k) + " NICs in the rings",
          pl.rms, rows_text(t, pl.begin, pl.end));
  }
  if (!fl.empty()) {
    const double step = (fl.intercept_us - m.collective_base_us - (C - G) * level_link(m, 0).step_us()) / (G - 1);
    const std::string field = "inter.step_latency_us";
    f.set(field, non_negative(f, step, field, floor_text(t, fl) + " less base and the NVLink steps"),
          floor_text(t, fl) + ": F = base + (C-G) step_intra + (G-1) step_inter", fl.rms,
          rows_text(t, fl.begin, fl.end));
  }
}

// G nodes, alltoall: the plateau is a NIC's share of the flows of the node's m members; the floor the C - m
// network steps (when no multi-node all_gather gave them).
void fit_all_to_all_nodes(Fitter& f, const Fitted& x) {
  const NcclTable& t = *x.table;
  const int C = t.ranks, members = t.ranks / t.nodes;
  Machine& m = f.m();
  const RegimeFit &fl = x.regimes.floor, &pl = x.regimes.plateau;
  if (!pl.empty() && !f.has("inter.gbps")) {
    const double share = std::min(1.0, static_cast<double>(level_links(m, 1)) / members);
    f.set("inter.gbps", pl.gbps / share,
          plateau_text(t, pl) + " in x = (C-m) size / C, the NICs shared by " + std::to_string(members), pl.rms,
          rows_text(t, pl.begin, pl.end));
  }
  if (!fl.empty() && !f.has("inter.step_latency_us")) {
    const std::string field = "inter.step_latency_us";
    const double step = (fl.intercept_us - m.collective_base_us) / (C - members);
    f.set(field, non_negative(f, step, field, floor_text(t, fl) + " less base"),
          floor_text(t, fl) + ": F = base + (C-m) step_inter", fl.rms, rows_text(t, fl.begin, fl.end));
  }
}

// The rms relative error of the modeled times over rows [begin, end).
double rms_over(const std::vector<double>& model, const std::vector<double>& measured, std::size_t begin,
                std::size_t end) {
  double e = 0;
  for (std::size_t i = begin; i < end; ++i) e += std::pow(model[i] / measured[i] - 1, 2);
  return end > begin ? std::sqrt(e / static_cast<double>(end - begin)) : 0;
}

// A table replayed on the fitted machine, regime by regime; and its in-place plateau against the out-of-place one.
std::string check_of(const Machine& m, const Fitted& x) {
  const NcclTable& t = *x.table;
  const Regimes& r = x.regimes;
  const std::vector<double> model = modeled_times_us(m, t);
  std::string out = table_name(t) + ": the fitted machine's rms error";
  const auto part = [&](const char* name, std::size_t b, std::size_t e) {
    if (b < e)
      out +=
          std::string(" ") + name + " " + pct(rms_over(model, t.times_us, b, e)) + " over " + rows_text(t, b, e) + ",";
  };
  part("floor", r.floor.begin, r.floor.end);
  part("protocol switch", r.switch_begin, r.switch_end);
  part("plateau", r.plateau.begin, r.plateau.end);
  out.pop_back();
  if (!t.in_place_us.empty() && !r.plateau.empty()) {
    double in = 0, outp = 0;
    for (std::size_t i = r.plateau.begin; i < r.plateau.end; ++i) in += 1 / t.in_place_us[i], outp += 1 / t.times_us[i];
    out += "; in-place plateau busbw " + pct(in / outp - 1, true) + " from out-of-place (out-of-place fitted)";
  }
  return out;
}

void fit_attention(Fitter& f, const AttentionBench& b) {
  Machine& m = f.m();
  KernelCurves k = m.curves_for(b.head_dim);
  k.head_dim = static_cast<int>(b.head_dim);
  for (const bool backward : {false, true}) {
    // The kernel's own rate at each S: flops / ((t - launch) occupancy), as attention_us would have it.
    std::vector<double> inv_s, inv_rate;
    for (std::size_t i = 0; i < b.seqs.size(); ++i) {
      const auto S = static_cast<std::int64_t>(b.seqs[i]);
      const Op op = square_attention(b.batch * b.heads, S, b.head_dim, true, backward);
      const double ms = backward ? b.bwd_ms[i] : b.fwd_ms[i];
      const double kernel_s = (ms * 1e3 - m.launch_us) * 1e-6 / occupancy_factor(m, op);
      require(kernel_s > 0, b.origin + ": S=" + num(b.seqs[i]) + " takes less than the machine's launch cost",
              "check the bench output");
      inv_s.push_back(1.0 / static_cast<double>(S));
      inv_rate.push_back(kernel_s / op.flops * 1e12);  // 1 / (TFLOP/s)
    }
    KernelCurve& causal = backward ? k.backward_causal : k.forward_causal;
    KernelCurve& full = backward ? k.backward_full : k.forward_full;
    const double old = causal.tflops;
    Line l;
    if (b.seqs.size() >= 2) l = fit_line(inv_s, inv_rate);
    KernelCurve fitted = causal;
    if (b.seqs.size() >= 2 && l.a > 0 && l.b >= 0) {
      fitted = {1 / l.a, l.b / l.a};  // 1/rate = 1/t + (h/t)/S
    } else {  // one length, or a curve the shape cannot follow: keep the half length, fit the scale
      double ratio = 0;
      for (std::size_t i = 0; i < inv_s.size(); ++i)
        ratio += (1 / inv_rate[i]) / (causal.tflops / (1 + causal.half_len * inv_s[i]));
      fitted.tflops = causal.tflops * ratio / static_cast<double>(inv_s.size());
      l.rms = 0;
    }
    const std::string section = "kernel_d" + std::to_string(b.head_dim) + ".", dir = backward ? "backward" : "forward";
    const std::string src = b.origin + ", " + std::to_string(b.seqs.size()) + " lengths " + num(b.seqs.front()) + ".." +
                            num(b.seqs.back()) + ", " + std::to_string(b.heads) + " heads, causal";
    causal = fitted;
    full.tflops *= fitted.tflops / old;
    // Install the head dim's curves (replacing a listed one, or adding it), then record the fitted fields.
    auto& ks = m.kernels;
    if (ks.size() == 1 && ks.front().head_dim == 0) {  // the first format's one curve becomes D's
      ks.clear();
      for (const char* f : {"forward_tflops", "forward_half_len", "backward_tflops", "backward_half_len"})
        m.sources.erase(std::string("attention.") + f);
    }
    auto it = std::find_if(ks.begin(), ks.end(), [&](const KernelCurves& c) { return c.head_dim == k.head_dim; });
    if (it == ks.end()) {
      ks.push_back(k);
      std::sort(ks.begin(), ks.end(), [](const auto& x, const auto& y) { return x.head_dim < y.head_dim; });
    } else {
      *it = k;
    }
    const double tflops = causal.tflops, half = causal.half_len, full_tflops = full.tflops;
    // set() records before/after: put back the old values first so that the record reads as a change.
    double* t = machine_value(m, section + dir + "_causal_tflops");
    double* h = machine_value(m, section + dir + "_causal_half_len");
    double* ft = machine_value(m, section + dir + "_full_tflops");
    *t = old;
    f.set(section + dir + "_causal_tflops", tflops, src + ", rms error " + num(l.rms * 100) + "% in 1/rate");
    *h = half;
    m.sources[section + dir + "_causal_half_len"] = "cpsim calibrate: fitted with " + dir + "_causal_tflops";
    *ft = full_tflops;
    m.sources[section + dir + "_full_tflops"] =
        "cpsim calibrate: scaled with " + dir + "_causal_tflops (the bench runs causal blocks only)";
  }
}

}  // namespace

AttentionBench parse_attention_bench(const std::string& text, const std::string& origin) {
  const std::string fix = "give the output of `cpsim bench gpu_attention --json`";
  const Json root = parse_json(text, origin, fix);
  require(root.is_object() && root.contains("bench") && root["bench"] == "gpu_attention",
          origin + " is not `cpsim bench gpu_attention --json` output (no \"bench\": \"gpu_attention\")", fix);
  require(!root.contains("causal") || root["causal"] == true, origin + " measured full attention; the fit needs causal",
          fix);
  // A field of `node` (an object), named in errors as "origin: \"key\"".
  auto field = [&](const Json& node, const char* key) -> const Json& {
    require(node.contains(key), origin + " has no \"" + key + "\"", fix);
    return node[key];
  };
  auto where = [&](const std::string& key) { return origin + ": \"" + key + "\""; };
  AttentionBench b;
  b.origin = origin;
  // Counts the fit multiplies together (batch x heads x S x S x D flops, in doubles): each within what a GPU runs.
  b.heads = json_whole(field(root, "heads"), where("heads"), 1, 1 << 20);
  b.head_dim = json_whole(field(root, "head_dim"), where("head_dim"), 1, 1024);  // the kernel sections' head dims
  b.batch = json_whole(field(root, "batch"), where("batch"), 1, 1 << 20);
  const Json& points = field(root, "points");
  require(points.is_array() && !points.empty(), origin + ": \"points\" is not a list of measurements", fix);
  // One curve per head dim: a bench of several kernels side by side (`--kernel mma2 mma1`) would mix their speeds.
  std::string kernel;
  for (const Json& p : points) {
    require(p.is_object(), origin + ": \"points\" holds " + json_text(p).substr(0, 20) + ", not a measurement", fix);
    const std::string k = p.contains("kernel") && p["kernel"].is_string() ? p["kernel"].get<std::string>() : "";
    require(kernel.empty() || k == kernel,
            origin + " holds points of several kernels (" + kernel + ", " + k + "); the fit needs one kernel's",
            "run `cpsim bench gpu_attention --json` with one --kernel (the one runs use, e.g. auto)");
    if (!k.empty()) kernel = k;
  }
  for (std::size_t i = 0; i < points.size(); ++i) {
    const Json& p = points[i];
    const std::string at = "points[" + std::to_string(i) + "].";
    b.seqs.push_back(static_cast<double>(json_whole(field(p, "seq"), where(at + "seq"), 1, std::int64_t{1} << 30)));
    b.fwd_ms.push_back(json_real(field(p, "fwd_ms"), where(at + "fwd_ms"), 1e-6, 1e7));
    b.bwd_ms.push_back(json_real(field(p, "bwd_ms"), where(at + "bwd_ms"), 1e-6, 1e7));
  }
  return b;
}

std::vector<double> modeled_times_us(const Machine& m, const NcclTable& t) {
  const int per_node = t.ranks / t.nodes;
  std::vector<int> group;
  for (int r = 0; r < t.ranks; ++r) group.push_back(r / per_node * m.ranks_per_node + r % per_node);
  std::vector<double> out;
  for (double size : t.sizes) {
    const auto n = static_cast<std::int64_t>(size);
    switch (t.test) {
      case NcclTest::sendrecv:
        out.push_back(p2p_us(m, n, group[0], group[1]));
        break;
      case NcclTest::all_gather:
        out.push_back(collective_us(m, Collective::all_gather, group, n / t.ranks));
        break;
      case NcclTest::all_to_all:
        out.push_back(collective_us(m, Collective::all_to_all, group, n / t.ranks));
        break;
    }
  }
  return out;
}

Calibration calibrate(const Machine& base, const std::vector<NcclTable>& tables,
                      const std::vector<AttentionBench>& benches) {
  require(tables.empty() || base.levels.empty() || base.levels.size() == 2,
          "calibrate fits nccl-tests tables to machines of two levels (intra, inter); " + base.name + " has " +
              std::to_string(base.levels.size()) + " levels",
          "calibrate on a two-level machine (--machine h100-ib) and write the levels from the fitted values");
  Fitter f(base);
  std::vector<Fitted> fits;
  for (const NcclTable& t : tables) fits.push_back({&t, regimes_of(t, x_per_byte(t))});
  // Latencies and point-to-point rates first (the sendrecv tables), then one node's collectives, then many.
  for (const bool multi : {false, true})
    for (const Fitted& x : fits)
      if (x.table->test == NcclTest::sendrecv && (x.table->nodes > 1) == multi) fit_sendrecv(f, x);
  fit_one_node(f, fits);
  for (const NcclTest test : {NcclTest::all_gather, NcclTest::all_to_all})
    for (const Fitted& x : fits)
      if (x.table->test == test && x.table->nodes > 1)
        test == NcclTest::all_gather ? fit_all_gather_nodes(f, x) : fit_all_to_all_nodes(f, x);
  for (const AttentionBench& b : benches) fit_attention(f, b);
  Calibration c{f.m(), f.fitted(), {}, f.warnings()};
  for (const Fitted& x : fits) c.checks.push_back(check_of(c.machine, x));
  return c;
}

}  // namespace cpsim::model
