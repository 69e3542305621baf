// `cpsim calibrate` recovers a known machine: nccl-tests tables and a `cpsim bench gpu_attention --json` output
// are generated in the formats the tools print, and the fitted machine file must give back the machine's values.
// Two kinds of tables: the model's own line (every value identifiable), and tables shaped like real NCCL output
// (its LL protocol below 64 KiB, LL128 and Simple above, noise), from which the values nccl-tests defines (the
// small-message floor, the large-message busbw) must come back within 5%.
#include "sim/model/calibrate.hpp"

#include <doctest/doctest.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <fmt/format.h>

#include "../cli/run_cli.hpp"
#include "sim/model/cost.hpp"
#include "sim/model/fit.hpp"

using namespace cpsim;
using namespace cpsim::model;
using cpsim::test::count;
using cpsim::test::count_lines;
using cpsim::test::run_cli;

namespace {

// The rows of a table: nccl-tests' size column (bytes) and the out-of-place time (us) at each.
using Rows = std::vector<std::pair<double, double>>;

// What nccl-tests prints for one run (header, rank lines, the table: out-of-place and in-place columns, the
// latter 1% faster) of `test` on `ranks` ranks over `nodes` hosts. Times as nccl-tests formats them (2, 1 or 0
// decimals; src/util.cu getFloatStr).
std::string nccl_run(NcclTest test, int ranks, int nodes, const Rows& rows) {
  std::string out = std::string("# nccl-tests version 2.17.1 nccl-headers=22703 nccl-library=22703\n") +
                    "# Collective test starting: " + nccl_test_name(test) +
                    "\n# nThread 1 nGpus 1 minBytes 8 maxBytes 1073741824 step: 2(factor) warmup iters: 5 iters: 20\n#\n"
                    "# Using devices\n";
  char line[256];
  for (int r = 0; r < ranks; ++r) {
    std::snprintf(line, sizeof line, "#  Rank %2d Group  0 Pid %6d on %10s device %2d [0000:%02x:00] NVIDIA H100 80GB HBM3\n",
                  r, 1000 + r, ("node" + std::to_string(r / (ranks / nodes))).c_str(), r % (ranks / nodes), 0x18 + r);
    out += line;
  }
  out +=
      "#\n#                                                              out-of-place                       in-place\n"
      "#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw "
      "#wrong\n#        (B)    (elements)                               (us)  (GB/s)  (GB/s)            (us)  (GB/s)"
      "  (GB/s)\n";
  const auto time_text = [](double us) {
    char t[32];
    std::snprintf(t, sizeof t, us >= 10000 ? "%7.0f" : us >= 100 ? "%7.1f" : "%7.2f", us);
    return std::string(t);
  };
  const double factor = test == NcclTest::sendrecv ? 1.0 : (ranks - 1.0) / ranks;
  for (const auto& [size, us] : rows) {
    const double algbw = size / us / 1e3;
    std::snprintf(line, sizeof line, "%12.0f  %12.0f     float    none      -1  %s  %6.2f  %6.2f  0  %s  %6.2f  %6.2f  0\n",
                  size, size / 4, time_text(us).c_str(), algbw, algbw * factor, time_text(us * 0.99).c_str(),
                  algbw / 0.99, algbw * factor / 0.99);
    out += line;
  }
  return out + "# Out of bounds values : 0 OK\n# Avg bus bandwidth    : 1.0\n#\n";
}

// nccl-tests' sizes for -b 8 -e 1G -f 2: a collective's count per rank rounds down to 16 bytes (all_gather.cu,
// alltoall.cu: (count / nranks) & ~(16 / eltsize - 1)), so its smallest sizes print as 0.
std::vector<double> nccl_sizes(NcclTest test, int ranks) {
  std::vector<double> out;
  for (std::int64_t size = 8; size <= (std::int64_t{1} << 30); size *= 2) {
    std::int64_t s = size;
    if (test != NcclTest::sendrecv) s = ((size / 4 / ranks) & ~std::int64_t{3}) * 4 * ranks;
    out.push_back(static_cast<double>(s));
  }
  return out;
}

// The model's own times at every size (modeled_times_us); the size-0 rows nccl-tests prints, at 0.2 us.
Rows model_rows(const Machine& m, NcclTest test, int ranks, int nodes) {
  NcclTable t;
  t.test = test;
  t.ranks = ranks;
  t.nodes = nodes;
  for (double s : nccl_sizes(test, ranks))
    if (s > 0) t.sizes.push_back(s);
  const std::vector<double> times = modeled_times_us(m, t);
  Rows rows;
  for (double s : nccl_sizes(test, ranks))
    if (s == 0) rows.push_back({0, 0.2});
  for (std::size_t i = 0; i < t.sizes.size(); ++i) rows.push_back({t.sizes[i], times[i]});
  return rows;
}

// A table's values as nccl-tests defines them: the small-message floor and the large-message busbw (in the
// model's x, the bytes its equation divides by the bandwidth).
struct Truth {
  double floor_us, gbps;
};

// Real NCCL around those values (NCCL src/graph/tuning.cc, Ring): below 64 KiB its LL protocol, t = floor + x /
// (gbps / 4) (LL moves half its bytes as flags, on few channels); above, the faster of LL128 (latency floor +
// ll128_extra, 90% of the rate) and Simple (latency floor + simple_extra, the full rate). NCCL's tuner puts
// Simple's latency far above LL's on 8 NVLink GPUs: 8.4 + 7 x 3.4 = 32.2 us against 6.6 + 7 x 0.6 = 10.8.
// Noise: every time x (1 + 2% u), u uniform in [-1, 1] from a fixed seed.
Rows real_rows(NcclTest test, int ranks, int nodes, const Truth& truth, double ll128_extra, double simple_extra,
               std::uint32_t seed) {
  const double C = ranks, m = static_cast<double>(ranks / nodes);
  const double x_per_byte = test == NcclTest::sendrecv                         ? 1.0
                            : test == NcclTest::all_to_all && nodes > 1 ? (C - m) / C
                                                                               : (C - 1) / C;
  std::uint32_t state = seed;
  const auto noise = [&] {
    state = state * 1664525u + 1013904223u;
    return 1 + 0.02 * (static_cast<double>(state >> 8) / (1 << 24) * 2 - 1);
  };
  const double bytes_per_us = truth.gbps * 1e3;
  Rows rows;
  for (double s : nccl_sizes(test, ranks)) {
    if (s == 0) {
      rows.push_back({0, 0.2});
      continue;
    }
    const double x = s * x_per_byte;
    const double t = s <= 64 * 1024 ? truth.floor_us + x / (bytes_per_us / 4)
                                    : std::min(truth.floor_us + ll128_extra + x / (0.9 * bytes_per_us),
                                               truth.floor_us + simple_extra + x / bytes_per_us);
    rows.push_back({s, t * noise()});
  }
  return rows;
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
  std::ofstream(path, std::ios::binary) << text;
  return path;
}

// Every line of `text` passed through `edit` (a capture's prefixes, CRLF endings).
std::string each_line(const std::string& text, const std::function<std::string(const std::string&)>& edit) {
  std::string out;
  std::size_t at = 0;
  for (std::size_t nl = text.find('\n'); nl != std::string::npos; at = nl + 1, nl = text.find('\n', at))
    out += edit(text.substr(at, nl - at));
  return out;
}

// Runs calibrate on h100-ib with `args`, writing the machine to a file, and reads it back.
struct Calibrated {
  test::CliResult r;
  Machine m;
};
Calibrated calibrated(const std::string& args, const std::string& tag) {
  const std::string out = std::string(CPSIM_BINARY_DIR) + "/tests/calibrate_" + tag + ".json";
  std::filesystem::remove(out);
  Calibrated c{run_cli("calibrate --machine h100-ib " + args + " --name " + tag + " --out " + out, "calibrate_" + tag),
               {}};
  REQUIRE(c.r.rc == 0);
  c.m = load_machine(out);
  std::filesystem::remove(out);
  return c;
}

}  // namespace

