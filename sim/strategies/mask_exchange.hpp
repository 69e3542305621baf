// The mask exchange: every rank receives exactly the K/V rows its queries see, from their owners, and nothing else.
//
// From the layout and the mask every rank knows the rows each rank needs of each owner (kv_need.hpp), so no sizes
// are exchanged. The exchange runs in C - 1 stages, stage j pairing rank r with the owner r - j (receive) and the
// rank r + j (send); a pair with no rows to move sends nothing. This is what MagiAttention calls zero-redundant
// communication (its GroupCast of K/V and GroupReduce of dK/dV); with the balanced sharding the layout plays the
// part of its dispatch solver, assigning chunks so that every rank's visible pairs are near equal.
//
// Forward, rank r (q: [B, s, Nq, D], k, v: [B, s, Nkv, D]):
//   1. stage 0: the diagonal (its own rows x its own keys) straight into (out, lse), while stage 1's rows arrive
//   2. stage j = 1..C-1: before computing stage j, pack and post stage j+1 (send to r + j + 1 the rows it needs of
//      this rank as one message [2B, m, Nkv, D]; receive from r - j - 1 the rows this rank needs of it); then
//      compute Q x the rows of stage j (the query rows that see any of them, against all of them) and merge it by
//      logaddexp; wait for stage j+1
// Backward: the same stages bring the K/V rows again (the forward kept none of them); each stage's dK/dV partial
// sums ([2B, n, Nkv, D] in the accumulator dtype) go back to their owner, which adds them into its own rows. The
// return of stage j is waited after stage j+1's compute.
// Bytes received by rank r: forward exactly need_fwd(r) (kv_need.hpp), forward and backward need_bwd(r).
#pragma once
#include "sim/strategies/strategy.hpp"
