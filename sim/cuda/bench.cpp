// What `cpsim bench gpu_attention` measures: causal attention on one GPU, and a cuBLAS GEMM as the yardstick.
//
// Attention: B = 1, positions 0..S-1 on both sides, random inputs made on the GPU; times are the kernels' own
// (CUDA events around each call, best of the repetitions). Flops are the Device base's useful flops, 4 D per
// visible pair forward and 10 D backward, so a causal call counts about half of the full S x S work.
// GEMM: C = A B with bf16 A, B, C and f32 accumulation (cublasGemmEx, CUBLAS_COMPUTE_32F), n x n x n, 2 n^3 flops.
// cuBLAS is opened with dlopen, so that the rest of cpsim runs where the library is missing.
#include "sim/cuda/bench.hpp"

#include <cublas_v2.h>
#include <dlfcn.h>

#include <algorithm>

#include "sim/cuda/cuda_check.hpp"
#include "sim/cuda/cuda_device.hpp"
#include "sim/cuda/make_device.hpp"

namespace cpsim {

GpuAttentionTiming time_gpu_attention(const GpuAttentionShape& shape, GpuKernel kernel, int repetitions,
                                      int device_index) {
  Recorder rec;
  auto dev_owner = make_cuda_device(rec, device_index, kernel);
  auto& dev = dynamic_cast<cuda::CudaDevice&>(*dev_owner);
  const cudaStream_t s = dev.gpu().compute();
  const DType dtype = shape.dtype;
  const Dims d{1, shape.seq, shape.heads, shape.head_dim}, dkv{1, shape.seq, shape.kv_heads, shape.head_dim};
  const Buffer q = dev.alloc(d, dtype, Layout::bsnd, "q"), k = dev.alloc(dkv, dtype, Layout::bsnd, "k"),
               v = dev.alloc(dkv, dtype, Layout::bsnd, "v"), dout = dev.alloc(d, dtype, Layout::bsnd, "dout");
  const Buffer out = dev.alloc(d, dtype, Layout::bsnd, "out");
  const Buffer lse = dev.alloc({1, shape.seq, shape.heads, 1}, dtype, Layout::bns, "lse");
  const Buffer dq = dev.alloc(d, DType::f32, Layout::bsnd, "dq"), dk = dev.alloc(dkv, DType::f32, Layout::bsnd, "dk"),
               dv = dev.alloc(dkv, DType::f32, Layout::bsnd, "dv");
  std::uint64_t seed = 1;
  for (const Buffer* b : {&q, &k, &v, &dout})
    cuda::check(cuda::launch_fill_random(cuda::to_gpu_view(View(*b)), seed++, s), "random inputs");
  const Positions pos = iota_positions(0, shape.seq);
  GpuAttentionTiming t;
  t.fwd_ms = t.bwd_ms = 1e300;
  for (int i = 0; i <= repetitions; ++i) {  // the first round warms up and is not counted
    const WorkCounts w = dev.attention_forward(View(q), pos, View(k), View(v), pos, View(out), View(lse));
    const double ms = dev.last_kernel_ms();  // waits for this call's kernels
    if (i > 0) t.fwd_ms = std::min(t.fwd_ms, ms);
    t.fwd_flops = w.flops;
    t.fwd_path = cuda::path_name(dev.last_path());
  }
  for (int i = 0; i <= repetitions; ++i) {
    const WorkCounts w = dev.attention_backward(View(q), pos, View(k), View(v), pos, View(out), View(lse), View(dout),
                                                View(dq), View(dk), View(dv));
    const double ms = dev.last_kernel_ms();
    if (i > 0) t.bwd_ms = std::min(t.bwd_ms, ms);
    t.bwd_flops = w.flops;
    t.bwd_path = cuda::path_name(dev.last_path());
  }
  return t;
}

namespace {

struct Cublas {
  void* lib = nullptr;
  decltype(&cublasCreate_v2) create = nullptr;
  decltype(&cublasDestroy_v2) destroy = nullptr;
  decltype(&cublasSetStream_v2) set_stream = nullptr;
  // cublasGemmEx (C API, 32-bit sizes)
  cublasStatus_t (*gemm)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int, const void*, const void*,
                         cudaDataType, int, const void*, cudaDataType, int, const void*, void*, cudaDataType, int,
                         cublasComputeType_t, cublasGemmAlgo_t) = nullptr;
};

Cublas open_cublas() {
  const std::string name = "libcublas.so." + std::to_string(CUDART_VERSION / 1000);
  Cublas c;
  c.lib = dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (c.lib == nullptr) c.lib = dlopen("libcublas.so", RTLD_NOW | RTLD_LOCAL);
  if (c.lib == nullptr)
    throw Error("cuBLAS could not be loaded (" + std::string(dlerror()) +
                "); put the CUDA toolkit's library folder on "
                "LD_LIBRARY_PATH");
  c.create = reinterpret_cast<decltype(c.create)>(dlsym(c.lib, "cublasCreate_v2"));
  c.destroy = reinterpret_cast<decltype(c.destroy)>(dlsym(c.lib, "cublasDestroy_v2"));
  c.set_stream = reinterpret_cast<decltype(c.set_stream)>(dlsym(c.lib, "cublasSetStream_v2"));
  c.gemm = reinterpret_cast<decltype(c.gemm)>(dlsym(c.lib, "cublasGemmEx"));
  if (!c.create || !c.destroy || !c.set_stream || !c.gemm) throw Error("cuBLAS (" + name + ") lacks cublasGemmEx");
  return c;
}

void cublas_check(cublasStatus_t s, const char* what) {
  if (s != CUBLAS_STATUS_SUCCESS)
    throw Error(std::string("cuBLAS ") + what + " failed with status " + std::to_string(s));
}

}  // namespace

