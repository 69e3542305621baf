// Machine files and presets, and the cost equations checked against the published figures they were built from.
#include "sim/model/machine.hpp"

#include <doctest/doctest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>

#include "sim/core/error.hpp"
#include "sim/model/cost.hpp"

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

// A causal square of S rows on one (batch, head): S (S+1) / 2 visible pairs.
Op causal_square(std::int64_t S, std::int64_t D, bool backward) {
  Op op;
  op.kind = OpKind::attention;
  op.backward = backward;
  op.q_rows = op.k_rows = S;
  op.batch_heads = 16;
  op.pairs = S * (S + 1) / 2 * op.batch_heads;
  op.flops = (backward ? 10.0 : 4.0) * D * static_cast<double>(op.pairs);
  return op;
}

}  // namespace

TEST_CASE("every preset parses and names a source for every value") {
  for (const auto& name : machine_preset_names()) {
    CAPTURE(name);
    const Machine m = load_machine(name);
    CHECK(m.name == name);
    for (const auto& field : machine_fields()) {
      CAPTURE(field);
      CHECK(m.sources.count(field) == 1);
      CHECK(!m.sources.at(field).empty());
    }
  }
}

TEST_CASE("a machine file on disk loads exactly as the preset it was printed from") {
  const auto path = std::filesystem::temp_directory_path() / "cpsim_machine_test.json";
  {
    std::ofstream f(path);
    f << replace(machine_preset_json("h100-ib"), "\"gbps\": 48.5", "\"gbps\": 24.25");
  }
  const Machine file = load_machine(path.string()), preset = load_machine("h100-ib");
  std::filesystem::remove(path);
  CHECK(file.inter.gbps == preset.inter.gbps / 2);
  CHECK(file.intra.gbps == preset.intra.gbps);
  CHECK(file.forward_tflops == preset.forward_tflops);
  CHECK(file.ranks_per_node == preset.ranks_per_node);
}

TEST_CASE("machine files with a wrong key, a missing value or a bad number are refused with the field named") {
  const std::string good = machine_preset_json("h100-sxm-8");
  CHECK(error_of(good).empty());
  CHECK(error_of(replace(good, "\"hbm_gbps\"", "\"hbm_gpbs\"")).find("memory.hbm_gpbs") != std::string::npos);
  CHECK(error_of(replace(good, "\"latency_us\": 3.4", "\"latency_us\": \"fast\"")).find("intra.latency_us") !=
        std::string::npos);
  CHECK(error_of(replace(good, "\"gbps\": 360, ", "")).find("intra.gbps") != std::string::npos);
  CHECK(error_of(replace(good, "\"sm_count\": 132", "\"sm_count\": 0")).find("attention.sm_count") !=
        std::string::npos);
  CHECK(error_of("{ not json").find("not valid JSON") != std::string::npos);
  CHECK_THROWS_AS(load_machine("no-such-machine"), UsageError);
}

TEST_CASE("a one-node machine refuses more ranks than it has GPUs") {
  const Machine m = load_machine("h100-sxm-8");
  CHECK_NOTHROW(check_fits(m, 8));
  CHECK_THROWS_AS(check_fits(m, 16), UsageError);
  CHECK_NOTHROW(check_fits(load_machine("h100-ib"), 256));
}

TEST_CASE("the H100 attention curve passes through FlashAttention-3's published rates") {
  const Machine m = load_machine("h100-sxm-8");
  // Causal forward, d=128, S=16K: 616 TFLOP/s (reference-facts.md). Rate = flops / time.
  const Op fwd = causal_square(16384, 128, false);
  CHECK(fwd.flops / (attention_us(m, fwd) - m.launch_us) / 1e6 == doctest::Approx(616).epsilon(0.02));
  // Small blocks run below peak: a 1K causal block reaches well under the 16K rate.
  const Op small = causal_square(1024, 128, false);
  CHECK(small.flops / (attention_us(m, small) - m.launch_us) / 1e6 < 0.8 * 616);
}

TEST_CASE("ring all-gather on one node reaches the NVLink busbw of nccl-tests for large messages") {
  const Machine m = load_machine("h100-sxm-8");
  const std::vector<int> node = {0, 1, 2, 3, 4, 5, 6, 7};
  const std::int64_t n = 1 << 30;  // per rank
  // busbw = algbw (C-1)/C = (C n / t) (C-1)/C = (C-1) n / t
  const double busbw = 7.0 * n / collective_us(m, Collective::all_gather, node, n) / 1e3;
  CHECK(busbw == doctest::Approx(m.intra.gbps).epsilon(0.01));
  CHECK(busbw >= 360 * 0.99);  // nccl-tests on 8x H100 SXM: 360-370 GB/s
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
