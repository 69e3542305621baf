// The rooms of sim/ depend downwards only: each file includes headers of its own room and of the rooms below it
// (docs/architecture.md), so that, for one, nothing below the runtime names a backend's code.
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <string>

namespace {

namespace fs = std::filesystem;

// The rooms each room may include, besides itself.
const std::map<std::string, std::set<std::string>> kBelow{
    {"core", {}},
    {"os", {"core"}},
    {"layout", {"core", "os"}},
    {"kernels", {"core", "os"}},
    {"comm", {"core", "os"}},
    {"strategies", {"core", "os", "layout", "kernels", "comm"}},
    {"model", {"core", "os", "layout", "kernels", "comm", "strategies"}},
    {"runtime", {"core", "os", "layout", "kernels", "comm", "strategies", "model"}},
    {"cuda", {"core", "os", "kernels", "comm"}},
    {"cli", {"core", "os", "layout", "kernels", "comm", "strategies", "runtime", "model", "cuda"}},
};

}  // namespace

TEST_CASE("every file of sim/ includes only its own room and the rooms below it") {
  const fs::path sim = fs::path(CPSIM_SOURCE_DIR) / "sim";
  int files = 0;
  for (const auto& [room, below] : kBelow)
    for (const auto& entry : fs::recursive_directory_iterator(sim / room)) {
      const std::string ext = entry.path().extension().string();
      if (ext != ".cpp" && ext != ".hpp" && ext != ".cu" && ext != ".cuh") continue;
      ++files;
      std::ifstream in(entry.path());
      for (std::string line; std::getline(in, line);) {
        const std::string prefix = "#include \"sim/";
        if (line.rfind(prefix, 0) != 0) continue;
        const std::string to = line.substr(prefix.size(), line.find('/', prefix.size()) - prefix.size());
        CAPTURE(entry.path().string());
        CAPTURE(line);
        CHECK((to == room || below.count(to) == 1));
      }
    }
  CHECK(files > 100);
}

TEST_CASE("every folder of sim/ is a room of the order, so that the files of a new room are checked too") {
  const fs::path sim = fs::path(CPSIM_SOURCE_DIR) / "sim";
  for (const auto& entry : fs::directory_iterator(sim)) {
    if (!entry.is_directory()) continue;
    CAPTURE(entry.path().string());
    CHECK(kBelow.count(entry.path().filename().string()) == 1);
  }
}
