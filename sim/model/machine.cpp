// Reading and writing machine files (Boost.PropertyTree's JSON parser): every number is checked against its
// plausible range, unknown keys are refused (a misspelt key would otherwise silently keep a default), and the
// fields a file leaves out take the defaults docs/model.md states, derived from the fields it gives.
#include "sim/model/machine.hpp"

// Boost.PropertyTree's JSON parser includes the deprecated <boost/bind.hpp>; this keeps its notice out of the build.
#define BOOST_BIND_GLOBAL_PLACEHOLDERS
#include <algorithm>
#include <boost/property_tree/json_parser.hpp>
#include <boost/property_tree/ptree.hpp>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <optional>
#include <set>
#include <sstream>

#include "sim/core/error.hpp"

namespace cpsim::model {

namespace pt = boost::property_tree;

const std::vector<MachineField>& machine_fields() {
  // name, lo, hi, lo_open, whole, required, cost
  static const std::vector<MachineField> fields = {
      {"nodes.ranks_per_node", 1, 1e6, false, true, true, false},
      {"nodes.max_nodes", 0, 1e6, false, true, true, false},
      {"nodes.memory_gb", 0, 1e6, true, false, true, false},
      {"attention.forward_tflops", 1e-6, 1e5, false, false, false, true},
      {"attention.forward_half_len", 0, 1e9, false, false, false, true},
      {"attention.backward_tflops", 1e-6, 1e5, false, false, false, true},
      {"attention.backward_half_len", 0, 1e9, false, false, false, true},
      {"attention.sm_count", 1, 1e5, false, true, true, false},
      {"attention.tile_rows", 1, 65536, false, true, true, false},
      {"attention.launch_us", 0, 1e6, false, false, true, true},
      {"memory.hbm_gbps", 1e-3, 1e6, false, false, true, true},
      {"intra.gbps", 1e-6, 1e5, false, false, true, true},
      {"intra.p2p_gbps", 1e-6, 1e5, false, false, false, true},
      {"intra.latency_us", 0, 1e6, false, false, true, true},
      {"inter.gbps", 1e-6, 1e5, false, false, true, true},
      {"inter.collective_gbps", 1e-6, 1e5, false, false, false, true},
      {"inter.latency_us", 0, 1e6, false, false, true, true},
      {"inter.nics_per_node", 1, 1024, false, true, true, false},
      {"collective.base_latency_us", 0, 1e6, false, false, true, true},
      {"contention.comm_sms", 0, 1e5, false, false, false, true},
      {"framework.step_us", 0, 1e6, false, false, false, true},
      {"framework.merge_bytes_per_element", 0, 1e4, false, false, false, true},
      {"framework.grad_add_bytes_per_element", 0, 1e4, false, false, false, true},
  };
  return fields;
}

const std::vector<MachineField>& kernel_fields() {
  static const std::vector<MachineField> fields = [] {
    std::vector<MachineField> f;
    for (const char* curve : {"forward_causal", "forward_full", "backward_causal", "backward_full"}) {
      f.push_back({std::string(curve) + "_tflops", 1e-6, 1e5, false, false, true, true});
      f.push_back({std::string(curve) + "_half_len", 0, 1e9, false, false, true, true});
    }
    return f;
  }();
  return fields;
}

namespace {

constexpr int kMaxKernelDim = 1024;

std::string num(double x) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.6g", x);
  return buf;
}

KernelCurve* curve_of(KernelCurves& k, std::string_view key) {
  if (key.starts_with("forward_causal")) return &k.forward_causal;
  if (key.starts_with("forward_full")) return &k.forward_full;
  if (key.starts_with("backward_causal")) return &k.backward_causal;
  if (key.starts_with("backward_full")) return &k.backward_full;
  return nullptr;
}

// "kernel_d128" -> 128; 0 when the section is not a kernel section.
int kernel_dim(std::string_view section) {
  if (!section.starts_with("kernel_d") || section.size() <= 8) return 0;
  int d = 0;
  for (char c : section.substr(8)) {
    if (c < '0' || c > '9' || d > kMaxKernelDim) return 0;
    d = d * 10 + (c - '0');
  }
  return d >= 1 && d <= kMaxKernelDim ? d : 0;
}

const MachineField* find_field(const std::string& name) {
  for (const auto& f : machine_fields())
    if (f.name == name) return &f;
  const auto dot = name.find('.');
  if (dot != std::string::npos && kernel_dim(std::string_view(name).substr(0, dot)) > 0)
    for (const auto& f : kernel_fields())
      if (f.name == name.substr(dot + 1)) return &f;
  return nullptr;
}

class Reader {
 public:
  Reader(const pt::ptree& root, std::string origin) : root_(root), origin_(std::move(origin)) {}

