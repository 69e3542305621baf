// `cpsim bench comm`: nccl-tests-style bandwidth tables for ring sendrecv, all_gather, reduce_scatter and
// all_to_all, on one backend or several side by side, with the busbw ratios between them.
//
//   size   nccl-tests' meaning: sendrecv bytes per rank; all_gather the gathered output; reduce_scatter the input
//          of each rank; all_to_all each rank's buffer. Each rank's chunk (one message, per peer) is size / C, except
//          for sendrecv (size).
//   time   the slowest rank's mean time per call, over calls made back to back after a barrier (about 20 ms of
//          them, judged by warm-up calls' time; 3 to 1000).
//   algbw  size / time;  busbw = algbw x factor: sendrecv 1, the three collectives (C-1)/C (nccl-tests).
//   #wrong elements that differ from the call's definition in a checked call made before the timed ones.
//   ratio  one backend's busbw over another's at the same row: each listed backend over mpi (Open MPI, when listed),
//          and processes over threads (when both are listed).
//
// --backend threads,processes,mpi (under `mpirun -np C`) measures the backends one after another, same sizes, same
// run: mpi on the job's C processes, threads and processes launched by rank 0 while the job's other processes wait
// idle (run_on_rank0). --collectives ring|direct imposes one form of all_gather and reduce_scatter on threads and
// processes.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <optional>
#include <utility>
#include <vector>

#include <fmt/printf.h>

#include "sim/cli/cli.hpp"
#include "sim/comm/launcher.hpp"
#include "sim/core/bytes.hpp"
#include "sim/core/error.hpp"
#include "sim/core/host_arena.hpp"
#include "sim/core/json.hpp"
#include "sim/core/sizes.hpp"
#include "sim/os/host_memory.hpp"

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

// "1K", "64M": whole KiB and MiB as such, other sizes in bytes.
std::string human_bytes(std::size_t bytes) {
  if (bytes >= (std::size_t{1} << 20) && bytes % (std::size_t{1} << 20) == 0) return std::to_string(bytes >> 20) + "M";
  if (bytes >= 1024 && bytes % 1024 == 0) return std::to_string(bytes >> 10) + "K";
  return std::to_string(bytes);
}

// Per-rank chunk (one message) of a call of nccl-tests size `size`, in floats.
std::size_t chunk_count(Op op, std::size_t size, int c) {
  return op == Op::sendrecv ? size / 4 : size / 4 / c;
}

// Calls per timed run: about kRunUs of them by the warm-up calls' time, at least 3, at most 1000.
constexpr double kRunUs = 20000;
constexpr int kWarmUp = 5, kMostCalls = 1000;

// Input element i of rank r's message for rank p: small integers, so the float sums of reduce_scatter are exact.
float value(int r, int p, std::size_t i) {
  return static_cast<float>((r * 131 + p * 17 + i * 7) % 1021);
}

