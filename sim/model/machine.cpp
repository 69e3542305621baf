// Reading and writing machine files (sim/core/json.hpp): every number is checked against its
// plausible range, unknown keys are refused (a misspelt key would otherwise silently keep a default), and the
// fields a file leaves out take the defaults docs/model.md states, derived from the fields it gives.
#include "sim/model/machine.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <optional>
#include <set>

#include "sim/core/error.hpp"
#include "sim/core/json.hpp"
#include "sim/os/input_file.hpp"

namespace cpsim::model {

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
      {"attention.launch_us", 0, 1e6, false, false, false, true},
      {"attention.forward_ctas_per_sm", 1, 64, false, true, false, false},
      {"attention.backward_ctas_per_sm", 1, 64, false, true, false, false},
      {"attention.forward_longest_first", 0, 1, false, true, false, false},
      {"attention.max_kv_splits", 1, 1024, false, true, false, false},
      {"attention.pack_gqa", 0, 1, false, true, false, false},
      {"memory.hbm_gbps", 1e-3, 1e6, false, false, true, true},
      {"intra.gbps", 1e-6, 1e5, false, false, true, true},
      {"intra.p2p_gbps", 1e-6, 1e5, false, false, false, true},
      {"intra.latency_us", 0, 1e6, false, false, true, true},
      {"intra.step_latency_us", 0, 1e6, false, false, false, true},
      {"inter.gbps", 1e-6, 1e5, false, false, true, true},
      {"inter.collective_gbps", 1e-6, 1e5, false, false, false, true},
      {"inter.latency_us", 0, 1e6, false, false, true, true},
      {"inter.step_latency_us", 0, 1e6, false, false, false, true},
      {"inter.nics_per_node", 1, 1024, false, true, true, false},
      {"collective.base_latency_us", 0, 1e6, false, false, false, true},
      {"contention.comm_sms", 0, 1e5, false, false, false, true},
      {"framework.step_us", 0, 1e6, false, false, false, true},
      {"framework.step_bytes_per_element", 0, 1e4, false, false, false, true},
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

const std::vector<MachineField>& level_fields() {
  // name, lo, hi, lo_open, whole, required, cost
  static const std::vector<MachineField> fields = {
      {"ranks", 0, 1e6, false, true, true, false},      {"links", 1, 1024, false, true, false, false},
      {"gbps", 1e-6, 1e5, false, false, true, true},    {"p2p_gbps", 1e-6, 1e5, false, false, false, true},
      {"latency_us", 0, 1e6, false, false, true, true}, {"step_latency_us", 0, 1e6, false, false, false, true},
  };
  return fields;
}

namespace {

constexpr int kMaxKernelDim = 1024;
constexpr std::size_t kMaxLevels = 16;

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

const std::string kStartFrom = "start from `cpsim predict --print-machine h100-ib`";

class Reader {
 public:
  Reader(const Json& root, std::string origin) : root_(root), origin_(std::move(origin)) {}

  // The field's number, checked against its range; nullopt when absent (UsageError if it is required).
  std::optional<double> get(const std::string& field, bool required_here) {
    const auto dot = field.find('.');
    const auto section = root_.find(field.substr(0, dot));
    const Json* v = nullptr;
    if (section != root_.end())
      if (const auto it = section->find(field.substr(dot + 1)); it != section->end()) v = &*it;
    return checked(v, field, *find_field(field), required_here);
  }
  double need(const std::string& field) { return *get(field, true); }
  // A level's field ("links") from its object, named "levels.NAME.links" in errors and in `given`.
  std::optional<double> get_level(const Json& level, const std::string& name, const std::string& key, bool required) {
    const MachineField* spec = nullptr;
    for (const auto& f : level_fields())
      if (f.name == key) spec = &f;
    const auto it = level.find(key);
    return checked(it == level.end() ? nullptr : &*it, "levels." + name + "." + key, *spec, required);
  }
  std::vector<std::string> given() const { return given_; }