  // The field's number, checked against its range; nullopt when absent (UsageError if it is required).
  std::optional<double> get(const std::string& field, bool required_here) {
    const MachineField* spec = find_field(field);
    const auto v = root_.get_optional<std::string>(pt::ptree::path_type(field, '.'));
    if (!v) {
      require(!required_here, origin_ + " has no \"" + field + "\"",
              "add it (see `cpsim predict --print-machine h100-ib`; docs/model.md lists every field)");
      return std::nullopt;
    }
    double x = 0;
    try {
      std::size_t used = 0;
      x = std::stod(*v, &used);
      if (used != v->size()) throw std::invalid_argument("trailing text");
    } catch (const std::exception&) {
      throw UsageError(origin_ + ": \"" + field + "\" must be a number (got \"" + *v + "\"); write it as e.g. 48.5");
    }
    const bool low = spec->lo_open ? !(x > spec->lo) : !(x >= spec->lo);
    if (!std::isfinite(x) || low || x > spec->hi)
      throw UsageError(origin_ + ": \"" + field + "\" is " + num(x) + ", outside its plausible range " +
                       (spec->lo_open ? "above " : "") + num(spec->lo) + " .. " + num(spec->hi) +
                       "; fix the value (docs/model.md lists every field's range)");
    if (spec->whole && x != std::floor(x))
      throw UsageError(origin_ + ": \"" + field + "\" must be a whole number (got " + num(x) + "); fix the value");
    given_.push_back(field);
    return x;
  }
  double need(const std::string& field) { return *get(field, true); }
  std::vector<std::string> given() const { return given_; }

 private:
  const pt::ptree& root_;
  std::string origin_;
  std::vector<std::string> given_;
};

// Refuses keys the format does not have, naming the first one, and sections that are not objects.
void check_keys(const pt::ptree& root, const std::string& origin) {
  std::set<std::string> sections;
  for (const auto& f : machine_fields()) sections.insert(f.name.substr(0, f.name.find('.')));
  for (const auto& [key, child] : root) {
    require(!key.empty(), origin + " must hold one JSON object of sections; it holds an array",
            "start from `cpsim predict --print-machine h100-ib`");
    if (key == "name" || key == "description") {
      require(child.empty(), origin + ": \"" + key + "\" must be a string", "write it as \"" + key + "\": \"...\"");
      continue;
    }
    const bool kernel = kernel_dim(key) > 0;
    require(key == "sources" || kernel || sections.count(key) > 0, origin + " has an unknown section \"" + key + "\"",
            "use the sections of `cpsim predict --print-machine h100-ib` (kernel sections are kernel_dD, D = 1.." +
                std::to_string(kMaxKernelDim) + ")");
    require(child.data().empty(), origin + ": \"" + key + "\" must be an object of fields",
            "write it as \"" + key + "\": {...}");
    for (const auto& [sub, leaf] : child) {
      require(!sub.empty(), origin + ": \"" + key + "\" must be an object of fields, not an array",
              "write it as \"" + key + "\": {...}");
      if (key == "sources") continue;
      require(find_field(key + "." + sub) != nullptr, origin + " has an unknown field \"" + key + "." + sub + "\"",
              "use the fields of `cpsim predict --print-machine h100-ib` (docs/model.md lists them)");
      require(leaf.empty(), origin + ": \"" + key + "." + sub + "\" must be a number, not an object or array",
              "write it as e.g. \"" + sub + "\": 48.5");
    }
  }
}

pt::ptree read_tree(const std::string& json, const std::string& origin) {
  const auto first = json.find_first_not_of(" \t\r\n");
  if (first == std::string::npos || json[first] != '{') {
    const std::string holds = first == std::string::npos ? "nothing"
                              : json[first] == '['       ? "an array"
                                                         : "a single value";
    throw UsageError(origin + " must hold one JSON object of sections; it holds " + holds +
                     "; start from `cpsim predict --print-machine h100-ib`");
  }
  pt::ptree root;
  try {
    std::istringstream in(json);
    pt::read_json(in, root);
  } catch (const pt::json_parser_error& e) {
    throw UsageError(origin + " is not valid JSON (line " + std::to_string(e.line()) + ": " + e.message() +
                     "); fix the file or start from `cpsim predict --print-machine h100-ib`");
  }
  return root;
}

KernelCurves legacy_curves(Reader& r) {
  // One curve per direction for every block: rate at inner-loop length L. A causal square of side S has L = S/2
  // in that model, so its causal curve has twice the half length (rate at side S = tflops * S / (S + 2 half_len)).
  KernelCurves k;
  const double ft = r.need("attention.forward_tflops"), fh = r.need("attention.forward_half_len");
  const double bt = r.need("attention.backward_tflops"), bh = r.need("attention.backward_half_len");
  k.forward_full = {ft, fh};
  k.forward_causal = {ft, 2 * fh};
  k.backward_full = {bt, bh};
  k.backward_causal = {bt, 2 * bh};
  return k;
}

}  // namespace