double cublas_bf16_gemm_tflops(std::int64_t n, int device_index) {
  const Cublas lib = open_cublas();
  Recorder rec;
  auto dev_owner = make_cuda_device(rec, device_index);
  auto& dev = dynamic_cast<cuda::CudaDevice&>(*dev_owner);
  const cudaStream_t s = dev.gpu().compute();
  const Dims d{1, n, n, 1};
  const Buffer a = dev.alloc(d, DType::bf16, Layout::bsnd, "a"), b = dev.alloc(d, DType::bf16, Layout::bsnd, "b"),
               c = dev.alloc(d, DType::bf16, Layout::bsnd, "c");
  cuda::check(cuda::launch_fill_random(cuda::to_gpu_view(View(a)), 11, s), "random inputs");
  cuda::check(cuda::launch_fill_random(cuda::to_gpu_view(View(b)), 12, s), "random inputs");
  // The handle and the events go away however this function ends.
  struct Owned {
    const Cublas& lib;
    cublasHandle_t h = nullptr;
    cudaEvent_t e0 = nullptr, e1 = nullptr;
    ~Owned() {
      if (h) lib.destroy(h);
      if (e0) cudaEventDestroy(e0);
      if (e1) cudaEventDestroy(e1);
    }
  } own{lib};
  cublas_check(lib.create(&own.h), "create");
  cublasHandle_t h = own.h;
  double best_ms = 1e300;
  {
    cublas_check(lib.set_stream(h, s), "set stream");
    cuda::check(cudaEventCreate(&own.e0), "creating an event");
    cuda::check(cudaEventCreate(&own.e1), "creating an event");
    const cudaEvent_t e0 = own.e0, e1 = own.e1;
    const float one = 1, zero = 0;
    const int ni = static_cast<int>(n);
    auto gemm = [&] {
      cublas_check(lib.gemm(h, CUBLAS_OP_N, CUBLAS_OP_N, ni, ni, ni, &one, a.data(), CUDA_R_16BF, ni, b.data(),
                            CUDA_R_16BF, ni, &zero, c.data(), CUDA_R_16BF, ni, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
                   "gemm");
    };
    gemm();  // warm-up (and cuBLAS's own first-call setup)
    constexpr int kPerRound = 10;
    for (int round = 0; round < 3; ++round) {
      cuda::check(cudaEventRecord(e0, s), "recording an event");
      for (int i = 0; i < kPerRound; ++i) gemm();
      cuda::check(cudaEventRecord(e1, s), "recording an event");
      dev.gpu().wait(s, "cuBLAS GEMM");
      float ms = 0;
      cuda::check(cudaEventElapsedTime(&ms, e0, e1), "reading an event");
      best_ms = std::min(best_ms, static_cast<double>(ms) / kPerRound);
    }
  }
  return 2.0 * static_cast<double>(n) * static_cast<double>(n) * static_cast<double>(n) / (best_ms * 1e-3) / 1e12;
}

}  // namespace cpsim