 private:
  std::optional<double> checked(const Json* v, const std::string& field, const MachineField& f, bool required_here) {
    const MachineField* spec = &f;
    if (v == nullptr) {
      require(!required_here, origin_ + " has no \"" + field + "\"",
              "add it (see `cpsim predict --print-machine h100-ib`; docs/model.md lists every field)");
      return std::nullopt;
    }
    if (!v->is_number())
      throw UsageError(origin_ + ": \"" + field + "\" must be a number (got " + json_text(*v) +
                       "); write it as e.g. 48.5");
    const double x = v->get<double>();
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

  const Json& root_;
  std::string origin_;
  std::vector<std::string> given_;
};

const std::string kLevelsFix =
    "write \"levels\": [{\"name\": \"node\", \"ranks\": 8, \"gbps\": 360, \"latency_us\": 3.4}, "
    "...] (`cpsim predict --print-machine h100-pcie-8` has one)";

// "levels": a list of 1..16 objects, each with a name and the fields of level_fields().
void check_level_keys(const Json& levels, const std::string& origin) {
  require(levels.is_array() && !levels.empty() && levels.size() <= kMaxLevels,
          origin + ": \"levels\" must be a list of 1 to " + std::to_string(kMaxLevels) + " levels", kLevelsFix);
  for (const Json& level : levels) {
    require(level.is_object(), origin + ": \"levels\" holds " + json_text(level).substr(0, 20) + ", not a level",
            kLevelsFix);
    for (const auto& item : level.items()) {
      if (item.key() == "name") {
        require(item.value().is_string(), origin + ": a level's \"name\" must be a string", kLevelsFix);
        continue;
      }
      bool known = false;
      for (const auto& f : level_fields()) known = known || f.name == item.key();
      require(known, origin + ": a level has an unknown field \"" + item.key() + "\"",
              "use name, ranks, links, gbps, p2p_gbps, latency_us, step_latency_us (docs/model.md, section 4)");
    }
  }
}

// Refuses keys the format does not have, naming the first one, and sections that are not objects.
void check_keys(const Json& root, const std::string& origin) {
  std::set<std::string> sections;
  for (const auto& f : machine_fields()) sections.insert(f.name.substr(0, f.name.find('.')));
  for (const auto& item : root.items()) {
    const std::string& key = item.key();
    const Json& child = item.value();
    if (key == "name" || key == "description") {
      require(child.is_string(), origin + ": \"" + key + "\" must be a string", "write it as \"" + key + "\": \"...\"");
      continue;
    }
    if (key == "levels") {
      check_level_keys(child, origin);
      continue;
    }
    const bool kernel = kernel_dim(key) > 0;
    require(key == "sources" || kernel || sections.count(key) > 0, origin + " has an unknown section \"" + key + "\"",
            "use the sections of `cpsim predict --print-machine h100-ib` (kernel sections are kernel_dD, D = 1.." +
                std::to_string(kMaxKernelDim) + ")");
    require(!child.is_array(), origin + ": \"" + key + "\" must be an object of fields, not an array",
            "write it as \"" + key + "\": {...}");
    require(child.is_object(), origin + ": \"" + key + "\" must be an object of fields",
            "write it as \"" + key + "\": {...}");
    for (const auto& field : child.items()) {
      const std::string& sub = field.key();
      if (key == "sources") {
        require(field.value().is_string(), origin + ": \"sources." + sub + "\" must be a string",
                "write it as \"" + sub + "\": \"where the value comes from\"");
        continue;
      }
      require(find_field(key + "." + sub) != nullptr, origin + " has an unknown field \"" + key + "." + sub + "\"",
              "use the fields of `cpsim predict --print-machine h100-ib` (docs/model.md lists them)");
      require(!field.value().is_structured(),
              origin + ": \"" + key + "." + sub + "\" must be a number, not an object or array",
              "write it as e.g. \"" + sub + "\": 48.5");
    }
  }
}

Json read_tree(const std::string& json, const std::string& origin) {
  if (json.find_first_not_of(" \t\r\n") == std::string::npos)
    throw UsageError(origin + " must hold one JSON object of sections; it holds nothing; " + kStartFrom);
  Json root = parse_json(json, origin, "fix the file or " + kStartFrom);
  if (!root.is_object())
    throw UsageError(origin + " must hold one JSON object of sections; it holds " +
                     (root.is_array() ? "an array" : "a single value") + "; " + kStartFrom);
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

bool valid_level_name(const std::string& n) {
  if (n.empty() || n.size() > 32) return false;
  for (char c : n)
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_')) return false;
  return true;
}

// The "levels" of a file: each group made of whole groups of the level below, the node one of them.
void read_levels(Machine& m, const Json& root, Reader& r, const std::string& origin) {
  for (const char* section : {"intra", "inter"})
    require(!root.contains(section), origin + " gives both \"levels\" and the \"" + std::string(section) + "\" section",
            "describe every link as a level and drop the intra and inter sections");
  const Json& levels = root["levels"];
  for (std::size_t i = 0; i < levels.size(); ++i) {
    const Json& j = levels[i];
    Level l;
    l.name = j.contains("name") ? j["name"].get<std::string>() : "";
    require(valid_level_name(l.name), origin + ": level " + std::to_string(i + 1) + " has no name of a-z, 0-9 and _",
            "name it, e.g. \"name\": \"socket\"");
    for (const Level& before : m.levels)
      require(before.name != l.name, origin + " names two levels \"" + l.name + "\"", "give each level its own name");
    l.ranks = static_cast<int>(*r.get_level(j, l.name, "ranks", true));
    l.links = static_cast<int>(r.get_level(j, l.name, "links", false).value_or(1));
    l.link.collective_gbps = *r.get_level(j, l.name, "gbps", true);
    l.link.p2p_gbps = r.get_level(j, l.name, "p2p_gbps", false).value_or(l.link.collective_gbps);
    l.link.latency_us = *r.get_level(j, l.name, "latency_us", true);
    l.link.step_latency_us = r.get_level(j, l.name, "step_latency_us", false).value_or(-1);
    const bool last = i + 1 == levels.size();
    const int below = m.levels.empty() ? 1 : m.levels.back().ranks;
    require(l.ranks > 0 || last,
            origin + ": level \"" + l.name + "\" has ranks 0 (every rank) but is not the last level",
            "give it its group size, or make it the last level");
    require(l.ranks == 0 || (l.ranks > below && l.ranks % below == 0),
            origin + ": level \"" + l.name + "\" has groups of " + std::to_string(l.ranks) +
                " ranks, not a multiple of the level below's " + std::to_string(below) + " (and larger)",
            "list the levels from the smallest group up, each made of whole groups of the one below");
    m.levels.push_back(l);
  }
  bool node = false;
  for (const Level& l : m.levels) node = node || l.ranks == m.ranks_per_node;
  require(node,
          origin + ": nodes.ranks_per_node (" + std::to_string(m.ranks_per_node) +
              ") is the group size of none of its levels",
          "set it to the ranks of the level that is one node (e.g. 8)");
  m.intra = m.levels.front().link;
  m.inter = m.levels.back().link;
  m.nics_per_node = m.levels.back().links;
}

Level* level_named(Machine& m, const std::string& name) {
  for (Level& l : m.levels)
    if (l.name == name) return &l;
  return nullptr;
}

// On a machine with levels: the level a field names and its key there ("levels.socket.gbps" -> socket, "gbps";
// intra.* the lowest level's, inter.* the highest's under the two-level names: inter.gbps is its p2p rate).
std::pair<Level*, std::string> level_field(Machine& m, const std::string& field) {
  const auto dot = field.find('.');
  const std::string section = field.substr(0, dot), key = field.substr(dot + 1);
  if (m.levels.empty()) return {nullptr, ""};
  if (section == "levels") {
    const auto dot2 = key.find('.');
    if (dot2 == std::string::npos) return {nullptr, ""};
    return {level_named(m, key.substr(0, dot2)), key.substr(dot2 + 1)};
  }
  if (section == "intra") return {&m.levels.front(), key};
  if (section == "inter")
    return {&m.levels.back(), key == "gbps" ? "p2p_gbps" : key == "collective_gbps" ? "gbps" : key};
  return {nullptr, ""};
}

}  // namespace

double head_dim_half_width(const Machine& m) {
  if (m.kernels.size() < 2 || m.kernels[0].head_dim <= 0) return kDefaultHeadDimHalfWidth;
  // r = t(D2) / t(D1) = D2 (D1 + D0) / (D1 (D2 + D0))  =>  D0 = D1 D2 (r - 1) / (D2 - r D1)
  const double d1 = m.kernels[0].head_dim, d2 = m.kernels[1].head_dim;
  const double r = m.kernels[1].forward_full.tflops / m.kernels[0].forward_full.tflops;
  const double d0 = d1 * d2 * (r - 1) / (d2 - r * d1);
  return r > 1 && r < d2 / d1 && std::isfinite(d0) && d0 > 0 ? d0 : kDefaultHeadDimHalfWidth;
}

KernelCurves Machine::curves_for(std::int64_t head_dim) const {
  if (kernels.empty()) throw Error("machine " + name + " has no attention kernel curves");
  if (head_dim < kernels.front().head_dim && kernels.front().head_dim > 0) {
    // Below the smallest listed head dim: its curves at the rate D / (D + D0) gives relative to it.
    const double d0 = head_dim_half_width(*this), d = static_cast<double>(std::max<std::int64_t>(head_dim, 1));
    const double lo = kernels.front().head_dim, f = (d / (d + d0)) / (lo / (lo + d0));
    KernelCurves k = kernels.front();
    k.head_dim = static_cast<int>(head_dim);
    for (KernelCurve* c : {&k.forward_causal, &k.forward_full, &k.backward_causal, &k.backward_full}) c->tflops *= f;
    return k;
  }
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
  if (section == "levels" || (!m.levels.empty() && (section == "intra" || section == "inter"))) {
    const auto [l, k] = level_field(m, field);
    if (l == nullptr) return nullptr;
    if (k == "gbps") return &l->link.collective_gbps;
    if (k == "p2p_gbps") return &l->link.p2p_gbps;
    if (k == "latency_us") return &l->link.latency_us;
    if (k == "step_latency_us") return &l->link.step_latency_us;
    return nullptr;
  }
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
      {"framework.step_bytes_per_element", &Machine::step_bytes_per_element},
      {"framework.merge_bytes_per_element", &Machine::merge_bytes_per_element},
      {"framework.grad_add_bytes_per_element", &Machine::grad_add_bytes_per_element}};
  if (const auto it = doubles.find(field); it != doubles.end()) return &(m.*(it->second));
  if (field == "intra.gbps") return &m.intra.collective_gbps;
  if (field == "intra.p2p_gbps") return &m.intra.p2p_gbps;
  if (field == "intra.latency_us") return &m.intra.latency_us;
  if (field == "intra.step_latency_us") return &m.intra.step_latency_us;
  if (field == "inter.step_latency_us") return &m.inter.step_latency_us;
  if (field == "inter.gbps") return &m.inter.p2p_gbps;
  if (field == "inter.collective_gbps") return &m.inter.collective_gbps;
  if (field == "inter.latency_us") return &m.inter.latency_us;
  return nullptr;
}

Machine parse_machine(const std::string& json, const std::string& origin) {
  const Json root = read_tree(json, origin);
  check_keys(root, origin);
  Reader r(root, origin);
  Machine m;
  m.name = root.contains("name") ? root["name"].get<std::string>() : origin;
  m.description = root.contains("description") ? root["description"].get<std::string>() : "";
  m.ranks_per_node = static_cast<int>(r.need("nodes.ranks_per_node"));
  m.max_nodes = static_cast<int>(r.need("nodes.max_nodes"));
  m.memory_gb = r.need("nodes.memory_gb");
  // 1. The kernel: per-head-dim sections, or the one curve per direction of the first format.
  for (const auto& item : root.items())
    if (const std::string& key = item.key(); kernel_dim(key) > 0) {
      const int d = kernel_dim(key);
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
    legacy_given = legacy_given || (root.contains("attention") && root["attention"].contains(f));
  require(m.kernels.empty() || !legacy_given,
          origin + " gives both kernel_dD sections and attention.forward_tflops / backward_tflops",
          "keep the kernel_dD sections and drop the attention rates (or the other way round)");
  if (m.kernels.empty()) m.kernels.push_back(legacy_curves(r));  // the first format: required
  m.sm_count = static_cast<int>(r.need("attention.sm_count"));
  m.tile_rows = static_cast<int>(r.need("attention.tile_rows"));
  m.launch_us = r.get("attention.launch_us", false).value_or(kDefaultLaunchUs);
  m.forward_ctas_per_sm = r.get("attention.forward_ctas_per_sm", false).value_or(1);
  m.backward_ctas_per_sm = r.get("attention.backward_ctas_per_sm", false).value_or(1);
  m.forward_longest_first = r.get("attention.forward_longest_first", false).value_or(0) != 0;
  m.max_kv_splits = static_cast<int>(r.get("attention.max_kv_splits", false).value_or(kDefaultMaxKvSplits));
  m.pack_gqa = r.get("attention.pack_gqa", false).value_or(0) != 0;
  m.hbm_gbps = r.need("memory.hbm_gbps");
  // 2. Links: intra.gbps is the collective rate and, unless given, the point-to-point one; inter.gbps a NIC's
  //    rate for flows and, unless given, in rings; a step of a collective costs the message latency unless given.
  //    Or the levels of a hierarchy, each alike.
  if (root.contains("levels")) {
    read_levels(m, root, r, origin);
  } else {
    m.intra.collective_gbps = r.need("intra.gbps");
    m.intra.p2p_gbps = r.get("intra.p2p_gbps", false).value_or(m.intra.collective_gbps);
    m.intra.latency_us = r.need("intra.latency_us");
    m.intra.step_latency_us = r.get("intra.step_latency_us", false).value_or(-1);
    m.inter.p2p_gbps = r.need("inter.gbps");
    m.inter.collective_gbps = r.get("inter.collective_gbps", false).value_or(m.inter.p2p_gbps);
    m.inter.latency_us = r.need("inter.latency_us");
    m.inter.step_latency_us = r.get("inter.step_latency_us", false).value_or(-1);
    m.nics_per_node = static_cast<int>(r.need("inter.nics_per_node"));
  }
  m.collective_base_us = r.get("collective.base_latency_us", false).value_or(kDefaultCollectiveBaseUs);
  // 3. Contention and the software stack: absent, contention and the merges cost nothing (the first format's
  //    model); a strategy step moves what ring-flash-attention's measured steps move per output element (a file
  //    that gives a fixed step_us and no bytes per element keeps meaning a constant).
  m.comm_sms = r.get("contention.comm_sms", false).value_or(0);
  const std::optional<double> step_us = r.get("framework.step_us", false);
  m.step_us = step_us.value_or(0);
  m.step_bytes_per_element =
      r.get("framework.step_bytes_per_element", false).value_or(step_us ? 0 : kDefaultStepBytesPerElement);
  m.merge_bytes_per_element = r.get("framework.merge_bytes_per_element", false).value_or(0);
  m.grad_add_bytes_per_element = r.get("framework.grad_add_bytes_per_element", false).value_or(0);
  m.given = r.given();
  if (root.contains("sources"))
    for (const auto& item : root["sources"].items()) m.sources[item.key()] = item.value().get<std::string>();
  return m;
}

Machine scaled(const Machine& m, const std::string& field, double factor) {
  Machine out = m;
  double* v = machine_value(out, field);
  if (v == nullptr) throw Error("scaled: the machine has no field " + field);
  *v *= factor;
  // The fields that took their default from this one move with it.
  auto given = [&](const std::string& f) { return std::find(m.given.begin(), m.given.end(), f) != m.given.end(); };
  if (!out.levels.empty()) {  // a level's gbps is its p2p rate too unless the file gave that
    const auto [l, key] = level_field(out, field);
    if (l != nullptr && key == "gbps" && !given("levels." + l->name + ".p2p_gbps")) l->link.p2p_gbps *= factor;
    out.intra = out.levels.front().link;
    out.inter = out.levels.back().link;
    return out;
  }
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
  std::error_code ec;
  if (!std::filesystem::exists(name_or_path, ec)) {
    std::string list;
    for (const auto& n : names) list += (list.empty() ? "" : ", ") + n;
    throw UsageError("--machine " + name_or_path + " is neither a preset nor a readable file; use one of " + list +
                     ", or the path of a JSON file (`cpsim predict --print-machine h100-ib > my.json`)");
  }
  const std::string text =
      read_input_file("--machine", name_or_path,
                      "give a machine file: a preset's is printed by `cpsim predict --print-machine h100-ib`");
  return parse_machine(text, name_or_path);
}

Json machine_number(double x) {
  const double rounded = std::stod(num(x));  // the files' 6 significant digits
  if (rounded == std::floor(rounded) && std::fabs(rounded) < 1e15) return static_cast<std::int64_t>(rounded);
  return rounded;
}

std::string machine_json(const Machine& m) {
  Json j{{"name", m.name}, {"description", m.description}};
  j["nodes"] = {{"ranks_per_node", machine_number(m.ranks_per_node)},
                {"max_nodes", machine_number(m.max_nodes)},
                {"memory_gb", machine_number(m.memory_gb)}};
  Json& attention = j["attention"] = Json::object();
  const bool legacy = m.kernels.size() == 1 && m.kernels.front().head_dim == 0;
  if (legacy) {
    const KernelCurves& k = m.kernels.front();
    attention["forward_tflops"] = machine_number(k.forward_full.tflops);
    attention["forward_half_len"] = machine_number(k.forward_full.half_len);
    attention["backward_tflops"] = machine_number(k.backward_full.tflops);
    attention["backward_half_len"] = machine_number(k.backward_full.half_len);
  }
  attention["sm_count"] = machine_number(m.sm_count);
  attention["tile_rows"] = machine_number(m.tile_rows);
  attention["launch_us"] = machine_number(m.launch_us);
  attention["forward_ctas_per_sm"] = machine_number(m.forward_ctas_per_sm);
  attention["backward_ctas_per_sm"] = machine_number(m.backward_ctas_per_sm);
  attention["forward_longest_first"] = machine_number(m.forward_longest_first ? 1 : 0);
  attention["max_kv_splits"] = machine_number(m.max_kv_splits);
  attention["pack_gqa"] = machine_number(m.pack_gqa ? 1 : 0);
  if (!legacy)
    for (const KernelCurves& k : m.kernels) {
      Json& section = j["kernel_d" + std::to_string(k.head_dim)] = Json::object();
      const KernelCurve* curves[] = {&k.forward_causal, &k.forward_full, &k.backward_causal, &k.backward_full};
      const char* names[] = {"forward_causal", "forward_full", "backward_causal", "backward_full"};
      for (int i = 0; i < 4; ++i) {
        section[std::string(names[i]) + "_tflops"] = machine_number(curves[i]->tflops);
        section[std::string(names[i]) + "_half_len"] = machine_number(curves[i]->half_len);
      }
    }
  j["memory"] = {{"hbm_gbps", machine_number(m.hbm_gbps)}};
  if (m.levels.empty()) {
    j["intra"] = {{"gbps", machine_number(m.intra.collective_gbps)},
                  {"p2p_gbps", machine_number(m.intra.p2p_gbps)},
                  {"latency_us", machine_number(m.intra.latency_us)}};
    if (m.intra.step_latency_us >= 0) j["intra"]["step_latency_us"] = machine_number(m.intra.step_latency_us);
    j["inter"] = {{"gbps", machine_number(m.inter.p2p_gbps)},
                  {"collective_gbps", machine_number(m.inter.collective_gbps)},
                  {"latency_us", machine_number(m.inter.latency_us)}};
    if (m.inter.step_latency_us >= 0) j["inter"]["step_latency_us"] = machine_number(m.inter.step_latency_us);
    j["inter"]["nics_per_node"] = machine_number(m.nics_per_node);
  } else {
    Json& levels = j["levels"] = Json::array();
    for (const Level& l : m.levels) {
      Json e{{"name", l.name},
             {"ranks", machine_number(l.ranks)},
             {"links", machine_number(l.links)},
             {"gbps", machine_number(l.link.collective_gbps)},
             {"p2p_gbps", machine_number(l.link.p2p_gbps)},
             {"latency_us", machine_number(l.link.latency_us)}};
      if (l.link.step_latency_us >= 0) e["step_latency_us"] = machine_number(l.link.step_latency_us);
      levels.push_back(e);
    }
  }
  j["collective"] = {{"base_latency_us", machine_number(m.collective_base_us)}};
  j["contention"] = {{"comm_sms", machine_number(m.comm_sms)}};
  j["framework"] = {{"step_us", machine_number(m.step_us)},
                    {"step_bytes_per_element", machine_number(m.step_bytes_per_element)},
                    {"merge_bytes_per_element", machine_number(m.merge_bytes_per_element)},
                    {"grad_add_bytes_per_element", machine_number(m.grad_add_bytes_per_element)}};
  Json& sources = j["sources"] = Json::object();
  for (const auto& [k, v] : m.sources) sources[k] = v;
  return json_text(j, true) + "\n";
}

void check_fits(const Machine& m, int ranks) {
  if (!m.levels.empty() && m.levels.back().ranks > 0) {
    const Level& top = m.levels.back();
    require(ranks <= top.ranks,
            "machine " + m.name + " has " + std::to_string(top.ranks) + " ranks (its widest level, " + top.name +
                "), fewer than C=" + std::to_string(ranks),
            Fix{{"--ranks " + std::to_string(top.ranks) + " or less", "--machine h100-ib for several nodes"}});
  }
  if (m.max_nodes == 0) return;
  const int most = m.max_nodes * m.ranks_per_node;
  require(ranks <= most,
          "machine " + m.name + " has " + std::to_string(most) + " ranks (" + std::to_string(m.max_nodes) +
              " node(s) of " + std::to_string(m.ranks_per_node) + "), fewer than C=" + std::to_string(ranks),
          Fix{{"--ranks " + std::to_string(most) + " or less", "--machine h100-ib for several nodes"}});
}

bool has_stack_costs(const Machine& m) {
  return m.step_us > 0 || m.step_bytes_per_element > 0 || m.merge_bytes_per_element > 0 ||
         m.grad_add_bytes_per_element > 0;
}

Machine with_stack(Machine m, SoftwareStack stack) {
  const bool pytorch = stack == SoftwareStack::pytorch;
  m.step_us = 0;
  m.step_bytes_per_element = pytorch ? kDefaultStepBytesPerElement : 0;
  m.merge_bytes_per_element = pytorch ? kPytorchMergeBytes : 0;
  m.grad_add_bytes_per_element = pytorch ? kPytorchGradAddBytes : 0;
  m.name += pytorch ? ", pytorch stack" : ", fused stack";
  return m;
}

}  // namespace cpsim::model
