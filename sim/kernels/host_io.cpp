#include "sim/kernels/host_io.hpp"

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "sim/core/bf16.hpp"
#include "sim/core/error.hpp"

namespace cpsim {

namespace {

// values[0, n) as a buffer of dtype t holds them, into dst (host memory of t's size per element).
void store_values(DType t, const double* values, std::size_t n, void* dst, const std::string& name) {
  switch (t) {
    case DType::f64:
      if (n > 0) std::memcpy(dst, values, n * sizeof(double));
      return;
    case DType::f32: {
      auto* f = static_cast<float*>(dst);
      for (std::size_t i = 0; i < n; ++i) f[i] = static_cast<float>(values[i]);
      return;
    }
    case DType::bf16: {
      auto* h = static_cast<std::uint16_t*>(dst);
      for (std::size_t i = 0; i < n; ++i) h[i] = to_bf16_bits(static_cast<float>(values[i]));
      return;
    }
    case DType::i64:
      break;
  }
  throw Error("upload to '" + name + "': host values convert to bf16, f32 or f64 only");
}

}  // namespace

void upload_values(Device& dev, const Buffer& dst, const std::vector<double>& values) {
  if (static_cast<std::int64_t>(values.size()) != dst.numel())
    throw Error("upload to '" + dst.name() + "': " + std::to_string(values.size()) + " values for " +
                std::to_string(dst.numel()) + " elements");
  if (dst.dtype() == DType::f64) return dev.upload(dst, values.data());
  std::vector<std::byte> host(dst.bytes());
  store_values(dst.dtype(), values.data(), values.size(), host.data(), dst.name());
  dev.upload(dst, host.data());
}

void upload_made(Device& dev, const Buffer& dst, const MakeValues& make) {
  constexpr std::size_t kChunk = 4096;  // doubles: 32 KiB, stays in the L1/L2 cache between make and store
  const auto n = static_cast<std::size_t>(dst.numel());
  const std::size_t size = dtype_size(dst.dtype());
  void* direct = dev.host_data(dst);
  std::vector<std::byte> staging(direct ? 0 : dst.bytes());
  auto* base = static_cast<std::byte*>(direct ? direct : staging.data());
  std::vector<double> chunk(std::min(n, kChunk));
  for (std::size_t at = 0; at < n; at += kChunk) {
    const std::size_t m = std::min(kChunk, n - at);
    make(at, m, chunk.data());
    store_values(dst.dtype(), chunk.data(), m, base + at * size, dst.name());
  }
  if (!direct) dev.upload(dst, staging.data());
}

Buffer upload_new(Device& dev, const std::vector<double>& values, Dims dims, DType dtype, Layout layout,
                  const std::string& name, BufferUse use) {
  Buffer b = dev.alloc(dims, dtype, layout, name, use);
  upload_values(dev, b, values);
  return b;
}

std::vector<double> download_values(Device& dev, const Buffer& src) {
  const auto n = static_cast<std::size_t>(src.numel());
  switch (src.dtype()) {
    case DType::f64: {
      std::vector<double> d(n);
      dev.download(src, d.data());
      return d;
    }
    case DType::f32: {
      std::vector<float> f(n);
      dev.download(src, f.data());
      return std::vector<double>(f.begin(), f.end());
    }
    case DType::bf16: {
      std::vector<std::uint16_t> h(n);
      dev.download(src, h.data());
      std::vector<double> d(n);
      for (std::size_t i = 0; i < n; ++i) d[i] = from_bf16_bits(h[i]);
      return d;
    }
    case DType::i64:
      break;
  }
  throw Error("download of '" + src.name() + "': host values convert from bf16, f32 or f64 only");
}

}  // namespace cpsim
