// bf16 on the host, and host values in and out of device buffers of any dtype the CUDA device holds.
//   bf16 = the upper 16 bits of an f32; rounding to nearest, ties to even: add 0x7fff + (bit 16) before truncating.
#include <bit>
#include <cmath>
#include <cstring>

#include "sim/core/error.hpp"
#include "sim/cuda/cuda_api.hpp"

namespace cpsim {

std::uint16_t to_bf16_bits(double x) {
  const float f = static_cast<float>(x);
  const auto u = std::bit_cast<std::uint32_t>(f);
  if (std::isnan(f)) return 0x7fc0;
  return static_cast<std::uint16_t>((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

double from_bf16_bits(std::uint16_t b) {
  return std::bit_cast<float>(static_cast<std::uint32_t>(b) << 16);
}

void upload_doubles(Device& dev, const Buffer& dst, const std::vector<double>& values) {
  if (static_cast<std::int64_t>(values.size()) != dst.numel())
    throw Error("upload to '" + dst.name() + "': " + std::to_string(values.size()) + " values for " +
                std::to_string(dst.numel()) + " elements");
  switch (dst.dtype()) {
    case DType::f64:
      return dev.upload(dst, values.data());
    case DType::f32: {
      const std::vector<float> f(values.begin(), values.end());
      return dev.upload(dst, f.data());
    }
    case DType::bf16: {
      std::vector<std::uint16_t> h(values.size());
      for (std::size_t i = 0; i < values.size(); ++i) h[i] = to_bf16_bits(values[i]);
      return dev.upload(dst, h.data());
    }
    case DType::i64:
      break;
  }
  throw Error("upload to '" + dst.name() + "': host values convert to bf16, f32 or f64 only");
}

std::vector<double> download_doubles(Device& dev, const Buffer& src) {
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
