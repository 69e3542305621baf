#include "sim/model/cost.hpp"

#include <algorithm>
#include <cmath>
#include <map>

#include "sim/core/error.hpp"

namespace cpsim::model {
namespace {

// bytes / (GB/s) in microseconds: bytes / (gbps * 1e9) * 1e6.
double transfer_us(double bytes, double gbps) {
  return bytes / (gbps * 1e3);
}

// Members of the group on each node.
std::map<int, int> per_node(const Machine& m, const std::vector<int>& group) {
  std::map<int, int> n;
  for (int r : group) ++n[m.node_of(r)];
  return n;
}

// The ring algorithms' bus bandwidth: NVLink on one node; across nodes each node's ring traffic leaves through
// k = min(members on the node, NICs) NICs, so the network carries k NIC rates (the least over the nodes).
double ring_busbw(const Machine& m, const std::map<int, int>& nodes) {
  if (nodes.size() <= 1) return m.intra.gbps;
  int k = m.nics_per_node;
  for (const auto& [node, members] : nodes) k = std::min(k, members);
  return std::min(m.intra.gbps, k * m.inter.gbps);
}

}  // namespace

double attention_us(const Machine& m, const Op& op) {
  const bool bwd = op.backward;
  const double rows = static_cast<double>(bwd ? op.k_rows : op.q_rows);
  const double bh = static_cast<double>(op.batch_heads);
  const double L = static_cast<double>(op.pairs) / bh / rows;  // inner-loop rows, on average
  const double half = bwd ? m.backward_half_len : m.forward_half_len;
  const double tiles = bh * std::ceil(rows / m.tile_rows);
  const double rate = (bwd ? m.backward_tflops : m.forward_tflops) * 1e12 * (L / (L + half)) *
                      std::min(1.0, tiles / m.sm_count);  // flop/s
  return m.launch_us + op.flops / rate * 1e6;
}

double memory_us(const Machine& m, std::int64_t bytes) {
  return m.launch_us + transfer_us(static_cast<double>(bytes), m.hbm_gbps);
}

bool same_node(const Machine& m, int a, int b) {
  return m.node_of(a) == m.node_of(b);
}

const Link& link_between(const Machine& m, int a, int b) {
  return same_node(m, a, b) ? m.intra : m.inter;
}

// Every rank of a node sends over the network at once; with fewer NICs than ranks they share them.
double inter_gbps_per_rank(const Machine& m) {
  return m.inter.gbps * std::min(1.0, static_cast<double>(m.nics_per_node) / m.ranks_per_node);
}

double p2p_us(const Machine& m, std::int64_t bytes, int a, int b) {
  const bool intra = same_node(m, a, b);
  const double bw = intra ? m.intra.gbps : inter_gbps_per_rank(m);
  return (intra ? m.intra.latency_us : m.inter.latency_us) + transfer_us(static_cast<double>(bytes), bw);
}

double collective_us(const Machine& m, Collective c, const std::vector<int>& group, std::int64_t bytes) {
  const int C = static_cast<int>(group.size());
  if (C <= 1) return 0;
  const auto nodes = per_node(m, group);
  const int G = static_cast<int>(nodes.size());
  const double n = static_cast<double>(bytes);
  const double ring_lat = (C - G) * m.intra.latency_us + (G - 1) * m.inter.latency_us;  // C-1 steps
  switch (c) {
    case Collective::all_gather:
    case Collective::reduce_scatter:
      return m.collective_base_us + ring_lat + transfer_us((C - 1) * n, ring_busbw(m, nodes));
    case Collective::all_reduce:
      return m.collective_base_us + 2 * ring_lat + transfer_us(2.0 * (C - 1) / C * n, ring_busbw(m, nodes));
    case Collective::barrier: {
      const double lat = G > 1 ? m.inter.latency_us : m.intra.latency_us;
      return m.collective_base_us + std::ceil(std::log2(static_cast<double>(C))) * lat;
    }
    case Collective::all_to_all: {
      double slowest = 0;
      for (int a : group) {
        double intra = 0, inter = 0;
        for (int b : group) {
          if (b == a) continue;
          if (same_node(m, a, b))
            intra += m.intra.latency_us + transfer_us(n, m.intra.gbps);
          else
            inter += m.inter.latency_us + transfer_us(n, inter_gbps_per_rank(m));
        }
        slowest = std::max(slowest, std::max(intra, inter));
      }
      return m.collective_base_us + slowest;
    }
  }
  throw Error("collective_us: unknown collective");
}

}  // namespace cpsim::model
