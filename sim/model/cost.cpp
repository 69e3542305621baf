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

// A rank's group at a level: its index among the level's groups (0 for the level of every rank).
std::int64_t group_of(const Machine& m, int rank, int level) {
  const int size = level_ranks(m, level);
  return size == 0 ? 0 : rank / size;
}

// Members of the group in each group of one level (level -1: each rank alone).
std::map<std::int64_t, int> per_group(const Machine& m, const std::vector<int>& group, int level) {
  std::map<std::int64_t, int> n;
  for (int r : group) ++n[level < 0 ? r : group_of(m, r, level)];
  return n;
}

// How a collective's group lies over the levels: hops[l], the steps of a ring over the group (in its order of
// ranks) whose two ranks meet at level l: g(l-1) - g(l), g(l) = groups of level l it touches (g(-1) = C, and 1
// above the highest level); top, the highest level a hop crosses (0 for one rank's group).
struct Spread {
  std::vector<int> hops;
  int top = 0;
};
Spread spread_of(const Machine& m, const std::vector<int>& group) {
  const int L = level_count(m);
  Spread s;
  s.hops.assign(static_cast<std::size_t>(L), 0);
  int below = static_cast<int>(group.size());
  for (int l = 0; l < L; ++l) {
    const int here = l + 1 == L ? 1 : static_cast<int>(per_group(m, group, l).size());
    s.hops[static_cast<std::size_t>(l)] = below - here;
    if (below > here) s.top = l;
    below = here;
  }
  return s;
}

// The ring algorithms' bus bandwidth: the slowest level up to the highest one its hops cross. The lowest level
// carries a rank's collective rate; a higher level l carries k_l of its links' rates, k_l = min(links, members in
// each group of the level below): each of NCCL's rings leaves a group once, and rings lie over distinct links.
// (Two levels: NVLink on one node; across nodes min(NVLink, k NIC rates).)
double ring_busbw(const Machine& m, const std::vector<int>& group, const Spread& s) {
  double bw = level_link(m, 0).collective_gbps;
  for (int l = 1; l <= s.top; ++l) {
    int k = level_links(m, l);
    for (const auto& [g, members] : per_group(m, group, l - 1)) k = std::min(k, members);
    bw = std::min(bw, k * level_link(m, l).collective_gbps);
  }
  return bw;
}

// Seconds of kernel time for `flops` on `curve` at inner-loop length L (L > 0).
double kernel_s(double flops, const KernelCurve& curve, double L) {
  return flops / curve.rate(std::max(L, 1e-9));
}

// A causal block's P visible pairs per (batch, head) of q x kr: its triangle of side s (s (s + 1) / 2 pairs, s at
// most the shorter side) and the rest, full work.
struct Split {
  double side, tri, rest;
};
Split causal_split(double P, double q, double kr) {
  const double s = std::min({(std::sqrt(8 * P + 1) - 1) / 2, q, kr});
  const double tri = std::min(P, s * (s + 1) / 2);
  return {s, tri, P - tri};
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
  // A split forward runs each part's loop over 1/s of the keys: the curves at L / s.
  const Tiling tl = tiling(m, op);
  const int s = tl.splits;
  double seconds = 0;
  if (P >= q * kr) {
    seconds = kernel_s(op.flops, full, (bwd ? q : kr) / s);
  } else {
    const Split t = causal_split(P, q, kr);
    seconds = kernel_s(op.flops * t.tri / P, causal, t.side / s);
    if (t.rest > 0) seconds += kernel_s(op.flops * t.rest / P, full, t.rest / rows / s);
  }
  // The split's combine: a second kernel reads the s partial outputs and LSEs (f32) and writes the merged ones.
  const double combine_us =
      s > 1 ? memory_us(m, static_cast<std::int64_t>(bh * q * (s + 1) * static_cast<double>(op.head_dim + 1) * 4))
            : 0;
  const double ctas = bwd ? m.backward_ctas_per_sm : m.forward_ctas_per_sm;
  // The kernel reads K and V at least once: a call of few query rows (decode) runs at the memory's rate.
  const double compute_us = seconds * 1e6 * occupancy_factor(m.sm_count, m.tile_rows, ctas, op, tl);
  const double read_us = transfer_us(static_cast<double>(op.bytes), m.hbm_gbps);
  return m.launch_us + std::max(compute_us, read_us) + combine_us;
}

