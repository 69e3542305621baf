#include "sim/model/cost.hpp"

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <queue>
#include <set>
#include <tuple>

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
  // The kernel reads K and V at least once: a call of few query rows (decode) runs at the memory's rate.
  const double compute_us = seconds * 1e6 * occupancy_factor(m, op, tl);
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
  if (op.backward) return {plain, 1, false};
  // 1. Packed: the g query heads of a KV head share tiles, g q_rows rows per (batch, KV head).
  const double g = static_cast<double>(std::max<std::int64_t>(1, op.kv_group));
  const bool can_pack = pack_gqa && g > 1;
  const double packed = bh / g * std::ceil(rows * g / tr);
  // 2. The split, counted on the tiles the kernel would run (FlashAttention-3 counts packed ones).
  const double key_tiles = std::ceil(static_cast<double>(op.k_rows) / tr);
  const int s = splits_for(can_pack ? packed : plain, key_tiles, sm_count, max_splits);
  // 3. Pack when split, or when the plain tiles' last one is under 0.9 of the packed ones' fill.
  const bool pack = can_pack && (s > 1 || last_fill(rows, tr) < 0.9 * last_fill(rows * g, tr));
  return {pack ? packed : plain, s, pack};
}

Tiling tiling(const Machine& m, const Op& op) {
  return tiling(m.sm_count, m.tile_rows, m.max_kv_splits, m.pack_gqa, op);
}

namespace {

// The work of one (batch, head)'s tiles, in visible pairs, in the order the kernel numbers them: forward, row tiles
// of q down the block; backward, column tiles of k across it. A causal block's P pairs are its triangle of side s
// (cost.hpp) and the rest: forward, every row holds rest / q_rows of the rest and the last s rows the triangle
// (row j of it j + 1 keys: causal aligned bottom right, as FlashAttention aligns it); backward, the first
// k_rows - s columns hold the rest and the last s the triangle (column j of it s - j rows). Past `most` tiles, runs
// of consecutive tiles, at most `most` of them.
std::vector<double> tile_works(double tile_rows, const Op& op, std::size_t most) {
  const double q = static_cast<double>(op.q_rows), kr = static_cast<double>(op.k_rows);
  const double P = static_cast<double>(op.pairs) / static_cast<double>(op.batch_heads);
  const bool full = P >= q * kr;
  const Split t = full ? Split{0, 0, q * kr} : causal_split(P, q, kr);
  const double n = op.backward ? kr : q;
  // Pairs on lines [0, x) of the n (rows forward, columns backward): the rest's share plus the triangle's.
  const auto upto = [&](double x) {
    const double s = t.side;
    if (!op.backward) {
      const double in_tri = std::max(0.0, x - (n - s));  // rows of the triangle above x: 1 + 2 + ... + in_tri
      return t.rest / n * x + in_tri * (in_tri + 1) / 2;
    }
    const double plain = n - s, before = std::min(x, plain), in_tri = std::max(0.0, x - plain);
    const double rest = plain > 0 ? t.rest / plain * before : t.rest / n * x;
    return rest + in_tri * s - in_tri * (in_tri - 1) / 2;  // s + (s - 1) + ... + (s - in_tri + 1)
  };
  // A tile runs whole: the last one, short of lines, costs as if it had them all.
  const double tiles = std::ceil(n / tile_rows), last = n - (tiles - 1) * tile_rows;
  const double padding = (upto(n) - upto(n - last)) * (tile_rows / last - 1);
  // More tiles than `most`: runs of k consecutive tiles, at most `most` of them.
  const double k = std::ceil(tiles / static_cast<double>(most));
  std::vector<double> w;
  for (double a = 0; a < n; a += k * tile_rows) {
    const double b = std::min(n, a + k * tile_rows);
    w.push_back(upto(b) - upto(a) + (b == n ? padding : 0));
  }
  return w;
}

}  // namespace

double makespan(const std::vector<double>& works, int sm_count, int ctas_per_sm) {
  // 1. Each SM: the work left on each tile resident there, as of `last`; its tiles share its rate equally.
  struct Sm {
    double last = 0;
    std::vector<double> left;
    int version = 0;  // bumped whenever its next completion changes (older events are stale)
  };
  std::vector<Sm> sms(static_cast<std::size_t>(sm_count));
  const auto advance = [](Sm& s, double t) {
    for (double& w : s.left) w -= (t - s.last) / static_cast<double>(s.left.size());
    s.last = t;
  };
  using Event = std::tuple<double, int, int>;  // (time, SM, version): the SM's next tile to finish
  std::priority_queue<Event, std::vector<Event>, std::greater<>> events;
  const auto schedule = [&](int i) {
    Sm& s = sms[static_cast<std::size_t>(i)];
    ++s.version;
    if (s.left.empty()) return;
    const double least = *std::min_element(s.left.begin(), s.left.end());
    events.emplace(s.last + least * static_cast<double>(s.left.size()), i, s.version);
  };
  // 2. A free slot takes the next tile in order, the emptiest SM first (the hardware spreads blocks over SMs).
  std::set<std::pair<int, int>> open;  // (tiles resident, SM) of every SM with a free slot
  for (int i = 0; i < sm_count; ++i) open.emplace(0, i);
  std::size_t next = 0;
  double now = 0;
  const auto place = [&] {
    while (next < works.size() && !open.empty()) {
      const auto [k, i] = *open.begin();
      open.erase(open.begin());
      Sm& s = sms[static_cast<std::size_t>(i)];
      advance(s, now);
      s.left.push_back(works[next++]);
      if (k + 1 < ctas_per_sm) open.emplace(k + 1, i);
      schedule(i);
    }
  };
  place();
  // 3. Run to the last completion, freeing every slot that empties at one instant before filling any.
  while (!events.empty()) {
    const double t = std::get<0>(events.top());
    now = t;
    while (!events.empty() && std::get<0>(events.top()) <= t * (1 + 1e-12)) {
      const auto [at, i, version] = events.top();
      events.pop();
      Sm& s = sms[static_cast<std::size_t>(i)];
      if (version != s.version) continue;
      advance(s, at);
      const int before = static_cast<int>(s.left.size());
      std::erase_if(s.left, [&](double w) { return w <= 1e-12 * std::max(1.0, at); });
      if (before < ctas_per_sm) open.erase({before, i});
      open.emplace(static_cast<int>(s.left.size()), i);
      schedule(i);
    }
    place();
  }
  return now;
}

