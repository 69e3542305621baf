// What one operation costs on a machine, in microseconds: the alpha-beta model NCCL's tuner uses for
// communication (time = latency + bytes / bandwidth) and size-dependent rates for the attention kernel.
// docs/model.md derives each equation and names each parameter's source.
//
// Attention, one call on a block of q_rows x k_rows with P visible pairs per (batch, head), B*N heads, head dim D
// (curves of that head dim: Machine::curves_for):
//   a block every pair of which is visible ("full"):      t_k = flops / full(L),  L = k_rows forward (keys per
//                                                          query row), q_rows backward (queries per key row)
//   a causal block: its triangle of side s, s (s+1) / 2 = P capped at min(q_rows, k_rows), runs on the causal
//   curve at L = s; the rest of its pairs on the full curve at L = rest / rows (rows: q_rows fwd, k_rows bwd)
//   occupancy: tiles = B*N x n, n = ceil(rows / tile_rows) row tiles per head (key tiles backward), each of the
//   pairs its rows see (a causal block's triangle on its last rows forward, on its last key columns backward;
//   the last tile padded to whole rows). t_k is the time with every SM busy for the whole call; the call takes
//     f = makespan / (the unpadded work / sm)  >= 1
//   times that: the tiles handed out in the kernel's order to sm SMs of c slots (attention.forward_ctas_per_sm,
//   backward_ctas_per_sm), the tiles on an SM sharing its rate, a free slot taking the next tile on the emptiest
//   SM. Order: (batch, head) by (batch, head), tiles in row order (FlashAttention-2's grid: the shortest causal
//   tiles of each head first forward, the longest first backward), or longest first forward
//   (attention.forward_longest_first: FlashAttention-3's scheduler). Equal tiles with c = 1 take whole waves.
//   split-KV (forward only; FlashAttention-2 csrc/flash_attn/flash_api.cpp set_params_splitkv, FlashAttention-3
//   hopper/heuristics.h num_splits_heuristic): a call of fewer than 0.8 sm row tiles and more than 4 key tiles
//   (ceil(k_rows / tile_rows)) splits its keys into s parts, the fewest whose wave efficiency
//   e(s) = w / ceil(w), w = tiles s / sm, is within 85% of the best over s = 1 .. min(attention.max_kv_splits,
//   sm, key tiles). Each part loops over 1/s of the keys (the curves at L / s), the occupancy counts tiles x s
//   parts, and a combine kernel reads the s partial outputs and LSEs (f32) and writes one:
//                                 t_c = launch + B*N q_rows (s + 1) (D + 1) 4 bytes / hbm
//   GQA packing (attention.pack_gqa; FlashAttention-3 hopper/heuristics.h should_pack_gqa, flash_api.cpp
//   get_pack_gqa): the g = Nq/Nkv query heads of a KV head share tiles, B*N/g ceil(g q_rows / tile_rows) tiles,
//   when split or when the unpacked last tile is under 0.9 of the packed one's fill (rows / whole tiles' rows);
//   the split is counted on the packed tiles
//   t = launch + max(t_k x f, kv_bytes / hbm) (+ t_c)      (launch: the fixed cost of every kernel call; kv_bytes:
//   the K and V the call reads, Op::bytes, at least once: a call of few query rows, decode, is bound by memory)
// Device memory (copy, add, merge, fill): t = launch + bytes / hbm.
// Point to point, n bytes between ranks a and b: t = latency + n / p2p_bw of the link (NVLink inside a node; one
// NIC between nodes: the clock shares a NIC among the flows that cross it, clock.hpp).
// Collectives on a group of C ranks spread over G nodes, n bytes per rank (NCCL ring model, Simple protocol):
//   all_gather, reduce_scatter   base + (C-G) lat_intra + (G-1) lat_inter + (C-1) n / busbw
//   all_reduce (n = whole buffer) base + 2 [(C-G) lat_intra + (G-1) lat_inter] + 2 (C-1)/C n / busbw
//        busbw = intra collective bw on one node; across nodes min(intra collective bw, k * inter collective bw),
//        k = min(members per node, NICs per node): each ring leaves a node once, rings lie over distinct NICs
//   all_to_all (pairwise exchange)  base + max(sum over same-node peers (lat_intra + n / intra collective bw),
//                                              sum over other-node peers (lat_inter + n / nic_share))
//        nic_share = inter p2p bw * min(1, NICs / members of the group on the node): the members' flows share
//        the node's NICs. NVLink and network steps run on different hardware, so the two sums overlap
//   barrier                     base + ceil(log2 C) lat
#pragma once
#include <cstdint>
#include <vector>

