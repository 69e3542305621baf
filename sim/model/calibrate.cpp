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

const char* nccl_test_name(NcclTest t) {
  switch (t) {
    case NcclTest::all_gather:
      return "all_gather_perf";
    case NcclTest::all_to_all:
      return "alltoall_perf";
    case NcclTest::sendrecv:
      return "sendrecv_perf";
  }
  return "?";
}

namespace {

std::vector<std::string> tokens(const std::string& line) {
  std::istringstream in(line);
  std::vector<std::string> out;
  for (std::string t; in >> t;) out.push_back(t);
  return out;
}

bool number(const std::string& s, double& out) {
  try {
    std::size_t used = 0;
    out = std::stod(s, &used);
    return used == s.size() && std::isfinite(out);
  } catch (const std::exception&) {
    return false;
  }
}

std::string num(double x) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.4g", x);
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

  void set(const std::string& field, double value, const std::string& source) {
    double* v = machine_value(m_, field);
    if (v == nullptr) throw Error("calibrate: no field " + field);
    require(std::isfinite(value) && value > 0,
            "the fit gives " + field + " = " + num(value) + ", which no machine has (" + source + ")",
            "check that the tables come from the machine and the test named");
    fitted_.push_back({field, *v, value, "cpsim calibrate: " + source});
    *v = value;
    m_.sources[field] = "cpsim calibrate: " + source;
    done_.insert(field);
  }
  bool has(const std::string& field) const { return done_.count(field) > 0; }
  Machine& m() { return m_; }
  std::vector<FitLine> fitted() const { return fitted_; }

 private:
  Machine m_;
  std::vector<FitLine> fitted_;
  std::set<std::string> done_;
};

std::string rows_of(const NcclTable& t, const Line& l) {
  return t.origin + ", " + nccl_test_name(t.test) + " on " + std::to_string(t.ranks) + " ranks / " +
         std::to_string(t.nodes) + " node(s), " + std::to_string(t.sizes.size()) + " sizes " + num(t.sizes.front()) +
         ".." + num(t.sizes.back()) + " B, rms error " + num(l.rms * 100) + "%";
}

// The x of each row: the bytes that cross the bottleneck per the model's equation for the test.
std::vector<double> scaled(const NcclTable& t, double factor) {
  std::vector<double> x;
  for (double s : t.sizes) x.push_back(s * factor);
  return x;
}

void fit_sendrecv(Fitter& f, const NcclTable& t) {
  require(t.ranks == 2, t.origin + ": sendrecv_perf is fitted on 2 ranks (it names " + std::to_string(t.ranks) + ")",
          "run sendrecv_perf -g 2 (one node) or on two nodes with one GPU each");
  const Line l = fit_line(t.sizes, t.times_us);
  const std::string link = t.nodes == 1 ? "intra" : "inter";
  f.set(link + ".latency_us", l.a, rows_of(t, l) + ": intercept");
  f.set(link == "intra" ? "intra.p2p_gbps" : "inter.gbps", 1e-3 / l.b, rows_of(t, l) + ": 1 / slope");
}

void fit_all_gather(Fitter& f, const NcclTable& t) {
  const int C = t.ranks, G = t.nodes;
  const Line l = fit_line(scaled(t, (C - 1.0) / C), t.times_us);
  Machine& m = f.m();
  const double lat = (C - G) * m.intra.latency_us + (G - 1) * m.inter.latency_us;
  if (!f.has("collective.base_latency_us"))
    f.set("collective.base_latency_us", l.a - lat, rows_of(t, l) + ": intercept - the ring's step latencies");
  const double busbw = 1e-3 / l.b;
  if (G == 1) {
    f.set("intra.gbps", busbw, rows_of(t, l) + ": busbw = 1 / slope");
  } else {
    const int k = std::min(C / G, m.nics_per_node);
    require(busbw < m.intra.collective_gbps,
            t.origin + ": the multi-node all-gather runs at " + num(busbw) + " GB/s, no slower than NVLink (" +
                num(m.intra.collective_gbps) + "), so the network's rate cannot be told from it",
            "fit intra.gbps from a one-node all_gather_perf table first (give it before this one)");
    f.set("inter.collective_gbps", busbw / k, rows_of(t, l) + ": busbw / " + std::to_string(k) + " NICs in the rings");
  }
}