KernelCurves Machine::curves_for(std::int64_t head_dim) const {
  if (kernels.empty()) throw Error("machine " + name + " has no attention kernel curves");
  if (kernels.size() == 1 || head_dim <= kernels.front().head_dim) return kernels.front();
  if (head_dim >= kernels.back().head_dim) return kernels.back();
  std::size_t i = 1;
  while (kernels[i].head_dim < head_dim) ++i;
  const KernelCurves &a = kernels[i - 1], &b = kernels[i];
  // Linear in log2(D) between the two listed head dims.
  const double w = (std::log2(static_cast<double>(head_dim)) - std::log2(a.head_dim)) /
                   (std::log2(b.head_dim) - std::log2(a.head_dim));
  auto mix = [w](const KernelCurve& x, const KernelCurve& y) {
    return KernelCurve{x.tflops + w * (y.tflops - x.tflops), x.half_len + w * (y.half_len - x.half_len)};
  };
  return KernelCurves{static_cast<int>(head_dim), mix(a.forward_causal, b.forward_causal),
                      mix(a.forward_full, b.forward_full), mix(a.backward_causal, b.backward_causal),
                      mix(a.backward_full, b.backward_full)};
}

double* machine_value(Machine& m, const std::string& field) {
  const auto dot = field.find('.');
  if (dot == std::string::npos) return nullptr;
  const std::string section = field.substr(0, dot), key = field.substr(dot + 1);
  if (const int d = kernel_dim(section); d > 0) {
    for (auto& k : m.kernels)
      if (k.head_dim == d)
        if (KernelCurve* c = curve_of(k, key)) return key.ends_with("_tflops") ? &c->tflops : &c->half_len;
    return nullptr;
  }
  if (section == "attention" && !m.kernels.empty() && m.kernels.front().head_dim == 0) {
    KernelCurves& k = m.kernels.front();  // the legacy curve: the full-block curves hold the file's values
    if (key == "forward_tflops") return &k.forward_full.tflops;
    if (key == "forward_half_len") return &k.forward_full.half_len;
    if (key == "backward_tflops") return &k.backward_full.tflops;
    if (key == "backward_half_len") return &k.backward_full.half_len;
  }
  static const std::map<std::string, double Machine::*> doubles = {
      {"nodes.memory_gb", &Machine::memory_gb},
      {"attention.launch_us", &Machine::launch_us},
      {"memory.hbm_gbps", &Machine::hbm_gbps},
      {"collective.base_latency_us", &Machine::collective_base_us},
      {"contention.comm_sms", &Machine::comm_sms},
      {"framework.step_us", &Machine::step_us},
      {"framework.merge_bytes_per_element", &Machine::merge_bytes_per_element},
      {"framework.grad_add_bytes_per_element", &Machine::grad_add_bytes_per_element}};
  if (const auto it = doubles.find(field); it != doubles.end()) return &(m.*(it->second));
  if (field == "intra.gbps") return &m.intra.collective_gbps;
  if (field == "intra.p2p_gbps") return &m.intra.p2p_gbps;
  if (field == "intra.latency_us") return &m.intra.latency_us;
  if (field == "inter.gbps") return &m.inter.p2p_gbps;
  if (field == "inter.collective_gbps") return &m.inter.collective_gbps;
  if (field == "inter.latency_us") return &m.inter.latency_us;
  return nullptr;
}