#include "sim/model/machine.hpp"
#include "sim/model/program.hpp"

namespace cpsim::model {

double attention_us(const Machine& m, const Op& attention);
// How a call's work is cut for the SMs: its row tiles (packed or not) and the parts each splits its keys into.
struct Tiling {
  double tiles = 0;  // row tiles over every (batch, head), or every (batch, KV head) when packed
  int splits = 1;    // split-KV parts per row tile (1: none)
  bool packed = false;
};
Tiling tiling(const Machine& m, const Op& attention);
Tiling tiling(int sm_count, int tile_rows, int max_splits, bool pack_gqa, const Op& attention);
// The factor f above of one attention call (>= 1), with its tiling or a given one.
double occupancy_factor(const Machine& m, const Op& attention);
double occupancy_factor(const Machine& m, const Op& attention, const Tiling& t);
// Without splits or packing (the one-GPU sweeps' calls, which fill the SMs), or with a given tiling.
double occupancy_factor(int sm_count, int tile_rows, double ctas_per_sm, bool longest_first, const Op& attention);
double occupancy_factor(int sm_count, int tile_rows, double ctas_per_sm, bool longest_first, const Op& attention,
                        const Tiling& t);
// The time `works` take, handed out in order to sm_count SMs of ctas_per_sm slots, each SM of rate 1.
double makespan(const std::vector<double>& works, int sm_count, int ctas_per_sm);
double memory_us(const Machine& m, std::int64_t bytes);
// A strategy step's cost on a rank whose output has `out_elements` (B x its query rows x Nq x D): the stack's
// fixed framework.step_us and its framework.step_bytes_per_element over the output at the memory's rate.
double step_cost_us(const Machine& m, std::int64_t out_elements);
// The memory op as the machine's software stack runs it (framework.merge_bytes_per_element for a merge).
double memory_op_us(const Machine& m, const Op& op);
// A backward block's gradient sums outside the kernel (framework.grad_add_bytes_per_element); 0 when none.
double grad_add_us(const Machine& m, const Op& backward_attention);
// The machine's levels, lowest first: Machine::levels, or the two a file without them describes (0: a node of
// ranks_per_node ranks on `intra`; 1: every rank on `inter`, nics_per_node links from each node).
int level_count(const Machine& m);
int level_ranks(const Machine& m, int level);  // ranks in one group of the level; 0: every rank
int level_links(const Machine& m, int level);  // links from each group of the level below into this one
const Link& level_link(const Machine& m, int level);
// The lowest level whose group holds both ranks (the highest when none does).
int meet_level(const Machine& m, int a, int b);
// The port a flow of `rank` crossing `level` takes: its own (level 0), or one of the links of its group of the
// level below into `level`, shared by that group's flows (rails: local rank g of a group of size s uses link
// g * links / s; two levels: a node's NICs). Distinct ports have distinct ids.
std::int64_t port_of(const Machine& m, int rank, int level);
// A message between world ranks a and b: latency + bytes / the point-to-point rate of the level where they meet.
double p2p_us(const Machine& m, std::int64_t bytes, int a, int b);
bool same_node(const Machine& m, int a, int b);
const Link& link_between(const Machine& m, int a, int b);  // the link of the level where a and b meet
// The NIC of a node that rank r's inter-node flows cross (rails: local GPU g uses NIC g * NICs / ranks_per_node).
int nic_of(const Machine& m, int rank);
// A collective over `group` (world ranks), `bytes` per rank as the Communicator call was given them.
double collective_us(const Machine& m, Collective c, const std::vector<int>& group, std::int64_t bytes);
// One causal (or full) square of S rows on one device: the plain kernel over the whole sequence.
Op square_attention(std::int64_t batch_heads, std::int64_t S, std::int64_t head_dim, bool causal, bool backward);

}  // namespace cpsim::model
