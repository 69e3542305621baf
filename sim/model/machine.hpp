// A machine the simulated clock runs on: GPUs (or CPU cores) grouped into nodes, joined by two kinds of links, and
// the software stack's costs that a count of the strategy code does not see.
//
// Read from a small JSON file (`cpsim predict --machine FILE`) or a built-in preset (`--machine h100-ib`); both go
// through the same parser, and `cpsim predict --print-machine NAME` prints a preset to start a file from.
// Every value of a preset names its source in "sources" (a measurement, a datasheet, NCCL's tuner, or an
// assumption said as such). The equations that use these numbers are in cost.hpp and clock.hpp; every field, its
// plausible range and its default are in docs/model.md (machine_fields() is the same list).
#pragma once
#include <cstdint>
#include <map>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <string_view>
#include <vector>

namespace cpsim::model {

// One link class (NVLink inside a node, the network between nodes, a PCIe switch, a socket's bus): NCCL moves one
// point-to-point flow and the many flows of a collective at different rates and latencies, so they are separate.
struct Link {
  double latency_us = 0;        // per point-to-point message
  double p2p_gbps = 0;          // one send/recv flow, GB/s (1e9 bytes per second); inter: one NIC
  double collective_gbps = 0;   // intra: a rank's bus bandwidth in NCCL's collectives; inter: per NIC in a ring
  double step_latency_us = -1;  // per step of a collective; < 0: latency_us (files that do not give it)
  double step_us() const { return step_latency_us < 0 ? latency_us : step_latency_us; }
};

// One level of a machine's hierarchy (docs/model.md, section 4): ranks form groups of `ranks` consecutive ranks
// (a GPU pair behind a PCIe switch, a socket, a node, a cluster), each group made of whole groups of the level
// below. Two ranks meet at the lowest level whose group holds both; a message between them has that level's
// figures (measured end to end, so they include the hops below).
struct Level {
  std::string name;  // [a-z0-9_], unique in a machine: "pcie_switch", "socket", "node", "cluster"
  int ranks = 0;     // ranks in one group; 0 (the last level only): every rank
  int links = 1;     // links from each group of the level below into this level, shared by that group's flows
                     // (a node's NICs for a network level); rings leave a group over at most this many
  Link link;
};

// The attention kernel's rate on blocks whose inner loop runs L rows: rate(L) = tflops * L / (L + half_len).
struct KernelCurve {
  double tflops = 0, half_len = 0;
  double rate(double L) const { return tflops * 1e12 * L / (L + half_len); }  // flop/s
};

// The four curves of one head dim. "causal": the triangle of a causal block, L = its side; "full": blocks every
// pair of which is visible, L = keys per query row (forward) or queries per key row (backward).
struct KernelCurves {
  int head_dim = 0;  // 0: every head dim (a machine file without kernel sections)
  KernelCurve forward_causal, forward_full, backward_causal, backward_full;
};

// A FlashAttention forward whose row tiles leave SMs idle splits its keys into at most this many parts
// (split-KV: FlashAttention-2 csrc/flash_attn/flash_api.cpp and FlashAttention-3 hopper/flash_api.cpp both cap
// num_splits at 128; cost.hpp says how many it takes).
constexpr int kDefaultMaxKvSplits = 128;

struct Machine {
  std::string name, description;
  // nodes
  int ranks_per_node = 8;  // rank r runs on node r / ranks_per_node
  int max_nodes = 0;       // 0: as many as the ranks need
  double memory_gb = 80;   // device memory per rank, GB (1e9 bytes)
  // the attention kernel, by head dim (ascending); curves_for() interpolates between them
  std::vector<KernelCurves> kernels;
  int sm_count = 1;      // streaming multiprocessors (cores): parallel tiles in flight
  int tile_rows = 128;   // rows per kernel tile, for the occupancy term
  double forward_ctas_per_sm = 1, backward_ctas_per_sm = 1;  // tiles resident on one SM at once (cost.hpp)
  // The forward hands out a causal call's longest tiles first (FlashAttention-3's scheduler); else in row order
  // (FlashAttention-2's grid, shortest first). The backward goes in key-tile order, the longest first (cost.hpp).
  bool forward_longest_first = false;
  int max_kv_splits = kDefaultMaxKvSplits;  // the forward's split-KV cap (cost.hpp); 1: it never splits
  bool pack_gqa = false;  // the forward packs a KV head's query heads into one tile (FlashAttention-3; cost.hpp)
  double launch_us = 0;  // fixed cost of every kernel (attention, copy, merge)
  double hbm_gbps = 0;   // device memory bandwidth for copy / add / merge / fill
  // links: two levels (intra, inter), or any number of `levels`
  Link intra;  // inside a node (NVLink / NVSwitch), per rank and direction
  Link inter;  // between nodes (InfiniBand), per NIC and direction
  int nics_per_node = 1;
  // The hierarchy, lowest level first. Empty: the two levels above (a node of ranks_per_node ranks on `intra`,
  // then every rank on `inter` over nics_per_node NICs); cost.hpp's level functions read both alike. A file with
  // levels also sets intra and inter to its lowest and highest level's links (for printing).
  std::vector<Level> levels;
  double collective_base_us = 0;  // fixed cost of every collective call
  // contention: SMs the kernel of a transfer in flight holds (0: transfers cost the compute nothing)
  double comm_sms = 0;
  // the software stack: a cost per strategy step (fixed, and bytes moved per element of the rank's output); a merge
  // or a gradient accumulation done outside the kernel, in bytes moved per output element (0: as the strategy code
  // issues it, counted)
  double step_us = 0;
  double step_bytes_per_element = 0;
  double merge_bytes_per_element = 0;
  double grad_add_bytes_per_element = 0;
  std::map<std::string, std::string> sources;  // "attention.sm_count" -> where the value comes from
  std::vector<std::string> given;              // the fields the file gave (the rest took their defaults)

