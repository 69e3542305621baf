#include "sim/kernels/host_io.hpp"

#include <string>

#include "sim/core/error.hpp"

namespace cpsim {

void upload_values(Device& dev, const Buffer& dst, const std::vector<double>& values) {
  if (static_cast<std::int64_t>(values.size()) != dst.numel())
    throw Error("upload to '" + dst.name() + "': " + std::to_string(values.size()) + " values for " +
                std::to_string(dst.numel()) + " elements");
  if (dst.dtype() == DType::f64) return dev.upload(dst, values.data());
  if (dst.dtype() == DType::f32) {
    const std::vector<float> f(values.begin(), values.end());
    return dev.upload(dst, f.data());
  }
  throw Error("upload to '" + dst.name() + "': host values convert to f32 or f64 only");
}

std::vector<double> download_values(Device& dev, const Buffer& src) {
  const auto n = static_cast<std::size_t>(src.numel());
  if (src.dtype() == DType::f64) {
    std::vector<double> d(n);
    dev.download(src, d.data());
    return d;
  }
  if (src.dtype() == DType::f32) {
    std::vector<float> f(n);
    dev.download(src, f.data());
    return std::vector<double>(f.begin(), f.end());
  }
  throw Error("download of '" + src.name() + "': host values convert from f32 or f64 only");
}

}  // namespace cpsim
