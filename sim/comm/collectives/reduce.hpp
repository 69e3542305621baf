// Element-wise reductions on raw buffers: the arithmetic step of reduce-scatter and all-reduce.
#pragma once
#include <cstddef>

#include "sim/comm/communicator.hpp"
#include "sim/core/dtype.hpp"

namespace cpsim::collectives {

// out[i] = op(a[i], b[i]) for i < count; out may alias a or b. f32, f64, i64; bf16 is combined in f32 and
// rounded back to nearest even (sim/core/bf16.hpp).
void combine(void* out, const void* a, const void* b, std::size_t count, DType dtype, ReduceOp op);

}  // namespace cpsim::collectives