TEST_CASE("cpsim calibrate recovers a known machine from its nccl-tests tables and gpu_attention bench") {
  // The machine to recover: h100-ib with every value calibration fits moved away from the preset, the tables its
  // model's own times. Two one-node all_gather runs (4 and 8 ranks) in one file split the floor into base and step.
  Machine known = load_machine("h100-ib");
  known.intra = Link{4.2, 150, 300, 0.9};
  known.inter = Link{11.0, 40, 21, 6.0};
  known.collective_base_us = 9.5;
  for (auto& k : known.kernels)
    if (k.head_dim == 128) {
      k.forward_causal = {600, 800};
      k.backward_causal = {520, 1100};
    }
  using T = NcclTest;
  const auto table = [&](T test, int C, int G) { return nccl_run(test, C, G, model_rows(known, test, C, G)); };
  const auto c = calibrated("--sendrecv " + put("sr1.txt", table(T::sendrecv, 2, 1)) + " --sendrecv " +
                                put("sr2.txt", table(T::sendrecv, 2, 2)) + " --all-gather " +
                                put("ag1.txt", table(T::all_gather, 4, 1) + table(T::all_gather, 8, 1)) +
                                " --all-gather " + put("ag2.txt", table(T::all_gather, 16, 2)) + " --all-to-all " +
                                put("a2a2.txt", table(T::all_to_all, 16, 2)) + " --gpu-attention " +
                                put("attn.json", attention_output(known)),
                            "recovered");
  CHECK(c.r.out.find("Check: calibrate_a2a2.txt: alltoall_perf on 16 ranks / 2 node(s)") != std::string::npos);
  CHECK(c.r.out.find("Check: calibrate_ag1.txt, run 2 (line ") != std::string::npos);
  const Machine& got = c.m;
  CHECK(got.name == "recovered");
  CHECK(got.intra.latency_us == doctest::Approx(4.2).epsilon(0.01));
  CHECK(got.intra.p2p_gbps == doctest::Approx(150).epsilon(0.01));
  CHECK(got.intra.collective_gbps == doctest::Approx(300).epsilon(0.01));
  CHECK(got.intra.step_latency_us == doctest::Approx(0.9).epsilon(0.02));
  CHECK(got.inter.latency_us == doctest::Approx(11.0).epsilon(0.01));
  CHECK(got.inter.p2p_gbps == doctest::Approx(40).epsilon(0.01));
  CHECK(got.inter.collective_gbps == doctest::Approx(21).epsilon(0.01));
  CHECK(got.inter.step_latency_us == doctest::Approx(6.0).epsilon(0.02));
  CHECK(got.collective_base_us == doctest::Approx(9.5).epsilon(0.02));
  const KernelCurves k = got.curves_for(128), preset = load_machine("h100-ib").curves_for(128);
  CHECK(k.forward_causal.tflops == doctest::Approx(600).epsilon(0.01));
  CHECK(k.forward_causal.half_len == doctest::Approx(800).epsilon(0.02));
  CHECK(k.backward_causal.tflops == doctest::Approx(520).epsilon(0.01));
  CHECK(k.backward_causal.half_len == doctest::Approx(1100).epsilon(0.02));
  // The full curves are scaled with the causal ones (the bench measures causal blocks only).
  CHECK(k.forward_full.tflops == doctest::Approx(preset.forward_full.tflops * 600 / preset.forward_causal.tflops));
  // The curves are cpsim's own kernels': they neither split nor pack, and start the longest tiles first.
  CHECK(got.max_kv_splits == 1);
  CHECK_FALSE(got.pack_gqa);
  CHECK(got.forward_longest_first);
  CHECK(got.sources.at("attention.forward_longest_first").find("attention_mma_fwd.cu") != std::string::npos);
  // What was not measured stays the base machine's, and every fitted value names where it came from.
  CHECK(got.hbm_gbps == load_machine("h100-ib").hbm_gbps);
  CHECK(got.sources.at("inter.collective_gbps").find("calibrate_ag2.txt") != std::string::npos);
  CHECK(got.sources.at("kernel_d128.forward_causal_tflops").find("calibrate_attn.json") != std::string::npos);
}

