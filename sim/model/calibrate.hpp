// Calibration: a machine's parameters fitted to what its own benchmarks print (`cpsim calibrate`).
//
// Inputs:
//   nccl-tests tables (all_gather_perf, alltoall_perf, sendrecv_perf): the rows "size count type redop root time
//   algbw busbw ..." and the "#  Rank N ... on HOST device ..." lines, from which the ranks C and nodes G come.
//   `cpsim bench gpu_attention --json`: causal attention on one GPU, forward and backward ms at each S.
// Each table is fitted by weighted least squares (relative error) to the cost model's own line (cost.hpp):
//   sendrecv (2 ranks)           t = lat + size / p2p_bw                 -> {intra|inter}.latency_us, p2p_gbps
//   all_gather, one node         t = base + (C-1) lat_intra + x / busbw,  x = (C-1) size / C
//                                                                         -> collective.base_latency_us, intra.gbps
//   all_gather, G nodes          busbw = min(intra.gbps, k inter.collective_gbps)   -> inter.collective_gbps
//   alltoall, one node           t = base + (C-1) lat_intra + x / intra.gbps        (intra.gbps, if no all_gather)
//   alltoall, G nodes            t = base + (C-m) lat_inter + (C-m) (size/C) / nic, nic = p2p * min(1, NICs/m)
//                                                                         -> inter.gbps (if no inter sendrecv)
//   (size: nccl-tests' size column; m = C / G ranks per node; k = min(m, NICs); latencies come from the sendrecv
//   tables when given, else from the base machine)
//   gpu_attention                1/rate(S) = 1/tflops + (half_len/tflops) / S, a line in 1/S, rate = flops /
//                                ((t - launch) occupancy)     -> kernel_dD causal curves; the full curves of that
//                                head dim scaled by the same factor (the bench measures causal blocks only)
// Every fitted field's source in the machine it writes names the file, the rows used and the fit's rms error.
#pragma once
#include <string>
#include <vector>

#include "sim/model/machine.hpp"

namespace cpsim::model {

enum class NcclTest { all_gather, all_to_all, sendrecv };
const char* nccl_test_name(NcclTest t);  // "all_gather_perf", ...

struct NcclTable {
  NcclTest test = NcclTest::all_gather;
  std::string origin;  // the file, for errors and sources
  int ranks = 0, nodes = 0;
  std::vector<double> sizes, times_us;  // per row: nccl-tests' size (bytes) and out-of-place time
};
// Parses nccl-tests output; UsageError naming `origin` when it holds no table or no rank lines.
NcclTable parse_nccl_table(NcclTest test, const std::string& text, const std::string& origin);

struct AttentionBench {
  std::string origin;
  std::int64_t heads = 0, head_dim = 0, batch = 1;
  std::vector<double> seqs, fwd_ms, bwd_ms;
};
// Parses `cpsim bench gpu_attention --json`; UsageError when it is not that output.
AttentionBench parse_attention_bench(const std::string& text, const std::string& origin);

struct FitLine {
  std::string field;
  double before = 0, after = 0;
  std::string source;
};

struct Calibration {
  Machine machine;
  std::vector<FitLine> fitted;
  // Every table replayed on the fitted machine: "alltoall_perf (a2a.txt, 16 ranks / 2 nodes): rms error 0.4%".
  std::vector<std::string> checks;
};
// The times the machine gives each of the table's rows (the model's own equations for the test and placement:
// the table's ranks fill its nodes in order, node n's at world ranks n * ranks_per_node + 0, 1, ...).
std::vector<double> modeled_times_us(const Machine& m, const NcclTable& t);

// The base machine with every parameter the inputs determine replaced by its fit.
Calibration calibrate(const Machine& base, const std::vector<NcclTable>& tables,
                      const std::vector<AttentionBench>& benches);

}  // namespace cpsim::model