Machine parse_machine(const std::string& json, const std::string& origin) {
  const pt::ptree root = read_tree(json, origin);
  check_keys(root, origin);
  Reader r(root, origin);
  Machine m;
  m.name = root.get<std::string>("name", origin);
  m.description = root.get<std::string>("description", "");
  m.ranks_per_node = static_cast<int>(r.need("nodes.ranks_per_node"));
  m.max_nodes = static_cast<int>(r.need("nodes.max_nodes"));
  m.memory_gb = r.need("nodes.memory_gb");
  // 1. The kernel: per-head-dim sections, or the one curve per direction of the first format.
  for (const auto& [key, child] : root)
    if (const int d = kernel_dim(key); d > 0) {
      KernelCurves k;
      k.head_dim = d;
      for (const auto& f : kernel_fields()) {
        KernelCurve* c = curve_of(k, f.name);
        (f.name.ends_with("_tflops") ? c->tflops : c->half_len) = r.need(key + "." + f.name);
      }
      m.kernels.push_back(k);
    }
  std::sort(m.kernels.begin(), m.kernels.end(), [](const auto& a, const auto& b) { return a.head_dim < b.head_dim; });
  for (std::size_t i = 1; i < m.kernels.size(); ++i)
    require(m.kernels[i].head_dim != m.kernels[i - 1].head_dim,
            origin + " lists kernel_d" + std::to_string(m.kernels[i].head_dim) + " twice", "keep one");
  bool legacy_given = false;
  for (const char* f : {"forward_tflops", "forward_half_len", "backward_tflops", "backward_half_len"})
    legacy_given = legacy_given || root.get_child_optional(pt::ptree::path_type(std::string("attention.") + f, '.'));
  require(m.kernels.empty() || !legacy_given,
          origin + " gives both kernel_dD sections and attention.forward_tflops / backward_tflops",
          "keep the kernel_dD sections and drop the attention rates (or the other way round)");
  if (m.kernels.empty()) m.kernels.push_back(legacy_curves(r));  // the first format: required
  m.sm_count = static_cast<int>(r.need("attention.sm_count"));
  m.tile_rows = static_cast<int>(r.need("attention.tile_rows"));
  m.launch_us = r.need("attention.launch_us");
  m.hbm_gbps = r.need("memory.hbm_gbps");
  // 2. Links: intra.gbps is the collective rate and, unless given, the point-to-point one; inter.gbps a NIC's
  //    rate for flows and, unless given, in rings.
  m.intra.collective_gbps = r.need("intra.gbps");
  m.intra.p2p_gbps = r.get("intra.p2p_gbps", false).value_or(m.intra.collective_gbps);
  m.intra.latency_us = r.need("intra.latency_us");
  m.inter.p2p_gbps = r.need("inter.gbps");
  m.inter.collective_gbps = r.get("inter.collective_gbps", false).value_or(m.inter.p2p_gbps);
  m.inter.latency_us = r.need("inter.latency_us");
  m.nics_per_node = static_cast<int>(r.need("inter.nics_per_node"));
  m.collective_base_us = r.need("collective.base_latency_us");
  // 3. Contention and the software stack: absent, they cost nothing (the first format's model).
  m.comm_sms = r.get("contention.comm_sms", false).value_or(0);
  m.step_us = r.get("framework.step_us", false).value_or(0);
  m.merge_bytes_per_element = r.get("framework.merge_bytes_per_element", false).value_or(0);
  m.grad_add_bytes_per_element = r.get("framework.grad_add_bytes_per_element", false).value_or(0);
  m.given = r.given();
  if (const auto src = root.get_child_optional("sources"))
    for (const auto& [key, leaf] : *src) m.sources[key] = leaf.get_value<std::string>();
  return m;
}

Machine scaled(const Machine& m, const std::string& field, double factor) {
  Machine out = m;
  double* v = machine_value(out, field);
  if (v == nullptr) throw Error("scaled: the machine has no field " + field);
  *v *= factor;
  // The fields that took their default from this one move with it.
  auto given = [&](const char* f) { return std::find(m.given.begin(), m.given.end(), f) != m.given.end(); };
  if (field == "intra.gbps" && !given("intra.p2p_gbps")) out.intra.p2p_gbps *= factor;
  if (field == "inter.gbps" && !given("inter.collective_gbps")) out.inter.collective_gbps *= factor;
  if (field.starts_with("attention.") && !out.kernels.empty() && out.kernels.front().head_dim == 0) {
    KernelCurves& k = out.kernels.front();
    if (field == "attention.forward_tflops") k.forward_causal.tflops *= factor;
    if (field == "attention.forward_half_len") k.forward_causal.half_len *= factor;
    if (field == "attention.backward_tflops") k.backward_causal.tflops *= factor;
    if (field == "attention.backward_half_len") k.backward_causal.half_len *= factor;
  }
  return out;
}