namespace {

// The machine behind the real-shaped tables: one node's and two nodes' figures as nccl-tests defines them.
// The collective base latency is h100-ib's (one group size cannot split a floor into base and steps).
struct RealMachine {
  double p2p_latency = 7.2, p2p_gbps = 150, nvlink_busbw = 300, step = 0.9;  // inside a node
  double nic_latency = 11, nic_gbps = 40, nic_ring_gbps = 21, net_step = 8;   // between nodes
  double base = 8.4;
  double ag_floor(int C, int G) const { return base + (C - G) * step + (G - 1) * net_step; }
};

// The six tables calibrate reads, shaped like real NCCL output (LL128 ~5 us and Simple ~20 us above the floor).
std::string real_args(const RealMachine& r, const std::function<std::string(const std::string&)>& capture) {
  using T = NcclTest;
  const auto file = [&](const std::string& name, T test, int C, int G, const Truth& truth, std::uint32_t seed) {
    return put(name, capture(nccl_run(test, C, G, real_rows(test, C, G, truth, 5, 20, seed))));
  };
  const int m = 8;  // ranks per node of the two-node tables
  return "--sendrecv " + file("real_sr1.txt", T::sendrecv, 2, 1, {r.p2p_latency, r.p2p_gbps}, 1) + " --sendrecv " +
         file("real_sr2.txt", T::sendrecv, 2, 2, {r.nic_latency, r.nic_gbps}, 2) + " --all-gather " +
         file("real_ag1.txt", T::all_gather, 8, 1, {r.ag_floor(8, 1), r.nvlink_busbw}, 3) + " --all-gather " +
         file("real_ag2.txt", T::all_gather, 16, 2, {r.ag_floor(16, 2), m * r.nic_ring_gbps}, 4) +
         " --all-to-all " +
         file("real_a2a1.txt", T::all_to_all, 8, 1, {r.ag_floor(8, 1), r.nvlink_busbw}, 5) + " --all-to-all " +
         file("real_a2a2.txt", T::all_to_all, 16, 2, {r.base + m * r.net_step, r.nic_gbps}, 6);
}

}  // namespace

