// The pieces of the collectives that do not need ranks (chunking, the element-wise reductions), and the
// agreement, bit for bit, of the two forms of the reductions: ring (processes backend) and direct (threads).
#include "sim/comm/collectives/collectives.hpp"

#include <doctest/doctest.h>

#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "comm_test_support.hpp"
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

namespace {

// Rank r's input: random magnitudes over many binades (so the order of a sum shows in its rounding), with
// signed zeros among them (so the order of max and min operands shows).
template <class T>
std::vector<T> mixed_input(int rank, std::size_t count) {
  std::mt19937_64 gen(1234 + static_cast<std::uint64_t>(rank));
  std::uniform_real_distribution<double> mantissa(-1, 1);
  std::uniform_int_distribution<int> exponent(-20, 20), kind(0, 9);
  std::vector<T> v(count);
  for (auto& x : v) {
    const int k = kind(gen);
    x = k == 0 ? T(0) : k == 1 ? -T(0) : static_cast<T>(std::ldexp(mantissa(gen), exponent(gen)));
  }
  return v;
}

// Every rank's reduce_scatter (sum) and all_reduce (sum, max, min) results, as bytes, on one backend with one
// form of the collectives.
template <class T>
std::vector<std::string> reductions(Backend b, CollectiveAlgorithm form, int c, std::size_t count, DType dtype) {
  LaunchOptions opt = test::options(b, c);
  opt.collectives = form;
  std::vector<std::string> results;
  for (const RankOutcome& o : launch(opt, [&](Communicator& comm) {
         const auto in = mixed_input<T>(comm.rank(), count * c);
         std::vector<T> rs(count), ar(count * c);
         std::string bytes;
         auto keep = [&](const std::vector<T>& v) {
           bytes.append(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(T));
         };
         comm.reduce_scatter(in.data(), rs.data(), count, dtype);
         keep(rs);
         for (ReduceOp op : {ReduceOp::sum, ReduceOp::max, ReduceOp::min}) {
           comm.all_reduce(in.data(), ar.data(), count * c - 1, dtype, op);  // a count C does not divide
           keep(ar);
         }
         return bytes;
       }))
    results.push_back(o.result);
  return results;
}

}  // namespace

TEST_CASE("ring and direct reductions give bit-identical sums, maxima and minima on both backends") {
  using enum CollectiveAlgorithm;
  for (int c : {2, 3, 4}) {
    CAPTURE(c);
    const auto want32 = reductions<float>(Backend::threads, ring, c, 1000, DType::f32);
    const auto want64 = reductions<double>(Backend::threads, ring, c, 1000, DType::f64);
    for (Backend b : {Backend::threads, Backend::processes}) {
      for (CollectiveAlgorithm form : {ring, direct}) {
        CAPTURE(backend_name(b));
        CAPTURE(algorithm_name(form));
        CHECK(reductions<float>(b, form, c, 1000, DType::f32) == want32);
        CHECK(reductions<double>(b, form, c, 1000, DType::f64) == want64);
      }
    }
  }
}

// The forms a communicator and a communicator split from it take for 1 KiB and 16 MiB chunks.
std::string forms(Backend b, std::optional<CollectiveAlgorithm> imposed) {
  LaunchOptions opt = test::options(b, 4);
  opt.collectives = imposed;
  const auto out = launch(opt, [](Communicator& comm) {
    auto sub = comm.split(comm.rank() % 2, comm.rank());
    std::string s;
    for (Communicator* c : {&comm, sub.get()})
      for (std::size_t chunk : {std::size_t{1} << 10, std::size_t{16} << 20})
        s += std::string(algorithm_name(dynamic_cast<P2pCommunicator&>(*c).algorithm(chunk))) + " ";
    return s;
  });
  for (const RankOutcome& o : out) CHECK(o.result == out[0].result);
  return out[0].result;
}

TEST_CASE("each backend runs its own form of the collectives unless the launch imposes one, and split keeps it") {
  using enum CollectiveAlgorithm;
  for (Backend b : {Backend::threads, Backend::processes}) {
    CHECK(forms(b, {}) == "direct direct direct direct ");
    CHECK(forms(b, ring) == "ring ring ring ring ");
    CHECK(forms(b, direct) == "direct direct direct direct ");
  }
}
