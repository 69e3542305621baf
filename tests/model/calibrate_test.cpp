// `cpsim calibrate` recovers a known machine: nccl-tests tables and a `cpsim bench gpu_attention --json` output
// are generated from that machine's own costs, in the formats the tools print, and the fitted machine file must
// give back its parameters.
#include "sim/model/calibrate.hpp"

#include <doctest/doctest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>

#include "../cli/run_cli.hpp"
#include "sim/model/cost.hpp"
#include "sim/model/fit.hpp"

using namespace cpsim;
using namespace cpsim::model;
using cpsim::test::count_lines;
using cpsim::test::run_cli;

namespace {

// What nccl-tests prints (header, rank lines, the table) for `test` on `ranks` ranks over `nodes` hosts, with the
// times the machine's cost model gives (modeled_times_us). Times as nccl-tests formats them (2, 1 or 0 decimals).
std::string nccl_output(const Machine& m, NcclTest test, int ranks, int nodes) {
  NcclTable t;
  t.test = test;
  t.ranks = ranks;
  t.nodes = nodes;
  for (std::int64_t size = 1024; size <= (std::int64_t{1} << 30); size *= 4)
    t.sizes.push_back(static_cast<double>(size));
  const std::vector<double> times = modeled_times_us(m, t);
  std::string out =
      "# nThread 1 nGpus 1 minBytes 8 maxBytes 1073741824 step: 2(factor) warmup iters: 5 iters: 20\n#\n"
      "# Using devices\n";
  char line[256];
  for (int r = 0; r < ranks; ++r) {
    std::snprintf(line, sizeof line, "#  Rank %2d Group  0 Pid %6d on %10s device %2d [0x%02x] NVIDIA H100 80GB HBM3\n",
                  r, 1000 + r, ("node" + std::to_string(r / (ranks / nodes))).c_str(), r % (ranks / nodes), 0x18 + r);
    out += line;
  }
  out +=
      "#\n#                                                              out-of-place                       in-place\n"
      "#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw "
      "#wrong\n#        (B)    (elements)                               (us)  (GB/s)  (GB/s)            (us)  (GB/s)"
      "  (GB/s)\n";
  for (std::size_t i = 0; i < t.sizes.size(); ++i) {
    const double us = times[i], size = t.sizes[i];
    char time[32];
    std::snprintf(time, sizeof time, us >= 10000 ? "%7.0f" : us >= 100 ? "%7.1f" : "%7.2f", us);
    const double algbw = size / us / 1e3;
    std::snprintf(line, sizeof line,
                  "%12.0f  %12.0f     float    none      -1  %s  %6.2f  %6.2f  0  %s  %6.2f  %6.2f  0\n", size,
                  size / 4, time, algbw, algbw, time, algbw, algbw);
    out += line;
  }
  return out + "# Out of bounds values : 0 OK\n# Avg bus bandwidth    : 1.0\n#\n";
}

// `cpsim bench gpu_attention --json` with the machine's modeled times (B = 1, 64 heads of 128, causal).
std::string attention_output(const Machine& m) {
  std::string out =
      "{\"bench\":\"gpu_attention\",\"gpu\":\"modeled\",\"dtype\":\"bf16\",\"causal\":true,\"batch\":1,"
      "\"heads\":64,\"head_dim\":128,\"points\":[";
  for (std::int64_t S = 4096; S <= 65536; S *= 2) {
    const double fwd = attention_us(m, square_attention(64, S, 128, true, false)) / 1e3;
    const double bwd = attention_us(m, square_attention(64, S, 128, true, true)) / 1e3;
    char p[160];
    std::snprintf(p, sizeof p, "%s{\"seq\":%lld,\"fwd_ms\":%.6f,\"bwd_ms\":%.6f}", S == 4096 ? "" : ",",
                  static_cast<long long>(S), fwd, bwd);
    out += p;
  }
  return out + "]}";
}

std::string put(const std::string& name, const std::string& text) {
  const std::string path = std::string(CPSIM_BINARY_DIR) + "/tests/calibrate_" + name;
  std::ofstream(path) << text;
  return path;
}

}  // namespace

