// Every input file the cpsim command reads (a machine file, nccl-tests tables, bench and trace JSON) under hostile
// content: one line on stderr, exit 2, nothing on stdout, in bounded time; never a crash, a hang or a silent pick.
#include <doctest/doctest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "run_cli.hpp"
#include "sim/os/child_process.hpp"

using namespace cpsim;
using cpsim::test::count_lines;
using cpsim::test::slurp;
namespace fs = std::filesystem;

namespace {

const std::string kCpsim = std::string(CPSIM_BINARY_DIR) + "/cpsim";

// A fresh folder for one case, removed after it.
struct Folder {
  fs::path path;
  explicit Folder(const std::string& name)
      : path(fs::path(CPSIM_BINARY_DIR) / "tests" / ("inputs_" + name + "_" + std::to_string(::getpid()))) {
    fs::remove_all(path);
    fs::create_directories(path);
  }
  ~Folder() { fs::remove_all(path); }
  std::string file(const std::string& name, const std::string& text) const {
    std::ofstream(path / name, std::ios::binary) << text;
    return (path / name).string();
  }
};

struct Ran {
  ChildResult r;
  std::string out, err;
};

// cpsim with these arguments, stopped after a minute (a read that blocks would otherwise hang the suite).
Ran run_cpsim(const std::vector<std::string>& args, const Folder& dir) {
  std::vector<std::string> argv{kCpsim};
  argv.insert(argv.end(), args.begin(), args.end());
  ChildOptions o;
  o.time_limit = std::chrono::seconds(60);
  o.stdin_path = "/dev/null";
  o.stdout_path = (dir.path / ".stdout").string();
  o.stderr_path = (dir.path / ".stderr").string();
  Ran ran{run_child(argv, o), slurp(o.stdout_path), slurp(o.stderr_path)};
  fs::remove(o.stdout_path);
  fs::remove(o.stderr_path);
  return ran;
}

// `cpsim bench gpu_attention --json` output with this head dim, as text.
std::string bench_with_head_dim(const std::string& d) {
  return R"({"bench":"gpu_attention","causal":true,"batch":1,"heads":16,"kv_heads":16,"head_dim":)" + d +
         R"(,"points":[{"kernel":"mma2","seq":4096,"fwd_ms":0.5,"bwd_ms":1.5},)"
         R"({"kernel":"mma2","seq":8192,"fwd_ms":1.8,"bwd_ms":5.2}]})";
}

}  // namespace

TEST_CASE("hostile input files are refused with one line naming the file and what would fit, exit 2") {
  Folder dir("hostile");
  const std::string deep = dir.file("deep.json", std::string(200 << 10, '['));
  const std::string preset = slurp(std::string(CPSIM_SOURCE_DIR) + "/tests/model/machines_v1/h800-fa2.json");
  const auto at = preset.find("\"gbps\"");
  REQUIRE(at != std::string::npos);
  const std::string twice = dir.file("twice.json", preset.substr(0, at) + "\"gbps\": 1, " + preset.substr(at));
  const std::string fifo = (dir.path / "fifo").string();
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  const std::string huge = dir.file("huge.txt", "");
  fs::resize_file(huge, std::uintmax_t{65} << 20);  // sparse: 65 MiB on paper, nothing on disk
  const std::string html = (dir.path / "page.html").string();
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases{
      {{"predict", "--machine", deep}, deep + " nests objects and arrays deeper than 64 levels"},
      {{"predict", "--machine", twice}, twice + " gives the key \"gbps\" twice in one object"},
      {{"predict", "--machine", "/dev/zero"},
       "--machine /dev/zero is a device, not a regular file; give a machine file"},
      {{"predict", "--machine", dir.path.string()}, " is a folder, not a regular file"},
      {{"calibrate", "--gpu-attention", dir.file("half.json", bench_with_head_dim("0.5"))},
       "half.json: \"head_dim\" is 0.5; give a whole number from 1 to 1024"},
      {{"calibrate", "--gpu-attention", dir.file("huge.json", bench_with_head_dim("1e19"))},
       "huge.json: \"head_dim\" is 1e+19; give a whole number from 1 to 1024"},
      {{"calibrate", "--gpu-attention", dir.file("zero.json", bench_with_head_dim("0"))}, "\"head_dim\" is 0;"},
      {{"calibrate", "--gpu-attention", deep}, "deeper than 64 levels"},
      {{"calibrate", "--sendrecv", "/dev/zero"}, "--sendrecv /dev/zero is a device, not a regular file; name a file"},
      {{"calibrate", "--sendrecv", fifo}, "--sendrecv " + fifo + " is a FIFO, not a regular file; name a file"},
      {{"calibrate", "--all-gather", dir.path.string()}, " is a folder, not a regular file"},
      {{"calibrate", "--all-to-all", huge}, "--all-to-all " + huge + " is larger than 64 MiB"},
      {{"run", "--html", html, "--bench-json", deep}, "--bench-json " + deep + " nests"},
      {{"run", "--html", html, "--compare", dir.file("dup_trace.json", R"({"traceEvents":[],"traceEvents":[]})")},
       "gives the key \"traceEvents\" twice"},
      {{"run", "--html", html, "--compare", fifo}, " is a FIFO, not a regular file"},
  };
  for (const auto& [args, says] : cases) {
    CAPTURE(args[0]);
    CAPTURE(args[1]);
    CAPTURE(args.back());
    const Ran ran = run_cpsim(args, dir);
    CHECK_FALSE(ran.r.timed_out);
    CHECK(ran.r.signal == 0);
    CHECK(ran.r.exit_code == 2);
    CHECK(count_lines(ran.err) == 1);
    CHECK(ran.err.find(says) != std::string::npos);
    CHECK(ran.out.empty());
    CHECK_FALSE(fs::exists(html));  // refused before the run: no page
  }
}

TEST_CASE("a bench output with a sane head dim is still fitted after the checks") {
  Folder dir("sane");
  const Ran ran = run_cpsim({"calibrate", "--gpu-attention", dir.file("ok.json", bench_with_head_dim("128"))}, dir);
  CHECK(ran.r.exit_code == 0);
  CHECK(ran.out.find("\"kernel_d128\"") != std::string::npos);
}
