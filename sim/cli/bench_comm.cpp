// `cpsim bench comm`: nccl-tests-style bandwidth tables for ring sendrecv, all_gather, reduce_scatter and
// all_to_all on one backend, beside single-thread memcpy and streaming copies measured in the same run.
//
//   size   nccl-tests' meaning: sendrecv bytes per rank; all_gather the gathered output; reduce_scatter the input
//          of each rank; all_to_all each rank's buffer. Each rank's chunk (one message, per peer) is size / C, except
//          for sendrecv (size).
//   time   the slowest rank's mean time per call, calls back to back after a barrier (about 20 ms of them, by the
//          size and by the warm-up calls' time); best of 3 such runs (the machine may be shared: the best run is the
//          one least disturbed), and with --rounds N the median of N such sweeps, the backends taking turns
//          operation by operation (a launch's speed varies more than its runs': see median_of_rounds below).
//   algbw  size / time;  busbw = algbw x factor: sendrecv 1, the three collectives (C-1)/C (nccl-tests).
//   #wrong elements that differ from the call's definition in a checked call made before the timed ones.
//   ranks  bound to CPUs, rank r on the (r mod n)-th usable CPU, on every backend (--bind cores, the default;
//          --bind none: the scheduler places them): see sim/comm/rank_binding.hpp.
//   memcpy single-thread memcpy of one chunk between two warm, 64-byte aligned buffers of the chunk's size, the
//          best of 7 runs (a reference for the machine's copy speed; bus/mem = busbw / memcpy).
//   stream the same copy with the transports' streaming stores (sim/comm/copy.hpp: stream_copy), which they use
//          for the bytes a call lands in a rank from stream_threshold(C) on: where it beats memcpy the machine's
//          memory, not its cache, sets the pace.
// The ranks' buffers are host memory from the process's arena (sim/core/host_arena.hpp): on the processes backend
// the shared heap, sized here to the buffers, so messages are copied once, as a run's are.
//
// --backend threads,processes,mpi (under `mpirun -np C`) puts the backends side by side in one table per
// operation, same sizes, same run, and evaluates the goals (bench_comm_goals.hpp): see side_by_side() below and
// docs/mpi.md. The single-backend tables evaluate the latency goal only.
// --collectives ring|direct imposes one form of all_gather and reduce_scatter on threads and processes (by
// default each backend runs its own: threads direct, processes direct for small chunks and the ring for large
// ones; docs/backends-threads-processes.md).
#include <algorithm>
#include <atomic>
#include <barrier>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <numeric>
#include <optional>
#include <thread>
#include <vector>

#include "sim/cli/bench_comm_goals.hpp"
#include "sim/cli/cli.hpp"
#include "sim/comm/copy.hpp"
#include "sim/comm/launcher.hpp"
#include "sim/comm/rank_binding.hpp"
#include "sim/core/bytes.hpp"
#include "sim/core/error.hpp"
#include "sim/core/host_arena.hpp"
#include "sim/core/json.hpp"
#include "sim/core/sizes.hpp"
#include "sim/os/host_memory.hpp"