double occupancy_factor(const Machine& m, const Op& op) {
  return occupancy_factor(m, op, tiling(m, op));
}

double occupancy_factor(const Machine& m, const Op& op, const Tiling& cut) {
  return occupancy_factor(m.sm_count, m.tile_rows, op.backward ? m.backward_ctas_per_sm : m.forward_ctas_per_sm,
                          !op.backward && m.forward_longest_first, op, cut);
}

double occupancy_factor(int sm_count, int tile_rows, double ctas_per_sm, bool longest_first, const Op& op) {
  return occupancy_factor(sm_count, tile_rows, ctas_per_sm, longest_first, op,
                          tiling(sm_count, tile_rows, 1, false, op));
}

double occupancy_factor(int sm_count, int tile_rows, double ctas_per_sm, bool longest_first, const Op& op,
                        const Tiling& cut) {
  if (op.pairs <= 0 || op.batch_heads <= 0) return 1;
  const int c = std::max(1, static_cast<int>(std::lround(ctas_per_sm)));
  // A program repeats its calls' shapes step after step: each shape is scheduled once per thread.
  using Key = std::tuple<int, int, int, bool, bool, std::int64_t, std::int64_t, std::int64_t, std::int64_t,
                         std::int64_t, int, bool>;
  thread_local std::map<Key, double> known;
  const Key key{sm_count, tile_rows, c,          longest_first && !op.backward, op.backward, op.q_rows,
                op.k_rows, op.pairs,  op.batch_heads, op.kv_group, cut.splits, cut.packed};
  if (const auto hit = known.find(key); hit != known.end()) return hit->second;
  // 1. One (batch, head)'s tiles, or one (batch, KV head)'s when packed: its g heads' rows share each tile.
  const double g = cut.packed ? static_cast<double>(std::max<std::int64_t>(1, op.kv_group)) : 1;
  // A group of more tiles than 64 per slot runs them in consecutive runs (at most 64 per slot): what that changes
  // is the tail, by less than one run, 1/64 of a slot's share of the group.
  std::vector<double> one = tile_works(tile_rows / g, op, 64 * static_cast<std::size_t>(sm_count * c));
  for (double& w : one) w *= g;
  const double one_total = g * static_cast<double>(op.pairs) / static_cast<double>(op.batch_heads);  // unpadded
  const auto groups = std::max<std::int64_t>(1, static_cast<std::int64_t>(static_cast<double>(op.batch_heads) / g));
  if (one_total <= 0) return 1;
  // 2. The tiles of enough groups to fill every slot 16 times over (at least two groups), in the kernel's order:
  //    group by group, each tile's split parts in turn, tiles in their order (FlashAttention-2's grid, x fastest);
  //    or longest first (FlashAttention-3's scheduler). The groups beyond run before the tail, every SM busy.
  const double per_group = static_cast<double>(one.size()) * cut.splits;
  const std::int64_t run = std::min(
      groups, std::max<std::int64_t>(2, static_cast<std::int64_t>(std::ceil(16.0 * sm_count * c / per_group))));
  std::vector<double> works;
  works.reserve(static_cast<std::size_t>(static_cast<double>(run) * per_group));
  for (std::int64_t b = 0; b < run; ++b)
    for (int s = 0; s < cut.splits; ++s)
      for (double w : one) works.push_back(w / cut.splits);
  if (longest_first && !op.backward) std::sort(works.begin(), works.end(), std::greater<>());
  // 3. The makespan over the same work, unpadded, spread evenly over every SM.
  const double even = one_total / sm_count;
  const double span = makespan(works, sm_count, c) + static_cast<double>(groups - run) * even;
  const double f = std::max(1.0, span / (static_cast<double>(groups) * even));
  known.emplace(key, f);
  return f;
}

double memory_us(const Machine& m, std::int64_t bytes) {
  return m.launch_us + transfer_us(static_cast<double>(bytes), m.hbm_gbps);
}

double step_cost_us(const Machine& m, std::int64_t out_elements) {
  return m.step_us + transfer_us(m.step_bytes_per_element * static_cast<double>(out_elements), m.hbm_gbps);
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
