// The ceiling of `cpsim bench comm` does exactly the call's data movement: each rank's share of the bare copies
// leaves the output the call's definition gives (values checked, no timing).
#include <doctest/doctest.h>

#include <cstring>

#include "sim/cli/bench_comm_ceiling.hpp"

using namespace cpsim::cli;

namespace {

// Element i of rank j's input: small integers, so float sums are exact and every element is told apart.
float input_value(int j, std::size_t i) {
  return static_cast<float>(j * 1000 + static_cast<int>(i));
}

float at(const std::vector<std::byte>& buf, std::size_t i) {
  float v;
  std::memcpy(&v, buf.data() + i * sizeof(float), sizeof v);
  return v;
}

}  // namespace

TEST_CASE("the bare copies of each operation leave every rank's output as the operation defines it") {
  const std::size_t count = 5, n = count * sizeof(float);  // floats per chunk, bytes per chunk
  for (int c : {1, 2, 3, 4}) {
    for (CommOp op : {CommOp::sendrecv, CommOp::all_gather, CommOp::reduce_scatter, CommOp::all_to_all}) {
      CAPTURE(c);
      CAPTURE(static_cast<int>(op));
      BareBuffers b = bare_buffers(op, n, c);
      for (int j = 0; j < c; ++j)
        for (std::size_t i = 0; i < b.in[j].size() / sizeof(float); ++i) {
          const float v = input_value(j, i);
          std::memcpy(b.in[j].data() + i * sizeof(float), &v, sizeof v);
        }
      for (int r = 0; r < c; ++r) bare_call(op, n, r, b);
      for (int r = 0; r < c; ++r) {
        const auto& out = b.out[r];
        REQUIRE(out.size() == (op == CommOp::sendrecv || op == CommOp::reduce_scatter ? n : c * n));
        for (std::size_t i = 0; i < out.size() / sizeof(float); ++i) {
          const std::size_t j = i / count, k = i % count;  // chunk j, element k of it
          float want = 0;
          switch (op) {
            case CommOp::sendrecv:
              want = input_value((r - 1 + c) % c, i);
              break;
            case CommOp::all_gather:
              want = input_value(static_cast<int>(j), k);
              break;
            case CommOp::all_to_all:
              want = input_value(static_cast<int>(j), r * count + k);
              break;
            case CommOp::reduce_scatter:
              for (int p = 0; p < c; ++p) want += input_value(p, r * count + i);
              break;
          }
          CHECK(at(out, i) == want);
        }
      }
    }
  }
}
