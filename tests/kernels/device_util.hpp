// Helpers for tests that hold buffers on a CpuDevice.
#pragma once
#include <vector>

#include "sim/kernels/cpu_device.hpp"
#include "sim/kernels/host_io.hpp"

namespace cpsim::test {

// A buffer holding the given values (numel of them), or the constant `fill` when values is empty.
inline Buffer make_buffer(Device& dev, Dims dims, DType dtype, Layout layout, const char* name,
                          const std::vector<double>& values = {}, double fill = 0) {
  Buffer b = dev.alloc(dims, dtype, layout, name);
  upload_values(dev, b, values.empty() ? std::vector<double>(static_cast<std::size_t>(dims.numel()), fill) : values);
  return b;
}

// Element (b, s, n, d) of a host copy of a buffer with the given dims, layout [B, S, N, D] or [B, N, S].
inline double at(const std::vector<double>& host, const Buffer& buf, std::int64_t b, std::int64_t s, std::int64_t n,
                 std::int64_t d = 0) {
  return host[static_cast<std::size_t>(buf.offset(b, s, n, d))];
}

}  // namespace cpsim::test
