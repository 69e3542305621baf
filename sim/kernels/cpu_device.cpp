#include "sim/kernels/cpu_device.hpp"

#include <cstdlib>
#include <cstring>
#include <initializer_list>

#include "sim/core/error.hpp"
#include "sim/kernels/device_registry.hpp"
#include "sim/kernels/host_pool.hpp"
#include "sim/kernels/merge.hpp"
#include "sim/kernels/tiled.hpp"
#include "sim/kernels/view_checks.hpp"

namespace cpsim {
namespace {

// Calls fn(float{}) or fn(double{}) for the buffer's dtype.
template <class Fn>
void with_type(DType t, const char* what, Fn&& fn) {
  if (t == DType::f32) return fn(float{});
  if (t == DType::f64) return fn(double{});
  throw Error(std::string(what) + ": the CPU device computes in f32 and f64 (got " + std::string(dtype_name(t)) + ")");
}

// Walks two views of one extent and layout in the same order, calling fn(dst_offset, src_offset, length) for
// each contiguous run: [B, S, N, D] per (b, s) the nh * D values of the view's heads; [B, N, S] per (b, h) its rows
// (one value at a time where a view's rows are strided).
template <class Fn>
void for_each_run(const View& dst, const View& src, Fn&& fn) {
  if (dst.buf.layout() == Layout::bsnd) {
    const std::int64_t len = dst.nh * dst.d();
    for (std::int64_t b = 0; b < dst.nb; ++b)
      for (std::int64_t s = 0; s < dst.ns; ++s)
        fn(dst.buf.offset(dst.b0 + b, dst.row(s), dst.h0), src.buf.offset(src.b0 + b, src.row(s), src.h0), len);
  } else if (dst.step == 1 && src.step == 1) {
    for (std::int64_t b = 0; b < dst.nb; ++b)
      for (std::int64_t h = 0; h < dst.nh; ++h)
        fn(dst.buf.offset(dst.b0 + b, dst.s0, dst.h0 + h), src.buf.offset(src.b0 + b, src.s0, src.h0 + h), dst.ns);
  } else {
    for (std::int64_t b = 0; b < dst.nb; ++b)
      for (std::int64_t h = 0; h < dst.nh; ++h)
        for (std::int64_t s = 0; s < dst.ns; ++s)
          fn(dst.buf.offset(dst.b0 + b, dst.row(s), dst.h0 + h), src.buf.offset(src.b0 + b, src.row(s), src.h0 + h), 1);
  }
}

// The one dtype every view holds (each must hold data).
DType common_dtype(std::initializer_list<const View*> views, const char* what) {
  const DType t = (*views.begin())->buf.dtype();
  for (const View* v : views) {
    if (v->buf.dtype() != t)
      throw Error(std::string(what) + ": every buffer must hold one dtype ('" + v->buf.name() + "' holds " +
                  std::string(dtype_name(v->buf.dtype())) + ", not " + std::string(dtype_name(t)) + ")");
    check_data(*v, what);
  }
  return t;
}

}  // namespace

CpuDevice::CpuDevice(Recorder& rec, int tile) : Device(rec), tile_(tile) {
  require(tile >= 1 && tile <= kMaxTile,
          "the attention tile holds 1 to " + std::to_string(kMaxTile) + " rows (got " + std::to_string(tile) + ")",
          "use a tile of 64 or 128");
}

Buffer CpuDevice::do_alloc(Dims dims, DType dtype, Layout layout, const std::string& name, BufferUse use) {
  require(dtype != DType::bf16, "bf16 needs a GPU device", Fix{{"--dtype f32 or f64"}});
  if (dtype != DType::f32 && dtype != DType::f64)
    throw Error("alloc '" + name + "': the CPU device holds f32 and f64 buffers (got " +
                std::string(dtype_name(dtype)) + ")");
  if (dims.b < 0 || dims.s < 0 || dims.n < 0 || dims.d < 1 || (layout == Layout::bns && dims.d != 1))
    throw Error("alloc '" + name + "': impossible dims " + to_string(dims, layout));
  const std::size_t bytes = static_cast<std::size_t>(dims.numel()) * dtype_size(dtype);
  const bool message = use == BufferUse::message;
  // Reused blocks: no fresh pages to fault in on every call. A message buffer from the process's shared heap, where
  // there is one (a processes-backend rank).
  void* p = host_pool::take(bytes, message ? host_pool::Where::shared_heap : host_pool::Where::own);
  if (p == nullptr) throw Error("alloc '" + name + "': out of host memory for " + std::to_string(bytes) + " bytes");
  std::memset(p, 0, bytes);
  auto meter = recorder().memory();  // shared with the deleter, which may outlive this device
  const auto counted = static_cast<std::int64_t>(bytes);
  meter->add(counted, message);
  std::shared_ptr<void> storage(p, [meter, counted, message](void* x) {
    host_pool::give(x, static_cast<std::size_t>(counted));
    meter->sub(counted, message);
  });
  return Buffer(std::move(storage), dims, dtype, layout, name);
}

void CpuDevice::upload(const Buffer& dst, const void* host) {
  if (dst.bytes() > 0) std::memcpy(dst.data(), host, dst.bytes());
}

void CpuDevice::download(const Buffer& src, void* host) {
  if (src.bytes() > 0) std::memcpy(host, src.data(), src.bytes());
}

void CpuDevice::fill(const View& dst, double value) {
  check_data(dst, "fill");
  with_type(dst.buf.dtype(), "fill", [&](auto zero) {
    using T = decltype(zero);
    T* p = dst.buf.as<T>();
    for_each_run(dst, dst,
                 [&](std::int64_t o, std::int64_t, std::int64_t n) { std::fill(p + o, p + o + n, T(value)); });
  });
}

void CpuDevice::copy(const View& dst, const View& src) {
  check_pair(dst, src, "copy");
  with_type(dst.buf.dtype(), "copy", [&](auto dz) {
    with_type(src.buf.dtype(), "copy", [&](auto sz) {
      using D = decltype(dz);
      using S = decltype(sz);
      D* d = dst.buf.as<D>();
      const S* s = src.buf.as<S>();
      // dst and src must not overlap (unless they are the same view).
      for_each_run(dst, src, [&](std::int64_t od, std::int64_t os, std::int64_t n) {
        for (std::int64_t i = 0; i < n; ++i) d[od + i] = static_cast<D>(s[os + i]);
      });
    });
  });
}

void CpuDevice::add(const View& dst, const View& src) {
  check_pair(dst, src, "add");
  with_type(dst.buf.dtype(), "add", [&](auto dz) {
    with_type(src.buf.dtype(), "add", [&](auto sz) {
      using D = decltype(dz);
      using S = decltype(sz);
      D* d = dst.buf.as<D>();
      const S* s = src.buf.as<S>();
      for_each_run(dst, src, [&](std::int64_t od, std::int64_t os, std::int64_t n) {
        for (std::int64_t i = 0; i < n; ++i) d[od + i] += static_cast<D>(s[os + i]);
      });
    });
  });
}

void CpuDevice::merge(const View& out_acc, const View& lse_acc, const View& out_t, const View& lse_t) {
  const DType t = common_dtype({&out_acc, &lse_acc, &out_t, &lse_t}, "merge");
  with_type(t, "merge", [&](auto zero) { merge_partials<decltype(zero)>(out_acc, lse_acc, out_t, lse_t); });
}

TileCounts CpuDevice::do_attention_forward(const View& q, const Positions& q_pos, const View& k, const View& v,
                                           const Positions& k_pos, const View& out, const View& lse, const Mask& mask,
                                           double scale) {
  check_activations({&q, &k, &v, &out}, "attention forward");
  const DType t = common_dtype({&q, &k, &v, &out, &lse}, "attention forward");
  TileCounts counts;
  with_type(t, "attention forward", [&](auto zero) {
    counts = tiled_forward<decltype(zero)>(q, q_pos, k, v, k_pos, out, lse, mask, scale, tile_);
  });
  return counts;
}

TileCounts CpuDevice::do_attention_backward(const View& q, const Positions& q_pos, const View& k, const View& v,
                                            const Positions& k_pos, const View& out, const View& lse, const View& dout,
                                            const View& dq, const View& dk, const View& dv, const Mask& mask,
                                            double scale) {
  check_activations({&q, &k, &v, &out, &dout, &dq, &dk, &dv}, "attention backward");
  const DType t = common_dtype({&q, &k, &v, &out, &lse, &dout, &dq, &dk, &dv}, "attention backward");
  TileCounts counts;
  with_type(t, "attention backward", [&](auto zero) {
    counts = tiled_backward<decltype(zero)>(q, q_pos, k, v, k_pos, out, lse, dout, dq, dk, dv, mask, scale, tile_);
  });
  return counts;
}

CPSIM_DEVICE(cpu) {
  info.name = "cpu";
  info.dtypes = {DType::f32, DType::f64};
  info.gpu = false;
  info.make = [](Recorder& rec, const DeviceSettings&) -> std::unique_ptr<Device> {
    return std::make_unique<CpuDevice>(rec);
  };
}

}  // namespace cpsim
