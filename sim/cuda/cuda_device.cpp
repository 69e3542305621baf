#include "sim/cuda/cuda_device.hpp"

#include <cmath>
#include <cstring>
#include <initializer_list>
#include <limits>

#include "sim/cuda/cuda_check.hpp"
#include "sim/cuda/tile_counts.hpp"
#include "sim/kernels/view_checks.hpp"

namespace cpsim::cuda {
namespace {

ElemType elem_type(DType t) {
  switch (t) {
    case DType::f32:
      return ElemType::f32;
    case DType::bf16:
      return ElemType::bf16;
    case DType::f64:
      return ElemType::f64;
    case DType::i64:
      return ElemType::i64;
  }
  return ElemType::f32;
}

int narrow(std::int64_t x, const View& v) {
  if (x < 0 || x > std::numeric_limits<int>::max())
    throw Error("buffer '" + v.buf.name() + "': an extent of " + std::to_string(x) +
                " is too large for the CUDA kernels");
  return static_cast<int>(x);
}

void check_types(std::initializer_list<const View*> views, DType want, const char* what) {
  for (const View* v : views) {
    check_data(*v, what);
    if (v->buf.dtype() != want)
      throw Error(std::string(what) + ": '" + v->buf.name() + "' holds " + std::string(dtype_name(v->buf.dtype())) +
                  " where " + std::string(dtype_name(want)) + " is needed");
  }
}

}  // namespace

GpuView to_gpu_view(const View& v) {
  const Buffer& b = v.buf;
  const Dims& d = b.dims();
  GpuView g;
  g.type = elem_type(b.dtype());
  g.nb = narrow(v.nb, v);
  g.ns = narrow(v.ns, v);
  g.nh = narrow(v.nh, v);
  g.d = narrow(d.d, v);
  const std::int64_t first = b.offset(v.b0, v.s0, v.h0);
  g.ptr = static_cast<char*>(b.data()) + first * static_cast<std::int64_t>(dtype_size(b.dtype()));
  if (b.layout() == Layout::bsnd) {  // [B, S, N, D]; a strided view steps `step` buffer rows per view row
    g.batch_stride = d.s * d.n * d.d;
    g.row_stride = d.n * d.d * v.step;
    g.head_stride = d.d;
    g.heads_inner = true;
  } else {  // [B, N, S]
    g.batch_stride = d.n * d.s;
    g.row_stride = v.step;
    g.head_stride = d.s;
    g.heads_inner = false;
  }
  return g;
}

CudaDevice::CudaDevice(Recorder& rec, std::shared_ptr<RankGpu> gpu, GpuKernel kernel)
    : Device(rec), gpu_(std::move(gpu)), kernel_(kernel) {
  check(cudaSetDevice(gpu_->device()), "selecting the rank's GPU");
  check(cudaEventCreate(&start_), "creating a timing event");
  check(cudaEventCreate(&stop_), "creating a timing event");
  for (Staging& st : staging_) check(cudaEventCreateWithFlags(&st.copied, cudaEventDisableTiming), "creating an event");
}

CudaDevice::~CudaDevice() {
  cudaStreamSynchronize(gpu_->compute());
  for (void* p : {pos_dev_, di_, part_})
    if (p) cudaFreeAsync(p, gpu_->compute());
  for (Staging& st : staging_) {
    if (st.host) cudaFreeHost(st.host);
    cudaEventDestroy(st.copied);
  }
  cudaEventDestroy(start_);
  cudaEventDestroy(stop_);
}

Buffer CudaDevice::do_alloc(Dims dims, DType dtype, Layout layout, const std::string& name, BufferUse use) {
  require(dtype == DType::f32 || dtype == DType::bf16,
          "the CUDA device holds bf16 and f32 buffers (got " + std::string(dtype_name(dtype)) + " for '" + name + "')",
          Fix{{"--dtype bf16 or f32"}});
  if (layout == Layout::bns && dtype == DType::bf16) dtype = DType::f32;  // log-sum-exp stays f32 (see the header)
  if (dims.b < 0 || dims.s < 0 || dims.n < 0 || dims.d < 1 || (layout == Layout::bns && dims.d != 1))
    throw Error("alloc '" + name + "': impossible dims " + to_string(dims, layout));
  const std::size_t bytes = static_cast<std::size_t>(dims.numel()) * dtype_size(dtype);
  void* p = nullptr;
  const cudaError_t e = cudaMallocAsync(&p, std::max<std::size_t>(bytes, 1), gpu_->compute());
  if (e == cudaErrorMemoryAllocation) {
    (void)cudaGetLastError();
    throw Error("alloc '" + name + "': the GPU is out of memory for " + std::to_string(bytes) + " bytes (rank " +
                std::to_string(gpu_->rank()) + " holds " + std::to_string(recorder().memory()->current.load()) +
                " bytes); use a shorter sequence or more ranks");
  }
  check(e, "alloc '" + name + "'");
  check(cudaMemsetAsync(p, 0, bytes, gpu_->compute()), "zero-filling '" + name + "'");
  auto meter = recorder().memory();  // shared with the deleter, which may outlive this device
  const auto counted = static_cast<std::int64_t>(bytes);
  const bool message = use == BufferUse::message;  // GPU memory either way (NCCL sends from any of it)
  meter->add(counted, message);
  std::shared_ptr<void> storage(p, [gpu = gpu_, meter, counted, message](void* x) {
    cudaFreeAsync(x, gpu->compute());  // after everything queued on the stream that may still read it
    meter->sub(counted, message);
  });
  return Buffer(std::move(storage), dims, dtype, layout, name);
}

void CudaDevice::upload(const Buffer& dst, const void* host) {
  if (dst.bytes() == 0) return;
  check(cudaMemcpyAsync(dst.data(), host, dst.bytes(), cudaMemcpyHostToDevice, gpu_->compute()),
        "upload to '" + dst.name() + "'");
  gpu_->wait(gpu_->compute(), "upload to '" + dst.name() + "'");
}

void CudaDevice::download(const Buffer& src, void* host) {
  if (src.bytes() == 0) return;
  check(cudaMemcpyAsync(host, src.data(), src.bytes(), cudaMemcpyDeviceToHost, gpu_->compute()),
        "download of '" + src.name() + "'");
  gpu_->wait(gpu_->compute(), "download of '" + src.name() + "'");
}

void CudaDevice::fill(const View& dst, double value) {
  check_data(dst, "fill");
  check(launch_fill(to_gpu_view(dst), value, gpu_->compute()), "fill of '" + dst.buf.name() + "'");
}

void CudaDevice::copy(const View& dst, const View& src) {
  check_pair(dst, src, "copy");
  check(launch_copy(to_gpu_view(dst), to_gpu_view(src), gpu_->compute()), "copy into '" + dst.buf.name() + "'");
}

void CudaDevice::add(const View& dst, const View& src) {
  check_pair(dst, src, "add");
  check(launch_add(to_gpu_view(dst), to_gpu_view(src), gpu_->compute()), "add into '" + dst.buf.name() + "'");
}

void CudaDevice::merge(const View& out_acc, const View& lse_acc, const View& out_t, const View& lse_t) {
  check_merge_views(out_acc, lse_acc, out_t, lse_t);
  check_types({&lse_acc, &lse_t}, DType::f32, "merge");
  check_types({&out_t}, out_acc.buf.dtype(), "merge");
  check_data(out_acc, "merge");
  check(
      launch_merge(to_gpu_view(out_acc), to_gpu_view(lse_acc), to_gpu_view(out_t), to_gpu_view(lse_t), gpu_->compute()),
      "merge into '" + out_acc.buf.name() + "'");
}

void CudaDevice::synchronize() {
  gpu_->wait(gpu_->compute(), "synchronize");
}

void* CudaDevice::workspace(void*& ptr, std::size_t& cap, std::size_t bytes) {
  if (bytes <= cap) return ptr;
  if (ptr) check(cudaFreeAsync(ptr, gpu_->compute()), "freeing kernel workspace");
  ptr = nullptr;
  cap = 0;
  check(cudaMallocAsync(&ptr, bytes, gpu_->compute()), "allocating kernel workspace");
  cap = bytes;
  return ptr;
}

AttentionArgs CudaDevice::args(const View& q, const Positions& q_pos, const View& k, const View& v,
                               const Positions& k_pos, const View& out, const View& lse, bool causal, double scale) {
  const DType t = q.buf.dtype();
  require(t == DType::f32 || t == DType::bf16, "the CUDA device computes attention on bf16 or f32 inputs",
          Fix{{"--dtype bf16 or f32"}});
  check_types({&q, &k, &v, &out}, t, "attention");
  check_types({&lse}, DType::f32, "attention (the log-sum-exp)");
  if (q.d() > kSimtMaxHeadDim)
    throw UsageError("the CUDA kernels take head dims up to " + std::to_string(kSimtMaxHeadDim) + " (got " +
                         std::to_string(q.d()) + ")",
                     {Fix{{"--head-dim 128"}, "use a head dim of 128 or less"}});
  // Positions: q then k, one per row (expanded from their runs), through the next pinned staging slot, once the copy
  // that last read it is done. The device copy is one buffer: the stream runs this call's copy after the previous
  // call's kernels.
  const std::vector<std::int64_t> qp = q_pos.expand(), kp = k_pos.expand();
  const std::size_t n = qp.size() + kp.size();
  Staging& st = staging_[static_cast<std::size_t>(next_staging_)];
  next_staging_ = (next_staging_ + 1) % kStaging;
  check(cudaEventSynchronize(st.copied), "waiting for a positions copy");  // done at once unless recorded and pending
  if (n > st.cap) {
    if (st.host) cudaFreeHost(st.host);
    st.host = nullptr;
    st.cap = 0;
    check(cudaMallocHost(&st.host, n * sizeof(std::int64_t)), "allocating pinned memory for positions");
    st.cap = n;
  }
  std::memcpy(st.host, qp.data(), qp.size() * sizeof(std::int64_t));
  std::memcpy(st.host + qp.size(), kp.data(), kp.size() * sizeof(std::int64_t));
  auto* pos = static_cast<std::int64_t*>(workspace(pos_dev_, pos_dev_cap_, n * sizeof(std::int64_t)));
  check(cudaMemcpyAsync(pos, st.host, n * sizeof(std::int64_t), cudaMemcpyHostToDevice, gpu_->compute()),
        "copying positions to the GPU");
  check(cudaEventRecord(st.copied, gpu_->compute()), "recording a copy event");
  AttentionArgs a;
  a.q = to_gpu_view(q);
  a.k = to_gpu_view(k);
  a.v = to_gpu_view(v);
  a.out = to_gpu_view(out);
  a.lse = to_gpu_view(lse);
  a.q_pos = pos;
  a.k_pos = pos + qp.size();
  a.group = static_cast<int>(q.nh / k.nh);
  a.causal = causal;
  a.scale = static_cast<float>(scale);
  return a;
}

AttentionPath CudaDevice::path_for(const AttentionArgs& a, bool backward) const {
  const bool mma = mma_takes(a, backward);
  switch (kernel_) {
    case GpuKernel::automatic:
      return mma ? AttentionPath::mma2 : AttentionPath::simt;
    case GpuKernel::simt:
      return AttentionPath::simt;
    case GpuKernel::mma2:
    case GpuKernel::mma1:
      break;
  }
  if (!mma)
    throw UsageError(std::string("--kernel ") + gpu_kernel_name(kernel_) +
                     " runs on the tensor cores, which take bf16 q, k, v (and f32 gradients) with head dim 64 or 128 "
                         "and rows on 16 bytes; this call has head dim " + std::to_string(a.q.d),
                     {Fix{{"--kernel auto"}, "leave the kernel choice to the device"}});
  return kernel_ == GpuKernel::mma2 ? AttentionPath::mma2 : AttentionPath::mma1;
}

TileCounts CudaDevice::run(AttentionArgs& a, bool backward, const Positions& q_pos, const Positions& k_pos,
                           bool causal) {
  last_path_ = path_for(a, backward);
  const cudaStream_t s = gpu_->compute();
  if (backward && last_path_ == AttentionPath::mma2 && a.group > 1) {  // the per-query-head dK, dV scratch
    const std::size_t each = static_cast<std::size_t>(a.q.nb) * a.k.ns * a.q.nh * a.q.d;
    auto* part = static_cast<float*>(workspace(part_, part_cap_, 2 * each * sizeof(float)));
    a.dk_part = part;
    a.dv_part = part + each;
  }
  const char* what = backward ? "attention backward" : "attention forward";
  check(cudaEventRecord(start_, s), "recording a timing event");
  check(backward ? launch_attention_backward(a, last_path_, s) : launch_attention_forward(a, last_path_, s), what);
  check(cudaEventRecord(stop_, s), "recording a timing event");
  if (recorder().tracing()) gpu_->wait(s, what);  // the trace's compute times are then the kernels' own
  int rows = 1, keys = kSimtKeys;
  if (last_path_ != AttentionPath::simt) {
    rows = last_path_ == AttentionPath::mma2 && !backward ? kMma2ForwardRows : kMmaRows;
    keys = kMmaRows;
  }
  const TileCounts per_head = count_tiles(q_pos, k_pos, causal, rows, keys);
  const std::int64_t heads = static_cast<std::int64_t>(a.q.nb) * a.q.nh;
  return {per_head.computed * heads, per_head.skipped * heads};
}

namespace {
// The kernels implement the causal and full masks only: anything else is refused, never computed as another mask.
void require_plain_mask(const Mask& mask) {
  if (!mask.plain())
    throw Error("the cuda device implements the causal and full masks, not " + mask.describe(),
                {Fix{{"--backend threads or processes for documents and windows"},
                     "run documents and windows on a CPU backend"}});
}
}  // namespace

double CudaDevice::last_kernel_ms() {
  check(cudaEventSynchronize(stop_), "waiting for the last attention call");
  float ms = 0;
  check(cudaEventElapsedTime(&ms, start_, stop_), "reading a timing event");
  return ms;
}

TileCounts CudaDevice::do_attention_forward(const View& q, const Positions& q_pos, const View& k, const View& v,
                                            const Positions& k_pos, const View& out, const View& lse, const Mask& mask,
                                            double scale) {
  require_plain_mask(mask);
  const bool causal = mask.causal();
  check_activations({&q, &k, &v, &out}, "attention forward");
  AttentionArgs a = args(q, q_pos, k, v, k_pos, out, lse, causal, scale);
  return run(a, false, q_pos, k_pos, causal);
}

TileCounts CudaDevice::do_attention_backward(const View& q, const Positions& q_pos, const View& k, const View& v,
                                             const Positions& k_pos, const View& out, const View& lse, const View& dout,
                                             const View& dq, const View& dk, const View& dv, const Mask& mask,
                                             double scale) {
  require_plain_mask(mask);
  const bool causal = mask.causal();
  check_activations({&q, &k, &v, &out, &dout, &dq, &dk, &dv}, "attention backward");
  check_types({&dout}, q.buf.dtype(), "attention backward");
  check_types({&dq, &dk, &dv}, DType::f32, "attention backward (the gradient accumulators)");
  AttentionArgs a = args(q, q_pos, k, v, k_pos, out, lse, causal, scale);
  a.dout = to_gpu_view(dout);
  a.dq = to_gpu_view(dq);
  a.dk = to_gpu_view(dk);
  a.dv = to_gpu_view(dv);
  const std::size_t rows = static_cast<std::size_t>(q.nb * q.nh * q.ns);
  a.di = static_cast<float*>(workspace(di_, di_cap_, std::max<std::size_t>(rows, 1) * sizeof(float)));
  return run(a, true, q_pos, k_pos, causal);
}

}  // namespace cpsim::cuda
