// Calibration: a machine's parameters fitted to what its own benchmarks print (`cpsim calibrate`).
//
// Inputs:
//   nccl-tests output (all_gather_perf, alltoall_perf, sendrecv_perf) as captured, one run or several per file
//   (nccl_table.hpp reads it and splits each table into its floor, protocol-switch and plateau regimes);
//   `cpsim bench gpu_attention --json`: causal attention on one GPU, forward and backward ms at each S.
// Each table's regimes give the cost model's fields (cost.hpp), in the model's own equation for the test; x is the
// bytes over the bandwidth, size nccl-tests' size column, m = C / G ranks per node, k = min(m, NICs):
//   sendrecv (2 ranks)      t = lat + size / p2p_bw   floor -> {intra|inter}.latency_us
//                                                     plateau -> intra.p2p_gbps | inter.gbps
//   all_gather, one node    t = base + (C-1) step_intra + x / busbw, x = (C-1) size / C
//                                                     plateau -> intra.gbps
//                                                     floor F -> intra.step_latency_us = (F - base) / (C-1), base
//                                                     the base machine's; with tables of two group sizes or more
//                                                     (C_i, F_i): base and step by least squares
//   alltoall, one node      the same line, x = (C-1) size / C (its plateau and floor used when no all_gather)
//   all_gather, G nodes     plateau: busbw = min(intra.gbps, k inter.collective_gbps) -> inter.collective_gbps
//                           floor: F = base + (C-G) step_intra + (G-1) step_inter -> inter.step_latency_us
//   alltoall, G nodes       t = base + (C-m) (step_inter + (size/C) / nic), nic = inter.gbps min(1, NICs/m)
//                           plateau, x = (C-m) size / C -> inter.gbps (if no inter sendrecv)
//                           floor -> inter.step_latency_us (if no multi-node all_gather)
//   The switch regime is fitted by neither: the fitted machine's error there is printed with the others. A
//   latency the data would make negative is clamped to 0 with a warning.
//   gpu_attention                1/rate(S) = 1/tflops + (half_len/tflops) / S, a line in 1/S, rate = flops /
//                                ((t - launch) occupancy)     -> kernel_dD causal curves; the full curves of that
//                                head dim scaled by the same factor (the bench measures causal blocks only)
// Every fitted field's source in the machine it writes names the file, the rows used and the fit's rms error.
#pragma once
#include <string>
#include <vector>

#include "sim/model/machine.hpp"
#include "sim/model/nccl_table.hpp"

namespace cpsim::model {

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
  double residual = -1;  // the fit's rms relative error over the rows it used; < 0: none (a bench fit)
  std::string sizes;     // the rows it came from: "64 MiB..1 GiB (5 rows)"
  std::string source;
};

struct Calibration {
  Machine machine;
  std::vector<FitLine> fitted;
  // Every table replayed on the fitted machine, per regime: "all_gather_perf (ag.txt, 8 ranks / 1 node(s)): the
  // fitted machine's rms error: floor 0.9%, switch 31%, plateau 0.4%".
  std::vector<std::string> checks;
  std::vector<std::string> warnings;  // a latency clamped to 0, a value kept because one group size cannot split it
};
// The times the machine gives each of the table's rows (the model's own equations for the test and placement:
// the table's ranks fill its nodes in order, node n's at world ranks n * ranks_per_node + 0, 1, ...).
std::vector<double> modeled_times_us(const Machine& m, const NcclTable& t);

// The base machine with every parameter the inputs determine replaced by its fit. UsageError when the base machine
// has more than two levels (the tables' ranks cannot be placed on its levels by the two-level equations).
Calibration calibrate(const Machine& base, const std::vector<NcclTable>& tables,
                      const std::vector<AttentionBench>& benches);

}  // namespace cpsim::model
