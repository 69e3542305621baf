#include "sim/layout/layout.hpp"

#include <string>

#include "sim/core/error.hpp"
#include "sim/core/flags.hpp"

namespace cpsim {

std::string_view sharding_name(Sharding s) { return s == Sharding::zigzag ? "zigzag" : "contiguous"; }

Sharding parse_sharding(std::string_view s) {
  if (s == "zigzag") return Sharding::zigzag;
  if (s == "contiguous") return Sharding::contiguous;
  throw UsageError("unknown sharding '" + std::string(s) + "'; " +
                   use_value("sharding", {"zigzag", "contiguous"}, "the shardings are zigzag and contiguous"));
}

namespace {
std::int64_t round_up(std::int64_t x, std::int64_t m) { return (x + m - 1) / m * m; }
}  // namespace

SeqLayout::SeqLayout(int ranks, std::int64_t seq, Sharding sharding) : ranks_(ranks), seq_(seq), sharding_(sharding) {
  const std::string C = std::to_string(ranks), S = std::to_string(seq);
  require(ranks >= 1, "the number of ranks C must be at least 1 (got C=" + C + ")", use({"--ranks 1 or more"}));
  require(seq >= 1, "the sequence length S must be at least 1 (got S=" + S + ")", use({"--seq 1 or more"}));
  if (sharding == Sharding::zigzag) {
    const std::int64_t m = 2 * static_cast<std::int64_t>(ranks);
    require(seq % m == 0,
            "zigzag sharding cuts the sequence into 2C equal chunks, so S must be divisible by 2C (S=" + S +
                ", 2C=" + std::to_string(m) + ")",
            use({"--seq " + std::to_string(round_up(seq, m)), "--sharding contiguous"}));
  } else {
    require(seq % ranks == 0,
            "contiguous sharding gives every rank S/C tokens, so S must be divisible by C (S=" + S + ", C=" + C + ")",
            use({"--seq " + std::to_string(round_up(seq, ranks)), "--sharding zigzag"}));
  }
}

std::vector<Span> SeqLayout::spans(int rank) const {
  if (rank < 0 || rank >= ranks_) throw Error("rank " + std::to_string(rank) + " out of range");
  if (sharding_ == Sharding::contiguous) return {Span{rank * local_len(), (rank + 1) * local_len()}};
  const std::int64_t t = chunk_len();
  const std::int64_t late = 2 * ranks_ - 1 - rank;
  return {Span{rank * t, (rank + 1) * t}, Span{late * t, (late + 1) * t}};
}

Positions SeqLayout::positions(int rank) const {
  Positions p;
  p.reserve(static_cast<std::size_t>(local_len()));
  for (const Span& s : spans(rank))
    for (std::int64_t x = s.lo; x < s.hi; ++x) p.push_back(x);
  return p;
}

int SeqLayout::owner(std::int64_t position) const {
  if (position < 0 || position >= seq_) throw Error("position out of range");
  if (sharding_ == Sharding::contiguous) return static_cast<int>(position / local_len());
  const int chunk = static_cast<int>(position / chunk_len());
  return chunk < ranks_ ? chunk : 2 * ranks_ - 1 - chunk;
}

std::vector<int> SeqLayout::chunks(int rank) const {
  if (sharding_ == Sharding::zigzag) return {rank, 2 * ranks_ - 1 - rank};
  if (seq_ % (2 * ranks_) == 0) return {2 * rank, 2 * rank + 1};
  return {rank};
}

std::vector<std::int64_t> SeqLayout::rank_to_seq() const {
  std::vector<std::int64_t> out;
  out.reserve(static_cast<std::size_t>(seq_));
  for (int r = 0; r < ranks_; ++r)
    for (std::int64_t p : positions(r)) out.push_back(p);
  return out;
}

std::vector<std::int64_t> SeqLayout::seq_to_rank() const {
  const auto fwd = rank_to_seq();
  std::vector<std::int64_t> inv(fwd.size());
  for (std::size_t i = 0; i < fwd.size(); ++i) inv[static_cast<std::size_t>(fwd[i])] = static_cast<std::int64_t>(i);
  return inv;
}

template <class T>
std::vector<T> shard(const SeqLayout& L, const std::vector<T>& global, std::int64_t batch, std::int64_t row_elems,
                     int rank) {
  const std::int64_t S = L.seq(), s = L.local_len();
  if (static_cast<std::int64_t>(global.size()) != batch * S * row_elems) throw Error("shard: global size mismatch");
  std::vector<T> local(static_cast<std::size_t>(batch * s * row_elems));
  for (std::int64_t b = 0; b < batch; ++b) {
    std::int64_t row = 0;
    for (const Span& sp : L.spans(rank)) {
      const std::int64_t n = (sp.hi - sp.lo) * row_elems;
      std::copy_n(global.begin() + (b * S + sp.lo) * row_elems, n, local.begin() + (b * s + row) * row_elems);
      row += sp.hi - sp.lo;
    }
  }
  return local;
}

template <class T>
std::vector<T> unshard(const SeqLayout& L, const std::vector<std::vector<T>>& locals, std::int64_t batch,
                       std::int64_t row_elems) {
  const std::int64_t S = L.seq(), s = L.local_len();
  if (static_cast<int>(locals.size()) != L.ranks()) throw Error("unshard: need one local tensor per rank");
  std::vector<T> global(static_cast<std::size_t>(batch * S * row_elems));
  for (int r = 0; r < L.ranks(); ++r) {
    if (static_cast<std::int64_t>(locals[r].size()) != batch * s * row_elems)
      throw Error("unshard: rank " + std::to_string(r) + " has the wrong local size");
    for (std::int64_t b = 0; b < batch; ++b) {
      std::int64_t row = 0;
      for (const Span& sp : L.spans(r)) {
        const std::int64_t n = (sp.hi - sp.lo) * row_elems;
        std::copy_n(locals[r].begin() + (b * s + row) * row_elems, n, global.begin() + (b * S + sp.lo) * row_elems);
        row += sp.hi - sp.lo;
      }
    }
  }
  return global;
}

template std::vector<float> shard(const SeqLayout&, const std::vector<float>&, std::int64_t, std::int64_t, int);
template std::vector<double> shard(const SeqLayout&, const std::vector<double>&, std::int64_t, std::int64_t, int);
template std::vector<float> unshard(const SeqLayout&, const std::vector<std::vector<float>>&, std::int64_t,
                                    std::int64_t);
template std::vector<double> unshard(const SeqLayout&, const std::vector<std::vector<double>>&, std::int64_t,
                                     std::int64_t);

}  // namespace cpsim
