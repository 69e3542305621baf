// Kernel tiles an attention call computes and skips, found from the positions alone (what the CUDA device reports
// in TileCounts; the visible pairs and flops come from the Device base).
//
// Queries are cut into tiles of q_rows, keys into tiles of k_rows. With ascending positions a (query tile, key
// tile) pair is computed unless causal and the key tile's first position is after the query tile's last one.
//   tensor-core kernels: 64 x 64 (mma1 forward and backward, mma2 backward), 128 x 64 (mma2 forward)
//   simt kernels:        1 x 32 (one query row against 32 keys)
// The counts are per (batch, head); the device multiplies by B * Nq.
#pragma once
#include "sim/core/positions.hpp"
#include "sim/kernels/device.hpp"

namespace cpsim::cuda {

TileCounts count_tiles(const Positions& q_pos, const Positions& k_pos, bool causal, int q_rows, int k_rows);

}  // namespace cpsim::cuda
