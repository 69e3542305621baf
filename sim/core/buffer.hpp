// Buffers and views: the data a device holds, seen through boxes of (batch, sequence row, head).
//
// Activations use the row-major layout [B, S, N, D]; log-sum-exp buffers use [B, N, S] (d = 1).
// A Buffer is a cheap handle (copies share storage). Its storage belongs to the device that allocated it
// and may be null: the counting device tracks sizes without holding data.
// A View is a box inside a buffer: batches [b0, b0+nb), rows s0, s0 + step, ..., s0 + (ns-1) step, heads
// [h0, h0+nh), all of D. Rows are consecutive (step 1) except in views made by strided_rows, which only copy, add
// and fill take (striped sharding's reordering); attention and merge take consecutive rows.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "sim/core/dtype.hpp"

namespace cpsim {

enum class Layout : std::uint8_t {
  bsnd,  // [B, S, N, D]: activations (q, k, v, out and their gradients)
  bns,   // [B, N, S]:    log-sum-exp, one value per (batch, head, row)
};

struct Dims {
  std::int64_t b = 0, s = 0, n = 0, d = 1;
  std::int64_t numel() const { return b * s * n * d; }
  bool operator==(const Dims&) const = default;
};

std::string to_string(const Dims& dims, Layout layout);  // "[2, 16, 8, 64]" or "[2, 8, 16]"

class Buffer {
 public:
  Buffer() = default;
  Buffer(std::shared_ptr<void> storage, Dims dims, DType dtype, Layout layout, std::string name);

  bool valid() const { return dims_.numel() > 0 || storage_ != nullptr || !name_.empty(); }
  void* data() const { return storage_.get(); }
  template <class T>
  T* as() const { return static_cast<T*>(storage_.get()); }
  const Dims& dims() const { return dims_; }
  DType dtype() const { return dtype_; }
  Layout layout() const { return layout_; }
  const std::string& name() const { return name_; }
  std::int64_t numel() const { return dims_.numel(); }
  std::size_t bytes() const { return static_cast<std::size_t>(numel()) * dtype_size(dtype_); }

  // Element offset of (b, s, n, d): bsnd ((b*S + s)*N + n)*D + d; bns (b*N + n)*S + s.
  std::int64_t offset(std::int64_t b, std::int64_t s, std::int64_t n, std::int64_t d = 0) const {
    if (layout_ == Layout::bsnd) return ((b * dims_.s + s) * dims_.n + n) * dims_.d + d;
    return (b * dims_.n + n) * dims_.s + s;
  }

 private:
  std::shared_ptr<void> storage_;
  Dims dims_;
  DType dtype_ = DType::f32;
  Layout layout_ = Layout::bsnd;
  std::string name_;
};

struct View {
  Buffer buf;
  std::int64_t b0 = 0, nb = 0, s0 = 0, ns = 0, h0 = 0, nh = 0;
  std::int64_t step = 1;  // buffer rows from one view row to the next

  View() = default;
  View(const Buffer& b);  // NOLINT: the whole buffer

  // Sub-boxes, relative to this view; each checks its bounds and throws Error when out of range.
  View rows(std::int64_t first, std::int64_t count) const;
  View heads(std::int64_t first, std::int64_t count) const;
  View batches(std::int64_t first, std::int64_t count) const;
  // Rows first, first + every, ..., (count of them) of this view.
  View strided_rows(std::int64_t first, std::int64_t count, std::int64_t every) const;
  std::int64_t row(std::int64_t i) const { return s0 + i * step; }  // the buffer row of view row i

  std::int64_t d() const { return buf.dims().d; }
  std::int64_t numel() const { return nb * ns * nh * d(); }
  // Same extent (nb, ns, nh, d) as another view: required by copy, add and merge.
  bool same_extent(const View& o) const { return nb == o.nb && ns == o.ns && nh == o.nh && d() == o.d(); }
};

}  // namespace cpsim
