// Who owns which tokens: contiguous and zigzag ("DualChunkSwap") sequence sharding.
//
// The sequence of S tokens is cut into 2C chunks of t = S/(2C) tokens (zigzag) and rank r owns
//   zigzag:     chunks r and 2C-1-r      C=4: [[0,7],[1,6],[2,5],[3,4]]     (requires S % 2C == 0)
//   contiguous: tokens [r*S/C, (r+1)*S/C)                                    (requires S % C == 0)
// A rank's local rows are its positions in ascending order (zigzag: chunk r, then chunk 2C-1-r).
#pragma once
#include <cstdint>
#include <string_view>
#include <vector>

#include "sim/core/positions.hpp"
#include "sim/core/recorder.hpp"

namespace cpsim {

enum class Sharding { contiguous, zigzag };
std::string_view sharding_name(Sharding s);
Sharding parse_sharding(std::string_view s);  // throws UsageError listing the accepted names

class SeqLayout {
 public:
  // Throws UsageError naming the constraint and a fix: C >= 1, S >= 1, S % 2C == 0 (zigzag), S % C == 0.
  SeqLayout(int ranks, std::int64_t seq, Sharding sharding);

  int ranks() const { return ranks_; }
  std::int64_t seq() const { return seq_; }
  Sharding sharding() const { return sharding_; }
  std::int64_t local_len() const { return seq_ / ranks_; }  // s = S/C rows per rank

  // The rank's runs of positions in local-row order: zigzag two spans of t, contiguous one span of s.
  std::vector<Span> spans(int rank) const;
  Positions positions(int rank) const;  // ascending global positions of the rank's local rows
  int owner(std::int64_t position) const;
  // Zigzag chunk indices (of 2C) a rank owns: {r, 2C-1-r}. Contiguous: {2r, 2r+1} when S % 2C == 0.
  std::vector<int> chunks(int rank) const;
  std::int64_t chunk_len() const { return seq_ / (2 * ranks_); }  // t (zigzag) / half a rank's rows

  // All-gather concatenates local rows in rank order; row i of that buffer holds sequence position
  // rank_to_seq()[i]. seq_to_rank() is its inverse: sequence position p sits at gathered row seq_to_rank()[p].
  std::vector<std::int64_t> rank_to_seq() const;
  std::vector<std::int64_t> seq_to_rank() const;

 private:
  int ranks_;
  std::int64_t seq_;
  Sharding sharding_;
};

// Host-side shard / unshard of a [B, S, row_elems] tensor (row_elems = N*D).
// shard returns rank r's [B, s, row_elems]; unshard places every rank's rows back.
template <class T>
std::vector<T> shard(const SeqLayout& L, const std::vector<T>& global, std::int64_t batch, std::int64_t row_elems,
                     int rank);
template <class T>
std::vector<T> unshard(const SeqLayout& L, const std::vector<std::vector<T>>& locals, std::int64_t batch,
                       std::int64_t row_elems);

}  // namespace cpsim
