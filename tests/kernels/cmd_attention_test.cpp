// `cpsim attention` as a learner runs it: exit codes, the check's verdict, one-line usage errors.
#include <doctest/doctest.h>
#include <sys/wait.h>

#include <cstdio>
#include <filesystem>
#include <string>

namespace {

struct Run {
  int code = -1;
  std::string output;  // stdout and stderr together
};

Run cpsim(const std::string& args) {
  const std::string bin = std::string(CPSIM_BINARY_DIR) + "/cpsim";
  REQUIRE_MESSAGE(std::filesystem::exists(bin), "build the cpsim executable first (target cpsim_cli)");
  Run r;
  FILE* f = popen((bin + " " + args + " 2>&1").c_str(), "r");
  REQUIRE(f != nullptr);
  char buf[4096];
  std::size_t n = 0;
  while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) r.output.append(buf, n);
  const int status = pclose(f);
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

int lines(const std::string& s) {
  int n = 0;
  for (char c : s) n += c == '\n';
  return n;
}

}  // namespace

TEST_CASE("cpsim attention --check passes and exits 0 in f32 and f64, causal and full") {
  for (const char* extra : {"--dtype f32", "--dtype f64 --full"}) {
    CAPTURE(extra);
    const Run r =
        cpsim(std::string("attention --batch 2 --seq 100 --heads 4 --kv-heads 2 --head-dim 32 --check ") + extra);
    INFO(r.output);
    CHECK(r.code == 0);
    CHECK(r.output.find("PASSED") != std::string::npos);
  }
}

TEST_CASE("cpsim attention --json prints one JSON object with the check's verdict and every error") {
  const Run r = cpsim("attention --seq 64 --heads 2 --head-dim 16 --check --json");
  INFO(r.output);
  CHECK(r.code == 0);
  CHECK(lines(r.output) == 1);
  CHECK(r.output.front() == '{');
  for (const char* key : {"\"config\"", "\"forward\"", "\"backward\"", "\"gflops\"", "\"passed\":true",
                          "\"max_abs_err\"", "\"dv\"", "\"plain_f32_err\""})
    CHECK(r.output.find(key) != std::string::npos);
}

TEST_CASE("impossible flags exit 2 with one line naming the constraint and a fix") {
  struct Case {
    const char* args;
    const char* says;
  };
  for (const Case& c :
       {Case{"--heads 8 --kv-heads 3", "use --kv-heads one of 1, 2, 4, 8"},
        Case{"--seq 0", "sequence length must be at least 1"}, Case{"--batch 0", "batch size must be at least 1"},
        Case{"--head-dim 0", "head dimension must be at least 1"},
        Case{"--dtype bf16", "bf16 needs a GPU device; use --dtype f32 or f64"},
        Case{"--causal --full", "exclude each other"}, Case{"--tile 0", "use --tile"}}) {
    CAPTURE(c.args);
    const Run r = cpsim(std::string("attention ") + c.args);
    INFO(r.output);
    CHECK(r.code == 2);
    CHECK(lines(r.output) == 1);
    CHECK(r.output.find(c.says) != std::string::npos);
  }
}
