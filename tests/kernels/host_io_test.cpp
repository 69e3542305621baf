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

namespace {

// A CPU device that hides its host memory, as a GPU device does: upload_made must stage and upload.
struct StagedCpuDevice : CpuDevice {
  using CpuDevice::CpuDevice;
  void* host_data(const Buffer&) const override { return nullptr; }
};

}  // namespace

TEST_CASE("values made chunk by chunk land as upload_values lands them, straight in host memory or staged") {
  const std::size_t n = 3 * 4096 + 17;  // several chunks and a partial one
  std::vector<double> x(n);
  for (std::size_t i = 0; i < n; ++i) x[i] = 0.1 * static_cast<double>(i) - 7.3;
  for (DType t : {DType::f64, DType::f32}) {
    CAPTURE(dtype_name(t));
    Recorder rec;
    CpuDevice direct(rec);
    StagedCpuDevice staged(rec);
    const Buffer want = upload_new(direct, x, {1, static_cast<std::int64_t>(n), 1, 1}, t, Layout::bsnd, "want");
    for (Device* dev : {static_cast<Device*>(&direct), static_cast<Device*>(&staged)}) {
      const Buffer b = dev->alloc({1, static_cast<std::int64_t>(n), 1, 1}, t, Layout::bsnd, "made");
      std::size_t calls = 0, covered = 0;
      upload_made(*dev, b, [&](std::size_t first, std::size_t count, double* out) {
        CHECK(first == covered);  // in order, each element once
        for (std::size_t i = 0; i < count; ++i) out[i] = x[first + i];
        covered += count;
        ++calls;
      });
      CHECK(covered == n);
      CHECK(calls > 1);
      CHECK(download_values(*dev, b) == download_values(direct, want));
    }
  }
}