void fit_all_to_all(Fitter& f, const NcclTable& t) {
  const int C = t.ranks, G = t.nodes, members = C / G;
  Machine& m = f.m();
  if (G == 1) {
    const Line l = fit_line(scaled(t, (C - 1.0) / C), t.times_us);
    if (!f.has("collective.base_latency_us"))
      f.set("collective.base_latency_us", l.a - (C - 1) * m.intra.latency_us,
            rows_of(t, l) + ": intercept - the steps' latencies");
    if (!f.has("intra.gbps")) f.set("intra.gbps", 1e-3 / l.b, rows_of(t, l) + ": 1 / slope");
    return;
  }
  const Line l = fit_line(scaled(t, static_cast<double>(C - members) / C), t.times_us);
  if (!f.has("collective.base_latency_us"))
    f.set("collective.base_latency_us", l.a - (C - members) * m.inter.latency_us,
          rows_of(t, l) + ": intercept - the network steps' latencies");
  const double nic = 1e-3 / l.b, share = std::min(1.0, static_cast<double>(m.nics_per_node) / members);
  if (!f.has("inter.gbps"))
    f.set("inter.gbps", nic / share, rows_of(t, l) + ": 1 / slope, the NICs shared by " + std::to_string(members));
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

NcclTable parse_nccl_table(NcclTest test, const std::string& text, const std::string& origin) {
  NcclTable t;
  t.test = test;
  t.origin = origin;
  std::set<std::string> hosts;
  std::size_t time_col = 5;  // size count type redop root time ...
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    auto tok = tokens(line);
    if (tok.empty()) continue;
    if (tok[0] == "#") {
      // "#  Rank  0 Group  0 Pid 1234 on host device  0 [0x18] NVIDIA H100"
      if (tok.size() > 7 && tok[1] == "Rank") {
        ++t.ranks;
        const auto on = std::find(tok.begin(), tok.end(), "on");
        if (on != tok.end() && on + 1 != tok.end()) hosts.insert(*(on + 1));
      }
      // the header naming the columns: "# size count type redop root time algbw busbw #wrong ..."
      const auto time = std::find(tok.begin(), tok.end(), "time");
      if (tok.size() > 1 && tok[1] == "size" && time != tok.end())
        time_col = static_cast<std::size_t>(time - tok.begin()) - 1;
      continue;
    }
    double size = 0, us = 0;
    if (tok.size() <= time_col || !number(tok[0], size) || !number(tok[time_col], us)) continue;
    if (size <= 0 || us <= 0) continue;
    t.sizes.push_back(size);
    t.times_us.push_back(us);
  }
  const std::string fix =
      std::string("save the whole output of ") + nccl_test_name(test) + " (e.g. -b 8 -e 1G -f 2), its header included";
  require(t.sizes.size() >= 2, origin + " holds no nccl-tests table of two sizes or more", fix);
  require(t.ranks >= 2, origin + " names no ranks (nccl-tests' '#  Rank N ... on HOST' lines)", fix);
  t.nodes = static_cast<int>(std::max<std::size_t>(1, hosts.size()));
  require(t.ranks % t.nodes == 0,
          origin + ": " + std::to_string(t.ranks) + " ranks on " + std::to_string(t.nodes) +
              " hosts is not the same count on every node",
          "run one rank per GPU on nodes of equal size");
  return t;
}

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
  Fitter f(base);
  // Latencies first (the sendrecv tables), then the collectives that use them, one node before many.
  auto each = [&](NcclTest test, bool multi, auto fit) {
    for (const NcclTable& t : tables)
      if (t.test == test && (t.nodes > 1) == multi) fit(f, t);
  };
  each(NcclTest::sendrecv, false, fit_sendrecv);
  each(NcclTest::sendrecv, true, fit_sendrecv);
  each(NcclTest::all_gather, false, fit_all_gather);
  each(NcclTest::all_to_all, false, fit_all_to_all);
  each(NcclTest::all_gather, true, fit_all_gather);
  each(NcclTest::all_to_all, true, fit_all_to_all);
  for (const AttentionBench& b : benches) fit_attention(f, b);
  Calibration c{f.m(), f.fitted(), {}};
  for (const NcclTable& t : tables) {
    const std::vector<double> model = modeled_times_us(c.machine, t);
    double e = 0;
    for (std::size_t i = 0; i < model.size(); ++i) e += std::pow(model[i] / t.times_us[i] - 1, 2);
    c.checks.push_back(std::string(nccl_test_name(t.test)) + " (" + t.origin + ", " + std::to_string(t.ranks) +
                       " ranks / " + std::to_string(t.nodes) + " node(s)): the fitted machine's rms error " +
                       num(std::sqrt(e / static_cast<double>(model.size())) * 100) + "%");
  }
  return c;
}

}  // namespace cpsim::model