namespace {

// FlashAttention's split count for `tiles` row tiles over `key_tiles` key tiles (cost.hpp, split-KV).
int splits_for(double tiles, double key_tiles, double sm, int max_splits) {
  // 1. Enough row tiles to nearly fill the SMs, or too few key tiles to split: one part.
  if (max_splits <= 1 || tiles >= 0.8 * sm || key_tiles <= 4) return 1;
  // 2. The wave efficiency of s parts: the waves tiles s / sm over the whole waves they take.
  const int most = static_cast<int>(std::min({static_cast<double>(max_splits), sm, key_tiles}));
  const auto efficiency = [&](int parts) {
    const double waves = tiles * parts / sm;
    return waves / std::ceil(waves);
  };
  double best = 0;
  for (int parts = 1; parts <= most; ++parts) best = std::max(best, efficiency(parts));
  // 3. The fewest parts within 85% of the best (more parts cost more partial outputs to write and combine).
  for (int parts = 1; parts <= most; ++parts)
    if (efficiency(parts) >= 0.85 * best) return parts;
  return 1;
}

// How full the last of the tiles over `rows` rows is: rows / (rows rounded up to whole tiles).
double last_fill(double rows, double tile_rows) {
  return rows / (std::ceil(rows / tile_rows) * tile_rows);
}

}  // namespace

Tiling tiling(int sm_count, int tile_rows, int max_splits, bool pack_gqa, const Op& op) {
  if (op.pairs <= 0 || op.batch_heads <= 0) return {};
  const double bh = static_cast<double>(op.batch_heads), tr = tile_rows;
  const double rows = static_cast<double>(op.backward ? op.k_rows : op.q_rows);
  const double plain = bh * std::ceil(rows / tr);
  if (op.backward) return {plain, 1, false, last_fill(rows, tr)};
  // 1. Packed: the g query heads of a KV head share tiles, g q_rows rows per (batch, KV head).
  const double g = static_cast<double>(std::max<std::int64_t>(1, op.kv_group));
  const bool can_pack = pack_gqa && g > 1;
  const double packed = bh / g * std::ceil(rows * g / tr);
  // 2. The split, counted on the tiles the kernel would run (FlashAttention-3 counts packed ones).
  const double key_tiles = std::ceil(static_cast<double>(op.k_rows) / tr);
  const int s = splits_for(can_pack ? packed : plain, key_tiles, sm_count, max_splits);
  // 3. Pack when split, or when the plain tiles' last one is under 0.9 of the packed ones' fill.
  const bool pack = can_pack && (s > 1 || last_fill(rows, tr) < 0.9 * last_fill(rows * g, tr));
  return {pack ? packed : plain, s, pack, pack ? last_fill(rows * g, tr) : last_fill(rows, tr)};
}

Tiling tiling(const Machine& m, const Op& op) {
  return tiling(m.sm_count, m.tile_rows, m.max_kv_splits, m.pack_gqa, op);
}

double tail_factor(double tiles, double r, int sm_count, double ctas_per_sm) {
  if (tiles <= 0) return 1;
  const double sm = sm_count;
  const double sharing = std::clamp(tiles / sm, 1.0, std::max(1.0, ctas_per_sm));  // tiles resident beside it
  return std::max(1.0, sm / tiles * r * sharing);
}

double occupancy_factor(const Machine& m, const Op& op) {
  return occupancy_factor(m.sm_count, m.tile_rows, op.backward ? m.backward_ctas_per_sm : m.forward_ctas_per_sm, op,
                          tiling(m, op));
}

double occupancy_factor(int sm_count, int tile_rows, double ctas_per_sm, const Op& op) {
  return occupancy_factor(sm_count, tile_rows, ctas_per_sm, op, tiling(sm_count, tile_rows, 1, false, op));
}

