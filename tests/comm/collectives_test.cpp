// The pieces of the collectives that do not need ranks: chunking and the element-wise reductions.
#include "sim/comm/collectives/collectives.hpp"

#include <doctest/doctest.h>

#include <cstdint>
#include <cstring>
#include <vector>

#include "sim/comm/collectives/reduce.hpp"

using namespace cpsim;
using namespace cpsim::collectives;

TEST_CASE("balanced chunks cover the buffer in order with lengths that differ by at most one element") {
  for (int c : {1, 3, 4, 8}) {
    for (std::size_t count : {std::size_t{0}, std::size_t{1}, std::size_t{7}, std::size_t{8}, std::size_t{1001}}) {
      CAPTURE(c);
      CAPTURE(count);
      const Chunks ch = Chunks::balanced(c, count, 4);
      std::size_t at = 0, lo = SIZE_MAX, hi = 0;
      for (int i = 0; i < c; ++i) {
        CHECK(ch.offset[i] == at);
        at += ch.bytes[i];
        lo = std::min(lo, ch.bytes[i]);
        hi = std::max(hi, ch.bytes[i]);
      }
      CHECK(at == count * 4);
      CHECK(hi - lo <= 4);
      CHECK(ch.largest() == hi);
    }
  }
}

TEST_CASE("combine applies sum, max and min element-wise in f32, f64 and i64, also in place") {
  const std::vector<double> a = {1, -2, 3.5, 0}, b = {4, 5, -6, 0};
  for (ReduceOp op : {ReduceOp::sum, ReduceOp::max, ReduceOp::min}) {
    std::vector<double> want(4);
    for (int i = 0; i < 4; ++i)
      want[i] = op == ReduceOp::sum ? a[i] + b[i] : op == ReduceOp::max ? std::max(a[i], b[i]) : std::min(a[i], b[i]);
    std::vector<double> d = a;
    combine(d.data(), d.data(), b.data(), 4, DType::f64, op);
    CHECK(d == want);
    std::vector<float> fa(a.begin(), a.end()), fb(b.begin(), b.end()), fo(4);
    combine(fo.data(), fa.data(), fb.data(), 4, DType::f32, op);
    for (int i = 0; i < 4; ++i) CHECK(fo[i] == static_cast<float>(want[i]));
    std::vector<std::int64_t> ia = {1, -2, 3, 0}, ib = {4, 5, -6, 0}, io(4);
    combine(io.data(), ia.data(), ib.data(), 4, DType::i64, op);
    for (int i = 0; i < 4; ++i) {
      const std::int64_t w = op == ReduceOp::sum   ? ia[i] + ib[i]
                             : op == ReduceOp::max ? std::max(ia[i], ib[i])
                                                   : std::min(ia[i], ib[i]);
      CHECK(io[i] == w);
    }
  }
}

TEST_CASE("combine in bf16 adds in f32 and rounds to the nearest even bf16") {
  auto bf16 = [](float f) {
    std::uint32_t u;
    std::memcpy(&u, &f, 4);
    return static_cast<std::uint16_t>(u >> 16);  // exact for the values used here
  };
  // 1 + 2^-8: halfway between the bf16 neighbours 1 and 1 + 2^-7; ties go to the even one, 1.
  const std::vector<std::uint16_t> a = {bf16(1.0f), bf16(1.5f)}, b = {bf16(0.00390625f), bf16(2.0f)};
  std::vector<std::uint16_t> out(2);
  combine(out.data(), a.data(), b.data(), 2, DType::bf16, ReduceOp::sum);
  CHECK(out[0] == bf16(1.0f));
  CHECK(out[1] == bf16(3.5f));
}
