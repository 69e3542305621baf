// The built-in machines, written in the machine-file format itself (one parser for both), each value with its source.
//
// The attention curve rate(L) = tflops * L / (L + half_len) is fitted through two published points per direction
// (L = keys per query row forward, queries per key row backward; for a causal square of S rows L is about S/2):
//   forward:  FlashAttention-3, bf16, d=128, H100: 430 TFLOP/s at S=512, 621 at S=16K (the flash_v3 rows of
//             pytorch/benchmark PR 2391, B x S = 16K, 16 heads; read as L = S)  ->  tflops = 630, half_len = 238.
//             Check: a causal 16K square (L = 8K) gives 612; the FlashAttention-3 paper reports 616 causal at 16K.
//   backward: FlashAttention-3 paper, backward figure, d=128, H100 SXM5: 316 TFLOP/s at S=512, 561 at 16K
//             (read as L = S)  ->  tflops = 575, half_len = 420.
// Solving r L1/(L1+h) = y1 and r L2/(L2+h) = y2: h = L1 L2 (y2 - y1) / (y1 L2 - y2 L1), r = y2 (L2 + h) / L2.
#include <string>

#include "sim/core/error.hpp"
#include "sim/model/machine.hpp"

namespace cpsim::model {
namespace {

// Shared by both H100 presets: the GPU, the kernel curve, NVLink, and NCCL's latencies; then their sources.
const char* const kH100Common = R"json(  "attention": {"forward_tflops": 630, "forward_half_len": 238,
                "backward_tflops": 575, "backward_half_len": 420, "sm_count": 132, "tile_rows": 128, "launch_us": 2},
  "memory": {"hbm_gbps": 3000},
  "intra": {"gbps": 360, "latency_us": 3.4},
  "collective": {"base_latency_us": 8.4},
)json";

const char* const kH100Sources = R"json(    "nodes.ranks_per_node": "8 H100 SXM GPUs per HGX/DGX H100 board",
    "nodes.memory_gb": "H100 SXM5: 80 GB HBM3 (NVIDIA H100 datasheet)",
    "attention.forward_tflops": "FlashAttention-3 fwd, d=128: 430 TFLOP/s at 512, 621 at 16K (pytorch/benchmark #2391)",
    "attention.forward_half_len": "fitted with forward_tflops through those two points",
    "attention.backward_tflops": "FlashAttention-3 paper, backward, d=128: 316 TFLOP/s at 512, 561 at 16K",
    "attention.backward_half_len": "fitted with backward_tflops through those two points",
    "attention.sm_count": "H100 SXM5: 132 SMs (NVIDIA H100 datasheet)",
    "attention.tile_rows": "FlashAttention-3 query tile of 128 rows at d=128",
    "attention.launch_us": "assumption: the gap between back-to-back kernels on one stream, about 2 us",
    "memory.hbm_gbps": "H100 SXM5 HBM3 3.35 TB/s (NVIDIA H100 datasheet) x 0.9 achievable (assumption)",
    "intra.gbps": "nccl-tests all-gather busbw 360-370 GB/s on 8x H100 SXM (NVLink 4: 450 GB/s per direction)",
    "intra.latency_us": "NCCL src/graph/tuning.cc hwLat, NVLink, Ring, Simple protocol: 3.4 us per step",
    "collective.base_latency_us": "NCCL src/graph/tuning.cc baseLat, Ring, Simple protocol: 8.4 us",
)json";

const char* const kH100Sxm8Head = R"json({
  "name": "h100-sxm-8",
  "description": "one HGX H100 SXM node: 8 GPUs on NVLink 4 / NVSwitch",
  "nodes": {"ranks_per_node": 8, "max_nodes": 1, "memory_gb": 80},
)json";
const char* const kH100Sxm8Tail = R"json(    "nodes.max_nodes": "one node: nothing leaves NVLink (h100-ib has several)",
    "inter.gbps": "unused on one node; as h100-ib",
    "inter.latency_us": "unused on one node; as h100-ib",
    "inter.nics_per_node": "unused on one node; as h100-ib"
  }
}
)json";

