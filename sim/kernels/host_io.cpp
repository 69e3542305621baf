#include "sim/kernels/host_io.hpp"

#include <cstdint>

#include "sim/core/bf16.hpp"
#include "sim/core/error.hpp"

namespace cpsim {

void upload_values(Device& dev, const Buffer& dst, const std::vector<double>& values) {
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
      for (std::size_t i = 0; i < values.size(); ++i) h[i] = to_bf16_bits(static_cast<float>(values[i]));
      return dev.upload(dst, h.data());
    }
    case DType::i64:
      break;
  }
  throw Error("upload to '" + dst.name() + "': host values convert to bf16, f32 or f64 only");
}

Buffer upload_new(Device& dev, const std::vector<double>& values, Dims dims, DType dtype, Layout layout,
                  const std::string& name) {
  Buffer b = dev.alloc(dims, dtype, layout, name);
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
