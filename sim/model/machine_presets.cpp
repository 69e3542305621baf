// The built-in machines, each value beside its source, written out in the machine-file format itself (one parser
// for both; `cpsim predict --print-machine NAME` prints the text).
//
// Kernel curves: fitted by least squares to the published sweeps of published.hpp when a preset is built
// (fit.hpp: t = launch + flops / (tflops S / (S + half_len)), launch 2 us), never typed in; each value's source
// names the sweep and the fit's residuals. The paper plots no causal backward and no backward at head dim 256:
//   causal backward(S) = full backward(S) x causal forward(S) / full forward(S)   (the forward's masking ratio);
//   checked on FlashAttention-2, whose causal backward ring-flash-attention measured on one H800 at 8K: 288 TFLOP/s,
//   against 318 x 333 / 370 = 286 from the paper's FlashAttention-2 bars;
//   head dim 256 backward = head dim 128's (an assumption, said in the sources).
// framework.step_bytes_per_element of ring-flash-attention's stack: fitted offline to its published ring rows
// (fit_step_bytes, which needs counting runs); the value is stored here and tests/model/fit_test.cpp re-runs the fit
// and recovers it.
#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "sim/core/error.hpp"
#include "sim/core/json.hpp"
#include "sim/model/cost.hpp"
#include "sim/model/fit.hpp"
#include "sim/model/machine.hpp"
#include "sim/model/published.hpp"

