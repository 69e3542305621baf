// Pieces the inference strategies share (inference.hpp): one block of attention over keys that may all be masked,
// and the partials' way home (pass-Q and decode).
#pragma once
#include <cstdint>

#include "sim/comm/communicator.hpp"
#include "sim/core/mask.hpp"
#include "sim/kernels/device.hpp"
#include "sim/strategies/inference.hpp"

namespace cpsim {

// Attention of the query rows q (at q_pos) over the keys k, v (at k_pos) into out and lse, under the mask:
//   q: [B, nq, Nq, D]  k, v: [B, nk, Nkv, D]  ->  out: [B, nq, Nq, D], lse: [B, Nq, nq]
// Returns false, writing nothing, when no pair is visible (recorded as a skipped block) or a side is empty.
bool attend(Device& dev, const View& q, const Positions& q_pos, const View& k, const View& v, const Positions& k_pos,
            const View& out, const View& lse, const Mask& mask, double scale);

// The partials home and merged (pass-Q's and decode's last step). part_out: [C B, n, Nq, D] and part_lse: [C B, Nq, n]
// hold in batches [o B, o B + B) this rank's partial of owner o's queries (lse -inf where a row saw nothing here).
//   1. all-to-all: block o goes to rank o; block p of what comes back is rank p's partial of this rank's rows
//   2. out, lse = this rank's own partial; then merged with every other rank's by LSE, in rank order:
//      lse = logaddexp(lse, lse_p);  out = exp(lse_old - lse) out + exp(lse_p - lse) out_p   (Device::merge)
// Returns out: [B, n, Nq, D], lse: [B, Nq, n], rows [0, rows) merged.
InferenceOutput gather_partials(Communicator& comm, Device& dev, const Buffer& part_out, const Buffer& part_lse,
                                std::int64_t batch, std::int64_t rows);

}  // namespace cpsim
