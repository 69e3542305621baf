// Where the tokens of one inference step live: T new tokens at positions [P, P + T) after a KV cache of P tokens
// at [0, P). The new tokens attend to the whole cache and causally to each other: with the causal mask on global
// positions (key k visible to query q when k <= q) the mask is offset by P without a mask of its own.
//
//   cache   never moves: it stays where the prefill that wrote it left it. A prefill balances its tokens by cutting
//           them into 2C chunks and giving rank r chunks r and 2C-1-r, so the cache is P cut that way (chunk sizes
//           differing by at most one token where 2C does not divide P). This is how Meta's context-parallel
//           inference keeps its cache (Yang et al., "Context Parallelism for Scalable Million-Token Inference",
//           arXiv 2411.01783, section 3: each rank keeps the KV of the tokens it processed).
//   new     prefill (pass-KV, pass-Q): the T new tokens cut the same way, 2C chunks of the new tokens alone, so that
//           the causal work among them balances whatever P is.
//           decode: round-robin, new token j on rank j mod C (the paper's placement of decoded tokens), so that
//           the cache of a long generation stays even.
// Rank r holds Q of its new tokens, and K and V of its cache share followed by its new tokens (ascending, since
// every cached position is below P). Shards differ by a token or two between ranks: buffers and messages are
// padded to the largest shard (max_new, max_kv rows), and a rank computes on its own rows only.
#pragma once
#include <cstdint>

#include "sim/core/positions.hpp"

namespace cpsim {

enum class NewTokenPlacement { zigzag, round_robin };

// The positions rank r owns when the n tokens [first, first + n) are cut into 2C chunks as equal as they can be
// (the first n mod 2C chunks one token longer) and rank r takes chunks r and 2C-1-r.
Positions zigzag_share(std::int64_t first, std::int64_t n, int ranks, int rank);

class InferenceLayout {
 public:
  InferenceLayout(int ranks, std::int64_t new_tokens, std::int64_t cached, NewTokenPlacement placement);

  int ranks() const { return ranks_; }
  std::int64_t new_tokens() const { return new_; }
  std::int64_t cached() const { return cached_; }
  NewTokenPlacement placement() const { return placement_; }

  Positions new_positions(int rank) const;    // in [P, P + T)
  Positions cache_positions(int rank) const;  // in [0, P)
  Positions kv_positions(int rank) const;     // cache then new
  std::int64_t new_count(int rank) const { return new_positions(rank).size(); }
  std::int64_t kv_count(int rank) const { return kv_positions(rank).size(); }
  std::int64_t max_new() const;  // the most new tokens one rank holds (the padded Q rows)
  std::int64_t max_kv() const;   // the most K/V rows one rank holds

 private:
  int ranks_;
  std::int64_t new_, cached_;
  NewTokenPlacement placement_;
};

}  // namespace cpsim
