// Output files are complete or absent, output paths are checked before any work, and stdout failures are reported.
#include "sim/os/output_file.hpp"

#include <doctest/doctest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "sim/core/error.hpp"

using namespace cpsim;
namespace fs = std::filesystem;

namespace {

// A fresh, empty folder for one test case.
struct Folder {
  fs::path path;
  explicit Folder(const std::string& name) : path(fs::temp_directory_path() / ("cpsim_output_" + name + "_" +
                                                                               std::to_string(::getpid()))) {
    fs::remove_all(path);
    fs::create_directories(path);
  }
  ~Folder() {
    std::error_code ec;
    fs::permissions(path, fs::perms::owner_all, fs::perm_options::add, ec);
    fs::remove_all(path, ec);
  }
  std::size_t entries() const { return static_cast<std::size_t>(std::distance(fs::directory_iterator(path), {})); }
};

std::string slurp(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

}  // namespace

TEST_CASE("a committed output file holds every byte under its name and nothing else is left in its folder") {
  Folder dir("commit");
  const fs::path file = dir.path / "run.json";
  {
    OutputFile f(file.string());
    f.write("{\"a\": ");
    f.write("1}\n");
    CHECK_FALSE(fs::exists(file));  // not under its name until committed
    f.commit();
  }
  CHECK(slurp(file) == "{\"a\": 1}\n");
  CHECK(dir.entries() == 1);
}

TEST_CASE("an output file that is never committed leaves neither the file nor its temporary") {
  Folder dir("abandon");
  const fs::path file = dir.path / "out.npy";
  std::ofstream(file) << "the old contents";
  {
    OutputFile f(file.string());
    f.write("half of the new one");
  }  // a failure between the writes and the commit
  CHECK(slurp(file) == "the old contents");
  CHECK(dir.entries() == 1);
}

TEST_CASE("an output file gets the permissions a new file gets, not those of a temporary") {
  Folder dir("mode");
  const fs::path file = dir.path / "page.html";
  write_file(file.string(), "<html></html>");
  struct stat st {};
  REQUIRE(::stat(file.c_str(), &st) == 0);
  const mode_t mask = ::umask(0);
  ::umask(mask);
  CHECK((st.st_mode & 0777) == (0666 & ~mask));
}

TEST_CASE("an output in a folder that does not exist, or that is a folder, is refused before any work") {
  Folder dir("paths");
  const std::string missing = "the folder " + (dir.path / "no").string() + " does not exist";
  CHECK_THROWS_WITH_AS(check_output_file("trace", (dir.path / "no" / "run.json").string()),
                       doctest::Contains(missing.c_str()), UsageError);
  CHECK_THROWS_WITH_AS(check_output_file("html", dir.path.string()), doctest::Contains("is a folder"), UsageError);
  CHECK_THROWS_WITH_AS(check_output_file("trace", "/dev/null"), doctest::Contains("is not a regular file"),
                       UsageError);
  CHECK_NOTHROW(check_output_file("trace", (dir.path / "run.json").string()));
  std::ofstream(dir.path / "plain") << "x";
  CHECK_THROWS_WITH_AS(check_output_folder("dump", (dir.path / "plain").string()),
                       doctest::Contains("exists and is not a folder"), UsageError);
  CHECK_THROWS_WITH_AS(check_output_folder("dump", (dir.path / "a" / "b").string()),
                       doctest::Contains("does not exist"), UsageError);
  CHECK_NOTHROW(check_output_folder("dump", (dir.path / "new").string()));
  CHECK_NOTHROW(check_output_folder("dump", dir.path.string()));
}

TEST_CASE("an output in a folder this process cannot write is refused") {
  if (::geteuid() == 0) return;  // root writes everywhere: nothing to refuse
  Folder dir("readonly");
  fs::permissions(dir.path, fs::perms::owner_read | fs::perms::owner_exec);
  CHECK_THROWS_WITH_AS(check_output_file("trace", (dir.path / "run.json").string()),
                       doctest::Contains("cannot write into the folder"), UsageError);
  CHECK_THROWS_WITH_AS(check_output_folder("dump", dir.path.string()), doctest::Contains("cannot write into it"),
                       UsageError);
}

TEST_CASE("two outputs, or an output and an input, naming the same file are refused") {
  CHECK_NOTHROW(check_distinct({{"trace", "a.json"}, {"html", "a.html"}, {"compare", ""}}));
  CHECK_THROWS_WITH_AS(check_distinct({{"trace", "run.json"}, {"html", "./run.json"}}),
                       "--trace and --html name the same file ./run.json; give each its own", UsageError);
  CHECK_THROWS_AS(check_distinct({{"compare", "x/../t.json"}, {"trace", "t.json"}}), UsageError);
}

TEST_CASE("a folder that permissions allow but the system refuses (/proc) is refused before any work, even as root") {
  CHECK_THROWS_WITH_AS(check_output_folder("dump", "/proc/cpsim_dump"), doctest::Contains("cannot create it"),
                       UsageError);
  // A folder that can be made is checked by making it once: nothing of it is left until the run writes it.
  Folder dir("probe");
  CHECK_NOTHROW(check_output_folder("dump", (dir.path / "new").string()));
  CHECK_FALSE(fs::exists(dir.path / "new"));
}