namespace cpsim::model {
namespace {

struct Entry {
  std::string field;  // "section.key"
  double value;
  std::string source;
};
using Entries = std::vector<Entry>;

// The preset as a machine file: its sections in the order their fields first appear, then the sources. A level's
// field "levels.NAME.key" goes to the entry of "levels" with that name (levels in the order they first appear).
std::string preset_text(const std::string& name, const std::string& description, const Entries& entries) {
  Json j{{"name", name}, {"description", description}};
  for (const Entry& e : entries) {
    const auto dot = e.field.find('.');
    const std::string section = e.field.substr(0, dot), key = e.field.substr(dot + 1);
    if (section != "levels") {
      j[section][key] = machine_number(e.value);
      continue;
    }
    const auto dot2 = key.find('.');
    const std::string level = key.substr(0, dot2);
    Json& levels = j["levels"];
    if (levels.is_null()) levels = Json::array();
    auto it = std::find_if(levels.begin(), levels.end(), [&](const Json& l) { return l["name"] == level; });
    if (it == levels.end()) {
      levels.push_back(Json{{"name", level}});
      it = levels.end() - 1;
    }
    (*it)[key.substr(dot2 + 1)] = machine_number(e.value);
  }
  Json& sources = j["sources"] = Json::object();
  for (const Entry& e : entries) sources[e.field] = e.source;
  return json_text(j, true) + "\n";
}

void add(Entries& to, const Entries& more) {
  to.insert(to.end(), more.begin(), more.end());
}

// The fixed cost of every kernel call on the GPU presets. Not determined by the published sweeps the curves are
// fitted to (fit.hpp, 2.: they hold batch x S fixed, so a per-call cost and the per-tile half_len have one shape):
// an assumption, and the curves are fitted net of it.
constexpr double kLaunchUs = 2;
const char* const kLaunchSource =
    "assumption: the gap between back-to-back kernels on one stream, about 2 us; the published sweeps do not "
    "determine it (cpsim calibrate --published: launches from 0 to the bound it prints fit them equally well)";

std::string points_text(const std::vector<double>& tflops) {
  std::string out;
  for (double t : tflops) {
    char v[16];
    std::snprintf(v, sizeof v, "%.4g", t);
    out += std::string(out.empty() ? "" : " ") + v;
  }
  return out;
}

std::string percent_text(double fraction) {
  char v[16];
  std::snprintf(v, sizeof v, "%.1f%%", fraction * 100);
  return v;
}

// One curve fitted to a published sweep (fit.hpp, 1.), its tflops scaled by `scale`: both fields carry the sweep,
// the fit and its residuals.
Entries fitted_curve(const KernelSweep& sweep, double scale = 1, const std::string& scaled_by = "") {
  const SweepFit f = fit_kernel_sweep(sweep, kLaunchUs);
  const std::string which = std::string(sweep.backward ? "backward" : "forward") + (sweep.causal ? "_causal" : "_full");
  const std::string section = "kernel_d" + std::to_string(sweep.head_dim) + "." + which;
  const std::string source = sweep.source + ": " + points_text(sweep.tflops) +
                             " TFLOP/s at S=512..16K; least squares of t = launch + flops / (tflops S / (S + "
                             "half_len)), launch 2 us (cpsim calibrate --published): rms " +
                             percent_text(f.rms) + ", worst " + percent_text(f.worst) + scaled_by;
  return {{section + "_tflops", f.curve.tflops * scale, source},
          {section + "_half_len", f.curve.half_len, "fitted with " + which + "_tflops through the same points"}};
}

// A head dim the publication has no backward for: another head dim's backward curves, said so.
Entries assumed_backward(int d, int from, const Entries& from_entries) {
  Entries e;
  for (const Entry& x : from_entries) {
    const std::string field = x.field.substr(x.field.find('.') + 1);
    if (field.rfind("backward", 0) != 0) continue;
    e.push_back({"kernel_d" + std::to_string(d) + "." + field, x.value,
                 "assumption: d=" + std::to_string(from) + "'s (the paper has no d=" + std::to_string(d) +
                     " backward)"});
  }
  return e;
}

// The four curves of one head dim from a publication's sweeps, the causal backward derived (fit.hpp).
Entries head_dim_kernels(const std::vector<KernelSweep>& sweeps, int d, double fwd_scale, double bwd_scale,
                         const std::string& scaled_by) {
  const KernelSweep& fc = find_sweep(sweeps, d, true, false);
  const KernelSweep& ff = find_sweep(sweeps, d, false, false);
  const KernelSweep& bf = find_sweep(sweeps, d, false, true);
  Entries e;
  add(e, fitted_curve(fc, fwd_scale, scaled_by));
  add(e, fitted_curve(ff, fwd_scale, scaled_by));
  add(e, fitted_curve(derived_causal_backward(fc, ff, bf), bwd_scale, scaled_by));
  add(e, fitted_curve(bf, bwd_scale, scaled_by));
  return e;
}

// d = 64 and 128 from their sweeps; d = 256's forward from its own, its backward d = 128's.
Entries kernels_of(const std::vector<KernelSweep>& sweeps, double fwd_scale = 1, double bwd_scale = 1,
                   const std::string& scaled_by = "") {
  Entries e;
  add(e, head_dim_kernels(sweeps, 64, fwd_scale, bwd_scale, scaled_by));
  const Entries d128 = head_dim_kernels(sweeps, 128, fwd_scale, bwd_scale, scaled_by);
  add(e, d128);
  add(e, fitted_curve(find_sweep(sweeps, 256, true, false), fwd_scale, scaled_by));
  add(e, fitted_curve(find_sweep(sweeps, 256, false, false), fwd_scale, scaled_by));
  add(e, assumed_backward(256, 128, d128));
  return e;
}

// NCCL's latencies (src/graph/tuning.cc, Ring, Simple protocol) and the one-node network fields.
Entries nccl_latencies() {
  return {{"intra.latency_us", 3.4, "NCCL src/graph/tuning.cc hwLat, NVLink, Ring, Simple protocol: 3.4 us per step"},
          {"collective.base_latency_us", 8.4, "NCCL src/graph/tuning.cc baseLat, Ring, Simple protocol: 8.4 us"}};
}

Entries unused_network() {
  return {{"inter.gbps", 48.5, "unused on one node; as h100-ib"},
          {"inter.latency_us", 9.6, "unused on one node; as h100-ib"},
          {"inter.nics_per_node", 8, "unused on one node; as h100-ib"}};
}

// The stack the strategy code itself describes: a merge and in-kernel gradient accumulation, counted as issued.
Entries own_stack() {
  return {{"framework.step_us", 0,
           "the strategy code's own: no host cost per step (the host issues ahead of the GPU at these sizes)"},
          {"framework.step_bytes_per_element", 0, "the strategy code's own: every copy it makes is counted"},
          {"framework.merge_bytes_per_element", 0,
           "0: the merge the strategy code issues, counted (one pass: read both partials, write the accumulator)"},
          {"framework.grad_add_bytes_per_element", 0, "0: the kernel adds into dq, dk, dv itself"}};
}

// ring-flash-attention's stack (PyTorch, FlashAttention-2): what its published runs measured. step_bytes: fitted to
// the machine's published ring rows (fit_step_bytes), stored here.
Entries ring_flash_attention_stack(const std::string& machine, double step_bytes) {
  std::string rows;
  for (const PublishedRingRun& r : ring_runs_on(machine)) {
    char v[96];
    std::snprintf(v, sizeof v, "%s%s %s %.1f", rows.empty() ? "" : ", ", std::string(sharding_name(r.sharding)).c_str(),
                  r.backward ? "forward+backward" : "forward", r.per_s);
    rows += v;
  }
  return {{"framework.step_us", 0, "0: the stack's cost per step is counted per element (step_bytes_per_element)"},
          {"framework.step_bytes_per_element", step_bytes,
           "least squares (relative time error, >= 0) over ring-flash-attention's README ring rows (32 heads) on "
           "this machine, it/s: " + rows + " (cpsim calibrate --published prints the fit and its residuals); "
           "per element, not per step: its 5-head table leaves a sixth as much per step (docs/model.md, 4.1)"},
          {"framework.merge_bytes_per_element", kPytorchMergeBytes,
           "ring-flash-attention utils.py update_out_and_lse keeps out in fp32 and merges in four elementwise "
           "passes: block_out.to(f32) 2+4, out-block_out 4+4+4, x sigmoid 4+4, out-x 4+4+4 = 38 bytes per element"},
          {"framework.grad_add_bytes_per_element", kPytorchGradAddBytes,
           "ring-flash-attention adds each block's bf16 dq/dk/dv buffer into fp32 accumulators: read 4+2, write 4"}};
}

const char* const kFa2ForwardCtas =
    "FlashAttention-2's forward at d=128 on sm80/sm90 runs 128 x 64 tiles of 4 warps with 64 KiB of shared memory "
    "(csrc/flash_attn/src/flash_fwd_launch_template.h run_mha_fwd_hdim128): two resident per SM, sharing its rate";
const char* const kFa2BackwardCtas = "assumption: FlashAttention-2's backward runs 8 warps per tile, one per SM";
const char* const kFa2RowOrder =
    "0: FlashAttention-2's forward grid is (query tiles, batch, heads) and a tile's index is blockIdx.x "
    "(csrc/flash_attn/src/flash_fwd_launch_template.h, flash_fwd_kernel.h compute_attn): the blocks go out head by "
    "head, the shortest causal tiles of each first";
const char* const kFa3LongestFirst =
    "1: FlashAttention-3 hands out a causal call's tiles longest first to the first free SM "
    "(hopper/tile_scheduler.hpp DynamicPersistentTileScheduler, longest-processing-time-first)";

// framework.step_bytes_per_element of the two ring-flash-attention presets: fit_step_bytes's result on each, to
// 0.01 byte.
constexpr double kH800StepBytes = 12.03, kA100StepBytes = 12.63;

const char* const kCommSms =
    "NCCL runs a send/recv pair on 2 channels per peer (NCCL log '2 p2p channels per peer', nccl issue 1189), one "
    "CTA each (NVIDIA forum: an all-gather of 24 channels launches 24 blocks): 2 peers x 2 = 4 SMs";

const char* const kFa3PackGqa =
    "FlashAttention-3 packs a KV head's query heads into one tile when that fills the last tile better, and always "
    "when it splits the keys (hopper/heuristics.h should_pack_gqa, hopper/flash_api.cpp get_pack_gqa)";

std::string h100(const std::string& name, const std::string& description, bool cluster) {
  Entries e = {
      {"nodes.ranks_per_node", 8, "8 H100 SXM GPUs per HGX/DGX H100 board"},
      {"nodes.max_nodes", cluster ? 0.0 : 1.0,
       cluster ? "0: as many nodes as the ranks need" : "one node: nothing leaves NVLink (h100-ib has several)"},
      {"nodes.memory_gb", 80, "H100 SXM5: 80 GB HBM3 (NVIDIA H100 datasheet)"},
      {"attention.sm_count", 132, "H100 SXM5: 132 SMs (NVIDIA H100 datasheet)"},
      {"attention.tile_rows", 128, "FlashAttention-3 query tile of 128 rows at d=128"},
      {"attention.pack_gqa", 1, kFa3PackGqa},
      {"attention.forward_ctas_per_sm", 1, "FlashAttention-3 runs one persistent CTA per SM"},
      {"attention.backward_ctas_per_sm", 1, "FlashAttention-3 runs one persistent CTA per SM"},
      {"attention.forward_longest_first", 1, kFa3LongestFirst},
      {"attention.launch_us", kLaunchUs, kLaunchSource},
      {"memory.hbm_gbps", 3000, "H100 SXM5 HBM3 3.35 TB/s (NVIDIA H100 datasheet) x 0.9 achievable (assumption)"},
      {"intra.gbps", 360, "nccl-tests all-gather busbw 360-370 GB/s on 8x H100 SXM (NVLink 4: 450 GB/s per direction)"},
      {"intra.p2p_gbps", 180,
       "nccl-tests sendrecv_perf between two H100s plateaus near 180 GB/s (nccl-tests issue 268)"},
  };
  add(e, kernels_of(flash_attention_3_sweeps()));
  add(e, nccl_latencies());
  if (cluster)
    add(e,
        {{"inter.gbps", 48.5,
          "a 400 Gb/s (50 GB/s) InfiniBand NIC gives 48-49 GB/s busbw in multi-node all-to-all (nccl-tests issue 267)"},
         {"inter.collective_gbps", 25,
          "NCCL issue 1218: all_gather_perf busbw about 200 GB/s on 32 nodes of 8 H100s, over 8 NICs a node"},
         {"inter.latency_us", 9.6, "NCCL src/graph/tuning.cc hwLat, network, Ring, Simple protocol: 9.6 us per step"},
         {"inter.nics_per_node", 8,
          "DGX H100: 8 ConnectX-7 400 Gb/s compute ports, one per GPU (DGX H100 user guide)"}});
  else
    add(e, unused_network());
  add(e, {{"contention.comm_sms", 4, kCommSms}});
  add(e, own_stack());
  return preset_text(name, description, e);
}

// One HGX node as ring-flash-attention measured it: the hardware's entries, its FlashAttention-2 curves, NCCL's
// latencies, the stack of ring-flash-attention.
std::string ring_flash_attention_node(const std::string& name, const std::string& description, Entries e,
                                      const Entries& kernels, double step_bytes) {
  add(e, kernels);
  add(e, nccl_latencies());
  add(e, unused_network());
  add(e, {{"contention.comm_sms", 4, kCommSms}});
  add(e, ring_flash_attention_stack(name, step_bytes));
  return preset_text(name, description, e);
}

std::string h800() {
  Entries e = {
      {"nodes.ranks_per_node", 8, "8 H800 SXM GPUs per HGX H800 board"},
      {"nodes.max_nodes", 1, "one node, as ring-flash-attention measured"},
      {"nodes.memory_gb", 80, "H800 SXM5: 80 GB HBM3"},
      {"attention.sm_count", 132, "DeepSeek-V3 technical report: 20 of the H800's 132 SMs run its communication"},
      {"attention.tile_rows", 128, "FlashAttention-2 forward tile of 128 query rows at d=128"},
      {"attention.forward_ctas_per_sm", 2, kFa2ForwardCtas},
      {"attention.backward_ctas_per_sm", 1, kFa2BackwardCtas},
      {"attention.forward_longest_first", 0, kFa2RowOrder},
      {"attention.launch_us", kLaunchUs, kLaunchSource},
      {"memory.hbm_gbps", 3000, "H800 SXM5 HBM3 3.35 TB/s, as the H100 SXM5 x 0.9 achievable (assumption)"},
      {"intra.gbps", 160, "H800 NVLink: about 160 GB/s one way measured (deepseek-ai/DeepSeek-V3 issue 28)"},
      {"intra.p2p_gbps", 160, "the same measurement; DeepSeek-V3 technical report: NVLink 160 GB/s"},
  };
  // The H800 is the H100's compute die (132 SMs, same clocks): FlashAttention-2 runs on it as on the H100.
  return ring_flash_attention_node("h800-sxm-8",
                                   "one HGX H800 node: 8 GPUs on NVLink (160 GB/s), FlashAttention-2 kernels, merges "
                                   "and gradient sums in PyTorch as ring-flash-attention runs them",
                                   e, kernels_of(flash_attention_2_sweeps(), 1, 1, "; unscaled (the H800 has the H100's SMs)"),
                                   kH800StepBytes);
}

// FlashAttention-2 on an A100: the H100 bars' shape over S, scaled so that the d=128 causal curves give
// ring-flash-attention's one-GPU A100 run (8K tokens, 32 heads of 128, causal, launch included): the forward from
// its forward it/s, the backward from forward+backward minus forward. FlashAttention's own A100 forward+backward
// figure checks the shape (data/published/flash_attention_2_fwd_bwd.json).
constexpr int kA100Sms = 108;

Entries a100_kernels() {
  const PublishedOneGpu& one = ring_flash_attention_one_gpu("a100-sxm-8");
  const Problem p = ring_flash_attention_problem(1);
  const auto& fa2 = flash_attention_2_sweeps();
  const KernelSweep& fc = find_sweep(fa2, 128, true, false);
  const KernelSweep bc =
      derived_causal_backward(fc, find_sweep(fa2, 128, false, false), find_sweep(fa2, 128, false, true));
  const double fwd_us = 1e6 / one.forward_per_s, bwd_us = 1e6 / one.total_per_s - fwd_us;
  const auto scale = [&](const KernelSweep& s, double us) {
    const Op op = square_attention(p.batch * p.heads, p.seq, p.head_dim, true, s.backward);
    // The run's 2048 tiles on the A100's 108 SMs, handed out as FlashAttention-2 does (cost.hpp's occupancy).
    const double f = occupancy_factor(kA100Sms, 128, s.ctas_per_sm, s.longest_first, op);
    return curve_scale(fit_kernel_sweep(s, kLaunchUs).curve, static_cast<double>(p.seq), op.flops * f, us - kLaunchUs);
  };
  const double fwd = scale(fc, fwd_us), bwd = scale(bc, bwd_us);
  char note[256];
  std::snprintf(note, sizeof note,
                "; x %.4f forward, %.4f backward: ring-flash-attention's one-GPU A100 run at 8K (%.1f it/s forward, "
                "%.1f forward+backward), the shape over S the H100's (FlashAttention's A100 forward+backward "
                "figure: within 7%%)",
                fwd, bwd, one.forward_per_s, one.total_per_s);
  return kernels_of(fa2, fwd, bwd, note);
}

std::string a100() {
  Entries e = {
      {"nodes.ranks_per_node", 8, "8 A100 SXM4 GPUs per HGX A100 board"},
      {"nodes.max_nodes", 1, "one node, as ring-flash-attention measured"},
      {"nodes.memory_gb", 80, "A100 SXM4 80GB (NVIDIA A100 datasheet)"},
      {"attention.sm_count", kA100Sms, "A100: 108 SMs (NVIDIA A100 datasheet)"},
      {"attention.tile_rows", 128, "FlashAttention-2 forward tile of 128 query rows at d=128"},
      {"attention.forward_ctas_per_sm", 2, kFa2ForwardCtas},
      {"attention.backward_ctas_per_sm", 1, kFa2BackwardCtas},
      {"attention.forward_longest_first", 0, kFa2RowOrder},
      {"attention.launch_us", kLaunchUs, kLaunchSource},
      {"memory.hbm_gbps", 1800, "A100 SXM4 80GB HBM2e 2.04 TB/s (NVIDIA A100 datasheet) x 0.9 achievable (assumption)"},
      {"intra.gbps", 230, "nccl-tests busbw about 200-230 GB/s on one 8x A100 NVLink box (nccl-tests issue 149)"},
      {"intra.p2p_gbps", 230,
       "p2pBandwidthLatencyTest on 8x A100: 430-520 GB/s both ways, 215-260 one way (nccl-tests issue 149)"},
  };
  return ring_flash_attention_node(
      "a100-sxm-8",
      "one HGX A100 node: 8 GPUs on NVLink 3, FlashAttention-2 kernels, merges and gradient sums in PyTorch as "
      "ring-flash-attention runs them",
      e,
      a100_kernels(), kA100StepBytes);
}

std::string local_cpu() {
  const Entries e = {
      {"nodes.ranks_per_node", 1024, "every thread rank shares one process: one node"},
      {"nodes.max_nodes", 1, "one machine"},
      {"nodes.memory_gb", 16, "assumption: a small workstation"},
      {"attention.forward_tflops", 0.080, "cpsim bench attention --seq 512 2048 8192 --head-dim 128: 65-83 GFLOP/s"},
      {"attention.forward_half_len", 32, "same runs: S=512 (L=256) within 0.9 of the S=2048 rate"},
      {"attention.backward_tflops", 0.070, "same runs: 54-85 GFLOP/s backward"},
      {"attention.backward_half_len", 32, "same runs"},
      {"attention.sm_count", 1, "one core per rank: the tiled kernel runs on one thread"},
      {"attention.tile_rows", 128, "CpuDevice::kDefaultTile"},
      {"attention.launch_us", 1, "assumption: a function call and Eigen set-up"},
      {"memory.hbm_gbps", 8, "assumption: one core's copy bandwidth, about 8 GB/s (no cpsim bench prints it yet)"},
      {"intra.gbps", 8, "assumption: a threads-backend message is one memory copy, at memory.hbm_gbps"},
      {"intra.latency_us", 5, "assumption: a condition-variable hand-off between threads, a few microseconds"},
      {"inter.gbps", 8, "unused: one node"},
      {"inter.latency_us", 5, "unused: one node"},
      {"inter.nics_per_node", 1, "unused: one node"},
      {"collective.base_latency_us", 5, "assumption: as intra.latency_us"},
  };
  return preset_text("local-cpu",
                     "this project's threads backend: one rank per CPU core, f32, messages are memory copies", e);
}

// One level's four figures, each with its source.
Entries level(const std::string& name, double ranks, double links, double gbps, double p2p_gbps, double latency_us,
              const std::string& ranks_source, const std::string& links_source, const std::string& gbps_source,
              const std::string& p2p_source, const std::string& latency_source) {
  const std::string at = "levels." + name + ".";
  return {{at + "ranks", ranks, ranks_source},
          {at + "links", links, links_source},
          {at + "gbps", gbps, gbps_source},
          {at + "p2p_gbps", p2p_gbps, p2p_source},
          {at + "latency_us", latency_us, latency_source}};
}

// H100 PCIe: the SXM part's die with fewer SMs at lower clocks. Its kernels: FlashAttention-3's H100 SXM curves
// scaled by the datasheets' dense BF16 ratio (756 / 989 TFLOP/s), their shape over S assumed the same.
constexpr double kPcieScale = 756.0 / 989.0;

// NCCL's figures for PCIe (src/graph/topo.h, src/graph/tuning.cc), as the presets cite them.
const char* const kPciLatency = "NCCL src/graph/tuning.cc hwLat, PCI, Ring, Simple protocol: 5.7 us per step";
const char* const kPcieGen5 =
    "NCCL src/graph/topo.h models a PCIe Gen3 x16 link at 12 GB/s (PCI_BW) and its log prints 24.0 for Gen4 x16 "
    "(nccl-tests issue 307); Gen5 x16 at 48 GB/s is the same doubling (assumption)";

// One server of 8 H100 PCIe cards and no NVLink: pairs behind PCIe Gen5 switches, two pairs under each CPU
// socket, the sockets joined by UPI.
std::string h100_pcie() {
  Entries e = {
      {"nodes.ranks_per_node", 8, "8 PCIe cards in one server (assumption: a common 2-socket, 8-slot layout)"},
      {"nodes.max_nodes", 1, "one server: nothing leaves its PCIe tree"},
      {"nodes.memory_gb", 80, "H100 PCIe: 80 GB HBM2e (NVIDIA H100 datasheet)"},
      {"attention.sm_count", 114, "H100 PCIe: 114 SMs (NVIDIA H100 datasheet)"},
      {"attention.tile_rows", 128, "FlashAttention-3 query tile of 128 rows at d=128"},
      {"attention.pack_gqa", 1, kFa3PackGqa},
      {"attention.forward_longest_first", 1, kFa3LongestFirst},
      {"attention.launch_us", kLaunchUs, kLaunchSource},
      {"memory.hbm_gbps", 1800, "H100 PCIe HBM2e 2.0 TB/s (NVIDIA H100 datasheet) x 0.9 achievable (assumption)"},
  };
  add(e, kernels_of(flash_attention_3_sweeps(), kPcieScale, kPcieScale,
                    "; x 0.764: NVIDIA H100 datasheet dense BF16, 756 TFLOP/s PCIe against 989 SXM (the shape over S "
                    "assumed as on the SXM part)"));
  add(e, level("pcie_switch", 2, 1, 48, 48, 5.7, "assumption: two GPUs behind each PCIe switch",
               "each GPU has its own x16 link to the switch", kPcieGen5,
               "a send/recv through the switch: the x16 link's rate (as gbps)", kPciLatency));
  add(e, level("socket", 4, 1, 40, 40, 5.7, "assumption: two PCIe switches under each CPU socket",
               "one x16 uplink from each switch to the CPU's root complex (assumption)",
               "NCCL src/graph/topo.h INTEL_P2P_OVERHEAD: Intel CPUs carry GPU peer traffic in 64-byte packets, "
               "costing 6/5 of the link: 48 / 1.2 = 40 GB/s",
               "as gbps: the same root complex", kPciLatency));
  add(e, level("node", 8, 1, 22, 22, 5.7, "two sockets: the whole server",
               "one UPI path between the two sockets carries every cross-socket flow (NCCL's topology joins the "
               "CPUs by one SYS link)",
               "NCCL src/graph/topo.h SRP_QPI_BW: 22 GB/s between Sapphire Rapids sockets (the H100's host CPU "
               "generation; assumption)",
               "as gbps: the same UPI path", "NCCL's tuner has no figure for crossing sockets; its PCI one, 5.7 us "
               "(src/graph/tuning.cc; assumption)"));
  add(e, {{"collective.base_latency_us", 8.4, "NCCL src/graph/tuning.cc baseLat, Ring, Simple protocol: 8.4 us"},
          {"contention.comm_sms", 4, kCommSms}});
  add(e, own_stack());
  return preset_text("h100-pcie-8",
                     "one server of 8 H100 PCIe GPUs without NVLink: pairs behind PCIe Gen5 switches, two switches "
                     "per CPU socket, two sockets joined by UPI; FlashAttention-3 kernels scaled to the PCIe part",
                     e);
}

// Nodes of 8 H100 SXM on NVLink, in scalable units of 32 nodes whose NICs meet in rail-optimized leaf switches,
// the units joined by a spine.
std::string h100_cluster() {
  Entries e = {
      {"nodes.ranks_per_node", 8, "8 H100 SXM GPUs per HGX/DGX H100 board"},
      {"nodes.max_nodes", 0, "0: as many nodes as the ranks need"},
      {"nodes.memory_gb", 80, "H100 SXM5: 80 GB HBM3 (NVIDIA H100 datasheet)"},
      {"attention.sm_count", 132, "H100 SXM5: 132 SMs (NVIDIA H100 datasheet)"},
      {"attention.tile_rows", 128, "FlashAttention-3 query tile of 128 rows at d=128"},
      {"attention.pack_gqa", 1, kFa3PackGqa},
      {"attention.forward_longest_first", 1, kFa3LongestFirst},
      {"attention.launch_us", kLaunchUs, kLaunchSource},
      {"memory.hbm_gbps", 3000, "H100 SXM5 HBM3 3.35 TB/s (NVIDIA H100 datasheet) x 0.9 achievable (assumption)"},
  };
  add(e, kernels_of(flash_attention_3_sweeps()));
  add(e, level("nvlink", 8, 1, 360, 180, 3.4, "8 GPUs on one NVLink 4 / NVSwitch board",
               "each GPU its own NVLink ports",
               "nccl-tests all-gather busbw 360-370 GB/s on 8x H100 SXM (NVLink 4: 450 GB/s per direction)",
               "nccl-tests sendrecv_perf between two H100s plateaus near 180 GB/s (nccl-tests issue 268)",
               "NCCL src/graph/tuning.cc hwLat, NVLink, Ring, Simple protocol: 3.4 us per step"));
  add(e, level("leaf", 256, 8, 25, 48.5, 9.6,
               "DGX SuperPOD reference architecture: a scalable unit of 32 nodes on rail-optimized leaf switches",
               "DGX H100: 8 ConnectX-7 400 Gb/s compute ports per node, one per GPU (DGX H100 user guide)",
               "NCCL issue 1218: all_gather_perf busbw about 200 GB/s on 32 nodes of 8 H100s, over 8 NICs a node",
               "a 400 Gb/s NIC gives 48-49 GB/s busbw in multi-node all-to-all (nccl-tests issue 267)",
               "NCCL src/graph/tuning.cc hwLat, network, Ring, Simple protocol: 9.6 us per step"));
  add(e, level("spine", 0, 256, 25, 48.5, 10.6, "every rank: the scalable units joined by the spine",
               "assumption: a non-blocking spine, one uplink per leaf port (256 per scalable unit)",
               "assumption: as the leaf, per NIC (the spine is non-blocking)",
               "assumption: as the leaf, per NIC",
               "assumption: the leaf's 9.6 us and two more switch hops (about 0.5 us each)"));
  add(e, {{"collective.base_latency_us", 8.4, "NCCL src/graph/tuning.cc baseLat, Ring, Simple protocol: 8.4 us"},
          {"contention.comm_sms", 4, kCommSms}});
  add(e, own_stack());
  return preset_text("h100-ib-pods",
                     "nodes of 8 H100 SXM GPUs on NVLink 4, one 400 Gb/s InfiniBand NIC per GPU; 32 nodes on each "
                     "rail-optimized leaf, the leaves joined by a spine; FlashAttention-3 kernels",
                     e);
}

}  // namespace

std::vector<std::string> machine_preset_names() {
  return {"h100-sxm-8", "h100-ib", "h800-sxm-8", "a100-sxm-8", "local-cpu", "h100-pcie-8", "h100-ib-pods"};
}

std::string machine_preset_json(std::string_view name) {
  if (name == "h100-sxm-8")
    return h100("h100-sxm-8", "one HGX H100 SXM node: 8 GPUs on NVLink 4 / NVSwitch, FlashAttention-3 kernels", false);
  if (name == "h100-ib")
    return h100("h100-ib",
                "nodes of 8 H100 SXM GPUs (NVLink 4 inside a node), one 400 Gb/s InfiniBand NIC per GPU, "
                "FlashAttention-3 kernels",
                true);
  if (name == "h800-sxm-8") return h800();
  if (name == "a100-sxm-8") return a100();
  if (name == "local-cpu") return local_cpu();
  if (name == "h100-pcie-8") return h100_pcie();
  if (name == "h100-ib-pods") return h100_cluster();
  std::string list;
  for (const auto& n : machine_preset_names()) list += (list.empty() ? "" : ", ") + n;
  throw UsageError("unknown machine preset '" + std::string(name) + "'; use " + list);
}

}  // namespace cpsim::model