TEST_CASE("cpsim calibrate recovers within 5% a machine from tables shaped like real NCCL output") {
  const RealMachine r;
  // The shape the issue names: an 8-GPU all_gather's small-message time is far below base + 7 x a send/recv's.
  REQUIRE(r.ag_floor(8, 1) < r.base + 7 * r.p2p_latency);
  const auto c = calibrated(real_args(r, [](const std::string& s) { return s; }), "real");
  const Machine& got = c.m;
  struct Field {
    const char* name;
    double got, truth;
  };
  const Field fields[] = {{"intra.latency_us", got.intra.latency_us, r.p2p_latency},
                          {"intra.p2p_gbps", got.intra.p2p_gbps, r.p2p_gbps},
                          {"intra.gbps", got.intra.collective_gbps, r.nvlink_busbw},
                          {"intra.step_latency_us", got.intra.step_latency_us, r.step},
                          {"inter.latency_us", got.inter.latency_us, r.nic_latency},
                          {"inter.gbps", got.inter.p2p_gbps, r.nic_gbps},
                          {"inter.collective_gbps", got.inter.collective_gbps, r.nic_ring_gbps},
                          {"inter.step_latency_us", got.inter.step_latency_us, r.net_step},
                          {"collective.base_latency_us (kept)", got.collective_base_us, r.base}};
  std::string report = "recovery from real-shaped tables (2% noise):";
  for (const Field& f : fields) {
    char line[128];
    std::snprintf(line, sizeof line, "\n  %-36s truth %8.3f  fitted %8.3f  error %+6.2f%%", f.name, f.truth, f.got,
                  (f.got / f.truth - 1) * 100);
    report += line;
    CAPTURE(f.name);
    CHECK(f.got == doctest::Approx(f.truth).epsilon(0.05));
  }
  MESSAGE(report);
  // Every fitted value printed with its residual and the rows it came from; one warning (the base kept); every
  // table replayed regime by regime, the protocol switch named as its own.
  CHECK(c.r.out.find("intra.gbps") != std::string::npos);
  CHECK(c.r.out.find("MiB..1 GiB (") != std::string::npos);
  CHECK(c.r.out.find("128 B..64 KiB (10 rows)") != std::string::npos);
  CHECK(count(c.r.out, "Warning: ") == 1);
  CHECK(c.r.out.find("collective.base_latency_us: kept at h100-ib's 8.4 us") != std::string::npos);
  CHECK(count(c.r.out, "Check: ") == 6);
  CHECK(c.r.out.find("protocol switch") != std::string::npos);
  CHECK(c.r.out.find("in-place plateau busbw") != std::string::npos);
}

