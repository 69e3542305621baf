#include <doctest/doctest.h>

#include <filesystem>

#include "run_cli.hpp"

using cpsim::test::count_lines;
using cpsim::test::run_cli;

TEST_CASE("cpsim run prints the per-rank table and a passing check") {
  const auto r = run_cli("run --strategy ring --ranks 4 --seq 32 --backward --check", "run1");
  CHECK(r.rc == 0);
  CHECK(r.out.find("rank 3: CORRECT") != std::string::npos);
  CHECK(r.out.find("PASSED") != std::string::npos);
  CHECK(r.out.find("isend 9") != std::string::npos);  // 3 forward + 3 K/V + 3 dK/dV backward
}

TEST_CASE("cpsim run --json has config, ranks and check with the five errors") {
  const auto r = run_cli("run --strategy hybrid --ranks 4 --seq 32 --heads 4 --backward --check --json", "run2");
  CHECK(r.rc == 0);
  for (const char* key : {"\"config\":", "\"ranks\":", "\"peak_bytes\":", "\"bytes_sent\":", "\"check\":",
                          "\"passed\":true", "\"dq\":", "\"dk\":", "\"dv\":", "\"lse\":"})
    CHECK(r.out.find(key) != std::string::npos);
  CHECK(count_lines(r.out) == 1);
}

TEST_CASE("cpsim run --dump writes NumPy files of the inputs and outputs") {
  const std::string dir = std::string(CPSIM_BINARY_DIR) + "/tests/dump_test";
  std::filesystem::remove_all(dir);
  const auto r = run_cli("run --strategy ulysses --ranks 2 --seq 16 --backward --dump " + dir, "run3");
  CHECK(r.rc == 0);
  for (const char* f : {"q", "k", "v", "out", "lse", "dout", "dq", "dk", "dv"})
    CHECK(std::filesystem::exists(dir + "/" + f + ".npy"));
  // q: [1, 16, 4, 16] doubles after a 128-byte header.
  CHECK(std::filesystem::file_size(dir + "/q.npy") == 128 + 16 * 4 * 16 * 8);
  std::filesystem::remove_all(dir);
}

TEST_CASE("cpsim run --html draws the same run modeled on 8 H100s beside the measured one") {
  const std::string page = std::string(CPSIM_BINARY_DIR) + "/tests/run_beside.html";
  const auto r = run_cli("run --strategy ring --ranks 4 --seq 64 --html " + page, "run_beside");
  REQUIRE(r.rc == 0);
  CHECK(r.out.find("with the same run modeled on h100-sxm-8 beside it") != std::string::npos);
  const std::string html = cpsim::test::slurp(page);
  const auto at = html.find("id=\"cpsim-compare\"");
  REQUIRE(at != std::string::npos);
  CHECK(html.find("\"machine\":\"h100-sxm-8\"", at) != std::string::npos);
  std::filesystem::remove(page);
}

TEST_CASE("impossible configurations exit 2 with one line and write no file") {
  const std::string dir = std::string(CPSIM_BINARY_DIR) + "/tests/dump_bad";
  std::filesystem::remove_all(dir);
  for (const char* args :
       {"run --seq 30 --ranks 4", "run --strategy ulysses --heads 4 --kv-heads 2 --ranks 4",
        "run --strategy hybrid --ranks 6 --a2a 4", "run --heads 6 --kv-heads 4", "run --ranks 0", "run --dtype f16",
        "run --backend carrier-pigeon", "run --dtype bf16", "run --kernel mma2"}) {
    INFO(args);
    const auto r = run_cli(std::string(args) + " --dump " + dir, "run_bad");
    CHECK(r.rc == 2);
    CHECK(r.out.empty());
    CHECK(count_lines(r.err) == 1);
    CHECK(!std::filesystem::exists(dir));
  }
}

#ifdef CPSIM_HAVE_CUDA
TEST_CASE("--kernel and the GPU bench's shape flags: impossible values exit 2 with one line, before any GPU is used") {
  for (const char* args : {"run --backend cuda-threads --kernel mma2 --dtype f32 --head-dim 64",
                           "run --backend cuda-threads --kernel mma1 --dtype bf16 --head-dim 32",
                           "run --backend cuda-threads --kernel bogus --dtype bf16",
                           "bench gpu_attention --kernel bogus", "bench gpu_attention --kernel mma2 mma1 --dtype f32",
                           "bench gpu_attention --kv-heads 7", "bench gpu_attention --gemm-n 100"}) {
    INFO(args);
    const auto r = run_cli(args, "kernel_bad");
    CHECK(r.rc == 2);
    CHECK(r.out.empty());
    CHECK(count_lines(r.err) == 1);
  }
}
#endif

#ifdef CPSIM_HAVE_CUDA
TEST_CASE("the cuda device refuses documents and windows in one line naming the masks it implements, before any GPU") {
  for (const char* args : {"run --backend cuda-threads --dtype f32 --docs 24,40",
                           "run --backend cuda-threads --dtype bf16 --window 16 --sharding striped",
                           "run --backend nccl --dtype bf16 --docs random:3 --sharding balanced"}) {
    INFO(args);
    const auto r = run_cli(args, "cuda_mask");
    CHECK(r.rc == 2);
    CHECK(r.out.empty());
    CHECK(count_lines(r.err) == 1);
    CHECK(r.err.find("implements the causal and full masks") != std::string::npos);
  }
}
#endif

TEST_CASE("padded documents are reported once: the header counts the documents and the padding runs apart") {
  // 13, 8, 21, 6 tokens padded to multiples of 2C = 8: 16, 8, 24, 8, three padding runs the mask keeps apart.
  const auto r = run_cli("run --ranks 4 --docs 13,8,21,6 --pad-docs --check", "run_padded_docs");
  CHECK(r.rc == 0);
  CHECK(r.out.find("causal, 4 documents + 3 padding runs masked apart, forward") != std::string::npos);
  CHECK(r.out.find("4 documents (13, 8, 21, 6 tokens; shortest 6; padded to 16, 8, 24, 8: 8 padding tokens)") !=
        std::string::npos);
  CHECK(r.out.find("7 documents") == std::string::npos);
  CHECK(r.out.find("PASSED") != std::string::npos);
}

TEST_CASE("a window of 2^63 - 1 is no window: the run checks out, as it does without one") {
  for (const char* args :
       {"run --window 9223372036854775807 --check", "run --window 9223372036854775807 --full --check",
        "run --window 9223372036854775807 --docs 16,48 --check"}) {
    INFO(args);
    const auto r = run_cli(args, "run_huge_window");
    CHECK(r.rc == 0);
    CHECK(r.out.find("PASSED") != std::string::npos);
    CHECK(r.out.find("ERROR") == std::string::npos);
  }
}
