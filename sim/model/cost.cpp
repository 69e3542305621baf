#include "sim/model/cost.hpp"

#include <algorithm>
#include <cmath>
#include <map>

#include "sim/core/error.hpp"
#include "sim/model/counting_device.hpp"

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
  if (nodes.size() <= 1) return m.intra.collective_gbps;
  int k = m.nics_per_node;
  for (const auto& [node, members] : nodes) k = std::min(k, members);
  return std::min(m.intra.collective_gbps, k * m.inter.collective_gbps);
}

// Seconds of kernel time for `flops` on `curve` at inner-loop length L (L > 0).
double kernel_s(double flops, const KernelCurve& curve, double L) {
  return flops / curve.rate(std::max(L, 1e-9));
}

}  // namespace

double attention_us(const Machine& m, const Op& op) {
  if (op.pairs <= 0 || op.flops <= 0) return m.launch_us;
  const bool bwd = op.backward;
  const KernelCurves k = m.curves_for(op.head_dim);
  const double bh = static_cast<double>(op.batch_heads);
  const double P = static_cast<double>(op.pairs) / bh;  // visible pairs per (batch, head)
  const double q = static_cast<double>(op.q_rows), kr = static_cast<double>(op.k_rows);
  const double rows = bwd ? kr : q;  // the rows the kernel parallelises over; it loops over the others
  const KernelCurve& full = bwd ? k.backward_full : k.forward_full;
  const KernelCurve& causal = bwd ? k.backward_causal : k.forward_causal;
  double seconds = 0;
  if (P >= q * kr) {
    seconds = kernel_s(op.flops, full, bwd ? q : kr);
  } else {
    // The causal triangle: side s with s (s + 1) / 2 pairs, at most the shorter side; the rest is full work.
    const double s = std::min({(std::sqrt(8 * P + 1) - 1) / 2, q, kr});
    const double tri = std::min(P, s * (s + 1) / 2), rest = P - tri;
    seconds = kernel_s(op.flops * tri / P, causal, s);
    if (rest > 0) seconds += kernel_s(op.flops * rest / P, full, rest / rows);
  }
  return m.launch_us + seconds * 1e6 * occupancy_factor(m, op);
}

double tail_factor(double tiles, double row_tiles, int sm_count, double ctas_per_sm) {
  if (tiles <= 0) return 1;
  const double n = std::max(1.0, row_tiles), sm = sm_count;
  const double r = 2 * n / (n + 1);                                 // the longest tile over the mean
  const double sharing = std::clamp(tiles / sm, 1.0, std::max(1.0, ctas_per_sm));  // tiles resident beside it
  return std::max(1.0, sm / tiles * r * sharing);
}

double occupancy_factor(const Machine& m, const Op& op) {
  return occupancy_factor(m.sm_count, m.tile_rows, op.backward ? m.backward_ctas_per_sm : m.forward_ctas_per_sm, op);
}

double occupancy_factor(int sm_count, int tile_rows, double ctas_per_sm, const Op& op) {
  if (op.pairs <= 0 || op.batch_heads <= 0) return 1;
  const double bh = static_cast<double>(op.batch_heads);
  const double rows = static_cast<double>(op.backward ? op.k_rows : op.q_rows);
  const double row_tiles = std::ceil(rows / tile_rows), tiles = bh * row_tiles;
  const double P = static_cast<double>(op.pairs) / bh;
  const bool full = P >= static_cast<double>(op.q_rows) * static_cast<double>(op.k_rows);
  // Full blocks: equal tiles. Causal ones: tiles of unequal length, the longest (the causal tail) finishing last.
  return full ? std::max(1.0, sm_count / tiles) : tail_factor(tiles, row_tiles, sm_count, ctas_per_sm);
}

double memory_us(const Machine& m, std::int64_t bytes) {
  return m.launch_us + transfer_us(static_cast<double>(bytes), m.hbm_gbps);
}

double memory_op_us(const Machine& m, const Op& op) {
  if (op.name == "merge" && m.merge_bytes_per_element > 0 && op.elements > 0)
    return memory_us(m, static_cast<std::int64_t>(m.merge_bytes_per_element * static_cast<double>(op.elements)));
  return memory_us(m, op.bytes);
}

double grad_add_us(const Machine& m, const Op& op) {
  if (!op.backward || m.grad_add_bytes_per_element <= 0 || op.elements <= 0) return 0;
  return memory_us(m, static_cast<std::int64_t>(m.grad_add_bytes_per_element * static_cast<double>(op.elements)));
}

bool same_node(const Machine& m, int a, int b) {
  return m.node_of(a) == m.node_of(b);
}

const Link& link_between(const Machine& m, int a, int b) {
  return same_node(m, a, b) ? m.intra : m.inter;
}

int nic_of(const Machine& m, int rank) {
  const int local = rank % m.ranks_per_node;
  return static_cast<int>(static_cast<std::int64_t>(local) * m.nics_per_node / m.ranks_per_node);
}

double p2p_us(const Machine& m, std::int64_t bytes, int a, int b) {
  const Link& l = link_between(m, a, b);
  return l.latency_us + transfer_us(static_cast<double>(bytes), l.p2p_gbps);
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
        const int members = nodes.at(m.node_of(a));  // the flows that share this node's NICs
        const double nic = m.inter.p2p_gbps * std::min(1.0, static_cast<double>(m.nics_per_node) / members);
        double intra = 0, inter = 0;
        for (int b : group) {
          if (b == a) continue;
          if (same_node(m, a, b))
            intra += m.intra.latency_us + transfer_us(n, m.intra.collective_gbps);
          else
            inter += m.inter.latency_us + transfer_us(n, nic);
        }
        slowest = std::max(slowest, std::max(intra, inter));
      }
      return m.collective_base_us + slowest;
    }
  }
  throw Error("collective_us: unknown collective");
}

Op square_attention(std::int64_t batch_heads, std::int64_t S, std::int64_t head_dim, bool causal, bool backward) {
  Op op;
  op.kind = OpKind::attention;
  op.backward = backward;
  op.q_rows = op.k_rows = S;
  op.batch_heads = batch_heads;
  op.head_dim = head_dim;
  const double per_head = causal ? static_cast<double>(S) * static_cast<double>(S + 1) / 2
                                 : static_cast<double>(S) * static_cast<double>(S);
  op.pairs = static_cast<std::int64_t>(per_head * static_cast<double>(batch_heads));
  op.flops = (backward ? kBackwardFlopsPerPairDim : kForwardFlopsPerPairDim) * static_cast<double>(head_dim) *
             per_head * static_cast<double>(batch_heads);
  op.block = causal ? BlockKind::diagonal : BlockKind::full;
  return op;
}

}  // namespace cpsim::model
