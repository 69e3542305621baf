// The device registry: the cpu device always, the cuda device in CUDA builds, each made by name.
#include "sim/kernels/device_registry.hpp"

#include <doctest/doctest.h>

#include "sim/core/error.hpp"

using namespace cpsim;

TEST_CASE("the cpu device is registered, computes in f32 and f64, and is made by name") {
  const DeviceInfo& cpu = device_info("cpu");
  CHECK(cpu.name == "cpu");
  CHECK_FALSE(cpu.gpu);
  CHECK(computes_in(cpu, DType::f32));
  CHECK(computes_in(cpu, DType::f64));
  CHECK_FALSE(computes_in(cpu, DType::bf16));
  CHECK(cpu.kernels.empty());  // one choice of attention kernels: auto
  CHECK(offers_kernel(cpu, "auto"));
  CHECK_FALSE(offers_kernel(cpu, "mma2"));
  Recorder rec;
  const auto dev = make_device("cpu", rec);
  CHECK(dev->name() == "cpu");
  CHECK(&dev->recorder() == &rec);
}

TEST_CASE("a device the build does not hold is an error naming it") {
  CHECK_THROWS_WITH_AS(device_info("abacus"), doctest::Contains("no device 'abacus'"), Error);
}

#ifdef CPSIM_HAVE_CUDA
TEST_CASE("CUDA builds register the cuda device, a GPU device computing in bf16 and f32") {
  const DeviceInfo& cuda = device_info("cuda");
  CHECK(cuda.gpu);
  CHECK(computes_in(cuda, DType::bf16));
  CHECK(computes_in(cuda, DType::f32));
  CHECK_FALSE(computes_in(cuda, DType::f64));
}

TEST_CASE("the cuda device offers mma2, mma1 and simt besides auto, and says which problems the tensor cores take") {
  const DeviceInfo& cuda = device_info("cuda");
  CHECK(cuda.kernels == std::vector<std::string>{"mma2", "mma1", "simt"});
  CHECK(offers_kernel(cuda, "auto"));
  CHECK_FALSE(offers_kernel(cuda, "mma3"));
  REQUIRE(cuda.kernel_problem);
  CHECK_FALSE(cuda.kernel_problem("mma2", DType::bf16, 128).has_value());
  CHECK_FALSE(cuda.kernel_problem("mma1", DType::bf16, 64).has_value());
  CHECK_FALSE(cuda.kernel_problem("simt", DType::f32, 32).has_value());
  const std::string f32 = cuda.kernel_problem("mma2", DType::f32, 128).value().what();
  CHECK(f32.find("bf16 with head dim 64 or 128") != std::string::npos);
  CHECK(f32.find("; use --dtype bf16 --head-dim 128 or --kernel auto") != std::string::npos);
  CHECK(std::string(cuda.kernel_problem("mma1", DType::bf16, 32).value().what()).find("head dim 32") !=
        std::string::npos);
}
#endif
