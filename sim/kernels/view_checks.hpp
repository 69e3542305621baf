// The argument checks every Device makes before touching memory, shared by the CPU and CUDA devices so both
// refuse the same calls with the same words.
#pragma once
#include <initializer_list>

#include "sim/core/buffer.hpp"

namespace cpsim {

// A view with elements must sit on a buffer that holds data on this device.
void check_data(const View& v, const char* what);
// dst and src: the same extent and layout, both holding data (copy, add).
void check_pair(const View& dst, const View& src, const char* what);
// attention: q, k, v, out (and their gradients) are [B, S, N, D] buffers of consecutive rows.
void check_activations(std::initializer_list<const View*> views, const char* what);
// attention and merge take views of consecutive rows (strided views are for copy, add and fill).
void check_consecutive(std::initializer_list<const View*> views, const char* what);
// merge: out views [B, S, N, D] and lse views [B, N, S] of the same rows, heads and batches, one lse per row and head.
void check_merge_views(const View& out_acc, const View& lse_acc, const View& out_t, const View& lse_t);

}  // namespace cpsim
