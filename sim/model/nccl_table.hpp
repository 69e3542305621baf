// nccl-tests output as people capture it, read into tables, and each table split into the regimes NCCL's
// protocols give it (what `cpsim calibrate` fits, calibrate.hpp).
//
// Reading (parse_nccl_runs):
//   every line is taken as nccl-tests printed it: a CR before the newline dropped, and the prefixes launchers add
//   stripped: Open MPI's --tag-output "[1,0]<stdout>:" and --timestamp-output (a date before "<stdout>:"),
//   MPICH / Intel MPI's "[0] " and Slurm's --label "0: ";
//   a file may hold several runs (each a header, its "#  Rank N ... on HOST" lines and its rows): each is a table,
//   named "FILE, run N" when there are several; a run that names its test ("# Collective test starting:
//   all_reduce_perf") must be the test the flag names;
//   the columns come from the header ("# size count type redop root time algbw busbw #wrong time ..."): the first
//   "time" is out-of-place, the second in-place.
// The numbers as nccl-tests defines them (its doc/PERFORMANCE.md, src/*.cu): size is the whole buffer (C x count
// per rank for all_gather and alltoall), algbw = size / time, busbw = algbw x (C-1)/C for all_gather and alltoall,
// x 1 for sendrecv.
// Regimes (regimes_of), rows in size order:
//   1. floor     size <= 64 KiB, where NCCL runs its LL protocol: t = floor + x / bw_LL, a weighted line; the
//                floor (its intercept) is the small-message latency
//   2. plateau   the rows from the first whose busbw reaches 80% of the table's largest: t = a + x / bw, a
//                weighted line whose slope gives the bandwidth (3 rows or more spanning 4x in size; else the mean
//                of x / t over them)
//   3. switch    the rows between: LL128 and Simple take over from LL; fitted by neither line
//   (x: the bytes the model's equation divides by the bandwidth, calibrate.hpp; weights 1 / t^2: relative error)
#pragma once
#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace cpsim::model {

enum class NcclTest { all_gather, all_to_all, sendrecv };
const char* nccl_test_name(NcclTest t);  // "all_gather_perf", ...

struct NcclTable {
  NcclTest test = NcclTest::all_gather;
  std::string origin;  // the file (and ", run N" when it holds several), for errors and sources
  int ranks = 0, nodes = 0;
  std::vector<double> sizes, times_us;  // per row, in size order: nccl-tests' size (bytes) and out-of-place time
  std::vector<double> in_place_us;      // per row: the in-place time; empty when the table has no such column
};

// The line as nccl-tests printed it: launcher prefixes and a trailing CR removed.
std::string strip_capture(std::string_view line);
// Every run the text holds, each a table. UsageError naming `origin` (and the run) when it holds no table, a run
// names no ranks, names another test, or has rows of another shape than its header.
std::vector<NcclTable> parse_nccl_runs(NcclTest test, const std::string& text, const std::string& origin);

// busbw / algbw as nccl-tests computes it: (C-1)/C for all_gather and alltoall, 1 for sendrecv.
double busbw_factor(const NcclTable& t);

// One weighted line t = a + x / bw over rows [begin, end) of a table.
struct RegimeFit {
  std::size_t begin = 0, end = 0;  // rows
  double intercept_us = 0;         // a
  double gbps = 0;                 // bw (GB/s); 0 when the rows do not determine it
  double rms = 0;                  // the line's rms relative error over the rows
  bool line = false;               // false: one row, or too narrow a range: intercept or rate from a mean
  bool empty() const { return begin == end; }
};
struct Regimes {
  RegimeFit floor, plateau;
  std::size_t switch_begin = 0, switch_end = 0;  // the rows between
};
// The regimes of a table, with x = x_per_byte * size for the lines. UsageError when the times do not grow with
// size as nccl-tests' do (the largest busbw at the smallest size and less than half of it at the largest).
Regimes regimes_of(const NcclTable& t, double x_per_byte);

// "8 B", "64 KiB", "1 GiB": a size as nccl-tests' -b / -e take it; "8 B..64 KiB (14 rows)" for rows [begin, end).
std::string size_text(double bytes);
std::string rows_text(const NcclTable& t, std::size_t begin, std::size_t end);

constexpr double kFloorMaxBytes = 64 * 1024;  // NCCL's LL protocol below about this size (ring, 8 GPUs)
constexpr double kPlateauShare = 0.8;         // a plateau row's busbw: at least this share of the table's largest

}  // namespace cpsim::model
