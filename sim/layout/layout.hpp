// Who owns which tokens: the sequence shardings.
//
// Rank r of C owns S/C positions, its local rows in ascending order:
//   contiguous     tokens [r S/C, (r+1) S/C)                                   (S % C == 0)
//   zigzag         the sequence cut into 2C chunks of t = S/(2C), rank r owns chunks r and 2C-1-r
//                  ("DualChunkSwap"; C=4: [[0,7],[1,6],[2,5],[3,4]])            (S % 2C == 0)
//                  With documents it is per document, as Transformer Engine's THD format does it: every
//                  document cut into 2C chunks, rank r owning chunks r and 2C-1-r of each (every document's
//                  length divisible by 2C; --pad-docs pads them)
//   global-zigzag  zigzag over the whole sequence even with documents (to compare with the per-document form)
//   doc-contiguous every document cut into C equal pieces, rank r owning piece r of each, as ring-flash-attention's
//                  varlen ring_flash_attn_varlen shards (every document's length divisible by C; --pad-docs pads
//                  them to multiples of 2C, which C divides). With one document it is contiguous.
//   striped        rank r owns positions r, r+C, r+2C, ... (Brandon et al., Striped Attention, 2023)  (S % C == 0)
//   balanced       the sequence cut into chunks of T tokens (default S/(4C)), assigned to ranks by a greedy
//                  longest-processing-time rule that minimises the largest per-rank count of visible pairs under
//                  the mask, S/(C T) chunks per rank (balance.hpp)
// Positions are runs (positions.hpp): zigzag 2, contiguous 1, striped 1 strided run, per-document zigzag 2 per
// document, contiguous per document 1 per document, balanced one per run of adjacent chunks. Nothing here is O(S).
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "sim/core/mask.hpp"
#include "sim/core/positions.hpp"
#include "sim/core/recorder.hpp"
#include "sim/layout/documents.hpp"

namespace cpsim {

enum class Sharding { contiguous, zigzag, global_zigzag, striped, balanced, doc_contiguous };
// "contiguous", "zigzag", "global-zigzag", "striped", "balanced", "doc-contiguous"
std::string_view sharding_name(Sharding s);
Sharding parse_sharding(std::string_view s);  // throws UsageError listing the accepted names
std::vector<Sharding> all_shardings();

// What a layout needs beyond C, S and the sharding: the documents (per-document zigzag), the mask and the chunk
// size (balanced: chunk 0 picks S/(4C), or S/(2C) or S/C when S is not divisible).
struct LayoutOptions {
  Documents docs;
  Mask mask;
  std::int64_t chunk = 0;
};

class SeqLayout {
 public:
  // Throws UsageError naming the constraint and a fix (C >= 1, S >= 1, the divisibility each sharding needs).
  SeqLayout(int ranks, std::int64_t seq, Sharding sharding, const LayoutOptions& options = {});

  int ranks() const { return ranks_; }
  std::int64_t seq() const { return seq_; }
  Sharding sharding() const { return sharding_; }
  bool per_document() const { return kind_ == Kind::doc_zigzag || kind_ == Kind::doc_contiguous; }
  std::int64_t local_len() const { return seq_ / ranks_; }  // s = S/C rows per rank
  // "zigzag", "zigzag per document", "contiguous per document", "striped", "balanced (chunks of 4 tokens)", ...
  std::string describe() const;

  Positions positions(int rank) const;  // the rank's local rows' positions, ascending, as runs
  std::vector<Span> spans(int rank) const { return positions(rank).spans(); }
  int owner(std::int64_t position) const;
  // The chunks (of the 2C equal chunks of the sequence) a rank owns, where its rows are such chunks: zigzag
  // {r, 2C-1-r}; contiguous {2r, 2r+1} when S % 2C == 0, else {r}; empty for the other shardings.
  std::vector<int> chunks(int rank) const;
  std::int64_t chunk_len() const { return seq_ / (2 * ranks_); }  // t (zigzag) / half a rank's rows
  // balanced: tokens per chunk and the chunks each rank owns (ascending); 0 and empty otherwise.
  std::int64_t balance_chunk() const { return chunk_; }
  std::vector<std::int64_t> balanced_chunks(int rank) const;

  // The layout of C/A ranks in which rank g owns what ranks gA .. gA+A-1 own here (the hybrid's A2A groups):
  // zigzag and contiguous give the same sharding on C/A ranks, striped one of stripes A tokens wide.
  SeqLayout grouped(int A) const;

  // All-gather concatenates local rows in rank order; row i of that buffer holds sequence position
  // rank_to_seq()[i]. seq_to_rank() is its inverse. O(S): for lessons and tests.
  std::vector<std::int64_t> rank_to_seq() const;
  std::vector<std::int64_t> seq_to_rank() const;

 private:
  enum class Kind { contiguous, zigzag, doc_zigzag, doc_contiguous, striped, chunks };
  SeqLayout() = default;

  int ranks_ = 1;
  std::int64_t seq_ = 0;
  Sharding sharding_ = Sharding::zigzag;
  Kind kind_ = Kind::zigzag;
  std::int64_t stripe_ = 1;                                  // striped: tokens per stripe
  std::shared_ptr<const std::vector<std::int64_t>> starts_;  // per document: document starts, then S
  std::int64_t chunk_ = 0;                                   // chunks: tokens per chunk
  std::shared_ptr<const std::vector<std::vector<std::int64_t>>> assigned_;  // chunks: per rank, ascending
  std::shared_ptr<const std::vector<int>> chunk_owner_;                     // chunks: per chunk
};

// Host-side shard / unshard of a [B, S, row_elems] tensor (row_elems = N*D).
// shard returns rank r's [B, s, row_elems]; unshard places every rank's rows back.
template <class T>
std::vector<T> shard(const SeqLayout& L, const std::vector<T>& global, std::int64_t batch, std::int64_t row_elems,
                     int rank);
template <class T>
std::vector<T> unshard(const SeqLayout& L, const std::vector<std::vector<T>>& locals, std::int64_t batch,
                       std::int64_t row_elems);

// Calls fn(first row, first position, count, position step) for each progression of a rank's rows, in local-row
// order: rows [row, row + count) hold positions first, first + step, ... (runs of blocks come one block at a time).
template <class Fn>
void for_each_progression(const Positions& p, Fn&& fn) {
  std::int64_t row = 0;
  for (const PosRun& r : p.runs()) {
    if (r.width == 1) {
      fn(row, r.first, r.count, r.stride);
      row += r.count;
      continue;
    }
    for (std::int64_t b = 0; b < r.count / r.width; ++b, row += r.width) fn(row, r.first + b * r.stride, r.width, 1);
  }
}

}  // namespace cpsim