TEST_CASE("cpsim calibrate reads output as captured: CRLF, Open MPI's tag and timestamp prefixes, MPICH's") {
  const RealMachine r;
  const Machine plain = calibrated(real_args(r, [](const std::string& s) { return s; }), "plain").m;
  using Edit = std::function<std::string(const std::string&)>;
  const std::pair<const char*, Edit> captures[] = {
      {"crlf", [](const std::string& s) { return each_line(s, [](const std::string& l) { return l + "\r\n"; }); }},
      {"tagged",
       [](const std::string& s) { return each_line(s, [](const std::string& l) { return "[1,0]<stdout>:" + l + "\n"; }); }},
      {"timestamped",
       [](const std::string& s) {
         return each_line(s, [](const std::string& l) { return "Mon Dec  7 10:00:00 2026[1,0]<stdout>:" + l + "\n"; });
       }},
      {"mpich", [](const std::string& s) { return each_line(s, [](const std::string& l) { return "[0] " + l + "\n"; }); }}};
  for (const auto& [name, edit] : captures) {
    CAPTURE(name);
    const Machine got = calibrated(real_args(r, edit), name).m;
    for (const char* field : {"intra.latency_us", "intra.p2p_gbps", "intra.gbps", "intra.step_latency_us",
                              "inter.latency_us", "inter.gbps", "inter.collective_gbps", "inter.step_latency_us"}) {
      CAPTURE(field);
      Machine a = plain, b = got;
      CHECK(*machine_value(b, field) == *machine_value(a, field));
    }
  }
}

TEST_CASE("cpsim calibrate splits a floor into base and step from runs of two group sizes in one file") {
  // 4 and 8 GPUs' all_gather, real-shaped, one after the other in one file; base and step both differ from h100-ib.
  const double base = 6.0, step = 0.9, busbw = 300;
  const std::string file =
      put("two_runs.txt", nccl_run(NcclTest::all_gather, 4, 1,
                                   real_rows(NcclTest::all_gather, 4, 1, {base + 3 * step, busbw}, 5, 20, 7)) +
                              nccl_run(NcclTest::all_gather, 8, 1,
                                       real_rows(NcclTest::all_gather, 8, 1, {base + 7 * step, busbw}, 5, 20, 8)));
  const auto c = calibrated("--all-gather " + file, "two_runs");
  CHECK(c.m.collective_base_us == doctest::Approx(base).epsilon(0.05));
  CHECK(c.m.intra.step_latency_us == doctest::Approx(step).epsilon(0.05));
  CHECK(c.m.intra.collective_gbps == doctest::Approx(busbw).epsilon(0.05));
  CHECK(count(c.r.out, "Warning: ") == 0);
  CHECK(c.r.out.find("calibrate_two_runs.txt, run 1 (line 1)") != std::string::npos);
  CHECK(c.r.out.find("calibrate_two_runs.txt, run 2 (line ") != std::string::npos);
}

