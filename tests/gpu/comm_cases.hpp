// Every communicator call on device buffers, checked value by value on every rank: shared by the cuda-threads and
// nccl tests. A rank that sees a wrong value throws, and the launch fails naming it.
#pragma once
#include <string>
#include <vector>

#include "gpu_support.hpp"

namespace cpsim::test {

inline void expect_values(const std::vector<double>& got, const std::vector<double>& want, const std::string& what) {
  if (got != want) {
    std::string g, w;
    for (double x : got) g += std::to_string(x) + " ";
    for (double x : want) w += std::to_string(x) + " ";
    throw Error(what + ": got [" + g + "], expected [" + w + "]");
  }
}

// Runs on every rank; returns "ok".
inline std::string every_call(Communicator& comm) {
  auto dev = make_cuda_device(comm.recorder());
  const int C = comm.size(), r = comm.rank();
  auto buffer = [&](std::int64_t n, std::vector<double> values = {}) {
    const Buffer b = dev->alloc({1, n, 1, 1}, DType::f32, Layout::bsnd, "x");
    if (!values.empty()) upload_values(*dev, b, values);
    return b;
  };
  auto values = [&](const Buffer& b) { return download_values(*dev, b); };

  {  // all_gather: recv[p] = rank p's {p, p + 0.5, p + 0.25}
    const Buffer s = buffer(3, {double(r), r + 0.5, r + 0.25}), g = buffer(3 * C);
    comm.all_gather(s.data(), g.data(), 12);
    std::vector<double> want;
    for (int p = 0; p < C; ++p) want.insert(want.end(), {double(p), p + 0.5, p + 0.25});
    expect_values(values(g), want, "all_gather");
  }
  {  // reduce_scatter: send[p][j] = 10 r + p + j  ->  recv[j] = sum over ranks q of (10 q + r + j)
    std::vector<double> send;
    for (int p = 0; p < C; ++p) send.insert(send.end(), {10.0 * r + p, 10.0 * r + p + 1});
    const Buffer s = buffer(2 * C, send), d = buffer(2);
    comm.reduce_scatter(s.data(), d.data(), 2, DType::f32);
    const double tens = 10.0 * C * (C - 1) / 2;
    expect_values(values(d), {tens + C * r, tens + C * (r + 1.0)}, "reduce_scatter");
  }
  {  // all_to_all: send[p] = 100 r + p  ->  recv[p] = 100 p + r
    std::vector<double> send, want;
    for (int p = 0; p < C; ++p) {
      send.push_back(100.0 * r + p);
      want.push_back(100.0 * p + r);
    }
    const Buffer s = buffer(C, send), d = buffer(C);
    comm.all_to_all(s.data(), d.data(), 4);
    expect_values(values(d), want, "all_to_all");
  }
  {  // all_reduce in place: sum and max
    const Buffer x = buffer(2, {double(r), 1.0});
    comm.all_reduce(x.data(), x.data(), 2, DType::f32, ReduceOp::sum);
    expect_values(values(x), {C * (C - 1) / 2.0, double(C)}, "all_reduce sum");
    const Buffer y = buffer(1, {double(r)});
    comm.all_reduce(y.data(), y.data(), 1, DType::f32, ReduceOp::max);
    expect_values(values(y), {double(C - 1)}, "all_reduce max");
  }
  {  // a ring step: isend to next, irecv from previous, then wait. The send buffer is written by a kernel queued
     // just before the isend, and the received values are read by a kernel queued just after the wait: both must
     // be ordered against the transfer by the streams alone.
    const int next = (r + 1) % C, prev = (r - 1 + C) % C;
    const Buffer s = buffer(4), d = buffer(4), e = buffer(4);
    dev->fill(View(s), double(r));
    Request send = comm.isend(s.data(), 16, next, 5);
    Request recv = comm.irecv(d.data(), 16, prev, 5);
    send.wait();
    recv.wait();
    dev->copy(View(e), View(d));
    expect_values(values(e), std::vector<double>(4, double(prev)), "isend/irecv ring");
    const Buffer a = buffer(1, {double(r)}), f = buffer(1);
    comm.sendrecv(a.data(), 4, next, f.data(), 4, prev, 6);
    expect_values(values(f), {double(prev)}, "sendrecv");
  }
  comm.barrier();
  {  // split by parity, ordered by descending rank: the group's all_gather lists its members that way
    auto sub = comm.split(r % 2, -r);
    if (!sub) throw Error("split returned no communicator for a non-negative color");
    const Buffer s = buffer(1, {double(r)}), g = buffer(sub->size());
    sub->all_gather(s.data(), g.data(), 4);
    std::vector<double> want;
    for (int q = C - 1; q >= 0; --q)
      if (q % 2 == r % 2) want.push_back(q);
    expect_values(values(g), want, "all_gather in a split group");
    if (sub->world_ranks()[static_cast<std::size_t>(sub->rank())] != r) throw Error("split: wrong world rank");
  }
  return "ok";
}

}  // namespace cpsim::test
