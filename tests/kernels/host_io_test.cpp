// Host values in and out of device buffers.
#include <doctest/doctest.h>

#include "device_util.hpp"
#include "sim/core/error.hpp"

using namespace cpsim;

TEST_CASE("values round-trip exactly through f64 buffers and are rounded to float in f32 buffers") {
  Recorder rec;
  CpuDevice dev(rec);
  const std::vector<double> x{0.1, -2.5, 1e-3};
  const Buffer b64 = dev.alloc({1, 3, 1, 1}, DType::f64, Layout::bsnd, "b64");
  const Buffer b32 = dev.alloc({1, 3, 1, 1}, DType::f32, Layout::bsnd, "b32");
  upload_values(dev, b64, x);
  upload_values(dev, b32, x);
  CHECK(download_values(dev, b64) == x);
  const auto y = download_values(dev, b32);
  for (std::size_t i = 0; i < x.size(); ++i) CHECK(y[i] == static_cast<double>(static_cast<float>(x[i])));
}

TEST_CASE("uploading the wrong number of values is refused") {
  Recorder rec;
  CpuDevice dev(rec);
  const Buffer b = dev.alloc({1, 3, 1, 1}, DType::f64, Layout::bsnd, "b");
  CHECK_THROWS_WITH_AS(upload_values(dev, b, {1.0, 2.0}), doctest::Contains("2 values for 3"), Error);
}
