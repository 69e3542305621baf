// A folder of output files is complete or absent: after a commit, a failed write, a stop signal, or a writer killed
// by SIGKILL (its temporary removed by the next writer).
#include "sim/os/output_folder.hpp"

#include <doctest/doctest.h>
#include <signal.h>
#include <sys/resource.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <set>
#include <string>

#include "sim/core/error.hpp"
#include "sim/os/forked_children.hpp"
#include "sim/os/output_file.hpp"

using namespace cpsim;
namespace fs = std::filesystem;

namespace {

// A fresh, empty folder for one test case; the output folder goes inside it as "out".
struct Place {
  fs::path path;
  explicit Place(const std::string& name)
      : path(fs::temp_directory_path() / ("cpsim_folder_" + name + "_" + std::to_string(::getpid()))) {
    fs::remove_all(path);
    fs::create_directories(path);
  }
  ~Place() { fs::remove_all(path); }
  std::string out() const { return (path / "out").string(); }
  // The names in the place (the output folder and any temporary beside it).
  std::set<std::string> names() const {
    std::set<std::string> s;
    for (const auto& e : fs::directory_iterator(path)) s.insert(e.path().filename().string());
    return s;
  }
};

std::set<std::string> names_in(const fs::path& dir) {
  std::set<std::string> s;
  for (const auto& e : fs::directory_iterator(dir)) s.insert(e.path().filename().string());
  return s;
}

// The file-size limit of this process lowered to `bytes` while it lives (SIGXFSZ ignored, so a write past it fails
// with EFBIG as on a full disk).
struct FileSizeLimit {
  rlimit old{};
  void (*old_handler)(int);
  explicit FileSizeLimit(rlim_t bytes) {
    ::getrlimit(RLIMIT_FSIZE, &old);
    old_handler = ::signal(SIGXFSZ, SIG_IGN);
    const rlimit r{bytes, old.rlim_max};
    ::setrlimit(RLIMIT_FSIZE, &r);
  }
  ~FileSizeLimit() {
    ::setrlimit(RLIMIT_FSIZE, &old);
    ::signal(SIGXFSZ, old_handler);
  }
};

}  // namespace

TEST_CASE("a committed folder holds every file, and nothing else is left beside it") {
  Place place("commit");
  {
    OutputFolder folder(place.out());
    CHECK(fs::path(folder.temporary()).parent_path() == place.path);
    for (const char* name : {"a.npy", "b.npy", "c.npy"}) write_file(folder.file(name), name);
    CHECK(!fs::exists(place.out()));  // nothing under the name until the commit
    folder.commit();
  }
  CHECK(place.names() == std::set<std::string>{"out"});
  CHECK(names_in(place.out()) == std::set<std::string>{"a.npy", "b.npy", "c.npy"});
}

TEST_CASE("a folder that exists and holds files gets the new files, its others kept") {
  Place place("existing");
  fs::create_directories(place.out());
  std::ofstream(fs::path(place.out()) / "notes.txt") << "mine";
  std::ofstream(fs::path(place.out()) / "a.npy") << "old";
  {
    OutputFolder folder(place.out());
    write_file(folder.file("a.npy"), "new");
    folder.commit();
  }
  CHECK(place.names() == std::set<std::string>{"out"});
  CHECK(names_in(place.out()) == std::set<std::string>{"a.npy", "notes.txt"});
  std::ifstream a(fs::path(place.out()) / "a.npy");
  std::string text;
  a >> text;
  CHECK(text == "new");
}

TEST_CASE("a write that fails on the fourth file (a full disk) leaves no folder and no temporary") {
  Place place("full");
  {
    const FileSizeLimit limit(1000);  // 3 files of 100 bytes fit; the fourth, of 5000, does not
    OutputFolder folder(place.out());
    for (const char* name : {"q.npy", "k.npy", "v.npy"}) write_file(folder.file(name), std::string(100, 'x'));
    CHECK_THROWS_WITH_AS(write_file(folder.file("out.npy"), std::string(5000, 'x')),
                         doctest::Contains("File too large"), Error);
  }  // never committed
  CHECK(place.names().empty());
}

TEST_CASE("SIGTERM while the files are written leaves nothing, and the writer still ends by SIGTERM") {
  Place place("sigterm");
  const std::string out = place.out();
  ForkedChildren procs;
  const int writer = procs.start([&]() -> int {
    ::signal(SIGTERM, SIG_DFL);  // as in a command (not the test runner's handler)
    OutputFolder folder(out);
    write_file(folder.file("q.npy"), std::string(100, 'x'));
    ::kill(::getpid(), SIGTERM);  // arrives while the dump is under way: taken, and looked at between files
    write_file(folder.file("k.npy"), std::string(100, 'x'));
    folder.check_interrupted();  // removes the temporary and raises SIGTERM again
    write_file(folder.file("v.npy"), std::string(100, 'x'));
    folder.commit();
    return 0;
  });
  const ChildExit end = procs.wait(writer);
  CHECK(end.signal == SIGTERM);
  CHECK(place.names().empty());
}

TEST_CASE("the temporary of a writer killed by SIGKILL is named as partial and removed by the next writer") {
  Place place("sigkill");
  const std::string out = place.out();
  ForkedChildren procs;
  int ready[2];
  REQUIRE(::pipe(ready) == 0);
  const int writer = procs.start([&]() -> int {
    OutputFolder folder(out);
    write_file(folder.file("q.npy"), std::string(100, 'x'));
    (void)!::write(ready[1], "x", 1);
    ::pause();  // killed here, half-way
    return 0;
  });
  char c;
  REQUIRE(::read(ready[0], &c, 1) == 1);
  const pid_t pid = procs.pid(writer);
  procs.kill(writer, SIGKILL);
  procs.wait(writer);
  const std::string stale = ".out.cpsim-partial-" + std::to_string(pid);
  CHECK(place.names() == std::set<std::string>{stale});
  CHECK(OutputFolder::temporary_for(out, pid) == (place.path / stale).string());
  {
    OutputFolder next(out);  // its writer is gone: removed
    write_file(next.file("q.npy"), "q");
    next.commit();
  }
  CHECK(place.names() == std::set<std::string>{"out"});
  ::close(ready[0]);
  ::close(ready[1]);
}