namespace cpsim::cli {
namespace {

using Clock = std::chrono::steady_clock;
using Op = CommOp;  // bench_comm_goals.hpp
const Op kOps[] = {Op::sendrecv, Op::all_gather, Op::reduce_scatter, Op::all_to_all};

const char* op_name(Op op) {
  return comm_op_name(op);
}

double bus_factor(Op op, int c) {
  return op == Op::sendrecv ? 1.0 : (c - 1.0) / c;
}

// GB/s of a call of nccl-tests size `size` taking `us` microseconds: algbw = size / time, busbw = algbw x factor.
double algbw_gbps(std::size_t size, double us) {
  return static_cast<double>(size) / (us * 1e-6) / 1e9;
}
double busbw_gbps(Op op, std::size_t size, double us, int c) {
  return algbw_gbps(size, us) * bus_factor(op, c);
}

// Per-rank chunk (one message) of a call of nccl-tests size `size`, in floats.
std::size_t chunk_count(Op op, std::size_t size, int c) {
  return op == Op::sendrecv ? size / 4 : size / 4 / c;
}

// Calls per timed run: enough to take ~20 ms at 5 GB/s, at least 3 and at most 1000; and no more than the warm-up
// calls say fit in kRunUs (sweep below), so that a machine busy with other work, where each call can cost a
// scheduler slice, does not make the sweep minutes long.
int iterations(std::size_t size) {
  return static_cast<int>(std::clamp<std::size_t>((std::size_t{100} << 20) / std::max<std::size_t>(size, 1), 3, 1000));
}
constexpr double kRunUs = 20000;
constexpr int kRuns = 3;

// Input element i of rank r's message for rank p: small integers, so the float sums of reduce_scatter are exact.
float value(int r, int p, std::size_t i) {
  return static_cast<float>((r * 131 + p * 17 + i * 7) % 1021);
}

using HostFloats = std::vector<float, ArenaAllocator<float>>;  // in the shared heap on processes
// The copy references' buffers: 64-byte aligned as the ranks' are (host_arena.hpp), so that no two of them lie a
// few bytes apart modulo 4 KiB, where glibc's memcpy stalls on some machines (sim/comm/copy.cpp).
using AlignedBytes = std::vector<char, ArenaAllocator<char>>;
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

// One rank's sweep: for each size a checked call, warm-up calls, then the timed calls. Returns, per size, the
// mean microseconds per call and the wrong count.
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
    const int warm = std::min(iterations(size), 5);
    // The warm-up starts together: the calls above also waited for ranks still setting up (a peer backing its
    // arena, first touching its buffers), and a warm-up that slow would leave the row a few calls per run (down to 3).
    comm.barrier();
    const auto w0 = Clock::now();
    for (int i = 0; i < warm; ++i) call(op, comm, b, n);
    const double mine = std::chrono::duration<double, std::micro>(Clock::now() - w0).count() / warm;
    double slowest = mine;
    comm.all_reduce(&mine, &slowest, 1, DType::f64, ReduceOp::max);
    const int iters = static_cast<int>(std::clamp(kRunUs / std::max(slowest, 1e-3), 3.0, double(iterations(size))));
    out.put(static_cast<std::int64_t>(iters));
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

// One size's figures from every rank's sweep output, read in order: the best of the kRuns runs, each as long as
// its slowest rank; the wrong elements of all ranks; the calls each run made (the same on every rank).
struct SizeFigures {
  double us = 0;
  std::int64_t wrong = 0, calls = 0;
  std::vector<double> round_us;  // with --rounds, every round's `us`, in round order (median_of_rounds)
};
SizeFigures read_size(std::vector<ByteReader>& readers) {
  SizeFigures f;
  std::vector<double> slowest(kRuns, 0);
  for (auto& in : readers) {
    f.calls = in.get<std::int64_t>();
    for (double& t : slowest) t = std::max(t, in.get<double>());  // a run lasts as long as its slowest rank
    f.wrong += in.get<std::int64_t>();
  }
  f.us = *std::min_element(slowest.begin(), slowest.end());
  return f;
}

// --rounds: every round measures each cell again, seconds later, and the cell's figure is the median round's
// (by time; of an even number, the slower of the middle two), with that run's calls; the wrong elements of every
// round count. Not the best round: on a 2-core virtual machine large messages move much faster now and then, for
// a round or several, on either backend, and a best of rounds is decided by whichever backend drew such a round.
// Run against itself, one binary read 0.69 x itself at a row so (docs/performance/comm.md, "Median of rounds"). A
// disturbance (the host's other work, a vCPU descheduled) that outlasts a cell's three back-to-back runs is likewise
// one round of several. Each round runs every backend, in turn; none gets more tries. The goals compare backends
// round by round (bench_comm_goals.hpp: row_ratio), from each cell's round_us.
template <class Figures>
std::vector<Figures> median_of_rounds(const std::vector<std::vector<Figures>>& rounds) {
  std::vector<Figures> out;
  if (rounds.empty()) return out;
  for (std::size_t i = 0; i < rounds.front().size(); ++i) {
    std::vector<const Figures*> by_time;
    std::int64_t wrong = 0;
    for (const auto& round : rounds) {
      by_time.push_back(&round[i]);
      wrong += round[i].wrong;
    }
    std::sort(by_time.begin(), by_time.end(), [](const Figures* a, const Figures* b) { return a->us < b->us; });
    Figures median = *by_time[by_time.size() / 2];
    median.wrong = wrong;
    for (const auto& round : rounds) median.round_us.push_back(round[i].us);
    out.push_back(std::move(median));
  }
  return out;
}

// How a cell's time was chosen, for the headers: "best of 3 runs", and with rounds "best of 3 runs in a round, the
// median of 15 rounds".
std::string time_rule(int rounds) {
  const std::string runs = "best of " + std::to_string(kRuns) + " runs";
  return rounds == 1 ? runs : runs + " in a round, the median of " + std::to_string(rounds) + " rounds";
}

// A cell's every round, in --json: "round_time_us": [...], in round order.
Json round_times(const SizeFigures& f) {
  return f.round_us;
}

// The heap each rank needs for a sweep up to `largest` (processes: LaunchOptions::heap_bytes): its send and receive
// buffers, and reduce_scatter's two partial sums of one chunk (P2pCommunicator::scratch).
std::size_t sweep_heap_bytes(std::size_t largest, int c) {
  return 2 * largest + 2 * (largest / static_cast<std::size_t>(c)) + (std::size_t{64} << 10);
}

// The memory a sweep up to `largest` holds, refused before anything is allocated, as `cpsim run` refuses
// (sim/runtime/memory_need.hpp): every rank's buffers (sweep_heap_bytes) and copy_gbps' two buffers of at most
// the largest size. `limit` (--memory-limit, bytes; 0: none) replaces the memory detected (host_memory.hpp).
void check_sweep_memory(std::size_t largest, int ranks, std::int64_t limit) {
  const HostMemory mem = limit > 0 ? HostMemory{{limit, "--memory-limit"}, {limit, "--memory-limit"}} : host_memory();
  const MemoryLimit& bound = mem.process.bytes < mem.machine.bytes ? mem.process : mem.machine;
  const double need =
      static_cast<double>(sweep_heap_bytes(largest, ranks)) * ranks + 2.0 * static_cast<double>(largest);
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

// Single-thread GB/s of `bytes`-byte copies between two warm, 64-byte aligned buffers of that size, by memcpy or
// (`stream`) by the transports' streaming stores: the best of kMemcpyRuns runs of copies taking about 2 ms each.
double copy_gbps(std::size_t bytes, bool stream) {
  constexpr int kMemcpyRuns = 7;
  bytes = std::max<std::size_t>(bytes, 1);
  AlignedBytes a(bytes, 1), b(bytes, 0);
  std::memcpy(b.data(), a.data(), bytes);  // both warm: mapped and in the caches they fit in
  const int iters = static_cast<int>(std::clamp<std::size_t>((std::size_t{20} << 20) / bytes, 2, 100000));
  double best = 1e300;
  for (int run = 0; run < kMemcpyRuns; ++run) {
    const auto t0 = Clock::now();
    for (int i = 0; i < iters; ++i) {
      a[(static_cast<std::size_t>(i) * 64) % bytes] = static_cast<char>(i);  // the copies cannot be merged away
      if (stream)
        stream_copy(b.data(), a.data(), bytes);
      else
        std::memcpy(b.data(), a.data(), bytes);
    }
    best = std::min(best, std::chrono::duration<double>(Clock::now() - t0).count() / iters);
  }
  volatile char sink = b[bytes / 2];
  (void)sink;
  return static_cast<double>(bytes) / best / 1e9;
}

// The machine's copy bound for one call: `copies` copies of `chunk` bytes, copy i reading source chunk i mod
// `sources` into its own destination chunk (the call's footprint: sources + copies chunks, warm), shared by two
// threads (one per core of a 2-core machine), made both ways the transports copy (memcpy, and streaming stores:
// copy.hpp), whichever is faster; microseconds per call, the best of kMemcpyRuns runs of calls taking about 2 ms
// each, per way. Every backend makes at least these copies per call (one per byte that lands in a receive buffer),
// one of those two ways, so none can be faster (copies_per_call).
double two_thread_copy_us(std::size_t chunk, int copies, int sources) {
  constexpr int kMemcpyRuns = 7, kThreads = 2;
  chunk = std::max<std::size_t>(chunk, 1);
  const int each = std::max(1, copies / kThreads);
  const std::size_t span = chunk * static_cast<std::size_t>(each);
  const int iters = static_cast<int>(std::clamp<std::size_t>((std::size_t{20} << 20) / span, 2, 100000));
  const AlignedBytes src(chunk * static_cast<std::size_t>(sources), 1);  // read by both threads
  // best[way][thread]: way 0 memcpy, way 1 streaming stores.
  std::vector<std::vector<double>> best(2, std::vector<double>(kThreads, 1e300));
  std::barrier sync(kThreads);
  auto body = [&](int t) {
    AlignedBytes dst(span, 0);
    auto from = [&](int c) {  // the source of this thread's copy c
      return reinterpret_cast<const std::byte*>(src.data()) + ((t * each + c) % sources) * chunk;
    };
    for (int c = 0; c < each; ++c) std::memcpy(dst.data() + c * chunk, from(c), chunk);  // warm
    for (int way = 0; way < 2; ++way) {
      for (int run = 0; run < kMemcpyRuns; ++run) {
        sync.arrive_and_wait();
        const auto t0 = Clock::now();
        for (int i = 0; i < iters; ++i) {
          asm volatile("" ::: "memory");  // every call's copies are made: none merged with the last call's
          for (int c = 0; c < each; ++c) {
            std::byte* to = reinterpret_cast<std::byte*>(dst.data()) + c * chunk;
            if (way == 0)
              std::memcpy(to, from(c), chunk);
            else
              stream_copy(to, from(c), chunk);
          }
        }
        const double us = std::chrono::duration<double, std::micro>(Clock::now() - t0).count() / iters;
        best[way][t] = std::min(best[way][t], us);
      }
    }
    volatile char sink = dst[span / 2];
    (void)sink;
  };
  std::thread other(body, 1);
  body(0);
  other.join();
  // A call lasts as long as its slower half; the bound is the faster way.
  return std::min(std::max(best[0][0], best[0][1]), std::max(best[1][0], best[1][1]));
}

// The copies a call must make, and from how many distinct sources: a ring sendrecv lands each rank's one message
// (C copies of its size, each from its own sender); all_to_all lands C chunks in each rank, its own among them
// (the bench's send and receive buffers lie apart, so every backend, Open MPI included, copies that one too: C^2
// copies, each chunk from its own source); all_gather lands every rank's one chunk in every rank (C^2 copies of C
// sources, each read by all C ranks).
struct CallCopies {
  int copies, sources;
};
CallCopies copies_per_call(Op op, int c) {
  if (op == Op::sendrecv) return {c, c};
  return {c * c, op == Op::all_gather ? c : c * c};
}

struct Row : SizeFigures {
  std::size_t size = 0, chunk_bytes = 0;
  double algbw = 0, busbw = 0, memcpy = 0, stream = 0;
};

std::string human(std::size_t bytes) {
  return human_bytes(bytes);
}

// --- Side by side: `--backend threads,processes,mpi` (any list of CPU backends; mpi alone too) ---
// One table per operation: for each size, every backend's time per call and busbw, from the same sweep() and
// the same reduction as the single-backend tables (slowest rank, best of kRuns). With mpi in the list the
// command runs under `mpirun -np C`: the mpi column is the job's C processes; threads and processes are then
// launched by rank 0 alone while the job's other processes wait idle (run_on_rank0), so each backend has the
// machine to itself. memcpy is not measured here (the single-backend tables have it). The goals follow the
// tables (bench_comm_goals.hpp).

struct Cell : SizeFigures {
  double busbw = 0;
};

// Per size, backend b's cell; empty in the processes of an MPI job other than rank 0.
std::vector<Cell> measure(Backend b, Op op, int ranks, const std::vector<std::size_t>& sizes,
                          std::optional<CollectiveAlgorithm> form, bool bind) {
  LaunchOptions opt;
  opt.ranks = ranks;
  opt.backend = b;
  opt.collectives = form;
  opt.bind = bind;
  opt.heap_bytes = sweep_heap_bytes(sizes.back(), ranks);
  const auto outcomes = launch(opt, [&](Communicator& comm) { return sweep(op, comm, sizes); });
  std::vector<ByteReader> readers;
  for (const auto& o : outcomes) readers.emplace_back(o.result);
  std::vector<Cell> cells;
  if (readers.empty()) return cells;
  for (std::size_t size : sizes) {
    Cell cell;
    static_cast<SizeFigures&>(cell) = read_size(readers);
    cell.busbw = busbw_gbps(op, size, cell.us, ranks);
    cells.push_back(cell);
  }
  return cells;
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

const char* bind_name(bool bind) {
  return bind ? "cores" : "none";
}

// Where the ranks ran (LaunchOptions::bind, sim/comm/rank_binding.hpp).
void print_binding(bool bind, int ranks) {
  if (!bind) {
    std::printf("# ranks: not bound (--bind none): the scheduler placed and moved them\n");
    return;
  }
  const std::vector<int> cpus = usable_cpus();
  std::string where;
  for (int r = 0; r < ranks && !cpus.empty(); ++r)
    where += (r == 0 ? "" : ", ") + std::to_string(r) + ":" + std::to_string(rank_cpu(r, cpus));
  std::printf("# ranks: bound to CPUs (--bind cores), rank:cpu %s\n", where.c_str());
}

// The goal lines under the tables: each goal with its lowest ratio and where, or why it was not evaluated.

void print_goals(const std::vector<RatioGoal>& goals, const LatencyGoal (&lat)[2], const bool (&listed)[2]) {
  std::printf(
      "#\n# goals: busbw ratios over sendrecv, all_gather and all_to_all at per-peer chunks %s..%s (a row's ratio: "
      "the median over the rounds of the ratio within a round)\n",
      human(kGoalChunkLow).c_str(), human(kGoalChunkHigh).c_str());
  for (const RatioGoal& g : goals) {
    if (g.rows == 0) {
      std::printf("#   %-46s not evaluated (needs both backends and such chunks in the sweep)\n", g.what.c_str());
      continue;
    }
    std::printf("#   %-46s lowest %s (%s; %d row%s): %s\n", g.what.c_str(), goal_figure(*g.lowest, g.goal).c_str(),
                g.at.c_str(), g.rows, g.rows == 1 ? "" : "s", g.met() ? "met" : "not met");
    if (!g.ceiling) continue;
    std::string reach = "within reach at every row";
    if (!g.out_of_reach.empty()) {
      reach = "out of reach in this run at " + std::to_string(g.out_of_reach.size()) + " of " +
              std::to_string(g.rows) + " rows (";
      for (std::size_t i = 0; i < g.out_of_reach.size(); ++i) reach += (i == 0 ? "" : "; ") + g.out_of_reach[i];
      reach += ")";
    }
    std::printf("#     the copy bound over %s: lowest %s (%s): %s\n", g.over.c_str(),
                goal_figure(*g.ceiling, g.goal).c_str(), g.ceiling_at.c_str(), reach.c_str());
  }
  for (int t = 0; t < 2; ++t) {
    if (!listed[t]) continue;
    const char* name = t == 0 ? "threads" : "processes";
    if (lat[t].us)
      std::printf("#   %s sendrecv at 1K <= %.0f us: %s us: %s\n", name, lat[t].goal_us,
                  goal_figure(*lat[t].us, lat[t].goal_us).c_str(), lat[t].met() ? "met" : "not met");
    else
      std::printf("#   %s sendrecv at 1K <= %.0f us: 1K is not in this sweep\n", name, lat[t].goal_us);
  }
}

int side_by_side(const std::string& list, int ranks, const std::vector<std::size_t>& sizes, int step, int rounds,
                 bool json, std::optional<CollectiveAlgorithm> form, bool bind) {
  const std::vector<Backend> backends = parse_backend_list(list);
  const bool with_mpi = std::find(backends.begin(), backends.end(), Backend::mpi) != backends.end();
  require(!with_mpi || launcher_rank() >= 0,
          "--backend " + list + " measures mpi on the processes mpirun starts, but mpirun did not start this one",
          "run `mpirun -np " + std::to_string(ranks) + " cpsim bench comm --backend " + list + " --ranks " +
              std::to_string(ranks) + "`");
  const std::size_t nops = std::size(kOps);
  // cells[op][backend][size]
  std::vector<std::vector<std::vector<Cell>>> cells(nops, std::vector<std::vector<Cell>>(backends.size()));
  // STEPS 1-2 for each operation, --rounds times, the backends taking turns (each round in the reverse order of the
  // one before, so that none always goes first); each cell is then its median round (median_of_rounds). STEP 1:
  // mpi, on every process of the job (its first call also checks that the job has --ranks processes). STEP 2: the
  // others, by rank 0 alone while the job's other processes wait idle (run_on_rank0).
  for (std::size_t k = 0; k < nops; ++k) {
    // measured[backend][round][size]
    std::vector<std::vector<std::vector<Cell>>> measured(backends.size());
    for (int round = 0; round < rounds; ++round) {
      std::vector<std::size_t> order(backends.size());
      std::iota(order.begin(), order.end(), std::size_t{0});
      if (round % 2 == 1) std::reverse(order.begin(), order.end());
      for (std::size_t j : order) {
        if (backends[j] == Backend::mpi)
          measured[j].push_back(measure(Backend::mpi, kOps[k], ranks, sizes, form, bind));
        else
          run_on_rank0([&] { measured[j].push_back(measure(backends[j], kOps[k], ranks, sizes, form, bind)); });
      }
    }
    for (std::size_t j = 0; j < backends.size(); ++j) cells[k][j] = median_of_rounds(measured[j]);
  }
  // STEP 3: the rows and (STEP 4) their copy bounds, still while the job's other processes wait idle, not while they
  // leave the job.
  std::vector<SideRow> rows;
  std::optional<double> latency[2];  // threads, processes
  // The copy bound of the rows the goals cover (two_thread_copy_us): beside each row's busbw, and what tells a
  // goal out of reach in this run (bench_comm_goals.hpp).
  struct Bound {
    const SideRow* row;  // its busbw: row->bound
    double us;
  };
  std::vector<Bound> bounds;
  run_on_rank0([&] {
    // STEP 3: the goals' rows (bench_comm_goals.hpp): every backend's busbw, and the 1 KiB sendrecv times.
    for (std::size_t k = 0; k < nops; ++k)
      for (std::size_t i = 0; i < sizes.size(); ++i) {
        SideRow row;
        row.op = kOps[k];
        row.size = sizes[i];
        row.chunk = chunk_count(kOps[k], sizes[i], ranks) * 4;
        for (std::size_t b = 0; b < backends.size(); ++b) {
          const Cell& c = cells[k][b][i];
          const bool t = backends[b] == Backend::threads, p = backends[b] == Backend::processes;
          (t ? row.threads : p ? row.processes : row.mpi) = c.busbw;
          // Every round's busbw, for the ratios within a round (bench_comm_goals.hpp: row_ratio).
          for (double us : c.round_us)
            (t ? row.threads_rounds : p ? row.processes_rounds : row.mpi_rounds)
                .push_back(busbw_gbps(kOps[k], sizes[i], us, ranks));
          if (kOps[k] == Op::sendrecv && sizes[i] == 1024 && backends[b] != Backend::mpi)
            latency[backends[b] == Backend::threads ? 0 : 1] = c.us;
        }
        rows.push_back(row);
      }
    // STEP 4: the bounds, after the backends (rows no longer grows: the pointers hold).
    for (SideRow& row : rows) {
      if (!in_goal_rows(row)) continue;
      const CallCopies cc = copies_per_call(row.op, ranks);
      const double us = two_thread_copy_us(row.chunk, cc.copies, cc.sources);
      row.bound = busbw_gbps(row.op, row.size, us, ranks);
      bounds.push_back({&row, us});
    }
  });
  if (launcher_rank() > 0) return 0;  // rank 0 reports

  const std::vector<RatioGoal> goals = evaluate_ratio_goals(rows);
  const LatencyGoal lat[2] = {latency_goal(true, latency[0]), latency_goal(false, latency[1])};
  const bool listed[2] = {std::find(backends.begin(), backends.end(), Backend::threads) != backends.end(),
                          std::find(backends.begin(), backends.end(), Backend::processes) != backends.end()};

  if (json) {
    Json names = Json::array();
    for (Backend b : backends) names.push_back(std::string(backend_name(b)));
    Json ops = Json::array();
    for (std::size_t k = 0; k < nops; ++k) {
      Json rows_json = Json::array();
      for (std::size_t i = 0; i < sizes.size(); ++i) {
        Json row{{"size", static_cast<std::int64_t>(sizes[i])}};
        for (std::size_t b = 0; b < backends.size(); ++b) {
          const Cell& c = cells[k][b][i];
          row[std::string(backend_name(backends[b]))] = {{"time_us", c.us},
                                                         {"busbw_gbps", c.busbw},
                                                         {"wrong", c.wrong},
                                                         {"calls_per_run", c.calls},
                                                         {"round_time_us", round_times(c)}};
        }
        rows_json.push_back(std::move(row));
      }
      ops.push_back(
          {{"op", op_name(kOps[k])}, {"bus_factor", bus_factor(kOps[k], ranks)}, {"rows", std::move(rows_json)}});
    }
    Json goals_json = Json::array();
    for (const RatioGoal& g : goals) {
      if (g.rows == 0) continue;
      Json goal{{"goal", g.what}, {"ratio", g.goal}, {"lowest", *g.lowest},
                {"at", g.at},     {"rows", g.rows},  {"met", g.met()}};
      if (g.ceiling) {  // the copy bound over the denominator (bench_comm_goals.hpp: reach)
        goal["ceiling"] = *g.ceiling;
        goal["ceiling_at"] = g.ceiling_at;
        goal["out_of_reach"] = g.out_of_reach;
      }
      goals_json.push_back(std::move(goal));
    }
    for (int t = 0; t < 2; ++t) {
      if (!listed[t] || !lat[t].us) continue;
      goals_json.push_back({{"goal", std::string(t == 0 ? "threads" : "processes") +
                                         " sendrecv 1K <= " + std::to_string(static_cast<int>(lat[t].goal_us)) + " us"},
                            {"us", *lat[t].us},
                            {"met", lat[t].met()}});
    }
    Json copy_bound = Json::array();
    for (const Bound& b : bounds)
      copy_bound.push_back({{"op", op_name(b.row->op)},
                            {"size", static_cast<std::int64_t>(b.row->size)},
                            {"time_us", b.us},
                            {"busbw_gbps", *b.row->bound}});
    const Json j{{"backends", std::move(names)},
                 {"ranks", ranks},
                 {"rounds", rounds},
                 {"collectives", form ? algorithm_name(*form) : "backend"},
                 {"bind", bind_name(bind)},
                 {"ops", std::move(ops)},
                 {"goals", std::move(goals_json)},
                 {"copy_bound", std::move(copy_bound)}};
    std::cout << json_text(j) << "\n";
    return 0;
  }

  std::printf("# cpsim bench comm: %s side by side, %d ranks; sizes %s..%s x%d\n", list.c_str(), ranks,
              human(sizes.front()).c_str(), human(sizes.back()).c_str(), step);
  if (with_mpi)
    std::printf(
        "# mpi: the %d processes of this mpirun job; threads, processes: launched by rank 0 while the job's "
        "other processes wait idle\n",
        ranks);
  std::printf("# time: the slowest rank's mean per call, %s (each operation swept by every backend in turn, once a "
              "round); busbw = size / time x factor (nccl-tests)\n",
              time_rule(rounds).c_str());
  if (form) std::printf("# collectives: %s on threads and processes (imposed)\n", algorithm_name(*form));
  print_binding(bind, ranks);
  std::string names;
  for (Backend b : backends) {
    char col[16];
    std::snprintf(col, sizeof col, " %10s", std::string(backend_name(b)).c_str());
    names += col;
  }
  const int width = static_cast<int>(11 * backends.size());
  for (std::size_t k = 0; k < nops; ++k) {
    std::printf("#\n# %s (busbw factor %.3g)\n", op_name(kOps[k]), bus_factor(kOps[k], ranks));
    std::printf("# %10s  %-*s  %-*s %8s\n", "", width, " time per call (us)", width, " busbw (GB/s)", "");
    std::printf("# %10s  %s  %s %8s\n", "size (B)", names.c_str(), names.c_str(), "#wrong");
    for (std::size_t i = 0; i < sizes.size(); ++i) {
      std::printf("  %10zu  ", sizes[i]);
      std::int64_t wrong = 0;
      for (std::size_t b = 0; b < backends.size(); ++b) {
        std::printf(" %10.2f", cells[k][b][i].us);
        wrong += cells[k][b][i].wrong;
      }
      std::printf("  ");
      for (std::size_t b = 0; b < backends.size(); ++b) std::printf(" %10.2f", cells[k][b][i].busbw);
      std::printf(" %8lld\n", static_cast<long long>(wrong));
    }
  }
  print_goals(goals, lat, listed);
  if (!bounds.empty()) {
    std::printf(
        "#\n# copy bound: the copies the call must make (sendrecv C of its size; all_to_all C^2 chunks, each rank's "
        "own too; all_gather C^2 copies of the C ranks' chunks) made by two threads, one per core, between warm "
        "buffers, by memcpy and by streaming stores, whichever is faster, best of 7, after the tables: on a quiet "
        "machine no backend can beat it (other work on the machine moves it as it moves the tables); each backend's "
        "busbw as a fraction of it:\n");
    std::printf("#   %-12s %7s %12s  %-10s%s\n", "op", "chunk", "bound GB/s", "fraction:", names.c_str());
    for (const Bound& b : bounds) {
      std::printf("#   %-12s %7s %12.2f  %-10s", op_name(b.row->op), human(b.row->chunk).c_str(), *b.row->bound, "");
      for (Backend be : backends) {
        const std::optional<double>& v = be == Backend::threads     ? b.row->threads
                                         : be == Backend::processes ? b.row->processes
                                                                    : b.row->mpi;
        std::printf(" %10.2f", v ? *v / *b.row->bound : 0.0);
      }
      std::printf("\n");
    }
  }
  return 0;
}

int bench_comm(const std::vector<std::string>& args) {
  po::options_description desc("cpsim bench comm");
  std::string backend = "threads", minb = "1K", maxb = "64M", collectives, memory, bind_text = "cores";
  int ranks = 4, step = 4, rounds = 0;
  desc.add_options()("backend", po::value(&backend),
                     "threads | processes; or a list, side by side: threads,processes,mpi (mpi: under mpirun)")(
      "ranks", po::value(&ranks), "number of ranks C (default 4)")("minbytes", po::value(&minb), "smallest size (1K)")(
      "maxbytes", po::value(&maxb), "largest size (64M)")("stepfactor", po::value(&step), "size multiplier (4)")(
      "rounds", po::value(&rounds),
      "every backend's sweep this many times, in turn; each row is its median round (default 15 side by side, "
      "1 alone)")(
      "collectives", po::value(&collectives),
      "ring | direct: the form of all_gather and reduce_scatter on threads and processes (default: each backend's "
      "own)")("bind", po::value(&bind_text)->value_name("cores|none"),
              "cores: rank r on the (r mod n)-th of the n CPUs this process may use, on every backend (default); "
              "none: wherever the scheduler puts them")("memory-limit", po::value(&memory)->value_name("BYTES"),
              "the most memory the buffers may take (K, M, G, T: powers of 1024); more is refused before "
              "anything is allocated (default: what this machine has left)")(
      "json", "print one JSON object instead of the tables");
  po::variables_map vm;
  if (!parse("bench comm", desc, args, vm)) return 0;
  const bool side = backend.find(',') != std::string::npos || backend == "mpi";  // side_by_side() above
  const Backend b = side ? Backend::threads : parse_backend(backend);
  require(side || b == Backend::threads || b == Backend::processes,
          "bench comm measures the CPU backends only (got '" + backend + "')", "use --backend threads or processes");
  require(ranks >= 2, "bench comm needs at least 2 ranks (got " + std::to_string(ranks) + ")", "use --ranks 2 or more");
  require(step >= 2, "--stepfactor must be at least 2", "use --stepfactor 2 or 4");
  if (!vm.count("rounds")) rounds = side ? 15 : 1;
  require(rounds >= 1, "--rounds must be at least 1 (got " + std::to_string(rounds) + ")", "use --rounds 1 or more");
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
  require(bind_text == "cores" || bind_text == "none", "--bind " + bind_text + " is not a placement of the ranks",
          "use --bind cores (rank r on the (r mod n)-th usable CPU) or --bind none");
  const bool bind = bind_text == "cores";
  std::vector<std::size_t> sizes;
  for (std::size_t s = lo;; s *= static_cast<std::size_t>(step)) {
    sizes.push_back(s);
    if (s > hi / static_cast<std::size_t>(step)) break;  // the next size would pass --maxbytes (or wrap)
  }
  if (sizes.back() > hi) sizes.pop_back();
  check_sweep_memory(sizes.back(), ranks, memory_limit);
  if (side) return side_by_side(backend, ranks, sizes, step, rounds, vm.count("json") > 0, form, bind);

  LaunchOptions opt;
  opt.ranks = ranks;
  opt.backend = b;
  opt.collectives = form;
  opt.bind = bind;
  opt.heap_bytes = sweep_heap_bytes(sizes.back(), ranks);
  const std::string form_name = form ? algorithm_name(*form) : "backend";
  // measured[op][round][size]; table[op][size]: the median round (median_of_rounds).
  std::vector<std::vector<std::vector<Row>>> measured(std::size(kOps));
  for (int round = 0; round < rounds; ++round)
    for (std::size_t k = 0; k < std::size(kOps); ++k) {
      auto outcomes = launch(opt, [&](Communicator& comm) { return sweep(kOps[k], comm, sizes); });
      std::vector<Row> rows(sizes.size());
      std::vector<ByteReader> readers;
      for (const auto& o : outcomes) readers.emplace_back(o.result);
      for (auto& row : rows) static_cast<SizeFigures&>(row) = read_size(readers);
      measured[k].push_back(std::move(rows));
    }
  std::vector<std::vector<Row>> table;
  for (const auto& rounds_of_op : measured) table.push_back(median_of_rounds(rounds_of_op));
  for (std::size_t k = 0; k < table.size(); ++k) {
    const Op op = kOps[k];
    std::vector<Row>& rows = table[k];
    for (std::size_t i = 0; i < sizes.size(); ++i) {
      Row& row = rows[i];
      row.size = sizes[i];
      row.chunk_bytes = chunk_count(op, sizes[i], ranks) * 4;
      row.algbw = algbw_gbps(row.size, row.us);
      row.busbw = row.algbw * bus_factor(op, ranks);
      row.memcpy = copy_gbps(row.chunk_bytes, false);
      row.stream = copy_gbps(row.chunk_bytes, true);
    }
  }

  // The latency goal (bench_comm_goals.hpp); the bandwidth goals need the side-by-side run.
  std::optional<double> us_1k;
  for (const Row& row : table[0])
    if (row.size == 1024) us_1k = row.us;
  const LatencyGoal latency = latency_goal(b == Backend::threads, us_1k);

  if (vm.count("json")) {
    Json ops = Json::array();
    for (std::size_t k = 0; k < table.size(); ++k) {
      Json rows_json = Json::array();
      for (const Row& row : table[k])
        rows_json.push_back({{"size", static_cast<std::int64_t>(row.size)},
                             {"count", static_cast<std::int64_t>(row.size / 4)},
                             {"type", "float"},
                             {"chunk_bytes", static_cast<std::int64_t>(row.chunk_bytes)},
                             {"time_us", row.us},
                             {"algbw_gbps", row.algbw},
                             {"busbw_gbps", row.busbw},
                             {"wrong", row.wrong},
                             {"calls_per_run", row.calls},
                             {"round_time_us", round_times(row)},
                             {"memcpy_gbps", row.memcpy},
                             {"stream_gbps", row.stream},
                             {"busbw_over_memcpy", row.busbw / row.memcpy}});
      ops.push_back(
          {{"op", op_name(kOps[k])}, {"bus_factor", bus_factor(kOps[k], ranks)}, {"rows", std::move(rows_json)}});
    }
    const Json j{{"backend", backend},
                 {"ranks", ranks},
                 {"rounds", rounds},
                 {"collectives", form_name},
                 {"bind", bind_name(bind)},
                 {"ops", std::move(ops)},
                 {"goals",
                  {{"sendrecv_1KiB_us", latency.us ? Json(*latency.us) : Json()},
                   {"sendrecv_1KiB_goal_us", latency.goal_us}}}};
    std::cout << json_text(j) << "\n";
    return 0;
  }

  std::printf("# cpsim bench comm: backend %s, %d ranks; sizes %s..%s x%d\n", backend.c_str(), ranks, human(lo).c_str(),
              human(hi).c_str(), step);
  std::printf("# time: the slowest rank's mean per call, %s\n", time_rule(rounds).c_str());
  std::printf("# memcpy: one thread, one chunk between two warm, 64-byte aligned buffers of its size, best of 7 runs, "
              "same run\n");
  std::printf("# stream: the same copy with the transports' streaming stores, which they use from %s on (landed in "
              "a rank by one call, %d ranks)\n",
              human(stream_threshold(ranks)).c_str(), ranks);
  if (form)
    std::printf("# collectives: %s (imposed by --collectives)\n", form_name.c_str());
  else
    std::printf("# collectives: the backend's own forms (docs/backends-threads-processes.md)\n");
  print_binding(bind, ranks);
  for (std::size_t k = 0; k < table.size(); ++k) {
    std::printf("#\n# %s (busbw factor %.3g)\n", op_name(kOps[k]), bus_factor(kOps[k], ranks));
    std::printf("# %10s %12s %6s %10s %10s %10s %8s %10s %10s %8s\n", "size", "count", "type", "time", "algbw", "busbw",
                "#wrong", "memcpy", "stream", "bus/mem");
    std::printf("# %10s %12s %6s %10s %10s %10s %8s %10s %10s %8s\n", "(B)", "(elements)", "", "(us)", "(GB/s)",
                "(GB/s)", "", "(GB/s)", "(GB/s)", "");
    for (const Row& row : table[k]) {
      std::printf("  %10zu %12zu %6s %10.2f %10.2f %10.2f %8lld %10.2f %10.2f %8.2f\n", row.size, row.size / 4, "float",
                  row.us, row.algbw, row.busbw, static_cast<long long>(row.wrong), row.memcpy, row.stream,
                  row.busbw / row.memcpy);
    }
  }
  std::printf("#\n# goal: ring sendrecv at 1K <= %.0f us: ", latency.goal_us);
  if (latency.us)
    std::printf("%s us (%s)\n", goal_figure(*latency.us, latency.goal_us).c_str(), latency.met() ? "met" : "not met");
  else
    std::printf("1K is not in this sweep\n");
  std::printf(
      "# the bandwidth goals are ratios to Open MPI and to the threads backend, measured side by side: mpirun -np %d "
      "cpsim bench comm --backend threads,processes,mpi --ranks %d (docs/performance/comm.md)\n",
      ranks, ranks);
  return 0;
}

}  // namespace

CPSIM_BENCH(comm, "communicator bandwidth tables (nccl-tests style) beside same-run memcpy", bench_comm);

}  // namespace cpsim::cli
