#include "sim/core/buffer.hpp"

#include <utility>

#include "sim/core/error.hpp"

namespace cpsim {

std::string to_string(const Dims& d, Layout layout) {
  auto s = [](std::int64_t v) { return std::to_string(v); };
  if (layout == Layout::bns) return "[" + s(d.b) + ", " + s(d.n) + ", " + s(d.s) + "]";
  return "[" + s(d.b) + ", " + s(d.s) + ", " + s(d.n) + ", " + s(d.d) + "]";
}

Buffer::Buffer(std::shared_ptr<void> storage, Dims dims, DType dtype, Layout layout, std::string name)
    : storage_(std::move(storage)), dims_(dims), dtype_(dtype), layout_(layout), name_(std::move(name)) {}

View::View(const Buffer& b) : buf(b), b0(0), nb(b.dims().b), s0(0), ns(b.dims().s), h0(0), nh(b.dims().n) {}

namespace {
void check_range(std::int64_t first, std::int64_t count, std::int64_t extent, const char* what, const Buffer& b) {
  if (first < 0 || count < 0 || first + count > extent)
    throw Error(std::string("view out of range: ") + what + " [" + std::to_string(first) + ", " +
                std::to_string(first + count) + ") of " + std::to_string(extent) + " in buffer '" + b.name() + "'");
}
}  // namespace

View View::rows(std::int64_t first, std::int64_t count) const {
  check_range(first, count, ns, "rows", buf);
  View v = *this;
  v.s0 += first * step;
  v.ns = count;
  return v;
}

View View::strided_rows(std::int64_t first, std::int64_t count, std::int64_t every) const {
  if (every < 1) throw Error("view: a row step must be at least 1 in buffer '" + buf.name() + "'");
  check_range(first, count > 0 ? (count - 1) * every + 1 : 0, ns, "strided rows", buf);
  View v = rows(first, 0);
  v.ns = count;
  v.step = step * every;
  return v;
}

View View::heads(std::int64_t first, std::int64_t count) const {
  check_range(first, count, nh, "heads", buf);
  View v = *this;
  v.h0 += first;
  v.nh = count;
  return v;
}

View View::batches(std::int64_t first, std::int64_t count) const {
  check_range(first, count, nb, "batches", buf);
  View v = *this;
  v.b0 += first;
  v.nb = count;
  return v;
}

}  // namespace cpsim
