// The built-in machines, each value beside its source, written out in the machine-file format itself (one parser
// for both; `cpsim predict --print-machine NAME` prints the text).
//
// Kernel curves: rate(L) = tflops * L / (L + half_len), fitted by least squares (relative error) through a
// publication's six points, S = 512, 1K, 2K, 4K, 8K, 16K. In the FlashAttention-3 paper's benchmarks (Shah et al.
// 2024, Fig. 5 forward, Fig. 6 backward; H100 80GB SXM5, BF16, B x S = 16K tokens, heads x D = 2048) a causal run of
// S tokens is one causal square of side S, a full one a block with L = S. The fits are within 5% of every point
// (tests/model/machine_test.cpp asserts it from the model's own curves). The paper plots no causal backward and no
// backward at head dim 256:
//   causal backward(S) = full backward(S) x causal forward(S) / full forward(S)   (the forward's masking ratio);
//   checked on FlashAttention-2, whose causal backward ring-flash-attention measured on one H800 at 8K: 288 TFLOP/s,
//   against 318 x 333 / 370 = 286 from the paper's FlashAttention-2 bars;
//   head dim 256 backward = head dim 128's (an assumption, said in the sources).
#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "sim/core/error.hpp"
#include "sim/model/machine.hpp"

namespace cpsim::model {
namespace {

struct Entry {
  std::string field;  // "section.key"
  double value;
  std::string source;
};
using Entries = std::vector<Entry>;

std::string escaped(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out;
}

// The preset as a machine file: its sections in the order their fields first appear, then the sources.
std::string preset_text(const std::string& name, const std::string& description, const Entries& entries) {
  std::vector<std::string> sections;
  for (const Entry& e : entries) {
    const std::string s = e.field.substr(0, e.field.find('.'));
    if (std::find(sections.begin(), sections.end(), s) == sections.end()) sections.push_back(s);
  }
  std::string out = "{\n  \"name\": \"" + name + "\",\n  \"description\": \"" + escaped(description) + "\",\n";
  for (const std::string& s : sections) {
    out += "  \"" + s + "\": {";
    bool first = true;
    for (const Entry& e : entries) {
      if (e.field.substr(0, e.field.find('.')) != s) continue;
      char v[32];
      std::snprintf(v, sizeof v, "%.6g", e.value);
      out += std::string(first ? "" : ", ") + "\"" + e.field.substr(s.size() + 1) + "\": " + v;
      first = false;
    }
    out += "},\n";
  }
  out += "  \"sources\": {\n";
  for (std::size_t i = 0; i < entries.size(); ++i)
    out += "    \"" + entries[i].field + "\": \"" + escaped(entries[i].source) + "\"" +
           (i + 1 < entries.size() ? ",\n" : "\n");
  return out + "  }\n}\n";
}

void add(Entries& to, const Entries& more) {
  to.insert(to.end(), more.begin(), more.end());
}

// One fitted curve: both fields carry the points it was fitted through.
Entries curve(int d, const char* which, double tflops, double half_len, const std::string& points) {
  const std::string section = "kernel_d" + std::to_string(d) + ".", f = which;
  return {{section + f + "_tflops", tflops, points},
          {section + f + "_half_len", half_len, "fitted with " + f + "_tflops through the same points"}};
}

const char* const kFa3 = "FlashAttention-3 paper (Shah et al. 2024), H100 SXM5 BF16, ";
const char* const kDerivedBwd =
    "causal backward = full backward x the causal/full forward ratio at each S (the paper plots no causal "
    "backward; the rule reproduces FlashAttention-2's measured causal backward within 1%), fitted: ";

Entries fa3_kernels() {
  Entries e;
  const std::string f = kFa3;
  add(e, curve(64, "forward_causal", 502.8, 825.0, f + "Fig. 5 causal d=64: 197 265 371 420 460 473 TFLOP/s"));
  add(e, curve(64, "forward_full", 509.9, 277.5, f + "Fig. 5 non-causal d=64: 333 392 460 476 496 497"));
  add(e, curve(64, "backward_causal", 493.0, 1029.5, kDerivedBwd + std::string("161 245 340 400 438 451")));
  add(e, curve(64, "backward_full", 496.0, 404.5, f + "Fig. 6 backward d=64: 272 363 422 453 472 474"));
  add(e, curve(128, "forward_causal", 654.8, 604.0, f + "Fig. 5 causal d=128: 292 423 521 579 602 616"));
  add(e, curve(128, "forward_full", 668.9, 209.0, f + "Fig. 5 non-causal d=128: 467 565 625 638 646 648"));
  add(e, curve(128, "backward_causal", 587.2, 944.0, kDerivedBwd + std::string("198 317 418 492 521 533")));
  add(e, curve(128, "backward_full", 590.9, 427.0, f + "Fig. 6 backward d=128: 316 424 501 542 559 561"));
  add(e, curve(256, "forward_causal", 692.4, 685.5, f + "Fig. 5 causal d=256: 286 427 537 612 628 642"));
  add(e, curve(256, "forward_full", 786.7, 297.0, f + "Fig. 5 non-causal d=256: 482 639 707 736 746 756"));
  add(e, curve(256, "backward_causal", 587.2, 944.0, "assumption: d=128's (the paper has no d=256 backward)"));
  add(e, curve(256, "backward_full", 590.9, 427.0, "assumption: d=128's (the paper has no d=256 backward)"));
  return e;
}

// FlashAttention-2: the paper's FlashAttention-2 bars (same figures), scaled by `fwd` and `bwd`.
Entries fa2_kernels(double fwd, double bwd, const std::string& scaled_by) {
  const std::string f = std::string("FlashAttention-2 bars of the ") + kFa3 + scaled_by;
  Entries e;
  add(e, curve(64, "forward_causal", 307.7 * fwd, 359.5, f + "Fig. 5 causal d=64: 180 229 262 284 295 299"));
  add(e, curve(64, "forward_full", 327.1 * fwd, 78.5, f + "Fig. 5 non-causal d=64: 282 306 318 321 322 324"));
  add(e, curve(64, "backward_causal", 282.3 * bwd, 619.5, kDerivedBwd + std::string("126 178 218 247 263 269")));
  add(e, curve(64, "backward_full", 296.0 * bwd, 252.0, f + "Fig. 6 backward d=64: 198 238 264 279 287 291"));
  add(e, curve(128, "forward_causal", 350.4 * fwd, 404.0, f + "Fig. 5 causal d=128: 191 260 298 319 333 335"));
  add(e, curve(128, "forward_full", 376.9 * fwd, 104.0, f + "Fig. 5 non-causal d=128: 309 350 362 368 370 370"));
  add(e, curve(128, "backward_causal", 310.1 * bwd, 660.0, kDerivedBwd + std::string("132 193 240 269 286 292")));
  add(e, curve(128, "backward_full", 329.0 * bwd, 273.5, f + "Fig. 6 backward d=128: 214 260 291 310 318 322"));
  add(e, curve(256, "forward_causal", 306.8 * fwd, 237.0, f + "Fig. 5 causal d=256: 208 251 278 293 297 298"));
  add(e, curve(256, "forward_full", 331.3 * fwd, 94.0, f + "Fig. 5 non-causal d=256: 275 313 321 323 324 326"));
  add(e, curve(256, "backward_causal", 310.1 * bwd, 660.0, "assumption: d=128's (the paper has no d=256 backward)"));
  add(e, curve(256, "backward_full", 329.0 * bwd, 273.5, "assumption: d=128's (the paper has no d=256 backward)"));
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
          {"framework.merge_bytes_per_element", 0,
           "0: the merge the strategy code issues, counted (one pass: read both partials, write the accumulator)"},
          {"framework.grad_add_bytes_per_element", 0, "0: the kernel adds into dq, dk, dv itself"}};
}

// ring-flash-attention's stack (PyTorch, FlashAttention-2): what its published runs measured.
Entries ring_flash_attention_stack() {
  return {{"framework.step_us", 0,
           "ring-flash-attention's per-step host work runs ahead of the GPU at 8K tokens per GPU; no fixed cost"},
          {"framework.merge_bytes_per_element", 38,
           "ring-flash-attention utils.py update_out_and_lse keeps out in fp32 and merges in four elementwise "
           "passes: block_out.to(f32) 2+4, out-block_out 4+4+4, x sigmoid 4+4, out-x 4+4+4 = 38 bytes per element"},
          {"framework.grad_add_bytes_per_element", 10,
           "ring-flash-attention adds each block's bf16 dq/dk/dv buffer into fp32 accumulators: read 4+2, write 4"}};
}

const char* const kCommSms =
    "NCCL runs a send/recv pair on 2 channels per peer (NCCL log '2 p2p channels per peer', nccl issue 1189), one "
    "CTA each (NVIDIA forum: an all-gather of 24 channels launches 24 blocks): 2 peers x 2 = 4 SMs";

std::string h100(const std::string& name, const std::string& description, bool cluster) {
  Entries e = {
      {"nodes.ranks_per_node", 8, "8 H100 SXM GPUs per HGX/DGX H100 board"},
      {"nodes.max_nodes", cluster ? 0.0 : 1.0,
       cluster ? "0: as many nodes as the ranks need" : "one node: nothing leaves NVLink (h100-ib has several)"},
      {"nodes.memory_gb", 80, "H100 SXM5: 80 GB HBM3 (NVIDIA H100 datasheet)"},
      {"attention.sm_count", 132, "H100 SXM5: 132 SMs (NVIDIA H100 datasheet)"},
      {"attention.tile_rows", 128, "FlashAttention-3 query tile of 128 rows at d=128"},
      {"attention.launch_us", 2, "assumption: the gap between back-to-back kernels on one stream, about 2 us"},
      {"memory.hbm_gbps", 3000, "H100 SXM5 HBM3 3.35 TB/s (NVIDIA H100 datasheet) x 0.9 achievable (assumption)"},
      {"intra.gbps", 360, "nccl-tests all-gather busbw 360-370 GB/s on 8x H100 SXM (NVLink 4: 450 GB/s per direction)"},
      {"intra.p2p_gbps", 180,
       "nccl-tests sendrecv_perf between two H100s plateaus near 180 GB/s (nccl-tests issue 268)"},
  };
  add(e, fa3_kernels());
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
                                      const Entries& kernels) {
  add(e, kernels);
  add(e, nccl_latencies());
  add(e, unused_network());
  add(e, {{"contention.comm_sms", 4, kCommSms}});
  add(e, ring_flash_attention_stack());
  return preset_text(name, description, e);
}

std::string h800() {
  Entries e = {
      {"nodes.ranks_per_node", 8, "8 H800 SXM GPUs per HGX H800 board"},
      {"nodes.max_nodes", 1, "one node, as ring-flash-attention measured"},
      {"nodes.memory_gb", 80, "H800 SXM5: 80 GB HBM3"},
      {"attention.sm_count", 132, "DeepSeek-V3 technical report: 20 of the H800's 132 SMs run its communication"},
      {"attention.tile_rows", 128, "FlashAttention-2 forward tile of 128 query rows at d=128"},
      {"attention.launch_us", 2, "assumption: the gap between back-to-back kernels on one stream, about 2 us"},
      {"memory.hbm_gbps", 3000, "H800 SXM5 HBM3 3.35 TB/s, as the H100 SXM5 x 0.9 achievable (assumption)"},
      {"intra.gbps", 160, "H800 NVLink: about 160 GB/s one way measured (deepseek-ai/DeepSeek-V3 issue 28)"},
      {"intra.p2p_gbps", 160, "the same measurement; DeepSeek-V3 technical report: NVLink 160 GB/s"},
  };
  // The H800 is the H100's compute die (132 SMs, same clocks): FlashAttention-2 runs on it as on the H100.
  return ring_flash_attention_node("h800-sxm-8",
                                   "one HGX H800 node: 8 GPUs on NVLink (160 GB/s), FlashAttention-2 kernels, merges "
                                   "and gradient sums in PyTorch as ring-flash-attention runs them",
                                   e, fa2_kernels(1, 1, "unscaled (the H800 has the H100's SMs); "));
}

std::string a100() {
  // ring-flash-attention's one-GPU row on 8x A100 (8K tokens, 32 heads of 128, causal): 373.4 it/s forward,
  // 94.7 forward+backward = 205.3 and 174.4 TFLOP/s; the FlashAttention-2 curves at 8K give 333.9 and 287.0.
  Entries e = {
      {"nodes.ranks_per_node", 8, "8 A100 SXM4 GPUs per HGX A100 board"},
      {"nodes.max_nodes", 1, "one node, as ring-flash-attention measured"},
      {"nodes.memory_gb", 80, "A100 SXM4 80GB (NVIDIA A100 datasheet)"},
      {"attention.sm_count", 108, "A100: 108 SMs (NVIDIA A100 datasheet)"},
      {"attention.tile_rows", 128, "FlashAttention-2 forward tile of 128 query rows at d=128"},
      {"attention.launch_us", 2, "assumption: the gap between back-to-back kernels on one stream, about 2 us"},
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
      fa2_kernels(205.3 / 333.9, 174.4 / 287.0,
                  "scaled to ring-flash-attention's one-GPU A100 run at 8K (205.3 / 333.9 forward, 174.4 / 287.0 "
                  "backward; the shape over S assumed as on the H100); "));
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

}  // namespace

std::vector<std::string> machine_preset_names() {
  return {"h100-sxm-8", "h100-ib", "h800-sxm-8", "a100-sxm-8", "local-cpu"};
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
  std::string list;
  for (const auto& n : machine_preset_names()) list += (list.empty() ? "" : ", ") + n;
  throw UsageError("unknown machine preset '" + std::string(name) + "'; use " + list);
}

}  // namespace cpsim::model