Machine load_machine(const std::string& name_or_path) {
  const auto names = machine_preset_names();
  for (const auto& n : names)
    if (n == name_or_path) return parse_machine(machine_preset_json(n), "preset " + n);
  std::ifstream in(name_or_path);
  if (!in || std::filesystem::is_directory(name_or_path)) {
    std::string list;
    for (const auto& n : names) list += (list.empty() ? "" : ", ") + n;
    throw UsageError("--machine " + name_or_path + " is neither a preset nor a readable file; use one of " + list +
                     ", or the path of a JSON file (`cpsim predict --print-machine h100-ib > my.json`)");
  }
  std::stringstream text;
  text << in.rdbuf();
  return parse_machine(text.str(), name_or_path);
}

namespace {

std::string quoted(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out + "\"";
}

}  // namespace

std::string machine_json(const Machine& m) {
  std::ostringstream o;
  auto field = [&](const char* key, double v, bool last = false) {
    o << quoted(key) << ": " << num(v) << (last ? "" : ", ");
  };
  o << "{\n  \"name\": " << quoted(m.name) << ",\n  \"description\": " << quoted(m.description) << ",\n";
  o << "  \"nodes\": {";
  field("ranks_per_node", m.ranks_per_node);
  field("max_nodes", m.max_nodes);
  field("memory_gb", m.memory_gb, true);
  o << "},\n  \"attention\": {";
  const bool legacy = m.kernels.size() == 1 && m.kernels.front().head_dim == 0;
  if (legacy) {
    const KernelCurves& k = m.kernels.front();
    field("forward_tflops", k.forward_full.tflops);
    field("forward_half_len", k.forward_full.half_len);
    field("backward_tflops", k.backward_full.tflops);
    field("backward_half_len", k.backward_full.half_len);
  }
  field("sm_count", m.sm_count);
  field("tile_rows", m.tile_rows);
  field("launch_us", m.launch_us, true);
  o << "},\n";
  if (!legacy)
    for (const KernelCurves& k : m.kernels) {
      o << "  \"kernel_d" << k.head_dim << "\": {";
      const KernelCurve* curves[] = {&k.forward_causal, &k.forward_full, &k.backward_causal, &k.backward_full};
      const char* names[] = {"forward_causal", "forward_full", "backward_causal", "backward_full"};
      for (int i = 0; i < 4; ++i) {
        field((std::string(names[i]) + "_tflops").c_str(), curves[i]->tflops);
        field((std::string(names[i]) + "_half_len").c_str(), curves[i]->half_len, i == 3);
      }
      o << "},\n";
    }
  o << "  \"memory\": {";
  field("hbm_gbps", m.hbm_gbps, true);
  o << "},\n  \"intra\": {";
  field("gbps", m.intra.collective_gbps);
  field("p2p_gbps", m.intra.p2p_gbps);
  field("latency_us", m.intra.latency_us, true);
  o << "},\n  \"inter\": {";
  field("gbps", m.inter.p2p_gbps);
  field("collective_gbps", m.inter.collective_gbps);
  field("latency_us", m.inter.latency_us);
  field("nics_per_node", m.nics_per_node, true);
  o << "},\n  \"collective\": {";
  field("base_latency_us", m.collective_base_us, true);
  o << "},\n  \"contention\": {";
  field("comm_sms", m.comm_sms, true);
  o << "},\n  \"framework\": {";
  field("step_us", m.step_us);
  field("merge_bytes_per_element", m.merge_bytes_per_element);
  field("grad_add_bytes_per_element", m.grad_add_bytes_per_element, true);
  o << "},\n  \"sources\": {";
  bool first = true;
  for (const auto& [k, v] : m.sources) {
    o << (first ? "\n" : ",\n") << "    " << quoted(k) << ": " << quoted(v);
    first = false;
  }
  o << (first ? "" : "\n  ") << "}\n}\n";
  return o.str();
}

void check_fits(const Machine& m, int ranks) {
  if (m.max_nodes == 0) return;
  const int most = m.max_nodes * m.ranks_per_node;
  require(ranks <= most,
          "machine " + m.name + " has " + std::to_string(most) + " ranks (" + std::to_string(m.max_nodes) +
              " node(s) of " + std::to_string(m.ranks_per_node) + "), fewer than C=" + std::to_string(ranks),
          Fix{{"--ranks " + std::to_string(most) + " or less", "--machine h100-ib for several nodes"}});
}

}  // namespace cpsim::model