  int nodes_for(int ranks) const { return (ranks + ranks_per_node - 1) / ranks_per_node; }
  int node_of(int rank) const { return rank / ranks_per_node; }
  // The curves at head dim D: a listed head dim's own; between two listed ones, interpolated linearly in log2(D);
  // outside them, the nearest.
  KernelCurves curves_for(std::int64_t head_dim) const;
};

// Defaults for the fixed costs a machine file leaves out (docs/model.md, section 4.2):
//   attention.launch_us        2 us per kernel call: the presets' assumption (the gap between back-to-back
//                              kernels on one stream; no published sweep determines it)
//   collective.base_latency_us 8.4 us per collective call: NCCL src/graph/tuning.cc baseLat, Ring, Simple
//   framework.step_bytes_per_element  kDefaultStepBytesPerElement per element of the rank's output (B x its query
//                              rows x Nq x D) per strategy step, at memory.hbm_gbps: ring-flash-attention's per-step
//                              cost fitted to its README's 32-head rows, 12.03 bytes on the H800 and 12.63 on the A100
//                              (`cpsim calibrate --published` prints both fits); their mean. Per element, not a
//                              constant: its 5-head table (docs/predictions.md) leaves a sixth as much per step.
//   framework.step_us          0 (a file that gives it and not the bytes per element means a constant per step)
constexpr double kDefaultLaunchUs = 2;
constexpr double kDefaultCollectiveBaseUs = 8.4;
constexpr double kDefaultStepBytesPerElement = 12.3;

// The software stack that runs the strategies (`--stack`), as the framework costs above:
//   fused    the strategy code's own: its merge and in-kernel gradient sums counted as issued, no per-step cost
//            (the H100 presets' stack)
//   pytorch  a stack that issues every block from Python, as ring-flash-attention's, Transformer Engine's and
//            Megatron-LM's rings do: kDefaultStepBytesPerElement per step, kPytorchMergeBytes per merged element,
//            kPytorchGradAddBytes per gradient element summed (ring-flash-attention's, which the FlashAttention-2
//            presets carry; MagiAttention's H100 baselines are met within 16% with them, docs/predictions.md)
enum class SoftwareStack { fused, pytorch };
constexpr double kPytorchMergeBytes = 38;    // ring-flash-attention's update_out_and_lse: four f32 passes
constexpr double kPytorchGradAddBytes = 10;  // a bf16 dq/dk/dv buffer added into f32 accumulators: 4 + 2 + 4
// The machine with that stack's framework costs; its name says so ("h100-ib, pytorch stack").
Machine with_stack(Machine m, SoftwareStack stack);
// Whether the machine counts a stack's costs beyond the strategy code's own (any framework cost above 0).
bool has_stack_costs(const Machine& m);
// The kernel's peak rate over head dims D as R D / (D + D0): the FlashAttention-3 paper's non-causal forward
// peaks (497, 648, 756 TFLOP/s at d = 64, 128, 256; Fig. 5, 16K) give D0 = 55.9 from d = 64 and 128 and then
// 764 at d = 256 (+1.1%). A machine with two head dims or more takes D0 from its two smallest full forward
// rates; below its smallest head dim the curves are that one's, their rates scaled by D / (D + D0).
constexpr double kDefaultHeadDimHalfWidth = 55.9;
double head_dim_half_width(const Machine& m);

// A field of the machine-file format: "section.key", its plausible range, and whether a file must give it.
struct MachineField {
  std::string name;
  double lo, hi;  // plausible range (lo excluded when lo_open)
  bool lo_open;   //
  bool whole;     // a whole number
  bool required;  // false: optional, with the default docs/model.md states
  bool cost;      // a cost the clock uses (moved by `cpsim predict --sensitivity`)
};
// Every field but the kernel sections' (kernel_fields()) and the levels' (level_fields()), in file order.
const std::vector<MachineField>& machine_fields();
// The fields of one entry of "levels": "ranks", "links", "gbps", "p2p_gbps", "latency_us", "step_latency_us".
const std::vector<MachineField>& level_fields();
// The eight fields of a kernel section "kernel_dD" (D = 1..1024): "forward_causal_tflops", ...
const std::vector<MachineField>& kernel_fields();
// A field's value in a machine ("intra.p2p_gbps", "kernel_d128.forward_full_half_len", "levels.socket.gbps"); null
// if it has none. On a machine with levels, intra.* and inter.* are its lowest and highest level's.
double* machine_value(Machine& m, const std::string& field);
// The machine with one field multiplied by `factor`, and with it the fields that took their default from it.
Machine scaled(const Machine& m, const std::string& field, double factor);

std::vector<std::string> machine_preset_names();         // "h100-sxm-8", "h100-ib", "h800-sxm-8", ...
std::string machine_preset_json(std::string_view name);  // throws UsageError listing the presets

// Parses a machine file's text; `origin` names it in errors. Throws UsageError naming the field and a fix.
Machine parse_machine(const std::string& json, const std::string& origin);
// A preset name, or else the path of a JSON file.
Machine load_machine(const std::string& name_or_path);
// A machine as a machine file (what `cpsim calibrate` writes); parse_machine reads it back unchanged.
std::string machine_json(const Machine& m);
// A number as machine files write it: to 6 significant digits, a whole one as an integer (80, 3.4, 1e-06).
nlohmann::ordered_json machine_number(double x);

// Throws UsageError when C ranks do not fit the machine (more nodes than it has).
void check_fits(const Machine& m, int ranks);

}  // namespace cpsim::model
