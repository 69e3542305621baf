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

// The number after `"key":` in one JSON line (the first occurrence after `after`).
long long json_int(const std::string& s, const std::string& key, const std::string& after = "") {
  const std::size_t from = after.empty() ? 0 : s.find(after);
  REQUIRE(from != std::string::npos);
  const std::size_t at = s.find("\"" + key + "\":", from);
  REQUIRE(at != std::string::npos);
  return std::stoll(s.substr(at + key.size() + 3));
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
        Case{"--causal --full", "exclude each other"}, Case{"--tile 0", "use --tile"},
        Case{"--seq 64 --docs 24,8", "--docs lengths must sum to S"},
        Case{"--window -1", "--window '-1' is not a size"}, Case{"--docs 0,64", "is not a document length"},
        Case{"--pad-docs", "unrecognised option '--pad-docs'"}}) {
    CAPTURE(c.args);
    const Run r = cpsim(std::string("attention ") + c.args);
    INFO(r.output);
    CHECK(r.code == 2);
    CHECK(lines(r.output) == 1);
    CHECK(r.output.find(c.says) != std::string::npos);
  }
}

TEST_CASE("cpsim attention takes the mask flags: documents and a window reach the kernel, the counts and the check") {
  // Visible pairs by formula, per head: documents sum L(L+1)/2; a window S W - W(W-1)/2 (S >= W); B=1, Nq=2.
  struct Case {
    const char* flags;
    const char* mask;
    long long pairs_per_head;
  };
  for (const Case& c : {Case{"--docs 24,8,32", "causal, 3 documents", 24 * 25 / 2 + 8 * 9 / 2 + 32 * 33 / 2},
                        Case{"--seq 64 --window 10", "causal, window 10", 64 * 10 - 10 * 9 / 2},
                        Case{"--docs 24,8,32 --window 10", "causal, 3 documents, window 10",
                             (24 * 10 - 45) + 8 * 9 / 2 + (32 * 10 - 45)}}) {
    CAPTURE(c.flags);
    const Run r = cpsim(std::string("attention --heads 2 --head-dim 8 --tile 8 --check --json ") + c.flags);
    INFO(r.output);
    CHECK(r.code == 0);
    CHECK(r.output.find(std::string("\"mask\":\"") + c.mask + "\"") != std::string::npos);
    CHECK(r.output.find("\"passed\":true") != std::string::npos);
    CHECK(json_int(r.output, "seq") == 64);  // the listed lengths make S
    CHECK(json_int(r.output, "pairs", "\"forward\"") == 2 * c.pairs_per_head);
    CHECK(json_int(r.output, "pairs", "\"backward\"") == 2 * c.pairs_per_head);
    CHECK(json_int(r.output, "tiles_skipped", "\"forward\"") > 0);  // tiles across documents or outside the window
  }
  const Run text = cpsim("attention --docs 24,8,32 --window 10 --heads 2 --head-dim 8 --check");
  INFO(text.output);
  CHECK(text.output.find("causal, 3 documents, window 10, tile") != std::string::npos);
  CHECK(text.output.find("3 documents (24, 8, 32 tokens; shortest 8)") != std::string::npos);
  CHECK(text.output.find("PASSED") != std::string::npos);
  const Run random = cpsim("attention --seq 96 --docs random:4 --full --window 16 --heads 2 --head-dim 8 --check");
  INFO(random.output);
  CHECK(random.code == 0);
  CHECK(random.output.find("full, 4 documents, window 16") != std::string::npos);
}
