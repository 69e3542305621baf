// Reading a machine file (Boost.PropertyTree's JSON parser): every field is required, numbers must be in range,
// unknown keys are refused (a misspelt key would otherwise silently keep a default).
#include "sim/model/machine.hpp"

// Boost.PropertyTree's JSON parser includes the deprecated <boost/bind.hpp>; this keeps its notice out of the build.
#define BOOST_BIND_GLOBAL_PLACEHOLDERS
#include <boost/property_tree/json_parser.hpp>
#include <boost/property_tree/ptree.hpp>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "sim/core/error.hpp"
#include "sim/core/flags.hpp"

namespace cpsim::model {

namespace pt = boost::property_tree;

const std::vector<std::string>& machine_fields() {
  static const std::vector<std::string> fields = {"nodes.ranks_per_node",
                                                  "nodes.max_nodes",
                                                  "nodes.memory_gb",
                                                  "attention.forward_tflops",
                                                  "attention.forward_half_len",
                                                  "attention.backward_tflops",
                                                  "attention.backward_half_len",
                                                  "attention.sm_count",
                                                  "attention.tile_rows",
                                                  "attention.launch_us",
                                                  "memory.hbm_gbps",
                                                  "intra.gbps",
                                                  "intra.latency_us",
                                                  "inter.gbps",
                                                  "inter.latency_us",
                                                  "inter.nics_per_node",
                                                  "collective.base_latency_us"};
  return fields;
}

namespace {

double number(const pt::ptree& root, const std::string& field, const std::string& origin) {
  const auto v = root.get_optional<std::string>(pt::ptree::path_type(field, '.'));
  require(v.has_value(), origin + " has no \"" + field + "\"", "add it (see `cpsim predict --print-machine h100-ib`)");
  try {
    std::size_t used = 0;
    const double x = std::stod(*v, &used);
    if (used == v->size()) return x;
  } catch (const std::exception&) {
  }
  throw UsageError(origin + ": \"" + field + "\" must be a number (got \"" + *v + "\"); write it as e.g. 48.5");
}

double at_least(double x, double lo, const std::string& field, const std::string& origin, bool strict) {
  require(strict ? x > lo : x >= lo,
          origin + ": \"" + field + "\" must be " + (strict ? "> " : ">= ") + std::to_string(lo) + " (got " +
              std::to_string(x) + ")",
          "fix the value in the machine file");
  return x;
}

int whole(double x, const std::string& field, const std::string& origin) {
  require(x == static_cast<double>(static_cast<int>(x)),
          origin + ": \"" + field + "\" must be a whole number (got " + std::to_string(x) + ")", "fix the value");
  return static_cast<int>(x);
}

// Refuses keys the format does not have, naming the first one.
void check_keys(const pt::ptree& root, const std::string& origin) {
  std::set<std::string> known = {"name", "description", "sources"};
  std::set<std::string> sections;
  for (const auto& f : machine_fields()) {
    known.insert(f);
    sections.insert(f.substr(0, f.find('.')));
  }
  for (const auto& [key, child] : root) {
    if (key == "sources" || key == "name" || key == "description") continue;
    require(sections.count(key) > 0, origin + " has an unknown section \"" + key + "\"",
            "use the sections of `cpsim predict --print-machine h100-ib`");
    for (const auto& [sub, leaf] : child)
      require(known.count(key + "." + sub) > 0, origin + " has an unknown field \"" + key + "." + sub + "\"",
              "use the fields of `cpsim predict --print-machine h100-ib`");
  }
}

}  // namespace

Machine parse_machine(const std::string& json, const std::string& origin) {
  pt::ptree root;
  try {
    std::istringstream in(json);
    pt::read_json(in, root);
  } catch (const pt::json_parser_error& e) {
    throw UsageError(origin + " is not valid JSON (line " + std::to_string(e.line()) + ": " + e.message() +
                     "); fix the file or start from `cpsim predict --print-machine h100-ib`");
  }
  check_keys(root, origin);
  auto num = [&](const char* f, double lo, bool strict) {
    return at_least(number(root, f, origin), lo, f, origin, strict);
  };
  Machine m;
  m.name = root.get<std::string>("name", origin);
  m.description = root.get<std::string>("description", "");
  m.ranks_per_node = whole(num("nodes.ranks_per_node", 1, false), "nodes.ranks_per_node", origin);
  m.max_nodes = whole(num("nodes.max_nodes", 0, false), "nodes.max_nodes", origin);
  m.memory_gb = num("nodes.memory_gb", 0, true);
  m.forward_tflops = num("attention.forward_tflops", 0, true);
  m.forward_half_len = num("attention.forward_half_len", 0, false);
  m.backward_tflops = num("attention.backward_tflops", 0, true);
  m.backward_half_len = num("attention.backward_half_len", 0, false);
  m.sm_count = whole(num("attention.sm_count", 1, false), "attention.sm_count", origin);
  m.tile_rows = whole(num("attention.tile_rows", 1, false), "attention.tile_rows", origin);
  m.launch_us = num("attention.launch_us", 0, false);
  m.hbm_gbps = num("memory.hbm_gbps", 0, true);
  m.intra = Link{num("intra.gbps", 0, true), num("intra.latency_us", 0, false)};
  m.inter = Link{num("inter.gbps", 0, true), num("inter.latency_us", 0, false)};
  m.nics_per_node = whole(num("inter.nics_per_node", 1, false), "inter.nics_per_node", origin);
  m.collective_base_us = num("collective.base_latency_us", 0, false);
  if (const auto src = root.get_child_optional("sources"))
    for (const auto& [key, leaf] : *src) m.sources[key] = leaf.get_value<std::string>();
  return m;
}

Machine load_machine(const std::string& name_or_path) {
  const auto names = machine_preset_names();
  for (const auto& n : names)
    if (n == name_or_path) return parse_machine(machine_preset_json(n), "preset " + n);
  std::ifstream in(name_or_path);
  if (!in) {
    std::string list;
    for (const auto& n : names) list += (list.empty() ? "" : ", ") + n;
    throw UsageError("--machine " + name_or_path + " is neither a preset nor a readable file; use one of " + list +
                     ", or the path of a JSON file (`cpsim predict --print-machine h100-ib > my.json`)");
  }
  std::stringstream text;
  text << in.rdbuf();
  return parse_machine(text.str(), std::filesystem::path(name_or_path).filename().string());
}

void check_fits(const Machine& m, int ranks) {
  if (m.max_nodes == 0) return;
  const int most = m.max_nodes * m.ranks_per_node;
  require(ranks <= most,
          "machine " + m.name + " has " + std::to_string(most) + " ranks (" + std::to_string(m.max_nodes) +
              " node(s) of " + std::to_string(m.ranks_per_node) + "), fewer than C=" + std::to_string(ranks),
          use({"--ranks " + std::to_string(most) + " or less", "--machine h100-ib for several nodes"}));
}

}  // namespace cpsim::model