TEST_CASE("cpsim calibrate recovers a known machine from its nccl-tests tables and gpu_attention bench") {
  // The machine to recover: h100-ib with every value calibration fits moved away from the preset.
  Machine known = load_machine("h100-ib");
  known.intra = Link{4.2, 150, 300};
  known.inter = Link{11.0, 40, 21};
  known.collective_base_us = 9.5;
  for (auto& k : known.kernels)
    if (k.head_dim == 128) {
      k.forward_causal = {600, 800};
      k.backward_causal = {520, 1100};
    }
  const std::string args = "calibrate --machine h100-ib --sendrecv " +
                           put("sr1.txt", nccl_output(known, NcclTest::sendrecv, 2, 1)) + " --sendrecv " +
                           put("sr2.txt", nccl_output(known, NcclTest::sendrecv, 2, 2)) + " --all-gather " +
                           put("ag1.txt", nccl_output(known, NcclTest::all_gather, 8, 1)) + " --all-gather " +
                           put("ag2.txt", nccl_output(known, NcclTest::all_gather, 16, 2)) + " --all-to-all " +
                           put("a2a2.txt", nccl_output(known, NcclTest::all_to_all, 16, 2)) + " --gpu-attention " +
                           put("attn.json", attention_output(known));
  const std::string out = std::string(CPSIM_BINARY_DIR) + "/tests/calibrate_machine.json";
  std::filesystem::remove(out);
  const auto r = run_cli(args + " --name recovered --out " + out, "calibrate");
  REQUIRE(r.rc == 0);
  CHECK(r.out.find("Wrote " + out) != std::string::npos);
  CHECK(r.out.find("Check: alltoall_perf (calibrate_a2a2.txt, 16 ranks / 2 node(s))") != std::string::npos);
  const Machine got = load_machine(out);
  CHECK(got.name == "recovered");
  CHECK(got.intra.latency_us == doctest::Approx(4.2).epsilon(0.01));
  CHECK(got.intra.p2p_gbps == doctest::Approx(150).epsilon(0.01));
  CHECK(got.intra.collective_gbps == doctest::Approx(300).epsilon(0.01));
  CHECK(got.inter.latency_us == doctest::Approx(11.0).epsilon(0.01));
  CHECK(got.inter.p2p_gbps == doctest::Approx(40).epsilon(0.01));
  CHECK(got.inter.collective_gbps == doctest::Approx(21).epsilon(0.01));
  CHECK(got.collective_base_us == doctest::Approx(9.5).epsilon(0.02));
  const KernelCurves k = got.curves_for(128), preset = load_machine("h100-ib").curves_for(128);
  CHECK(k.forward_causal.tflops == doctest::Approx(600).epsilon(0.01));
  CHECK(k.forward_causal.half_len == doctest::Approx(800).epsilon(0.02));
  CHECK(k.backward_causal.tflops == doctest::Approx(520).epsilon(0.01));
  CHECK(k.backward_causal.half_len == doctest::Approx(1100).epsilon(0.02));
  // The full curves are scaled with the causal ones (the bench measures causal blocks only).
  CHECK(k.forward_full.tflops == doctest::Approx(preset.forward_full.tflops * 600 / preset.forward_causal.tflops));
  // What was not measured stays the base machine's, and every fitted value names where it came from.
  CHECK(got.hbm_gbps == load_machine("h100-ib").hbm_gbps);
  CHECK(got.sources.at("inter.collective_gbps").find("calibrate_ag2.txt") != std::string::npos);
  CHECK(got.sources.at("kernel_d128.forward_causal_tflops").find("calibrate_attn.json") != std::string::npos);
  std::filesystem::remove(out);
}