using HostFloats = std::vector<float, ArenaAllocator<float>>;  // host memory as a run's message buffers
struct Buffers {
  HostFloats send, recv;
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

// One rank's sweep: for each size a checked call, warm-up calls, then the timed calls. Writes, per size, the calls
// timed, this rank's mean microseconds per call and its wrong elements.
std::string sweep(Op op, Communicator& comm, const std::vector<std::size_t>& sizes) {
  const int r = comm.rank(), c = comm.size();
  const std::size_t most = chunk_count(op, sizes.back(), c) * (op == Op::sendrecv ? 1 : c);
  Buffers b{HostFloats(most, 0.f), HostFloats(most, 0.f)};
  ByteWriter out;
  for (std::size_t size : sizes) {
    const std::size_t n = chunk_count(op, size, c);
    fill(op, b, r, c, n);
    call(op, comm, b, n);
    const std::int64_t bad = wrong(op, b, r, c, n);
    // Warm-up calls, timed: every rank takes the slowest rank's time per call, so that all make the same calls.
    comm.barrier();
    const auto w0 = Clock::now();
    for (int i = 0; i < kWarmUp; ++i) call(op, comm, b, n);
    const double mine = std::chrono::duration<double, std::micro>(Clock::now() - w0).count() / kWarmUp;
    double slowest = mine;
    comm.all_reduce(&mine, &slowest, 1, DType::f64, ReduceOp::max);
    const int iters = static_cast<int>(std::clamp(kRunUs / std::max(slowest, 1e-3), 3.0, double(kMostCalls)));
    comm.barrier();
    const auto t0 = Clock::now();
    for (int i = 0; i < iters; ++i) call(op, comm, b, n);
    out.put(static_cast<std::int64_t>(iters));
    out.put(std::chrono::duration<double, std::micro>(Clock::now() - t0).count() / iters);
    out.put(bad);
  }
  return out.take();
}

// One backend's figures at one size: the slowest rank's time, every rank's wrong elements.
struct Cell {
  double us = 0, algbw = 0, busbw = 0;
  std::int64_t wrong = 0, calls = 0;
};

// Per size, backend b's cell; empty in the processes of an MPI job other than rank 0.
std::vector<Cell> measure(Backend b, Op op, int ranks, const std::vector<std::size_t>& sizes,
                          std::optional<CollectiveAlgorithm> form, std::size_t buffer_bytes) {
  LaunchOptions opt;
  opt.ranks = ranks;
  opt.backend = b;
  opt.collectives = form;
  opt.heap_bytes = buffer_bytes;
  const auto outcomes = launch(opt, [&](Communicator& comm) { return sweep(op, comm, sizes); });
  std::vector<ByteReader> readers;
  for (const auto& o : outcomes) readers.emplace_back(o.result);
  std::vector<Cell> cells;
  if (readers.empty()) return cells;
  for (std::size_t size : sizes) {
    Cell cell;
    for (auto& in : readers) {
      cell.calls = in.get<std::int64_t>();
      cell.us = std::max(cell.us, in.get<double>());  // a call lasts as long as its slowest rank
      cell.wrong += in.get<std::int64_t>();
    }
    cell.algbw = static_cast<double>(size) / (cell.us * 1e-6) / 1e9;
    cell.busbw = cell.algbw * bus_factor(op, ranks);
    cells.push_back(cell);
  }
  return cells;
}

// The bytes of buffers each rank holds for a sweep up to `largest`: its send and receive buffers, and
// reduce_scatter's two partial sums of one chunk (P2pCommunicator::scratch).
std::size_t rank_buffer_bytes(std::size_t largest, int c) {
  return 2 * largest + 2 * (largest / static_cast<std::size_t>(c));
}

// The memory a sweep up to `largest` holds, refused before anything is allocated, as `cpsim run` refuses
// (sim/runtime/memory_need.hpp). `limit` (--memory-limit, bytes; 0: none) replaces the memory detected
// (host_memory.hpp).
void check_sweep_memory(std::size_t largest, int ranks, std::int64_t limit) {
  const HostMemory mem = limit > 0 ? HostMemory{{limit, "--memory-limit"}, {limit, "--memory-limit"}} : host_memory();
  const MemoryLimit& bound = mem.process.bytes < mem.machine.bytes ? mem.process : mem.machine;
  const double need = static_cast<double>(rank_buffer_bytes(largest, ranks)) * ranks;
  if (need <= static_cast<double>(bound.bytes)) return;
  // The largest --maxbytes that fits: the need is linear in it.
  const auto fits = static_cast<std::size_t>(static_cast<double>(largest) * static_cast<double>(bound.bytes) / need);
  const std::string fix =
      fits >= 4 * static_cast<std::size_t>(ranks) ? "use --maxbytes " + std::to_string(fits) : "use fewer --ranks";
  require(false,
          "bench comm needs " + format_bytes(need) + " of memory (a send and a receive buffer of " +
              format_bytes(static_cast<double>(largest)) + " on each of " + std::to_string(ranks) +
              " ranks), more than the " + format_bytes(static_cast<double>(bound.bytes)) + " " +
              (bound.source == "--memory-limit" ? "that --memory-limit allows" : "available (" + bound.source + ")"),
          fix + ", or set the limit with --memory-limit BYTES");
}

std::vector<Backend> parse_backend_list(const std::string& list) {
  std::vector<Backend> out;
  std::size_t at = 0;
  for (;;) {
    const std::size_t comma = list.find(',', at);
    const Backend b = parse_backend(list.substr(at, comma == std::string::npos ? std::string::npos : comma - at));
    require(b == Backend::threads || b == Backend::processes || b == Backend::mpi,
            "bench comm measures the CPU backends only (got '" + std::string(backend_name(b)) + "')",
            "use --backend threads,processes,mpi or a part of it");
    require(std::find(out.begin(), out.end(), b) == out.end(),
            "--backend " + list + " names " + std::string(backend_name(b)) + " twice", "name each backend once");
    out.push_back(b);
    if (comma == std::string::npos) return out;
    at = comma + 1;
  }
}

// The ratios printed: (numerator, denominator) indices into the backends, each listed backend over mpi, and
// processes over threads.
std::vector<std::pair<std::size_t, std::size_t>> ratio_pairs(const std::vector<Backend>& backends) {
  auto index = [&](Backend b) -> std::optional<std::size_t> {
    const auto it = std::find(backends.begin(), backends.end(), b);
    if (it == backends.end()) return std::nullopt;
    return static_cast<std::size_t>(it - backends.begin());
  };
  std::vector<std::pair<std::size_t, std::size_t>> pairs;
  const auto mpi = index(Backend::mpi), threads = index(Backend::threads), processes = index(Backend::processes);
  if (mpi)
    for (std::size_t b = 0; b < backends.size(); ++b)
      if (b != *mpi) pairs.emplace_back(b, *mpi);
  if (threads && processes) pairs.emplace_back(*processes, *threads);
  return pairs;
}

std::string ratio_name(const std::vector<Backend>& backends, std::pair<std::size_t, std::size_t> p) {
  return std::string(backend_name(backends[p.first])) + "/" + std::string(backend_name(backends[p.second]));
}

int bench_comm(const std::vector<std::string>& args) {
  po::options_description desc("cpsim bench comm");
  std::string list = "threads", minb = "1K", maxb = "64M", collectives, memory;
  int ranks = 4, step = 4;
  desc.add_options()("backend", po::value(&list),
                     "threads | processes; or a list, side by side: threads,processes,mpi (mpi: under mpirun)")(
      "ranks", po::value(&ranks), "number of ranks C (default 4)")("minbytes", po::value(&minb), "smallest size (1K)")(
      "maxbytes", po::value(&maxb), "largest size (64M)")("stepfactor", po::value(&step), "size multiplier (4)")(
      "collectives", po::value(&collectives),
      "ring | direct: the form of all_gather and reduce_scatter on threads and processes (default: direct)")(
      "memory-limit", po::value(&memory)->value_name("BYTES"),
      "the most memory the buffers may take (K, M, G, T: powers of 1024); more is refused before anything is "
      "allocated (default: what this machine has left)")("json", "print one JSON object instead of the tables");
  po::variables_map vm;
  if (!parse("bench comm", desc, args, vm)) return 0;
  const std::vector<Backend> backends = parse_backend_list(list);
  require(ranks >= 2, "bench comm needs at least 2 ranks (got " + std::to_string(ranks) + ")", "use --ranks 2 or more");
  require(step >= 2, "--stepfactor must be at least 2", "use --stepfactor 2 or 4");
  const std::size_t lo = parse_size("minbytes", minb), hi = parse_size("maxbytes", maxb);
  require(lo >= 4 * static_cast<std::size_t>(ranks) && lo <= hi, "sizes must satisfy 4 x ranks <= minbytes <= maxbytes",
          "use e.g. --minbytes 1K --maxbytes 64M");
  const std::int64_t memory_limit = vm.count("memory-limit") ? parse_size64("memory-limit", memory) : 0;
  require(!vm.count("memory-limit") || memory_limit > 0, "--memory-limit must be at least 1 byte",
          "use --memory-limit 8G");
  std::optional<CollectiveAlgorithm> form;
  if (!collectives.empty()) {
    require(collectives == "ring" || collectives == "direct",
            "--collectives " + collectives + " is not a form of the collectives", "use --collectives ring or direct");
    form = collectives == "ring" ? CollectiveAlgorithm::ring : CollectiveAlgorithm::direct;
  }
  const bool with_mpi = std::find(backends.begin(), backends.end(), Backend::mpi) != backends.end();
  require(!with_mpi || launcher_rank() >= 0,
          "--backend " + list + " measures mpi on the processes mpirun starts, but mpirun did not start this one",
          "run `mpirun -np " + std::to_string(ranks) + " cpsim bench comm --backend " + list + " --ranks " +
              std::to_string(ranks) + "`");
  std::vector<std::size_t> sizes;
  for (std::size_t s = lo;; s *= static_cast<std::size_t>(step)) {
    sizes.push_back(s);
    if (s > hi / static_cast<std::size_t>(step)) break;  // the next size would pass --maxbytes (or wrap)
  }
  if (sizes.back() > hi) sizes.pop_back();
  check_sweep_memory(sizes.back(), ranks, memory_limit);

  // cells[op][backend][size]: mpi on every process of the job, the others by rank 0 alone.
  const std::size_t buffers = rank_buffer_bytes(sizes.back(), ranks);
  std::vector<std::vector<std::vector<Cell>>> cells(std::size(kOps), std::vector<std::vector<Cell>>(backends.size()));
  for (std::size_t k = 0; k < std::size(kOps); ++k)
    for (std::size_t b = 0; b < backends.size(); ++b) {
      auto run_one = [&] { cells[k][b] = measure(backends[b], kOps[k], ranks, sizes, form, buffers); };
      if (backends[b] == Backend::mpi)
        run_one();
      else
        run_on_rank0(run_one);
    }
  if (launcher_rank() > 0) return 0;  // rank 0 reports
  const auto pairs = ratio_pairs(backends);
  auto ratio = [&](std::size_t k, std::size_t i, std::pair<std::size_t, std::size_t> p) {
    return cells[k][p.first][i].busbw / cells[k][p.second][i].busbw;
  };

  if (vm.count("json")) {
    Json names = Json::array();
    for (Backend b : backends) names.push_back(std::string(backend_name(b)));
    Json ops = Json::array();
    for (std::size_t k = 0; k < std::size(kOps); ++k) {
      Json rows = Json::array();
      for (std::size_t i = 0; i < sizes.size(); ++i) {
        Json row{{"size", static_cast<std::int64_t>(sizes[i])},
                 {"count", static_cast<std::int64_t>(sizes[i] / 4)},
                 {"type", "float"},
                 {"chunk_bytes", static_cast<std::int64_t>(chunk_count(kOps[k], sizes[i], ranks) * 4)}};
        for (std::size_t b = 0; b < backends.size(); ++b) {
          const Cell& c = cells[k][b][i];
          row[std::string(backend_name(backends[b]))] = {
              {"time_us", c.us}, {"algbw_gbps", c.algbw}, {"busbw_gbps", c.busbw}, {"wrong", c.wrong}, {"calls", c.calls}};
        }
        Json ratios = Json::object();
        for (const auto& p : pairs) ratios[ratio_name(backends, p)] = ratio(k, i, p);
        row["busbw_ratios"] = std::move(ratios);
        rows.push_back(std::move(row));
      }
      ops.push_back({{"op", op_name(kOps[k])}, {"bus_factor", bus_factor(kOps[k], ranks)}, {"rows", std::move(rows)}});
    }
    const Json j{{"backends", std::move(names)},
                 {"ranks", ranks},
                 {"collectives", form ? algorithm_name(*form) : "backend"},
                 {"ops", std::move(ops)}};
    std::cout << json_text(j) << "\n";
    return 0;
  }

  fmt::printf("# cpsim bench comm: %s, %d ranks; sizes %s..%s x%d\n", list.c_str(), ranks,
              human_bytes(sizes.front()).c_str(), human_bytes(sizes.back()).c_str(), step);
  if (with_mpi)
    fmt::printf("# mpi: the %d processes of this mpirun job; threads, processes: launched by rank 0 while the job's "
                "other processes wait idle\n",
                ranks);
  fmt::printf("# time: the slowest rank's mean per call; algbw = size / time, busbw = algbw x factor (nccl-tests), "
              "GB/s\n");
  if (!pairs.empty()) fmt::printf("# ratio: one backend's busbw over another's, same row\n");
  if (form) fmt::printf("# collectives: %s on threads and processes (imposed)\n", algorithm_name(*form));
  for (std::size_t k = 0; k < std::size(kOps); ++k) {
    fmt::printf("#\n# %s (busbw factor %.3g)\n#%29s", op_name(kOps[k]), bus_factor(kOps[k], ranks), "");
    for (Backend b : backends) fmt::printf(" %32s", std::string(backend_name(b)).c_str());
    fmt::printf("\n# %10s %12s %6s", "size (B)", "count", "type");
    for (std::size_t b = 0; b < backends.size(); ++b) fmt::printf(" %10s %10s %10s", "time (us)", "algbw", "busbw");
    for (const auto& p : pairs) fmt::printf(" %18s", ratio_name(backends, p).c_str());
    fmt::printf(" %8s\n", "#wrong");
    for (std::size_t i = 0; i < sizes.size(); ++i) {
      fmt::printf("  %10zu %12zu %6s", sizes[i], sizes[i] / 4, "float");
      std::int64_t bad = 0;
      for (std::size_t b = 0; b < backends.size(); ++b) {
        const Cell& c = cells[k][b][i];
        fmt::printf(" %10.2f %10.2f %10.2f", c.us, c.algbw, c.busbw);
        bad += c.wrong;
      }
      for (const auto& p : pairs) fmt::printf(" %18.2f", ratio(k, i, p));
      fmt::printf(" %8lld\n", static_cast<long long>(bad));
    }
  }
  return 0;
}

}  // namespace

CPSIM_BENCH(comm, "communicator bandwidth tables (nccl-tests style), backends side by side", bench_comm);

}  // namespace cpsim::cli
