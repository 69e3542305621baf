// What one operation costs on a machine, in microseconds: the alpha-beta model NCCL's tuner uses for
// communication (time = latency + bytes / bandwidth) and a size-dependent rate for the attention kernel.
//
// Attention (one call, forward or backward):
//   L    = pairs / (B*N) / rows      the rows the kernel's inner loop visits on average: keys per query row
//                                     forward, queries per key row backward (a causal square of S rows: S/2)
//   tiles = B*N * ceil(rows / tile_rows)                 (rows: q rows forward, k rows backward)
//   rate = tflops * L / (L + half_len) * min(1, tiles / sm_count)        (small blocks run below peak)
//   t    = launch + flops / rate
// Device memory (copy, add, merge, fill): t = launch + bytes / hbm.
// Point to point, a message of n bytes between ranks a and b on link l (NVLink inside a node, else the network):
//   t = latency_l + n / bw_l           bw_inter per rank = NIC rate * min(1, nics_per_node / ranks_per_node)
// Collectives on a group of C ranks spread over G nodes, n bytes per rank (NCCL ring model, Simple protocol):
//   all_gather, reduce_scatter   base + (C-1-(G-1)) lat_intra + (G-1) lat_inter + (C-1) n / busbw
//   all_reduce (n = whole buffer) base + 2 [(C-G) lat_intra + (G-1) lat_inter] + 2 (C-1)/C n / busbw
//        busbw = intra bw on one node; across nodes min(intra bw, k * NIC rate): every ring leaves each node
//        once, and NCCL lays k = min(members per node, NICs per node) rings over distinct NICs
//   all_to_all (pairwise exchange)  base + max(sum over same-node peers (lat_intra + n / bw_intra),
//                                              sum over other-node peers (lat_inter + n / bw_inter))
//        NVLink and network steps run on different hardware, so the two sums overlap
//   barrier                     base + ceil(log2 C) lat
#pragma once
#include <cstdint>
#include <vector>

#include "sim/model/machine.hpp"
#include "sim/model/program.hpp"

namespace cpsim::model {

double attention_us(const Machine& m, const Op& attention);
double memory_us(const Machine& m, std::int64_t bytes);
// A message between world ranks a and b.
double p2p_us(const Machine& m, std::int64_t bytes, int a, int b);
bool same_node(const Machine& m, int a, int b);
const Link& link_between(const Machine& m, int a, int b);
double inter_gbps_per_rank(const Machine& m);
// A collective over `group` (world ranks), `bytes` per rank as the Communicator call was given them.
double collective_us(const Machine& m, Collective c, const std::vector<int>& group, std::int64_t bytes);

}  // namespace cpsim::model