TEST_CASE("cpsim calibrate clamps a latency the data would make negative, with one warning") {
  // An 8-GPU floor of 5 us, below h100-ib's base of 8.4: the step would be negative.
  const std::string file = put(
      "low_floor.txt", nccl_run(NcclTest::all_gather, 8, 1, real_rows(NcclTest::all_gather, 8, 1, {5, 300}, 5, 20, 9)));
  const auto c = calibrated("--all-gather " + file, "low_floor");
  CHECK(c.m.intra.step_latency_us == 0);
  CHECK(c.m.collective_base_us == doctest::Approx(5).epsilon(0.05));
  CHECK(count(c.r.out, "Warning: ") == 1);
  CHECK(c.r.out.find("Warning: intra.step_latency_us: the floor") != std::string::npos);
  CHECK(c.r.out.find("clamped to 0") != std::string::npos);
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
  // A file of two runs whose second is all_reduce_perf's; a table whose rows lack the header's time column; a
  // table whose busbw falls as the size grows (not nccl-tests' shape); a sendrecv on 8 ranks.
  const Machine h100 = load_machine("h100-sxm-8");
  std::string all_reduce = nccl_run(NcclTest::all_gather, 8, 1, model_rows(h100, NcclTest::all_gather, 8, 1));
  const std::string named = "# Collective test starting: all_gather_perf";
  all_reduce.replace(all_reduce.find(named), named.size(), "# Collective test starting: all_reduce_perf");
  const std::string good =
      put("good.txt", nccl_run(NcclTest::all_gather, 8, 1, model_rows(h100, NcclTest::all_gather, 8, 1)));
  const std::string mixed =
      put("mixed.txt", nccl_run(NcclTest::all_gather, 8, 1, model_rows(h100, NcclTest::all_gather, 8, 1)) + all_reduce);
  const std::string short_rows = put("short_rows.txt", "#  Rank  0 Group 0 Pid 1 on a device 0 [0x18] H100\n"
                                                       "#  Rank  1 Group 0 Pid 2 on a device 1 [0x19] H100\n"
                                                       "#  size count type redop root time algbw busbw\n"
                                                       " 1024 256 float none -1\n");
  Rows falling;
  for (double size = 1024; size <= 1 << 20; size *= 4) falling.push_back({size, size * size / 1e6});
  const std::string backwards = put("backwards.txt", nccl_run(NcclTest::all_gather, 8, 1, falling));
  const std::string sr8 = put("sr8.txt", nccl_run(NcclTest::sendrecv, 8, 1, model_rows(h100, NcclTest::sendrecv, 2, 1)));
  using Case = std::pair<std::string, std::string>;
  for (const auto& [args, says] :
       {Case{"calibrate --all-gather " + mixed, "calibrate_mixed.txt, run 2 (line "},
        Case{"calibrate --all-gather " + mixed, "is the output of all_reduce_perf, not of all_gather_perf"},
        Case{"calibrate --all-gather " + short_rows, "line 4 is a row of 5 columns without a time in column 6"},
        Case{"calibrate --all-gather " + backwards, "busbw falls from"},
        Case{"calibrate --sendrecv " + sr8, "fitted on 2 ranks (it names 8)"},
        Case{"calibrate --machine h100-pcie-8 --all-gather " + good, "has 3 levels"},
        Case{"calibrate", "at least one"}, Case{"calibrate --all-gather " + junk, "no nccl-tests table"},
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
    const std::string fitted = fmt::format("{:.2f}", fit_step_bytes(m, ring_runs_on(name)).step_bytes);
    CHECK(r.out.find("step_bytes_per_element = " + fitted + "**") != std::string::npos);
    CHECK(r.out.find("the preset stores " + fmt::format("{:.2f}", m.step_bytes_per_element)) != std::string::npos);
  }
}