const char* const kH100IbHead = R"json({
  "name": "h100-ib",
  "description": "nodes of 8 H100 SXM GPUs (NVLink 4 inside a node), one 400 Gb/s InfiniBand NIC per GPU",
  "nodes": {"ranks_per_node": 8, "max_nodes": 0, "memory_gb": 80},
)json";
const char* const kH100IbTail = R"json(    "nodes.max_nodes": "0: as many nodes as the ranks need",
    "inter.gbps": "a 400 Gb/s (50 GB/s) InfiniBand NIC gives 48-49 GB/s busbw in multi-node all-to-all (nccl-tests)",
    "inter.latency_us": "NCCL src/graph/tuning.cc hwLat, network, Ring, Simple protocol: 9.6 us per step",
    "inter.nics_per_node": "DGX H100: 8 ConnectX-7 400 Gb/s compute ports, one per GPU (DGX H100 user guide)"
  }
}
)json";

const char* const kLocalCpu = R"json({
  "name": "local-cpu",
  "description": "this project's threads backend: one rank per CPU core, f32, messages are memory copies",
  "nodes": {"ranks_per_node": 1024, "max_nodes": 1, "memory_gb": 16},
  "attention": {"forward_tflops": 0.080, "forward_half_len": 32, "backward_tflops": 0.070,
                "backward_half_len": 32, "sm_count": 1, "tile_rows": 128, "launch_us": 1},
  "memory": {"hbm_gbps": 8},
  "intra": {"gbps": 8, "latency_us": 5},
  "inter": {"gbps": 8, "latency_us": 5, "nics_per_node": 1},
  "collective": {"base_latency_us": 5},
  "sources": {
    "nodes.ranks_per_node": "every thread rank shares one process: one node",
    "nodes.max_nodes": "one machine",
    "nodes.memory_gb": "assumption: a small workstation",
    "attention.forward_tflops": "cpsim bench attention --seq 512 2048 8192 --head-dim 128: 65-83 GFLOP/s",
    "attention.forward_half_len": "same runs: S=512 (L=256) within 0.9 of the S=2048 rate",
    "attention.backward_tflops": "same runs: 54-85 GFLOP/s backward",
    "attention.backward_half_len": "same runs",
    "attention.sm_count": "one core per rank: the tiled kernel runs on one thread",
    "attention.tile_rows": "CpuDevice::kDefaultTile",
    "attention.launch_us": "assumption: a function call and Eigen set-up",
    "memory.hbm_gbps": "assumption: one core's copy bandwidth, about 8 GB/s (no cpsim bench prints it yet)",
    "intra.gbps": "assumption: a threads-backend message is one memory copy, at memory.hbm_gbps",
    "intra.latency_us": "assumption: a condition-variable hand-off between threads, a few microseconds",
    "inter.gbps": "unused: one node",
    "inter.latency_us": "unused: one node",
    "inter.nics_per_node": "unused: one node",
    "collective.base_latency_us": "assumption: as intra.latency_us"
  }
}
)json";

// head (name, nodes), the shared GPU and NVLink part, the network, the sources: shared, then the preset's own.
std::string h100(const char* head, const char* tail) {
  return std::string(head) + kH100Common +
         "  \"inter\": {\"gbps\": 48.5, \"latency_us\": 9.6, \"nics_per_node\": 8},\n  \"sources\": {\n" +
         kH100Sources + tail;
}

}  // namespace

std::vector<std::string> machine_preset_names() {
  return {"h100-sxm-8", "h100-ib", "local-cpu"};
}

std::string machine_preset_json(std::string_view name) {
  if (name == "h100-sxm-8") return h100(kH100Sxm8Head, kH100Sxm8Tail);
  if (name == "h100-ib") return h100(kH100IbHead, kH100IbTail);
  if (name == "local-cpu") return kLocalCpu;
  throw UsageError("unknown machine preset '" + std::string(name) + "'; use h100-sxm-8, h100-ib or local-cpu");
}

}  // namespace cpsim::model
