// `cpsim bench comm`: nccl-tests-style bandwidth tables for ring sendrecv, all_gather, reduce_scatter and
// all_to_all on one backend, beside single-thread memcpy measured in the same run (the limit to compare with).
//
//   size   nccl-tests' meaning: sendrecv bytes per rank; all_gather the gathered output; reduce_scatter the input
//          of each rank; all_to_all each rank's buffer. Each rank's chunk (one message) is size / C, except for
//          sendrecv (size).
//   time   the slowest rank's mean time per call, calls back to back after a barrier; best of 3 such runs
//          (the machine may be shared: the best run is the one least disturbed).
//   algbw  size / time;  busbw = algbw x factor: sendrecv 1, the three collectives (C-1)/C (nccl-tests).
//   #wrong elements that differ from the call's definition in a checked call made before the timed ones.
//   memcpy single-thread memcpy of one chunk, same run, cycling through as much memory as the call touches on
//          all ranks together (their send and receive buffers), so caches help it as much as they help the
//          ranks; bus/mem = busbw / memcpy.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <vector>

#include "sim/cli/cli.hpp"
#include "sim/comm/launcher.hpp"
#include "sim/core/bytes.hpp"
#include "sim/core/json.hpp"

namespace cpsim::cli {
namespace {

using Clock = std::chrono::steady_clock;
enum class Op { sendrecv, all_gather, reduce_scatter, all_to_all };
const Op kOps[] = {Op::sendrecv, Op::all_gather, Op::reduce_scatter, Op::all_to_all};

const char* op_name(Op op) {
  switch (op) {
    case Op::sendrecv:
      return "sendrecv";
    case Op::all_gather:
      return "all_gather";
    case Op::reduce_scatter:
      return "reduce_scatter";
    case Op::all_to_all:
      return "all_to_all";
  }
  return "?";
}

double bus_factor(Op op, int c) {
  return op == Op::sendrecv ? 1.0 : (c - 1.0) / c;
}

// Per-rank chunk (one message) of a call of nccl-tests size `size`, in floats.
std::size_t chunk_count(Op op, std::size_t size, int c) {
  return op == Op::sendrecv ? size / 4 : size / 4 / c;
}

// Calls per timed run: enough to take ~20 ms at 5 GB/s, at least 3 and at most 1000.
int iterations(std::size_t size) {
  return static_cast<int>(std::clamp<std::size_t>((std::size_t{100} << 20) / std::max<std::size_t>(size, 1), 3, 1000));
}
constexpr int kRuns = 3;

// Input element i of rank r's message for rank p: small integers, so the float sums of reduce_scatter are exact.
float value(int r, int p, std::size_t i) {
  return static_cast<float>((r * 131 + p * 17 + i * 7) % 1021);
}

struct Buffers {
  std::vector<float> send, recv;
};

void fill(Op op, Buffers& b, int r, int c, std::size_t n) {
  const int next = (r + 1) % c;
  for (std::size_t i = 0; i < (op == Op::sendrecv || op == Op::all_gather ? n : n * c); ++i) {
    const std::size_t p = op == Op::sendrecv ? next : i / n;
    b.send[i] = op == Op::all_gather ? value(r, 0, i) : value(r, static_cast<int>(p), i % n);
  }
}

void call(Op op, Communicator& comm, Buffers& b, std::size_t n) {
  const int r = comm.rank(), c = comm.size();
  switch (op) {
    case Op::sendrecv:
      return comm.sendrecv(b.send.data(), n * 4, (r + 1) % c, b.recv.data(), n * 4, (r - 1 + c) % c);
    case Op::all_gather:
      return comm.all_gather(b.send.data(), b.recv.data(), n * 4);
    case Op::reduce_scatter:
      return comm.reduce_scatter(b.send.data(), b.recv.data(), n, DType::f32);
    case Op::all_to_all:
      return comm.all_to_all(b.send.data(), b.recv.data(), n * 4);
  }
}

// Elements of the output that differ from the definition of the call.
std::int64_t wrong(Op op, const Buffers& b, int r, int c, std::size_t n) {
  std::int64_t bad = 0;
  const int prev = (r - 1 + c) % c;
  for (std::size_t i = 0; i < (op == Op::sendrecv || op == Op::reduce_scatter ? n : n * c); ++i) {
    float want = 0;
    switch (op) {
      case Op::sendrecv:
        want = value(prev, r, i);
        break;
      case Op::all_gather:
        want = value(static_cast<int>(i / n), 0, i % n);
        break;
      case Op::all_to_all:
        want = value(static_cast<int>(i / n), r, i % n);
        break;
      case Op::reduce_scatter:
        for (int p = 0; p < c; ++p) want += value(p, r, i);
        break;
    }
    bad += b.recv[i] != want;
  }
  return bad;
}

// One rank's sweep: for each size a checked call, warm-up calls, then the timed calls. Returns, per size, the
// mean microseconds per call and the wrong count.
std::string sweep(Op op, Communicator& comm, const std::vector<std::size_t>& sizes) {
  const int r = comm.rank(), c = comm.size();
  const std::size_t most = chunk_count(op, sizes.back(), c) * (op == Op::sendrecv ? 1 : c);
  Buffers b{std::vector<float>(most, 0.f), std::vector<float>(most, 0.f)};
  ByteWriter out;
  for (std::size_t size : sizes) {
    const std::size_t n = chunk_count(op, size, c);
    fill(op, b, r, c, n);
    call(op, comm, b, n);
    const std::int64_t bad = wrong(op, b, r, c, n);
    const int iters = iterations(size);
    for (int i = 0; i < std::min(iters, 5); ++i) call(op, comm, b, n);
    // Best of kRuns: each run's time is the slowest rank's, so every rank reports every run.
    for (int run = 0; run < kRuns; ++run) {
      comm.barrier();
      const auto t0 = Clock::now();
      for (int i = 0; i < iters; ++i) call(op, comm, b, n);
      out.put(std::chrono::duration<double, std::micro>(Clock::now() - t0).count() / iters);
    }
    out.put(bad);
  }
  return out.take();
}

// Bytes of send and receive buffers a call with chunks of n bytes touches on all ranks together.
std::size_t footprint(Op op, std::size_t n, int c) {
  const std::size_t cn = static_cast<std::size_t>(c) * n;
  switch (op) {
    case Op::sendrecv:
      return c * 2 * n;
    case Op::all_gather:
      return c * (n + cn);
    case Op::reduce_scatter:
      return c * (cn + 3 * n);  // input, output, two partial buffers
    case Op::all_to_all:
      return c * 2 * cn;
  }
  return 0;
}

// Single-thread memcpy GB/s of `bytes`-byte copies, cycling through buffers of `working_set` bytes in all.
double memcpy_gbps(std::size_t bytes, std::size_t working_set) {
  bytes = std::max<std::size_t>(bytes, 1);
  const std::size_t pieces =
      std::clamp<std::size_t>(working_set / (2 * bytes), 1, (std::size_t{512} << 20) / bytes + 1);
  std::vector<char> a(pieces * bytes, 1), b(pieces * bytes, 0);
  const int iters = iterations(bytes) * 4;
  for (std::size_t p = 0; p < pieces; ++p) std::memcpy(b.data() + p * bytes, a.data() + p * bytes, bytes);
  double s = 1e300;
  for (int run = 0; run < kRuns; ++run) {
    const auto t0 = Clock::now();
    for (int i = 0; i < iters; ++i) {
      const std::size_t at = (i % pieces) * bytes;
      a[at] = static_cast<char>(i);  // the copies cannot be merged away
      std::memcpy(b.data() + at, a.data() + at, bytes);
    }
    s = std::min(s, std::chrono::duration<double>(Clock::now() - t0).count() / iters);
  }
  volatile char sink = b[bytes / 2];
  (void)sink;
  return bytes / s / 1e9;
}

struct Row {
  std::size_t size = 0, chunk_bytes = 0;
  double us = 0, algbw = 0, busbw = 0, memcpy = 0;
  std::int64_t wrong = 0;
};

std::string human(std::size_t bytes) {
  char s[32];
  if (bytes >= (1u << 20) && bytes % (1u << 20) == 0)
    std::snprintf(s, sizeof s, "%zuM", bytes >> 20);
  else if (bytes >= 1024 && bytes % 1024 == 0)
    std::snprintf(s, sizeof s, "%zuK", bytes >> 10);
  else
    std::snprintf(s, sizeof s, "%zu", bytes);
  return s;
}

int bench_comm(const std::vector<std::string>& args) {
  po::options_description desc("cpsim bench comm");
  std::string backend = "threads", minb = "1K", maxb = "64M";
  int ranks = 4, step = 4;
  desc.add_options()("backend", po::value(&backend), "threads | processes")(
      "ranks", po::value(&ranks), "number of ranks C (default 4)")("minbytes", po::value(&minb), "smallest size (1K)")(
      "maxbytes", po::value(&maxb), "largest size (64M)")("stepfactor", po::value(&step), "size multiplier (4)")(
      "json", "print one JSON object instead of the tables");
  po::variables_map vm;
  if (!parse("bench comm", desc, args, vm)) return 0;
  const Backend b = parse_backend(backend);
  require(b == Backend::threads || b == Backend::processes,
          "bench comm measures the CPU backends only (got '" + backend + "')", "use --backend threads or processes");
  require(ranks >= 2, "bench comm needs at least 2 ranks (got " + std::to_string(ranks) + ")", "use --ranks 2 or more");
  require(step >= 2, "--stepfactor must be at least 2", "use --stepfactor 2 or 4");
  const std::size_t lo = parse_size("minbytes", minb), hi = parse_size("maxbytes", maxb);
  require(lo >= 4 * static_cast<std::size_t>(ranks) && lo <= hi, "sizes must satisfy 4 x ranks <= minbytes <= maxbytes",
          "use e.g. --minbytes 1K --maxbytes 64M");
  std::vector<std::size_t> sizes;
  for (std::size_t s = lo; s <= hi; s *= step) sizes.push_back(s);

  LaunchOptions opt;
  opt.ranks = ranks;
  opt.backend = b;
  std::vector<std::vector<Row>> table;
  for (Op op : kOps) {
    auto outcomes = launch(opt, [&](Communicator& comm) { return sweep(op, comm, sizes); });
    std::vector<Row> rows(sizes.size());
    std::vector<ByteReader> readers;
    for (const auto& o : outcomes) readers.emplace_back(o.result);
    for (auto& row : rows) {
      row.us = 1e300;
      std::vector<double> slowest(kRuns, 0);
      for (auto& in : readers) {
        for (double& t : slowest) t = std::max(t, in.get<double>());  // a run lasts as long as its slowest rank
        row.wrong += in.get<std::int64_t>();
      }
      for (double t : slowest) row.us = std::min(row.us, t);
    }
    for (std::size_t i = 0; i < sizes.size(); ++i) {
      Row& row = rows[i];
      row.size = sizes[i];
      row.chunk_bytes = chunk_count(op, sizes[i], ranks) * 4;
      row.algbw = static_cast<double>(row.size) / (row.us * 1e-6) / 1e9;
      row.busbw = row.algbw * bus_factor(op, ranks);
      row.memcpy = memcpy_gbps(row.chunk_bytes, footprint(op, row.chunk_bytes, ranks));
    }
    table.push_back(std::move(rows));
  }

  // Goals: busbw >= 0.5 x memcpy wherever each rank's chunk is >= 1 MiB; sendrecv latency at 1 KiB.
  const double latency_goal_us = b == Backend::threads ? 10 : 20;
  double worst_ratio = 1e300, latency_1k = -1;
  for (std::size_t k = 0; k < table.size(); ++k)
    for (const Row& row : table[k]) {
      if (row.chunk_bytes >= (1u << 20)) worst_ratio = std::min(worst_ratio, row.busbw / row.memcpy);
      if (kOps[k] == Op::sendrecv && row.size == 1024) latency_1k = row.us;
    }
  const bool have_ratio = worst_ratio < 1e300;

  if (vm.count("json")) {
    JsonWriter j;
    j.begin_object().key("backend").value(backend).key("ranks").value(ranks).key("ops").begin_array();
    for (std::size_t k = 0; k < table.size(); ++k) {
      j.begin_object().key("op").value(op_name(kOps[k])).key("bus_factor").value(bus_factor(kOps[k], ranks));
      j.key("rows").begin_array();
      for (const Row& row : table[k]) {
        j.begin_object().key("size").value(static_cast<std::int64_t>(row.size));
        j.key("count").value(static_cast<std::int64_t>(row.size / 4)).key("type").value("float");
        j.key("chunk_bytes").value(static_cast<std::int64_t>(row.chunk_bytes)).key("time_us").value(row.us);
        j.key("algbw_gbps").value(row.algbw).key("busbw_gbps").value(row.busbw).key("wrong").value(row.wrong);
        j.key("memcpy_gbps").value(row.memcpy).key("busbw_over_memcpy").value(row.busbw / row.memcpy).end_object();
      }
      j.end_array().end_object();
    }
    j.end_array().key("goals").begin_object();
    j.key("busbw_over_memcpy_min_at_1MiB_chunks");
    if (have_ratio)
      j.value(worst_ratio);
    else
      j.null();
    j.key("busbw_over_memcpy_goal").value(0.5).key("sendrecv_1KiB_us");
    if (latency_1k >= 0)
      j.value(latency_1k);
    else
      j.null();
    j.key("sendrecv_1KiB_goal_us").value(latency_goal_us).end_object().end_object();
    std::cout << j.str() << "\n";
    return 0;
  }

  std::printf("# cpsim bench comm: backend %s, %d ranks; sizes %s..%s x%d; memcpy is single-thread, same run\n",
              backend.c_str(), ranks, human(lo).c_str(), human(hi).c_str(), step);
  for (std::size_t k = 0; k < table.size(); ++k) {
    std::printf("#\n# %s (busbw factor %.3g)\n", op_name(kOps[k]), bus_factor(kOps[k], ranks));
    std::printf("# %10s %12s %6s %10s %10s %10s %8s %10s %8s\n", "size", "count", "type", "time", "algbw", "busbw",
                "#wrong", "memcpy", "bus/mem");
    std::printf("# %10s %12s %6s %10s %10s %10s %8s %10s %8s\n", "(B)", "(elements)", "", "(us)", "(GB/s)", "(GB/s)",
                "", "(GB/s)", "");
    for (const Row& row : table[k]) {
      std::printf("  %10zu %12zu %6s %10.2f %10.2f %10.2f %8lld %10.2f %8.2f\n", row.size, row.size / 4, "float",
                  row.us, row.algbw, row.busbw, static_cast<long long>(row.wrong), row.memcpy, row.busbw / row.memcpy);
    }
  }
  std::printf("#\n# goal: busbw >= 0.50 x memcpy where each rank's chunk >= 1 MiB: ");
  if (have_ratio)
    std::printf("lowest %.2f (%s)\n", worst_ratio, worst_ratio >= 0.5 ? "met" : "not met");
  else
    std::printf("no such size in this sweep\n");
  std::printf("# goal: ring sendrecv at 1 KiB under %.0f us: ", latency_goal_us);
  if (latency_1k >= 0)
    std::printf("%.2f us (%s)\n", latency_1k, latency_1k < latency_goal_us ? "met" : "not met");
  else
    std::printf("1K is not in this sweep\n");
  return 0;
}

}  // namespace

CPSIM_BENCH(comm, "communicator bandwidth tables (nccl-tests style) beside same-run memcpy", bench_comm);

}  // namespace cpsim::cli
