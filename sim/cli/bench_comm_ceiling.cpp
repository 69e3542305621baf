#include "sim/cli/bench_comm_ceiling.hpp"

#include <algorithm>
#include <barrier>
#include <chrono>
#include <cstring>
#include <thread>

#include "sim/comm/fold.hpp"

namespace cpsim::cli {

namespace {
using Clock = std::chrono::steady_clock;
constexpr int kRuns = 3;
}  // namespace

BareBuffers bare_buffers(CommOp op, std::size_t n, int ranks) {
  const std::size_t cn = static_cast<std::size_t>(ranks) * n;
  const bool one_in = op == CommOp::sendrecv || op == CommOp::all_gather;
  const bool one_out = op == CommOp::sendrecv || op == CommOp::reduce_scatter;
  BareBuffers b;
  b.in.assign(ranks, std::vector<std::byte>(one_in ? n : cn, std::byte{0}));  // zero floats: the adds stay finite
  b.out.assign(ranks, std::vector<std::byte>(one_out ? n : cn, std::byte{0}));
  return b;
}

void bare_call(CommOp op, std::size_t n, int r, BareBuffers& b) {
  const int c = static_cast<int>(b.in.size());
  std::byte* o = b.out[r].data();
  auto input = [&](int j) { return b.in[j % c].data(); };  // rank j's input, j taken mod C
  switch (op) {
    case CommOp::sendrecv:  // out_r = in_{r-1}
      std::memcpy(o, input(r - 1 + c), n);
      return;
    case CommOp::all_gather:  // out_r[j] = in_j
      for (int j = 0; j < c; ++j) std::memcpy(o + j * n, input(j), n);
      return;
    case CommOp::all_to_all:  // out_r[j] = in_j[r]
      for (int j = 0; j < c; ++j) std::memcpy(o + j * n, input(j) + r * n, n);
      return;
    case CommOp::reduce_scatter: {  // acc = in_{r+1}[r]; acc = acc + in_{r+k}[r], k = 2..C (own last)
      std::memcpy(o, input(r + 1) + r * n, n);
      const Fold add{o, DType::f32, ReduceOp::sum, true};
      for (int k = 2; k <= c; ++k) land(o, input(r + k) + r * n, 0, n, &add);
      return;
    }
  }
}

double bare_call_us(CommOp op, std::size_t n, int ranks, int iters) {
  BareBuffers b = bare_buffers(op, n, ranks);
  double best = 1e300;
  for (int run = 0; run < kRuns; ++run) {
    std::barrier meet(ranks);
    double us = 0;
    std::vector<std::thread> pool;
    for (int r = 0; r < ranks; ++r) {
      pool.emplace_back([&, r] {
        bare_call(op, n, r, b);  // warm-up: pages touched, caches as in a steady run
        meet.arrive_and_wait();
        const auto t0 = Clock::now();
        for (int i = 0; i < iters; ++i) {
          bare_call(op, n, r, b);
          meet.arrive_and_wait();  // a call ends when every rank's share has ended
        }
        if (r == 0) us = std::chrono::duration<double, std::micro>(Clock::now() - t0).count() / iters;
      });
    }
    for (auto& t : pool) t.join();
    best = std::min(best, us);
  }
  return best;
}

}  // namespace cpsim::cli
