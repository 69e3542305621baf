// A machine the simulated clock runs on: GPUs (or CPU cores) grouped into nodes, joined by two kinds of links.
//
// Read from a small JSON file (`cpsim predict --machine FILE`) or a built-in preset (`--machine h100-ib`); both go
// through the same parser, and `cpsim predict --print-machine NAME` prints a preset to start a file from.
// Every value of a preset names its source in "sources" (a measurement, a datasheet, NCCL's tuner, or an
// assumption said as such). The equations that use these numbers are in clock.hpp and cost.hpp.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace cpsim::model {

struct Link {
  double gbps = 0;        // achievable bandwidth per rank and direction, GB/s (1e9 bytes per second)
  double latency_us = 0;  // per message / per collective step
};

struct Machine {
  std::string name, description;
  // nodes
  int ranks_per_node = 8;  // rank r runs on node r / ranks_per_node
  int max_nodes = 0;       // 0: as many as the ranks need
  double memory_gb = 80;   // device memory per rank, GB (1e9 bytes)
  // the attention kernel: a block whose inner loop visits L rows on average runs at
  //   rate = tflops * L / (L + half_len) * min(1, tiles / sm_count)
  double forward_tflops = 0, forward_half_len = 0;
  double backward_tflops = 0, backward_half_len = 0;
  int sm_count = 1;      // streaming multiprocessors (cores): parallel tiles in flight
  int tile_rows = 128;   // rows per kernel tile, for the occupancy term
  double launch_us = 0;  // fixed cost of every kernel (attention, copy, merge)
  double hbm_gbps = 0;   // device memory bandwidth for copy / add / merge / fill
  // links
  Link intra;  // inside a node (NVLink / NVSwitch)
  Link inter;  // between nodes (InfiniBand), per NIC
  int nics_per_node = 1;
  double collective_base_us = 0;               // fixed cost of every collective call
  std::map<std::string, std::string> sources;  // "attention.forward_tflops" -> where the value comes from

  int nodes_for(int ranks) const { return (ranks + ranks_per_node - 1) / ranks_per_node; }
  int node_of(int rank) const { return rank / ranks_per_node; }
};

// Every field a machine file holds, as "section.key" (the keys of Machine::sources).
const std::vector<std::string>& machine_fields();

std::vector<std::string> machine_preset_names();         // "h100-sxm-8", "h100-ib", "local-cpu"
std::string machine_preset_json(std::string_view name);  // throws UsageError listing the presets

// Parses a machine file's text; `origin` names it in errors. Throws UsageError naming the field and a fix.
Machine parse_machine(const std::string& json, const std::string& origin);
// A preset name, or else the path of a JSON file.
Machine load_machine(const std::string& name_or_path);

// Throws UsageError when C ranks do not fit the machine (more nodes than it has).
void check_fits(const Machine& m, int ranks);

}  // namespace cpsim::model
