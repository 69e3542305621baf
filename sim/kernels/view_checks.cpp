#include "sim/kernels/view_checks.hpp"

#include <string>

#include "sim/core/error.hpp"

namespace cpsim {

void check_data(const View& v, const char* what) {
  if (v.numel() > 0 && v.buf.data() == nullptr)
    throw Error(std::string(what) + ": buffer '" + v.buf.name() + "' holds no data on this device");
}

void check_pair(const View& dst, const View& src, const char* what) {
  if (!dst.same_extent(src) || dst.buf.layout() != src.buf.layout())
    throw Error(std::string(what) + ": views differ in extent or layout (" +
                to_string(dst.buf.dims(), dst.buf.layout()) + " box vs " + to_string(src.buf.dims(), src.buf.layout()) +
                " box)");
  check_data(dst, what);
  check_data(src, what);
}

void check_activations(std::initializer_list<const View*> views, const char* what) {
  for (const View* v : views)
    if (v->buf.layout() != Layout::bsnd)
      throw Error(std::string(what) + ": '" + v->buf.name() + "' must be a [B, S, N, D] buffer");
  check_consecutive(views, what);
}

void check_merge_views(const View& out_acc, const View& lse_acc, const View& out_t, const View& lse_t) {
  if (!out_acc.same_extent(out_t) || !lse_acc.same_extent(lse_t))
    throw Error("merge: the two partial results must cover the same rows, heads and batches");
  if (lse_acc.buf.layout() != Layout::bns || lse_t.buf.layout() != Layout::bns ||
      out_acc.buf.layout() != Layout::bsnd || out_t.buf.layout() != Layout::bsnd)
    throw Error("merge: out views must be [B, S, N, D] and lse views [B, N, S]");
  if (lse_acc.nb != out_acc.nb || lse_acc.ns != out_acc.ns || lse_acc.nh != out_acc.nh)
    throw Error("merge: lse must have one value per row and head of out");
  check_consecutive({&out_acc, &lse_acc, &out_t, &lse_t}, "merge");
}

void check_consecutive(std::initializer_list<const View*> views, const char* what) {
  for (const View* v : views)
    if (v->step != 1)
      throw Error(std::string(what) + ": '" + v->buf.name() + "' must be a view of consecutive rows (it steps " +
                  std::to_string(v->step) + " rows)");
}

}  // namespace cpsim
