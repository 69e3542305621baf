// Machine files and presets, and the cost equations checked against the published figures they were built from.
// Every published number below is the publication's; the model's side is always computed here.
#include "sim/model/machine.hpp"

#include <doctest/doctest.h>

#include <regex>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "../cli/run_cli.hpp"
#include "gqa_spec.hpp"
#include "relative_error.hpp"
#include "sim/core/error.hpp"
#include "sim/core/json.hpp"
#include "sim/model/cost.hpp"
#include "sim/model/counting_device.hpp"
#include "sim/model/predict.hpp"
#include "sim/model/published.hpp"

using namespace cpsim;
using namespace cpsim::model;

namespace {

std::string error_of(const std::string& json) {
  try {
    parse_machine(json, "test.json");
  } catch (const UsageError& e) {
    return e.what();
  }
  return "";
}

std::string replace(std::string s, const std::string& from, const std::string& to) {
  const auto at = s.find(from);
  REQUIRE(at != std::string::npos);
  return s.replace(at, from.size(), to);
}

std::string text_of(const std::string& path) {
  std::ifstream f(path);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

const std::string kV1 = std::string(CPSIM_SOURCE_DIR) + "/tests/model/machines_v1/";

// TFLOP/s the model gives one kernel call: flops / time.
double tflops_of(const Machine& m, const Op& op) {
  return op.flops / attention_us(m, op) / 1e6;
}

}  // namespace

TEST_CASE("every preset parses and names a source for every value it gives") {
  for (const auto& name : machine_preset_names()) {
    CAPTURE(name);
    const Machine m = load_machine(name);
    CHECK(m.name == name);
    CHECK(!m.given.empty());
    for (const auto& field : m.given) {
      CAPTURE(field);
      CHECK(m.sources.count(field) == 1);
      if (m.sources.count(field)) CHECK(!m.sources.at(field).empty());
    }
  }
}

TEST_CASE("a machine file written out and read back is the same machine, and so is one on disk") {
  for (const auto& name : machine_preset_names()) {
    CAPTURE(name);
    Machine preset = load_machine(name);
    const Machine back = parse_machine(machine_json(preset), "written");
    CHECK(back.kernels.size() == preset.kernels.size());
    for (const auto& f : machine_fields()) {
      Machine a = preset, b = back;
      const double *x = machine_value(a, f.name), *y = machine_value(b, f.name);
      if (x && y) CHECK(*x == doctest::Approx(*y));
    }
  }
  const auto path = std::filesystem::temp_directory_path() / "cpsim_machine_test.json";
  {
    std::ofstream f(path);
    f << replace(machine_preset_json("h100-ib"), "\"gbps\": 48.5", "\"gbps\": 24.25");
  }
  const Machine file = load_machine(path.string()), preset = load_machine("h100-ib");
  std::filesystem::remove(path);
  CHECK(file.inter.p2p_gbps == preset.inter.p2p_gbps / 2);
  CHECK(file.intra.collective_gbps == preset.intra.collective_gbps);
  CHECK(file.ranks_per_node == preset.ranks_per_node);
}

TEST_CASE("machine files with a wrong key, a missing value or a bad number are refused with the field named") {
  const std::string good = machine_preset_json("h100-sxm-8");
  CHECK(error_of(good).empty());
  CHECK(error_of(replace(good, "\"hbm_gbps\"", "\"hbm_gpbs\"")).find("memory.hbm_gpbs") != std::string::npos);
  CHECK(error_of(replace(good, "\"latency_us\": 3.4", "\"latency_us\": \"fast\"")).find("intra.latency_us") !=
        std::string::npos);
  CHECK(error_of(replace(good, "\"gbps\": 360,", "")).find("intra.gbps") != std::string::npos);
  CHECK(error_of(replace(good, "\"sm_count\": 132", "\"sm_count\": 0")).find("attention.sm_count") !=
        std::string::npos);
  CHECK(error_of("{ not json").find("not valid JSON") != std::string::npos);
  CHECK_THROWS_AS(load_machine("no-such-machine"), UsageError);
}

TEST_CASE("absurd machine values are refused with the field's plausible range") {
  const std::string good = machine_preset_json("h100-sxm-8");
  const std::string slow = error_of(replace(good, "\"latency_us\": 3.4", "\"latency_us\": 1e308"));
  CHECK(slow.find("intra.latency_us") != std::string::npos);
  CHECK(slow.find("plausible range 0 .. 1e+06") != std::string::npos);
  // d=128's causal forward rate (fitted, so its digits are not written here) replaced by an absurd one.
  std::string tiny = good;
  const auto at = tiny.find("\"forward_causal_tflops\": ", tiny.find("\"kernel_d128\""));
  REQUIRE(at != std::string::npos);
  const auto from = at + std::string("\"forward_causal_tflops\": ").size();
  tiny.replace(from, tiny.find(',', from) - from, "1e-300");
  const std::string weak = error_of(tiny);
  CHECK(weak.find("kernel_d128.forward_causal_tflops") != std::string::npos);
  CHECK(weak.find("plausible range") != std::string::npos);
  // A count too large is reported as out of range, not as "not a whole number".
  const std::string many = error_of(replace(good, "\"ranks_per_node\": 8", "\"ranks_per_node\": 1e12"));
  CHECK(many.find("nodes.ranks_per_node") != std::string::npos);
  CHECK(many.find("plausible range") != std::string::npos);
  CHECK(error_of(replace(good, "\"ranks_per_node\": 8", "\"ranks_per_node\": 7.5")).find("whole number") !=
        std::string::npos);
}

TEST_CASE("a machine file that is not one JSON object of sections is named as such") {
  CHECK(error_of("[1, 2]").find("must hold one JSON object of sections; it holds an array") != std::string::npos);
  CHECK(error_of("  5").find("it holds a single value") != std::string::npos);
  CHECK(error_of("").find("it holds nothing") != std::string::npos);
  const std::string good = machine_preset_json("h100-sxm-8");
  CHECK(error_of(replace(good, "\"memory\": {\n    \"hbm_gbps\": 3000\n  }", "\"memory\": 3000"))
            .find("must be an object") != std::string::npos);
}

TEST_CASE("machine files of the first format keep loading and keep meaning what they say") {
  for (const char* file : {"h800-fa2.json", "a100-fa2.json"}) {
    CAPTURE(file);
    const Machine m = load_machine(kV1 + file);
    // One curve per direction for every head dim, read at inner-loop length L: a causal square of S rows has
    // L = S/2, a full block L = its keys per query row.
    REQUIRE(m.kernels.size() == 1);
    const std::string json = text_of(kV1 + file);
    const double t = m.kernels[0].forward_full.tflops, h = m.kernels[0].forward_full.half_len;
    CHECK(json.find("\"forward_tflops\": " + std::to_string(t).substr(0, 5)) != std::string::npos);
    const Op causal = square_attention(32, 8192, 128, true, false),
             full = square_attention(32, 8192, 128, false, false);
    CHECK(causal.flops / (attention_us(m, causal) - m.launch_us) / 1e6 * occupancy_factor(m, causal) ==
          doctest::Approx(t * 4096 / (4096 + h)));
    CHECK(full.flops / (attention_us(m, full) - m.launch_us) / 1e6 * occupancy_factor(m, full) ==
          doctest::Approx(t * 8192 / (8192 + h)));
    // One rate per link for both kinds of traffic; no contention, no stack costs beyond what is counted.
    CHECK(m.intra.p2p_gbps == m.intra.collective_gbps);
    CHECK(m.inter.p2p_gbps == m.inter.collective_gbps);
    CHECK(m.comm_sms == 0);
    // A strategy step costs what ring-flash-attention's measured steps cost per element of the output.
    CHECK(m.step_us == 0);
    CHECK(m.step_bytes_per_element == kDefaultStepBytesPerElement);
    CHECK(m.merge_bytes_per_element == 0);
    CHECK(m.grad_add_bytes_per_element == 0);
  }
}

TEST_CASE("docs/model.md gives every machine field with its plausible range") {
  const std::string doc = text_of(std::string(CPSIM_SOURCE_DIR) + "/docs/model.md");
  for (const auto& f : machine_fields()) {
    CAPTURE(f.name);
    CHECK(doc.find("`" + f.name + "`") != std::string::npos);
  }
  for (const auto& f : kernel_fields()) {
    CAPTURE(f.name);
    CHECK(doc.find("`kernel_dD." + f.name + "`") != std::string::npos);
  }
  for (const auto& f : level_fields()) {
    CAPTURE(f.name);
    CHECK(doc.find("`levels[]." + f.name + "`") != std::string::npos);
  }
}

TEST_CASE("a one-node machine refuses more ranks than it has GPUs") {
  const Machine m = load_machine("h100-sxm-8");
  CHECK_NOTHROW(check_fits(m, 8));
  CHECK_THROWS_AS(check_fits(m, 16), UsageError);
  CHECK_NOTHROW(check_fits(load_machine("h100-ib"), 256));
}

TEST_CASE("the H100 kernel curves are within 6% of FlashAttention-3's published rates, d = 64 and 128, 512-16K") {
  // FlashAttention-3 paper (Shah et al. 2024), H100 SXM5 BF16; B x S = 16K tokens, heads x D = 2048.
  struct Series {
    int d;
    bool causal, backward;
    double tflops[6];  // S = 512, 1K, 2K, 4K, 8K, 16K
  };
  const Series published[] = {
      {64, true, false, {197, 265, 371, 420, 460, 473}},   {64, false, false, {333, 392, 460, 476, 496, 497}},
      {64, false, true, {272, 363, 422, 453, 472, 474}},   {128, true, false, {292, 423, 521, 579, 602, 616}},
      {128, false, false, {467, 565, 625, 638, 646, 648}}, {128, false, true, {316, 424, 501, 542, 559, 561}},
  };
  const Machine m = load_machine("h100-sxm-8");
  for (const Series& s : published)
    for (int i = 0; i < 6; ++i) {  // 512 .. 16K
      const std::int64_t S = std::int64_t{512} << i, B = 16384 / S, heads = 2048 / s.d;
      CAPTURE(s.d);
      CAPTURE(s.causal);
      CAPTURE(s.backward);
      CAPTURE(S);
      const double model = tflops_of(m, square_attention(B * heads, S, s.d, s.causal, s.backward));
      CHECK(relative_error(model, s.tflops[i]) <= 0.06);  // the fits: worst 5.4% (docs/model.md); the goal is 15%
    }
}

TEST_CASE("the H800 and A100 kernels give ring-flash-attention's one-GPU runs (8K tokens, 32 heads of 128)") {
  // 591.5 it/s forward and 154.7 forward + backward on an H800, 373.4 and 94.7 on an A100.
  struct Run {
    const char* machine;
    double fwd_per_s, fwd_bwd_per_s, within;
  };
  for (const Run& r : {Run{"h800-sxm-8", 591.5, 154.7, 0.05}, Run{"a100-sxm-8", 373.4, 94.7, 0.01}}) {
    CAPTURE(r.machine);
    const Machine m = load_machine(r.machine);
    const double fwd = attention_us(m, square_attention(32, 8192, 128, true, false));
    const double bwd = attention_us(m, square_attention(32, 8192, 128, true, true));
    CHECK(relative_error(1e6 / fwd, r.fwd_per_s) <= r.within);
    CHECK(relative_error(1e6 / (fwd + bwd), r.fwd_bwd_per_s) <= r.within);
  }
}

TEST_CASE("a head dim between two listed ones takes curves between theirs") {
  const Machine m = load_machine("h100-sxm-8");
  const KernelCurves a = m.curves_for(64), b = m.curves_for(128), mid = m.curves_for(96);
  CHECK(mid.forward_full.tflops > std::min(a.forward_full.tflops, b.forward_full.tflops));
  CHECK(mid.forward_full.tflops < std::max(a.forward_full.tflops, b.forward_full.tflops));
  CHECK(m.curves_for(512).forward_full.tflops == m.curves_for(256).forward_full.tflops);
  // Below the smallest listed head dim the rate falls as D / (D + D0), D0 from the listed rates at 64 and 128.
  const double d0 = head_dim_half_width(m);
  CHECK(d0 == doctest::Approx(64.0 * 128 * (b.forward_full.tflops / a.forward_full.tflops - 1) /
                              (128 - 64 * b.forward_full.tflops / a.forward_full.tflops)));
  CHECK(m.curves_for(32).forward_full.tflops ==
        doctest::Approx(a.forward_full.tflops * (32 / (32 + d0)) / (64 / (64 + d0))));
  CHECK(m.curves_for(16).forward_full.tflops < m.curves_for(32).forward_full.tflops);
  CHECK(m.curves_for(32).forward_full.half_len == a.forward_full.half_len);
}

TEST_CASE("the FlashAttention-3 paper's peak rates over head dims follow R D / (D + D0)") {
  // Fig. 5 non-causal forward at 16K: 497, 648, 756 TFLOP/s at d = 64, 128, 256. D0 from the first two predicts
  // the third within 2%: the law the curves below d = 64 follow.
  const auto& fa3 = flash_attention_3_sweeps();
  const double r64 = find_sweep(fa3, 64, false, false).tflops.back(), r128 = find_sweep(fa3, 128, false, false).tflops.back(),
               r256 = find_sweep(fa3, 256, false, false).tflops.back();
  const double r = r128 / r64, d0 = 64.0 * 128 * (r - 1) / (128 - r * 64);
  CHECK(d0 == doctest::Approx(kDefaultHeadDimHalfWidth).epsilon(0.01));
  const double R = r64 * (64 + d0) / 64;
  CHECK(relative_error(R * 256 / (256 + d0), r256) <= 0.02);
}

TEST_CASE("tiles handed out in order to the SMs: one resident runs alone, several share the SM's rate") {
  // One slot per SM: greedy list scheduling. Three tiles of 3 on two SMs: the third waits for the first.
  CHECK(makespan({3, 3, 3}, 2, 1) == doctest::Approx(6));
  // In order, the longest last: it starts when the short ones are done; longest first ends sooner.
  CHECK(makespan({1, 1, 1, 3}, 2, 1) == doctest::Approx(4));
  CHECK(makespan({3, 1, 1, 1}, 2, 1) == doctest::Approx(3));
  // Two slots on one SM: two tiles at half its rate each; when one ends the other runs at the whole rate.
  CHECK(makespan({1, 1, 1, 1}, 1, 2) == doctest::Approx(4));
  CHECK(makespan({2, 1}, 1, 2) == doctest::Approx(3));
  // The emptiest SM takes the next tile: three tiles on two SMs of two slots end at 2 (two share SM 0).
  CHECK(makespan({1, 1, 1}, 2, 2) == doctest::Approx(2));
}

TEST_CASE("a head of more tiles than 64 per slot is scheduled in runs of tiles, its tail within 1/64 of a slot") {
  // One causal head of 2^21 rows: 16384 row tiles of 128 on 132 SMs, one slot each (more than 64 x 132 = 8448).
  const std::int64_t S = std::int64_t{1} << 21;
  std::vector<double> tiles;
  for (std::int64_t i = 0; i < S / 128; ++i) tiles.push_back(128.0 * 128 * static_cast<double>(i) + 128.0 * 129 / 2);
  const double exact = makespan(tiles, 132, 1) / (static_cast<double>(S) * static_cast<double>(S + 1) / 2 / 132);
  const double f = occupancy_factor(132, 128, 1, false, square_attention(1, S, 64, true, false));
  CHECK(f >= exact);
  CHECK(f - exact <= 1.0 / 64);
}

TEST_CASE("a kernel call's occupancy: idle SMs, whole waves, and the causal tiles' order") {
  Machine m = load_machine("h100-sxm-8");  // 132 SMs, tiles of 128 rows, one tile resident per SM
  m.max_kv_splits = 1;                     // a kernel that never splits its keys (the next case splits them)
  // 5 heads x 16 row tiles = 80 full tiles: 52 SMs idle.
  CHECK(occupancy_factor(m, square_attention(5, 2048, 64, false, false)) == doctest::Approx(132.0 / 80));
  // 160 tiles, one resident per SM: two whole waves, the second of 28 tiles.
  CHECK(occupancy_factor(m, square_attention(10, 2048, 64, false, false)) == doctest::Approx(2 * 132.0 / 160));
  CHECK(occupancy_factor(m, square_attention(33, 2048, 64, false, false)) == 1);  // 528 tiles: four whole waves
  // Two resident per SM (FlashAttention-2's forward): 160 tiles, one on every SM and a second on 28; those 28
  // take twice as long, sharing their SMs.
  Machine shared = m;
  shared.forward_ctas_per_sm = 2;
  CHECK(occupancy_factor(shared, square_attention(10, 2048, 64, false, false)) == doctest::Approx(2 * 132.0 / 160));
  // Causal, 5 heads of 16 row tiles, each tile on an SM of its own: the call lasts as long as the last row tile,
  // rows 1920..2047 of the triangle (row x sees x + 1 keys), against the 5 triangles spread over 132 SMs.
  double last = 0;
  for (int x = 1920; x < 2048; ++x) last += x + 1;
  CHECK(occupancy_factor(m, square_attention(5, 2048, 64, true, false)) ==
        doctest::Approx(last / (5 * 2048.0 * 2049 / 2 / 132)));
  // Enough causal tiles to fill the SMs many times over, handed out longest first: almost no loss.
  CHECK(occupancy_factor(m, square_attention(64, 16384, 128, true, false)) < 1.01);
  // FlashAttention-2's order, each head's shortest tiles first: the last head's longest tiles go out last and run
  // past the rest. 5 heads x 64 row tiles, two resident per SM: slower than longest first, and than the ideal.
  m.forward_ctas_per_sm = 2;
  m.forward_longest_first = false;
  const double in_order = occupancy_factor(m, square_attention(5, 8192, 128, true, false));
  m.forward_longest_first = true;
  const double longest = occupancy_factor(m, square_attention(5, 8192, 128, true, false));
  CHECK(in_order > longest);
  CHECK(longest > 1);
  // The backward goes key tile by key tile, the longest of each head first (its order does not depend on the flag).
  const Op backward = square_attention(5, 8192, 128, true, true);
  CHECK(occupancy_factor(m, backward) == occupancy_factor(shared, backward));
  CHECK(occupancy_factor(m, backward) > 1);  // 320 tiles on 132 SMs, one resident each: the tail of the last head
}

TEST_CASE("a forward of few row tiles splits its keys as FlashAttention does, and packs GQA heads") {
  const Machine m = load_machine("h100-ib");  // 132 SMs, tiles of 128 rows, FlashAttention-3: splits and packs
  const auto block = [](std::int64_t q, std::int64_t k, std::int64_t heads, std::int64_t group) {
    Op op;
    op.q_rows = q;
    op.k_rows = k;
    op.batch_heads = heads;
    op.kv_group = group;
    op.head_dim = 128;
    op.pairs = q * k * heads;
    op.flops = kForwardFlopsPerPairDim * 128 * static_cast<double>(op.pairs);
    return op;
  };
  // 16 heads x 3 row tiles = 48 < 0.8 x 132: split; waves of 48 s tiles: s = 1, 2 reach 0.36, 0.73 of a whole
  // wave, s = 3 (144 tiles, 1.09 waves) 0.55, ... the best is 1 (s = 11: 528 = 4 x 132); the fewest within 85%
  // of it: s = 5 (240 tiles, 1.82 waves, 0.91).
  Op few = block(320, 32000, 16, 1);
  CHECK(tiling(m, few).tiles == 48);
  CHECK(tiling(m, few).splits == 5);
  CHECK_FALSE(tiling(m, few).packed);  // a KV head per query head: nothing to pack
  // The split call: 240 parts in two whole waves (one part resident per SM), each over 32000 / 5 keys, the last
  // row tile padded (320 rows in 384), plus the combine of 5 partials.
  const double rate = m.curves_for(128).forward_full.rate(32000.0 / 5);
  const double combine = memory_us(m, static_cast<std::int64_t>(16.0 * 320 * 6 * 129 * 4));
  CHECK(attention_us(m, few) ==
        doctest::Approx(m.launch_us + few.flops / rate * 1e6 * (384.0 / 320) * (2 * 132.0 / 240) + combine));
  // The backward never splits; a machine that caps the parts at 1 keeps the idle SMs.
  few.backward = true;
  CHECK(tiling(m, few).splits == 1);
  few.backward = false;
  Machine plain = m;
  plain.max_kv_splits = 1;
  CHECK(occupancy_factor(plain, few) == doctest::Approx(132.0 / 48 * 384 / 320));
  // Enough tiles (0.8 x 132 or more), or 4 key tiles or fewer: no split.
  CHECK(tiling(m, block(1024, 32000, 16, 1)).splits == 1);  // 128 tiles
  CHECK(tiling(m, block(320, 512, 16, 1)).splits == 1);     // 4 key tiles
  // GQA, 16 query heads on one KV head, 800 rows: unpacked 7 tiles a head, the last 0.25 full (112 tiles, no
  // split); packed 12800 rows in 100 whole tiles, fewer than 0.8 x 132: split in 5 (500 parts, 3.8 waves), and packed.
  const Tiling gqa = tiling(m, block(800, 32000, 16, 16));
  CHECK(gqa.packed);
  CHECK(gqa.tiles == 100);
  CHECK(gqa.splits == 5);
  // A kernel that does not pack (FlashAttention-2's): 112 tiles, no split, its last tiles padded.
  CHECK_FALSE(tiling(load_machine("h800-sxm-8"), block(800, 32000, 16, 16)).packed);
  CHECK(tiling(load_machine("h800-sxm-8"), block(800, 32000, 16, 16)).splits == 1);
  CHECK(occupancy_factor(load_machine("h800-sxm-8"), block(800, 32000, 16, 16)) ==
        doctest::Approx(132.0 / 112 * 896 / 800));
}

TEST_CASE("a machine file without the fixed costs takes the published defaults") {
  std::string json = text_of(kV1 + "a100-fa2.json");
  for (const char* line : {"\"launch_us\": 2", "\"base_latency_us\": 8.4"}) {
    const auto at = json.find(line);
    REQUIRE(at != std::string::npos);
    json.erase(at, std::string(line).size());
  }
  // The commas left behind: drop a comma before a closing brace.
  json = std::regex_replace(json, std::regex(",\\s*\\}"), "\n}");
  const Machine m = parse_machine(json, "no fixed costs");
  CHECK(m.launch_us == kDefaultLaunchUs);
  CHECK(m.collective_base_us == kDefaultCollectiveBaseUs);
  CHECK(m.step_us == 0);
  CHECK(m.step_bytes_per_element == kDefaultStepBytesPerElement);
}

TEST_CASE("ring all-gather on one node reaches the NVLink busbw of nccl-tests for large messages") {
  const Machine m = load_machine("h100-sxm-8");
  const std::vector<int> node = {0, 1, 2, 3, 4, 5, 6, 7};
  const std::int64_t n = 1 << 30;  // per rank
  // busbw = algbw (C-1)/C = (C n / t) (C-1)/C = (C-1) n / t
  const double busbw = 7.0 * n / collective_us(m, Collective::all_gather, node, n) / 1e3;
  CHECK(busbw == doctest::Approx(360).epsilon(0.03));  // nccl-tests on 8x H100 SXM: 360-370 GB/s
}

TEST_CASE("send/recv between two H100s runs at half the collective rate, as nccl-tests sendrecv_perf measures") {
  const Machine m = load_machine("h100-sxm-8");
  const std::int64_t n = 1 << 30;
  CHECK(n / p2p_us(m, n, 0, 1) / 1e3 == doctest::Approx(180).epsilon(0.03));  // nccl-tests issue 268
}

TEST_CASE("all-gather over 32 nodes of 8 H100s runs at about 200 GB/s busbw (NCCL issue 1218)") {
  const Machine m = load_machine("h100-ib");
  std::vector<int> world(256);
  for (int r = 0; r < 256; ++r) world[static_cast<std::size_t>(r)] = r;
  const std::int64_t n = (std::int64_t{2} << 30) / 256;  // a 2 GiB all-gather
  const double busbw = 255.0 * n / collective_us(m, Collective::all_gather, world, n) / 1e3;
  CHECK(busbw == doctest::Approx(200).epsilon(0.1));
}

TEST_CASE("all-to-all over many nodes runs at about one NIC's rate, as nccl-tests measures (48-49 GB/s)") {
  const Machine m = load_machine("h100-ib");
  std::vector<int> world(256);
  for (int r = 0; r < 256; ++r) world[static_cast<std::size_t>(r)] = r;
  const std::int64_t n = 16 << 20;  // per peer
  const double busbw = 255.0 * n / collective_us(m, Collective::all_to_all, world, n) / 1e3;
  CHECK(busbw == doctest::Approx(48.5).epsilon(0.05));
  // Inside one node the same call runs at NVLink rates.
  const std::vector<int> node = {0, 1, 2, 3, 4, 5, 6, 7};
  CHECK(7.0 * n / collective_us(m, Collective::all_to_all, node, n) / 1e3 > 5 * busbw);
}

TEST_CASE("an all-to-all shares a node's NICs among the group's members on it, not among every rank of the node") {
  Machine m = load_machine("h100-ib");
  m.nics_per_node = 1;
  const std::int64_t n = 64 << 20;
  // Two ranks, one on each node: each has the node's NIC to itself.
  const double lone = collective_us(m, Collective::all_to_all, {0, 8}, n) - m.collective_base_us;
  CHECK(lone == doctest::Approx(m.inter.latency_us + n / (m.inter.p2p_gbps * 1e3)));
  // Eight members on each node share it.
  std::vector<int> two_nodes(16);
  for (int r = 0; r < 16; ++r) two_nodes[static_cast<std::size_t>(r)] = r;
  const double crowded = collective_us(m, Collective::all_to_all, two_nodes, n) - m.collective_base_us;
  CHECK(crowded == doctest::Approx(8 * (m.inter.latency_us + n / (m.inter.p2p_gbps / 8 * 1e3))));
}

namespace {

// A two-level machine's file rewritten as levels: the node on intra's figures, every rank on inter's.
std::string as_levels(const std::string& two_level_json) {
  Json j = parse_json(two_level_json, "preset", "");
  const Json intra = j["intra"], inter = j["inter"];
  j.erase("intra");
  j.erase("inter");
  j["levels"] = Json::array({Json{{"name", "node"},
                                  {"ranks", j["nodes"]["ranks_per_node"]},
                                  {"gbps", intra["gbps"]},
                                  {"p2p_gbps", intra.value("p2p_gbps", intra["gbps"])},
                                  {"latency_us", intra["latency_us"]}},
                             Json{{"name", "cluster"},
                                  {"ranks", 0},
                                  {"links", inter["nics_per_node"]},
                                  {"gbps", inter.value("collective_gbps", inter["gbps"])},
                                  {"p2p_gbps", inter["gbps"]},
                                  {"latency_us", inter["latency_us"]}}});
  Json sources = Json::object();
  for (const auto& item : j["sources"].items())
    if (!item.key().starts_with("intra.") && !item.key().starts_with("inter.")) sources[item.key()] = item.value();
  j["sources"] = sources;
  return json_text(j, true);
}

std::vector<int> ranks_from(int first, int count, int stride = 1) {
  std::vector<int> g;
  for (int i = 0; i < count; ++i) g.push_back(first + i * stride);
  return g;
}

}  // namespace

TEST_CASE("a machine file of levels reads back what it says, and refuses levels that do not nest") {
  const Machine m = load_machine("h100-pcie-8");
  REQUIRE(m.levels.size() == 3);
  CHECK(m.levels[0].name == "pcie_switch");
  CHECK(m.levels[0].ranks == 2);
  CHECK(m.levels[1].ranks == 4);
  CHECK(m.levels[2].ranks == 8);
  CHECK(meet_level(m, 0, 1) == 0);
  CHECK(meet_level(m, 0, 3) == 1);
  CHECK(meet_level(m, 3, 4) == 2);
  const Machine back = parse_machine(machine_json(m), "written");
  REQUIRE(back.levels.size() == 3);
  for (std::size_t l = 0; l < 3; ++l) {
    CHECK(back.levels[l].name == m.levels[l].name);
    CHECK(back.levels[l].link.p2p_gbps == m.levels[l].link.p2p_gbps);
    CHECK(back.levels[l].link.latency_us == m.levels[l].link.latency_us);
    CHECK(back.levels[l].links == m.levels[l].links);
  }
  const std::string good = machine_preset_json("h100-pcie-8");
  CHECK(error_of(replace(good, "\"ranks\": 4", "\"ranks\": 5")).find("not a multiple of the level below's 2") !=
        std::string::npos);
  CHECK(error_of(replace(good, "\"ranks\": 8", "\"ranks\": 0")).find("not the last level") == std::string::npos);
  CHECK(error_of(replace(good, "\"ranks\": 2", "\"ranks\": 0")).find("is not the last level") != std::string::npos);
  CHECK(error_of(replace(good, "\"links\": 1", "\"lanes\": 1")).find("unknown field \"lanes\"") != std::string::npos);
  CHECK(error_of(replace(good, "\"ranks_per_node\": 8", "\"ranks_per_node\": 16")).find("group size of none") !=
        std::string::npos);
  CHECK(error_of(replace(good, "\"levels\": [", "\"intra\": {\"gbps\": 1}, \"levels\": ["))
            .find("both \"levels\" and the \"intra\" section") != std::string::npos);
  CHECK(error_of(replace(good, "\"gbps\": 22", "\"gbps\": -1")).find("levels.node.gbps") != std::string::npos);
  CHECK_THROWS_AS(check_fits(m, 16), UsageError);
}

TEST_CASE("a two-level machine written as levels costs every message and collective exactly as before") {
  for (const char* name : {"h100-sxm-8", "h100-ib", "h800-sxm-8", "a100-sxm-8", "local-cpu"}) {
    CAPTURE(name);
    const Machine two = load_machine(name), levels = parse_machine(as_levels(machine_preset_json(name)), "levels");
    REQUIRE(levels.levels.size() == 2);
    const int node = two.ranks_per_node;
    for (const std::int64_t n : {std::int64_t{1}, std::int64_t{1} << 20, std::int64_t{3} << 28}) {
      CHECK(p2p_us(levels, n, 0, 1) == p2p_us(two, n, 0, 1));
      CHECK(p2p_us(levels, n, 0, node + 3) == p2p_us(two, n, 0, node + 3));
      for (const auto& group : {ranks_from(0, std::min(node, 8)), ranks_from(0, 16), ranks_from(2, 4, node),
                                ranks_from(0, 64), ranks_from(3, 2)})
        for (const Collective c : {Collective::all_gather, Collective::reduce_scatter, Collective::all_reduce,
                                   Collective::all_to_all, Collective::barrier}) {
          CAPTURE(group.size());
          CHECK(collective_us(levels, c, group, n) == collective_us(two, c, group, n));
        }
    }
  }
  // And a whole prediction (counted programs replayed on the clock, NIC sharing included) is the same number.
  model::PredictSpec spec;
  spec.problem.ranks = 16;
  spec.problem.heads = spec.problem.kv_heads = 32;
  spec.problem.head_dim = 128;
  spec.problem.dtype = DType::bf16;
  spec.seqs = {64 << 10};
  spec.strategies = {{StrategyKind::ulysses, 0}, {StrategyKind::ring, 0}, {StrategyKind::hybrid, 8}};
  spec.machine = load_machine("h100-ib");
  const PredictTable two = predict(spec);
  spec.machine = parse_machine(as_levels(machine_preset_json("h100-ib")), "levels");
  const PredictTable levels = predict(spec);
  for (std::size_t i = 0; i < two.cells.size(); ++i) CHECK(levels.cells[i].total_us == two.cells[i].total_us);
}

TEST_CASE("on the PCIe preset a message follows the level it crosses: all-to-all is many times slower than send/recv") {
  const Machine m = load_machine("h100-pcie-8");
  const std::int64_t n = 64 << 20;  // bytes per peer
  const std::vector<int> all = ranks_from(0, 8);
  // A pair behind one switch, across the switches of a socket, across the sockets.
  const double pair = n / p2p_us(m, n, 0, 1) / 1e3, socket = n / p2p_us(m, n, 0, 2) / 1e3,
               sockets = n / p2p_us(m, n, 0, 7) / 1e3;
  CHECK(pair > socket);
  CHECK(socket > sockets);
  // All-to-all: each socket's 4 ranks send 4 x n across the one UPI path; its busbw (nccl-tests' (C-1)/C x algbw).
  const double a2a = collective_us(m, Collective::all_to_all, all, n);
  const Link& upi = m.levels[2].link;
  CHECK(a2a == doctest::Approx(m.collective_base_us + 4 * (upi.step_us() + n / (upi.p2p_gbps / 4 * 1e3))));
  const double a2a_busbw = 7.0 * n / a2a / 1e3;
  CHECK(pair / a2a_busbw > 4);
  // A ring's busbw is its slowest level's: the sockets' path.
  const double ring_busbw = 7.0 * n / (collective_us(m, Collective::all_gather, all, n) - m.collective_base_us) / 1e3;
  CHECK(ring_busbw == doctest::Approx(upi.collective_gbps).epsilon(0.01));
  // On an NVLink box an all-to-all runs at the collective rate: the two presets differ by far more than their links.
  const Machine nv = load_machine("h100-sxm-8");
  const double nv_a2a = collective_us(nv, Collective::all_to_all, all, n),
               nv_ring = collective_us(nv, Collective::all_gather, all, n);
  CHECK(a2a / collective_us(m, Collective::all_gather, all, n) > 2 * nv_a2a / nv_ring);
}

TEST_CASE("ulysses is predicted slower against ring on the PCIe preset than on an NVLink box") {
  // 64 query heads sharing 8 KV heads (a 70B-class model): ring passes the small K and V, ulysses moves every
  // head's Q, K, V and O through the all-to-all, whose cross-socket flows share one path.
  double ratio[2][2];
  int i = 0;
  for (const char* name : {"h100-sxm-8", "h100-pcie-8"}) {
    const PredictTable t = predict(
        test_specs::gqa_70b(name, {32 << 10, 128 << 10}, {{StrategyKind::ulysses, 0}, {StrategyKind::ring, 0}}));
    for (std::size_t s = 0; s < 2; ++s) ratio[i][s] = t.cells[2 * s].total_us / t.cells[2 * s + 1].total_us;
    ++i;
  }
  for (std::size_t s = 0; s < 2; ++s) {
    CAPTURE(s);
    CHECK(ratio[1][s] > 1.2 * ratio[0][s]);
  }
}

TEST_CASE("the NVLink + InfiniBand cluster preset: rings over leaves at k NICs, a spine hop costs its latency") {
  const Machine m = load_machine("h100-ib-pods");
  REQUIRE(m.levels.size() == 3);
  CHECK(meet_level(m, 0, 7) == 0);
  CHECK(meet_level(m, 0, 8) == 1);
  CHECK(meet_level(m, 0, 256) == 2);
  const std::int64_t n = (std::int64_t{2} << 30) / 256;
  // 32 nodes of one leaf: NCCL issue 1218's about 200 GB/s; 64 nodes over the spine: the same rate.
  for (const int C : {256, 512}) {
    const double busbw = (C - 1.0) * n / collective_us(m, Collective::all_gather, ranks_from(0, C), n) / 1e3;
    CHECK(busbw == doctest::Approx(200).epsilon(0.1));
  }
  CHECK(p2p_us(m, 1, 0, 256) - p2p_us(m, 1, 0, 8) ==
        doctest::Approx(m.levels[2].link.latency_us - m.levels[1].link.latency_us));
}

TEST_CASE("cpsim predict --print-machine prints the level presets as files that load as the presets") {
  for (const char* name : {"h100-pcie-8", "h100-ib-pods"}) {
    CAPTURE(name);
    const auto r = cpsim::test::run_cli(std::string("predict --print-machine ") + name, "print_machine");
    REQUIRE(r.rc == 0);
    const Machine printed = parse_machine(r.out, "printed"), preset = load_machine(name);
    REQUIRE(printed.levels.size() == preset.levels.size());
    for (std::size_t l = 0; l < preset.levels.size(); ++l) {
      CHECK(printed.levels[l].name == preset.levels[l].name);
      CHECK(printed.levels[l].link.collective_gbps == preset.levels[l].link.collective_gbps);
      CHECK(printed.sources.count("levels." + preset.levels[l].name + ".gbps") == 1);
    }
  }
}
