#include "sim/model/counting_device.hpp"

#include <algorithm>
#include <cstddef>
#include <mutex>
#include <vector>

#include "sim/core/error.hpp"

namespace cpsim::model {
namespace {

// The one address every counting buffer points at. Nothing reads or writes it: the counting communicator moves no
// bytes and this device touches no data. It is not null only because the Communicator refuses null buffers.
alignas(64) std::byte g_no_data[64];

std::int64_t bytes_of(const View& v) {
  return v.numel() * static_cast<std::int64_t>(dtype_size(v.buf.dtype()));
}

// The tiles of one call counted tile by tile (tile_counts' steps 1 and 2).
TileCounts counted_tiles(const Positions& q_pos, const Positions& k_pos, const Mask& mask, std::int64_t t);

// The last calls counted tile by tile, kept for the ranks that make the same call (every rank of Ulysses, every
// rank of a hybrid's all-to-all group): a call of many tiles is counted once per run, not once per rank.
struct CountedCall {
  Positions q, k;
  Mask mask;
  std::int64_t tile = 0;
  TileCounts counts;
};
constexpr std::size_t kCountedCalls = 64;
// The same runs (Positions' == compares position by position): O(runs).
bool same_runs(const Positions& a, const Positions& b) {
  return std::ranges::equal(a.runs(), b.runs());
}
constexpr std::int64_t kTilesWorthKeeping = 64;

}  // namespace

TileCounts tile_counts(const Positions& q_pos, const Positions& k_pos, const Mask& mask, int tile) {
  const std::int64_t sq = q_pos.size(), sk = k_pos.size(), t = tile;
  const std::int64_t q_tiles = (sq + t - 1) / t, k_tiles = (sk + t - 1) / t;
  TileCounts c;
  // 0. Causal or full, and every query sees every key (full; or causal with every key at or before the first
  //    query) or none (causal, every key after the last query): every tile, or none, without looking at each. Most
  //    of a ring's blocks are one or the other.
  if (mask.plain() && sq > 0 && sk > 0) {
    const bool all = !mask.causal() || k_pos.back() <= q_pos.front(),
               none = mask.causal() && k_pos.front() > q_pos.back();
    if (all || none) {
      c.computed = all ? q_tiles * k_tiles : 0;
      c.skipped = q_tiles * k_tiles - c.computed;
      return c;
    }
  }
  // Otherwise tile by tile (counted_tiles), a call of many tiles once for all the ranks that make it.
  if (q_tiles < kTilesWorthKeeping) return counted_tiles(q_pos, k_pos, mask, t);
  static std::mutex lock;
  static std::vector<CountedCall> kept;
  static std::size_t next = 0;
  {
    std::lock_guard hold(lock);
    for (const CountedCall& e : kept)
      if (e.tile == t && same_runs(e.q, q_pos) && same_runs(e.k, k_pos) && e.mask == mask) return e.counts;
  }
  c = counted_tiles(q_pos, k_pos, mask, t);
  std::lock_guard hold(lock);
  CountedCall e{q_pos, k_pos, mask, t, c};
  if (kept.size() < kCountedCalls)
    kept.push_back(std::move(e));
  else
    kept[next++ % kCountedCalls] = std::move(e);
  return c;
}

namespace {

TileCounts counted_tiles(const Positions& q_pos, const Positions& k_pos, const Mask& mask, std::int64_t t) {
  const std::int64_t sq = q_pos.size(), sk = k_pos.size();
  const std::int64_t q_tiles = (sq + t - 1) / t, k_tiles = (sk + t - 1) / t;
  TileCounts c;
  // Causal, and queries and keys each one progression (a contiguous or striped shard): a tile's last query q sees
  // the keys k_0 + j s_k <= q, so its candidates are the first jb = floor((q - k_0) / s_k) + 1 keys; step 1 by
  // arithmetic, not by search.
  const auto one = [](const Positions& p) { return p.runs().size() == 1 && p.runs()[0].width == 1; };
  if (mask.plain() && mask.causal() && one(q_pos) && one(k_pos)) {
    const PosRun q = q_pos.runs()[0], k = k_pos.runs()[0];
    for (std::int64_t i0 = 0; i0 < sq; i0 += t) {
      const std::int64_t q_last = q.first + (std::min(i0 + t, sq) - 1) * q.stride;
      if (q_last < k.first) continue;
      const std::int64_t jb = std::min(sk, (q_last - k.first) / k.stride + 1);
      c.computed += (jb + t - 1) / t;
    }
    c.skipped = q_tiles * k_tiles - c.computed;
    return c;
  }
  for (std::int64_t i0 = 0; i0 < sq; i0 += t) {
    const std::int64_t bq = std::min(t, sq - i0), q_first = q_pos.at(i0), q_last = q_pos.at(i0 + bq - 1);
    // 1. The candidates: key rows [ja, jb) hold every key some row of the tile sees (lo and hi are monotone).
    const std::int64_t ja = k_pos.lower_bound(mask.lo(q_first)), jb = k_pos.upper_bound(mask.hi(q_last));
    if (jb <= ja) continue;
    const std::int64_t kt_first = ja / t, kt_end = (jb + t - 1) / t;
    if (mask.plain()) {  // causal or full: the last query sees the first key of every candidate tile
      c.computed += kt_end - kt_first;
      continue;
    }
    // 2. Otherwise a corner pair decides most tiles; the rest are counted.
    const Positions q_tile = q_pos.slice(i0, bq);
    for (std::int64_t kt = kt_first; kt < kt_end; ++kt) {
      const std::int64_t j0 = kt * t, bk = std::min(t, sk - j0), k_first = k_pos.at(j0), k_last = k_pos.at(j0 + bk - 1);
      const bool corner = mask.visible(q_last, k_first) || mask.visible(q_last, k_last) ||
                          mask.visible(q_first, k_first) || mask.visible(q_first, k_last);
      if (corner || visible_pairs(q_tile, k_pos.slice(j0, bk), mask) > 0) ++c.computed;
    }
  }
  c.skipped = q_tiles * k_tiles - c.computed;
  return c;
}

}  // namespace

CountingDevice::CountingDevice(Recorder& rec, Program* program, int tile)
    : Device(rec), program_(program), tile_(tile) {
  require(tile >= 1, "the attention tile must hold at least one row (got " + std::to_string(tile) + ")",
          "use a tile of 64 or 128");
}

Buffer CountingDevice::do_alloc(Dims dims, DType dtype, Layout layout, const std::string& name, BufferUse use) {
  // A GPU keeps the log-sum-exp in f32 when the data is bf16 (CudaDevice::do_alloc does the same): its merges and
  // memory are counted as the GPU runs them.
  if (layout == Layout::bns && dtype == DType::bf16) dtype = DType::f32;
  if (dims.b < 0 || dims.s < 0 || dims.n < 0 || dims.d < 1 || (layout == Layout::bns && dims.d != 1))
    throw Error("alloc '" + name + "': impossible dims " + to_string(dims, layout));
  const auto counted = dims.numel() * static_cast<std::int64_t>(dtype_size(dtype));
  auto meter = recorder().memory();  // shared with the deleter, which may outlive this device
  const bool message = use == BufferUse::message;
  meter->add(counted, message);
  std::shared_ptr<void> storage(static_cast<void*>(g_no_data),
                                [meter, counted, message](void*) { meter->sub(counted, message); });
  return Buffer(std::move(storage), dims, dtype, layout, name);
}

void CountingDevice::memory(const char* name, std::int64_t bytes, std::int64_t elements) {
  if (program_ == nullptr || bytes == 0) return;
  Op op;
  op.kind = OpKind::memory;
  op.name = name;
  op.bytes = bytes;
  op.elements = elements;
  program_->push(std::move(op));
}

// fill writes dst; copy reads src and writes dst; add reads both and writes dst.
void CountingDevice::fill(const View& dst, double) {
  memory("fill", bytes_of(dst));
}
void CountingDevice::copy(const View& dst, const View& src) {
  memory("copy", bytes_of(dst) + bytes_of(src));
}
void CountingDevice::add(const View& dst, const View& src) {
  memory("add", 2 * bytes_of(dst) + bytes_of(src));
}

// merge reads both partials and their LSEs and writes the accumulator and its LSE.
void CountingDevice::merge(const View& out_acc, const View& lse_acc, const View& out_t, const View& lse_t) {
  memory("merge", 2 * bytes_of(out_acc) + bytes_of(out_t) + 2 * bytes_of(lse_acc) + bytes_of(lse_t), out_acc.numel());
}

TileCounts CountingDevice::attention(const View& q, const Positions& q_pos, const View& k, const Positions& k_pos,
                                     const Mask& mask, bool backward, std::int64_t grad_elements) {
  TileCounts per_head = tile_counts(q_pos, k_pos, mask, tile_);
  const std::int64_t bh = q.nb * q.nh;  // the kernel repeats the tiles for every (batch, query head)
  if (program_ != nullptr) {
    Op op;
    op.kind = OpKind::attention;
    op.backward = backward;
    op.q_rows = q.ns;
    op.k_rows = k.ns;
    op.batch_heads = bh;
    op.kv_group = k.nh > 0 ? std::max<std::int64_t>(1, q.nh / k.nh) : 1;
    op.bytes = 2 * bytes_of(k);  // K and V (of K's shape), read at least once
    op.head_dim = q.d();
    op.elements = grad_elements;
    const std::int64_t pairs1 = visible_pairs(q_pos, k_pos, mask);
    op.pairs = pairs1 * bh;
    op.flops = (backward ? kBackwardFlopsPerPairDim : kForwardFlopsPerPairDim) * static_cast<double>(q.d()) *
               static_cast<double>(op.pairs);
    op.block = pairs1 == q.ns * k.ns ? BlockKind::full : BlockKind::diagonal;
    if (program_->spans) {
      op.q_spans = q_pos.spans();
      op.k_spans = k_pos.spans();
    }
    program_->push(std::move(op));
  }
  return TileCounts{per_head.computed * bh, per_head.skipped * bh};
}

TileCounts CountingDevice::do_attention_forward(const View& q, const Positions& q_pos, const View& k, const View&,
                                                const Positions& k_pos, const View&, const View&, const Mask& mask,
                                                double) {
  return attention(q, q_pos, k, k_pos, mask, false, 0);
}

TileCounts CountingDevice::do_attention_backward(const View& q, const Positions& q_pos, const View& k, const View&,
                                                 const Positions& k_pos, const View&, const View&, const View&,
                                                 const View& dq, const View& dk, const View& dv, const Mask& mask,
                                                 double) {
  return attention(q, q_pos, k, k_pos, mask, true, dq.numel() + dk.numel() + dv.numel());
}

}  // namespace cpsim::model