double occupancy_factor(int sm_count, int tile_rows, double ctas_per_sm, const Op& op, const Tiling& cut) {
  if (op.pairs <= 0 || op.batch_heads <= 0) return 1;
  const double bh = static_cast<double>(op.batch_heads);
  const double rows = static_cast<double>(op.backward ? op.k_rows : op.q_rows);
  // Each row tile runs as cut.splits parts, each over a share of its keys: the longest part over the mean one is
  // the longest tile over the mean one.
  const double tiles = cut.tiles * cut.splits;
  // A tile runs whole whether its rows are there or not: the padding of the last one costs its rows too.
  const double padding = cut.fill > 0 ? 1 / cut.fill : 1;
  const double P = static_cast<double>(op.pairs) / bh;
  const bool full = P >= static_cast<double>(op.q_rows) * static_cast<double>(op.k_rows);
  // Full blocks: equal tiles. One resident per SM: each SM runs its tiles one after another, so the call takes
  // whole waves of sm_count tiles. Several resident: they share the SM's throughput; only idle SMs are lost.
  if (full)
    return padding * (ctas_per_sm <= 1 ? std::ceil(tiles / sm_count) * sm_count / tiles
                                       : std::max(1.0, sm_count / tiles));
  // The longest tile over the mean: a row's length is its share of the full rest plus its part of the triangle,
  // whose last row tile does 2 n_s / (n_s + 1) of the triangle's mean (n_s row tiles across its side s); never
  // longer than a whole row. A pure triangle gives 2 n / (n + 1); a block that is mostly full, close to 1.
  const double q = static_cast<double>(op.q_rows), kr = static_cast<double>(op.k_rows);
  const Split t = causal_split(P, q, kr);
  const double n_s = std::max(1.0, std::ceil(t.side / tile_rows));
  const double longest = std::min(op.backward ? q : kr, t.rest / rows + 2 * n_s / (n_s + 1) * t.tri / t.side);
  const double r = std::max(1.0, longest / (P / rows));
  return padding * tail_factor(tiles, r, sm_count, ctas_per_sm);
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

int level_count(const Machine& m) {
  return m.levels.empty() ? 2 : static_cast<int>(m.levels.size());
}

int level_ranks(const Machine& m, int level) {
  if (m.levels.empty()) return level == 0 ? m.ranks_per_node : 0;
  return m.levels[static_cast<std::size_t>(level)].ranks;
}

int level_links(const Machine& m, int level) {
  if (m.levels.empty()) return level == 0 ? 1 : m.nics_per_node;
  return m.levels[static_cast<std::size_t>(level)].links;
}

const Link& level_link(const Machine& m, int level) {
  if (m.levels.empty()) return level == 0 ? m.intra : m.inter;
  return m.levels[static_cast<std::size_t>(level)].link;
}

int meet_level(const Machine& m, int a, int b) {
  const int L = level_count(m);
  for (int l = 0; l + 1 < L; ++l)
    if (group_of(m, a, l) == group_of(m, b, l)) return l;
  return L - 1;  // the highest level: every rank (or, past its groups, the widest path there is)
}

std::int64_t port_of(const Machine& m, int rank, int level) {
  if (level <= 0) return -1 - static_cast<std::int64_t>(rank);  // the rank's own port
  const int size = level_ranks(m, level - 1);
  const std::int64_t local = rank % size, link = local * level_links(m, level) / size;
  return (static_cast<std::int64_t>(level) << 48) | (static_cast<std::int64_t>(rank / size) << 12) | link;
}

bool same_node(const Machine& m, int a, int b) {
  return m.node_of(a) == m.node_of(b);
}

const Link& link_between(const Machine& m, int a, int b) {
  return level_link(m, meet_level(m, a, b));
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
  const Spread s = spread_of(m, group);
  const double n = static_cast<double>(bytes);
  double ring_lat = 0;  // C-1 steps, each at the level its two ranks meet
  for (int l = 0; l < level_count(m); ++l) ring_lat += s.hops[static_cast<std::size_t>(l)] * level_link(m, l).step_us();
  switch (c) {
    case Collective::all_gather:
    case Collective::reduce_scatter:
      return m.collective_base_us + ring_lat + transfer_us((C - 1) * n, ring_busbw(m, group, s));
    case Collective::all_reduce:
      return m.collective_base_us + 2 * ring_lat + transfer_us(2.0 * (C - 1) / C * n, ring_busbw(m, group, s));
    case Collective::barrier:
      return m.collective_base_us + std::ceil(std::log2(static_cast<double>(C))) * level_link(m, s.top).step_us();
    case Collective::all_to_all: {
      // Each rank sends n bytes to every other, one peer per step. The lowest level's link is the rank's own:
      // it carries the steps to the peers met there, at the collective rate. A higher level l's link carries
      // every byte that leaves the rank's group of level l - 1 (to peers met at l or above), at its p2p rate
      // shared by that group's members: min(1, links / members); its steps' latencies are those of the peers
      // met at l. The levels' links run at once: the slowest decides. (Two levels: NVLink steps and the
      // network's, overlapped.)
      const int L = level_count(m);
      std::vector<std::map<std::int64_t, int>> members;  // per level l: members in each group of level l - 1
      for (int l = 0; l < L; ++l) members.push_back(per_group(m, group, l - 1));
      double slowest = 0;
      for (int a : group) {
        std::vector<double> sum(static_cast<std::size_t>(L), 0), rate(static_cast<std::size_t>(L), 0);
        rate[0] = level_link(m, 0).collective_gbps;
        for (int l = 1; l < L; ++l) {
          const int members_below = members[static_cast<std::size_t>(l)].at(group_of(m, a, l - 1));
          rate[static_cast<std::size_t>(l)] =
              level_link(m, l).p2p_gbps * std::min(1.0, static_cast<double>(level_links(m, l)) / members_below);
        }
        for (int b : group) {
          if (b == a) continue;
          const int meet = meet_level(m, a, b);
          sum[0] += meet == 0 ? level_link(m, 0).step_us() + transfer_us(n, rate[0]) : 0;
          for (int l = 1; l <= meet; ++l)
            sum[static_cast<std::size_t>(l)] +=
                (l == meet ? level_link(m, l).step_us() : 0.0) + transfer_us(n, rate[static_cast<std::size_t>(l)]);
        }
        for (double t : sum) slowest = std::max(slowest, t);
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
