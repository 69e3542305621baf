#include "sim/layout/layout.hpp"

#include <algorithm>
#include <optional>
#include <string>

#include "sim/core/error.hpp"
#include "sim/core/sizes.hpp"
#include "sim/layout/balance.hpp"

namespace cpsim {

std::string_view sharding_name(Sharding s) {
  switch (s) {
    case Sharding::contiguous:
      return "contiguous";
    case Sharding::zigzag:
      return "zigzag";
    case Sharding::global_zigzag:
      return "global-zigzag";
    case Sharding::striped:
      return "striped";
    case Sharding::balanced:
      return "balanced";
    case Sharding::doc_contiguous:
      return "doc-contiguous";
  }
  return "?";
}

std::vector<Sharding> all_shardings() {
  return {Sharding::contiguous, Sharding::zigzag,   Sharding::global_zigzag,
          Sharding::striped,    Sharding::balanced, Sharding::doc_contiguous};
}

Sharding parse_sharding(std::string_view s) {
  for (Sharding x : all_shardings())
    if (sharding_name(x) == s) return x;
  throw UsageError("unknown sharding '" + std::string(s) + "'",
                   {Fix{{"--sharding zigzag, contiguous, striped, balanced, global-zigzag or doc-contiguous"},
                        "the shardings are zigzag, contiguous, striped, balanced, global-zigzag and doc-contiguous"}});
}

namespace {

std::string num(std::int64_t v) {
  return std::to_string(v);
}

// A per-document sharding cuts every (padded) document into `pieces` equal parts (2C chunks for zigzag, C pieces
// for contiguous per document), so every length must be divisible by `pieces`: the message names the first
// offenders and the padding --pad-docs would add (to multiples of 2C, which both divide).
void require_documents_divisible(const Documents& d, std::int64_t pieces, std::int64_t two_c, const std::string& what) {
  std::string bad;
  std::optional<std::int64_t> pad = 0;  // nullopt: more padding tokens than 64 bits hold
  std::int64_t shown = 0;
  for (std::size_t i = 0; i < d.padded.size(); ++i) {
    if (d.padded[i] % pieces == 0) continue;
    if (pad) pad = checked_add(*pad, two_c - d.padded[i] % two_c);
    if (shown++ < 3)
      bad += (bad.empty() ? "" : ", ") +
             ("document " + num(static_cast<std::int64_t>(i)) + " has " + num(d.padded[i]) + " tokens");
  }
  if (shown > 3) bad += ", ...";
  if (shown == 0) return;
  throw UsageError(what + " cuts every document into " + num(pieces) + " parts, so every length must be divisible by " +
                       num(pieces) + " (" + bad + ")",
                   {Fix{{}, "pad them with --pad-docs" + (pad ? " (" + num(*pad) + " padding tokens)" : std::string())},
                    Fix{{"--sharding balanced", "--sharding striped"}}});
}

}  // namespace

SeqLayout::SeqLayout(int ranks, std::int64_t seq, Sharding sharding, const LayoutOptions& opt)
    : ranks_(ranks), seq_(seq), sharding_(sharding) {
  const std::string C = num(ranks), S = num(seq);
  require(ranks >= 1, "the number of ranks C must be at least 1 (got C=" + C + ")", Fix{{"--ranks 1 or more"}});
  require(seq >= 1, "the sequence length S must be at least 1 (got S=" + S + ")", Fix{{"--seq 1 or more"}});
  const std::int64_t two_c = 2 * static_cast<std::int64_t>(ranks);
  auto require_c = [&](const std::string& what) {
    require(seq % ranks == 0,
            what + " gives every rank S/C tokens, so S must be divisible by C (S=" + S + ", C=" + C + ")",
            Fix{{"--seq " + num(multiple_for_fix(seq, ranks))}});
  };
  switch (sharding) {
    case Sharding::contiguous:
      kind_ = Kind::contiguous;
      require_c("contiguous sharding");
      break;
    case Sharding::doc_contiguous:
      if (opt.docs.count() > 1) {
        kind_ = Kind::doc_contiguous;
        require(opt.docs.total() == seq, "the documents must fill the sequence", "");
        require_documents_divisible(opt.docs, ranks, two_c, "contiguous per document (C=" + C + ")");
        starts_ = std::make_shared<const std::vector<std::int64_t>>(opt.docs.starts());
        break;
      }
      kind_ = Kind::contiguous;  // one document: the sequence cut into C pieces
      require_c("contiguous sharding");
      break;
    case Sharding::zigzag:
    case Sharding::global_zigzag:
      if (sharding == Sharding::zigzag && opt.docs.count() > 1) {
        kind_ = Kind::doc_zigzag;
        require(opt.docs.total() == seq, "the documents must fill the sequence", "");
        require_documents_divisible(opt.docs, two_c, two_c, "per-document zigzag (2C=" + num(two_c) + ")");
        starts_ = std::make_shared<const std::vector<std::int64_t>>(opt.docs.starts());
        break;
      }
      kind_ = Kind::zigzag;
      require(seq % two_c == 0,
              "zigzag sharding cuts the sequence into 2C equal chunks, so S must be divisible by 2C (S=" + S +
                  ", 2C=" + num(two_c) + ")",
              Fix{{"--seq " + num(multiple_for_fix(seq, two_c)), "--sharding contiguous"}});
      break;
    case Sharding::striped:
      kind_ = Kind::striped;
      require_c("striped sharding");
      break;
    case Sharding::balanced: {
      kind_ = Kind::chunks;
      require_c("balanced sharding");
      chunk_ = opt.chunk > 0 ? opt.chunk : default_balance_chunk(ranks, seq);
      require(seq % chunk_ == 0 && (seq / chunk_) % ranks == 0,
              "balanced sharding deals chunks of T tokens to the ranks, S/(C T) each, so S must be divisible by "
              "C x T (S=" +
                  S + ", C=" + C + ", T=" + num(chunk_) + ")",
              Fix{{"a --chunk that divides S/C=" + num(seq / ranks)}});
      // Counting a rank pair's work takes (its runs) x (the other's runs) steps, so all of a layout's counts take
      // about (S/T)^2: more than kMaxBalancedChunks chunks would take minutes (a chunk of 1 token at S = 256K).
      if (seq / chunk_ > kMaxBalancedChunks) {
        std::int64_t fit = 0;  // the smallest chunk that divides S into at most kMaxBalancedChunks, a multiple of C
        for (std::int64_t m = kMaxBalancedChunks / ranks * ranks; m >= ranks && fit == 0; m -= ranks)
          if (seq % m == 0) fit = seq / m;
        require(false,
                "balanced sharding deals at most " + num(kMaxBalancedChunks) + " chunks (S/T = " + num(seq / chunk_) +
                    " with S=" + S + ", T=" + num(chunk_) + ")",
                fit > 0 ? Fix{{"--chunk " + num(fit)}} : Fix{{"--sharding zigzag", "--sharding striped"}});
      }
      auto owned = balance_chunks(ranks, seq, chunk_, opt.mask);
      auto owner = std::make_shared<std::vector<int>>(static_cast<std::size_t>(seq / chunk_));
      for (int r = 0; r < ranks; ++r)
        for (std::int64_t c : owned[static_cast<std::size_t>(r)]) (*owner)[static_cast<std::size_t>(c)] = r;
      assigned_ = std::make_shared<const std::vector<std::vector<std::int64_t>>>(std::move(owned));
      chunk_owner_ = std::move(owner);
      break;
    }
  }
}

std::string SeqLayout::describe() const {
  switch (kind_) {
    case Kind::doc_zigzag:
      return "zigzag per document";
    case Kind::doc_contiguous:
      return "contiguous per document";
    case Kind::contiguous:
      return "contiguous";
    case Kind::striped:
      return stripe_ == 1 ? "striped" : "striped (stripes of " + num(stripe_) + " tokens)";
    case Kind::chunks:
      return sharding_ == Sharding::balanced ? "balanced (chunks of " + num(chunk_) + " tokens)"
                                             : std::string(sharding_name(sharding_));
    default:
      return std::string(sharding_name(sharding_));
  }
}

Positions SeqLayout::positions(int rank) const {
  if (rank < 0 || rank >= ranks_) throw Error("rank " + num(rank) + " out of range");
  Positions p;
  const std::int64_t s = local_len(), t = chunk_len();
  const std::int64_t late = 2 * static_cast<std::int64_t>(ranks_) - 1 - rank;
  switch (kind_) {
    case Kind::contiguous:
      p.append(PosRun{rank * s, s, 1, 1});
      break;
    case Kind::zigzag:
      p.append(PosRun{rank * t, t, 1, 1});
      p.append(PosRun{late * t, t, 1, 1});
      break;
    case Kind::doc_zigzag: {
      const auto& st = *starts_;
      for (std::size_t d = 0; d + 1 < st.size(); ++d) {
        const std::int64_t td = (st[d + 1] - st[d]) / (2 * ranks_);  // this document's chunk
        p.append(PosRun{st[d] + rank * td, td, 1, 1});
        p.append(PosRun{st[d] + late * td, td, 1, 1});
      }
      break;
    }
    case Kind::doc_contiguous: {
      const auto& st = *starts_;
      for (std::size_t d = 0; d + 1 < st.size(); ++d) {
        const std::int64_t pd = (st[d + 1] - st[d]) / ranks_;  // this document's piece
        p.append(PosRun{st[d] + rank * pd, pd, 1, 1});
      }
      break;
    }
    case Kind::striped:
      p.append(PosRun{rank * stripe_, s, ranks_ * stripe_, stripe_});
      break;
    case Kind::chunks:
      for (std::int64_t c : (*assigned_)[static_cast<std::size_t>(rank)]) p.append(PosRun{c * chunk_, chunk_, 1, 1});
      break;
  }
  return p;
}

int SeqLayout::owner(std::int64_t position) const {
  if (position < 0 || position >= seq_) throw Error("position out of range");
  const auto mirror = [&](std::int64_t chunk) {
    return static_cast<int>(chunk < ranks_ ? chunk : 2 * ranks_ - 1 - chunk);
  };
  switch (kind_) {
    case Kind::contiguous:
      return static_cast<int>(position / local_len());
    case Kind::zigzag:
      return mirror(position / chunk_len());
    case Kind::doc_zigzag: {
      const auto& st = *starts_;
      const auto d = static_cast<std::size_t>(std::upper_bound(st.begin(), st.end(), position) - st.begin() - 1);
      return mirror((position - st[d]) / ((st[d + 1] - st[d]) / (2 * ranks_)));
    }
    case Kind::doc_contiguous: {
      const auto& st = *starts_;
      const auto d = static_cast<std::size_t>(std::upper_bound(st.begin(), st.end(), position) - st.begin() - 1);
      return static_cast<int>((position - st[d]) / ((st[d + 1] - st[d]) / ranks_));
    }
    case Kind::striped:
      return static_cast<int>(position / stripe_ % ranks_);
    case Kind::chunks:
      return (*chunk_owner_)[static_cast<std::size_t>(position / chunk_)];
  }
  return 0;
}

std::vector<int> SeqLayout::chunks(int rank) const {
  if (kind_ == Kind::zigzag) return {rank, 2 * ranks_ - 1 - rank};
  if (kind_ != Kind::contiguous) return {};
  if (seq_ % (2 * ranks_) == 0) return {2 * rank, 2 * rank + 1};
  return {rank};
}

std::vector<std::int64_t> SeqLayout::balanced_chunks(int rank) const {
  if (kind_ != Kind::chunks) return {};
  return (*assigned_)[static_cast<std::size_t>(rank)];
}

SeqLayout SeqLayout::grouped(int A) const {
  if (A < 1 || ranks_ % A != 0) throw Error("a layout groups its ranks A at a time only when A divides C");
  SeqLayout g = *this;
  g.ranks_ = ranks_ / A;
  switch (kind_) {
    case Kind::striped:
      g.stripe_ = stripe_ * A;  // ranks gA .. gA+A-1 own A adjacent stripes of every C
      break;
    case Kind::chunks: {
      std::vector<std::vector<std::int64_t>> owned(static_cast<std::size_t>(g.ranks_));
      auto owner = std::make_shared<std::vector<int>>(chunk_owner_->size());
      for (int r = 0; r < ranks_; ++r) {
        auto& mine = owned[static_cast<std::size_t>(r / A)];
        for (std::int64_t c : (*assigned_)[static_cast<std::size_t>(r)]) {
          mine.push_back(c);
          (*owner)[static_cast<std::size_t>(c)] = r / A;
        }
      }
      for (auto& mine : owned) std::sort(mine.begin(), mine.end());
      g.assigned_ = std::make_shared<const std::vector<std::vector<std::int64_t>>>(std::move(owned));
      g.chunk_owner_ = std::move(owner);
      break;
    }
    default:  // contiguous and zigzag (global or per document), contiguous per document: the same on C/A ranks
      break;
  }
  return g;
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
  const Positions pos = L.positions(rank);
  for (std::int64_t b = 0; b < batch; ++b)
    for_each_progression(pos, [&](std::int64_t row, std::int64_t first, std::int64_t n, std::int64_t step) {
      for (std::int64_t i = 0; i < n; ++i)
        std::copy_n(global.begin() + (b * S + first + i * step) * row_elems, row_elems,
                    local.begin() + (b * s + row + i) * row_elems);
    });
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
    const Positions pos = L.positions(r);
    for (std::int64_t b = 0; b < batch; ++b)
      for_each_progression(pos, [&](std::int64_t row, std::int64_t first, std::int64_t n, std::int64_t step) {
        for (std::int64_t i = 0; i < n; ++i)
          std::copy_n(locals[r].begin() + (b * s + row + i) * row_elems, row_elems,
                      global.begin() + (b * S + first + i * step) * row_elems);
      });
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
