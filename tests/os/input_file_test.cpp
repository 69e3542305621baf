// Reading an input file (sim/os/input_file.hpp): regular files only, and none larger than the limit, each refused
// at once in one line.
#include "sim/os/input_file.hpp"

#include <doctest/doctest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>

#include "sim/core/error.hpp"

using namespace cpsim;
namespace fs = std::filesystem;

namespace {

// A fresh folder for one case, removed after it.
struct Folder {
  fs::path path;
  explicit Folder(const std::string& name)
      : path(fs::temp_directory_path() / ("cpsim_input_file_" + name + "_" + std::to_string(::getpid()))) {
    fs::remove_all(path);
    fs::create_directories(path);
  }
  ~Folder() { fs::remove_all(path); }
};

std::string refusal(const std::string& path, std::int64_t max_bytes = kMaxInputBytes) {
  try {
    (void)read_input_file("--sendrecv", path, "give the saved output", max_bytes);
  } catch (const UsageError& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("a regular file is read whole, bytes as they are") {
  Folder dir("plain");
  const std::string text("line one\n\0binary\xff", 17);
  std::ofstream(dir.path / "a.txt", std::ios::binary) << text;
  CHECK(read_input_file("--sendrecv", (dir.path / "a.txt").string(), "fix") == text);
  std::ofstream(dir.path / "empty.txt");
  CHECK(read_input_file("--sendrecv", (dir.path / "empty.txt").string(), "fix").empty());
}

TEST_CASE("a missing file is refused in one line naming the flag, the path and the reason") {
  CHECK(refusal("/nonexistent/x.txt") ==
        "--sendrecv /nonexistent/x.txt cannot be read (No such file or directory); give the saved output");
}

TEST_CASE("a folder, /dev/zero and a FIFO are refused at once as not regular files, without reading a byte") {
  Folder dir("special");
  CHECK(refusal(dir.path.string()) ==
        "--sendrecv " + dir.path.string() + " is a folder, not a regular file; give the saved output");
  CHECK(refusal("/dev/zero") == "--sendrecv /dev/zero is a device, not a regular file; give the saved output");
  const std::string fifo = (dir.path / "fifo").string();
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  // No writer ever opens it: a blocking open would wait forever, so returning at all is the check.
  const auto start = std::chrono::steady_clock::now();
  CHECK(refusal(fifo) == "--sendrecv " + fifo + " is a FIFO, not a regular file; give the saved output");
  CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(60));
}

TEST_CASE("a file larger than the limit is refused before it is read") {
  Folder dir("large");
  const std::string path = (dir.path / "big.txt").string();
  std::ofstream(path) << std::string(4096, 'x');
  CHECK(read_input_file("--sendrecv", path, "fix", 4096).size() == 4096);
  CHECK(refusal(path, 4095) == "--sendrecv " + path +
                                   " is larger than 4095 bytes, more than any input cpsim reads; "
                                   "give the saved output");
  // A sparse file of 65 MiB over the default limit of 64 MiB: refused from its size, no memory taken.
  const std::string sparse = (dir.path / "sparse.txt").string();
  std::ofstream(sparse).close();
  fs::resize_file(sparse, (std::uintmax_t{65} << 20));
  CHECK(refusal(sparse).find("is larger than 64 MiB") != std::string::npos);
}