TEST_CASE("cpsim calibrate refuses input that is not what it names, in one line with exit code 2") {
  const std::string junk = put("junk.txt", "hello\nworld\n");
  const std::string json = put("notbench.json", "{\"bench\": \"strategies\"}");
  const std::string two_kernels =
      put("two_kernels.json",
          "{\"bench\":\"gpu_attention\",\"causal\":true,\"batch\":1,\"heads\":64,\"head_dim\":128,\"points\":["
          "{\"kernel\":\"mma2\",\"seq\":4096,\"fwd_ms\":1,\"bwd_ms\":2},"
          "{\"kernel\":\"mma1\",\"seq\":4096,\"fwd_ms\":1.5,\"bwd_ms\":3}]}");
  const std::string norank = put("norank.txt",
                                 "#  size count type redop root time algbw busbw\n 1024 256 float none -1 "
                                 "10.0 0.1 0.1 0\n 2048 512 float none -1 11.0 0.2 0.2 0\n");
  using Case = std::pair<std::string, std::string>;
  for (const auto& [args, says] :
       {Case{"calibrate", "at least one"}, Case{"calibrate --all-gather " + junk, "no nccl-tests table"},
        Case{"calibrate --all-gather " + norank, "names no ranks"},
        Case{"calibrate --gpu-attention " + json, "not `cpsim bench gpu_attention"},
        Case{"calibrate --gpu-attention " + two_kernels, "several kernels (mma2, mma1)"},
        Case{"calibrate --sendrecv /nonexistent/x.txt", "cannot be read"},
        Case{"calibrate --published --sendrecv " + junk, "takes no tables"}}) {
    CAPTURE(args);
    const auto r = run_cli(args, "calibrate_bad");
    CHECK(r.rc == 2);
    CHECK(r.out.empty());
    CHECK(count_lines(r.err) == 1);
    CHECK(r.err.find(says) != std::string::npos);
  }
}

TEST_CASE("cpsim calibrate on a machine of the first format gives it kernel curves of the bench's head dim") {
  const Machine known = load_machine("h100-sxm-8");
  const auto r =
      run_cli("calibrate --machine local-cpu --gpu-attention " + put("attn_cpu.json", attention_output(known)),
              "calibrate_cpu");
  REQUIRE(r.rc == 0);
  const Machine got = parse_machine(r.out, "stdout");
  REQUIRE(got.kernels.size() == 1);
  CHECK(got.kernels[0].head_dim == 128);
  CHECK(got.kernels[0].forward_causal.tflops ==
        doctest::Approx(known.curves_for(128).forward_causal.tflops).epsilon(0.01));
  CHECK(got.sources.count("attention.forward_tflops") == 0);  // the first format's curve is gone, and its source
  CHECK(got.intra.collective_gbps == load_machine("local-cpu").intra.collective_gbps);
}

TEST_CASE("cpsim calibrate --published prints every preset fit with the values the presets hold") {
  const auto r = run_cli("calibrate --published", "calibrate_published");
  REQUIRE(r.rc == 0);
  CHECK(r.err.empty());
  const auto one_decimal = [](double x) {
    char v[32];
    std::snprintf(v, sizeof v, "%.1f", x);
    return std::string(v);
  };
  // 1. Every sweep's fitted curve, as the H100 and H800 presets hold it.
  for (const auto& [machine, sweeps] : {std::pair{"h100-sxm-8", &flash_attention_3_sweeps()},
                                        std::pair{"h800-sxm-8", &flash_attention_2_sweeps()}}) {
    const Machine m = load_machine(machine);
    for (const KernelSweep& s : *sweeps) {
      const KernelCurves k = m.curves_for(s.head_dim);
      const KernelCurve& c = s.backward ? k.backward_full : (s.causal ? k.forward_causal : k.forward_full);
      CAPTURE(s.source);
      CHECK(r.out.find(" | " + one_decimal(c.tflops) + " | " + one_decimal(c.half_len) + " | ") != std::string::npos);
    }
  }
  // 2. The launch's profile and 3. each step fit with the value stored beside it.
  CHECK(r.out.find("largest launch with every half_len >= 0") != std::string::npos);
  for (const char* name : {"h800-sxm-8", "a100-sxm-8"}) {
    const Machine m = load_machine(name);
    const std::string fitted = one_decimal(fit_step_us(m, ring_runs_on(name)).step_us);
    CHECK(r.out.find("step_us = " + fitted + " us**, the preset stores " + one_decimal(m.step_us)) !=
          std::string::npos);
  }
}
