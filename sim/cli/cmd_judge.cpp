// cpsim judge: builds an exercise's judge on the learner's file and runs it.
//
//   cpsim judge zigzag_ring               cmake --build <build dir> --target judge_zigzag_ring, then runs it
//   cpsim judge zigzag_ring --solution    the same judge on the reference solution (exercises/<name>/solution/)
// An exercise is one line of kExercises (and one cpsim_add_exercise in exercises/CMakeLists.txt).
// The build dir is the folder holding this cpsim binary (where CMake puts it), unless --build-dir names another.
// Exit code: the judge's (0 every case passed, 1 a case failed); 1 when the build fails; 2 for bad input.
#include <sys/wait.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <iostream>

#include "sim/cli/cli.hpp"
#include "sim/core/error.hpp"

namespace cpsim::cli {
namespace {

namespace fs = std::filesystem;

struct Exercise {
  const char* name;
  const char* summary;
};
constexpr Exercise kExercises[] = {
    {"zigzag_ring", "zigzag ring attention, forward (exercises/zigzag_ring/zigzag_ring.cpp)"},
    {"ring_backward", "ring attention, backward (exercises/ring_backward/ring_backward.cpp)"},
};

std::string exercise_names() {
  std::string s;
  for (const Exercise& e : kExercises) s += (s.empty() ? "" : " | ") + std::string(e.name);
  return s;
}

std::string quoted(const fs::path& p) {
  std::string s = "'";
  for (char c : p.string()) s += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return s + "'";
}

int exit_code(int status) {
  return WIFEXITED(status) ? WEXITSTATUS(status) : 1;
}

int cmd_judge(const std::vector<std::string>& args) {
  po::options_description desc("cpsim judge <exercise>: build the judge on your file and run it");
  std::string exercise, build_dir;
  const std::string names = exercise_names();
  desc.add_options()("exercise", po::value(&exercise), ("the exercise: " + names).c_str())(
      "solution", "judge the reference solution instead of your file")(
      "no-build", "run the judge as last built, without calling cmake --build")(
      "build-dir", po::value(&build_dir), "the CMake build folder (default: the folder of this cpsim binary)")(
      "list", "list the exercises");
  po::positional_options_description pos;
  pos.add("exercise", 1);
  po::variables_map vm;
  po::options_description all(desc);
  all.add_options()("help,h", "show this help");
  try {
    po::store(po::command_line_parser(args).options(all).positional(pos).run(), vm);
    po::notify(vm);
  } catch (const po::error& e) {
    throw UsageError(std::string(e.what()) + "; see `cpsim judge --help`");
  }
  if (vm.count("help") || vm.count("list")) {
    if (vm.count("help")) std::cout << "usage: cpsim judge <exercise> [options]\n\n" << all << "\n";
    std::cout << "exercises:\n";
    std::size_t width = 0;
    for (const Exercise& e : kExercises) width = std::max(width, std::string(e.name).size());
    for (const Exercise& e : kExercises)
      std::cout << "  " << e.name << std::string(width + 2 - std::string(e.name).size(), ' ') << e.summary << "\n";
    return 0;
  }
  bool known = false;
  for (const Exercise& e : kExercises) known = known || exercise == e.name;
  if (!known)
    throw UsageError((exercise.empty() ? "name the exercise to judge" : "unknown exercise '" + exercise + "'") +
                     "; use `cpsim judge <exercise>` with one of " + names);

  const fs::path dir = build_dir.empty() ? fs::read_symlink("/proc/self/exe").parent_path() : fs::path(build_dir);
  if (!fs::exists(dir / "CMakeCache.txt"))
    throw UsageError(dir.string() +
                     " is not a CMake build folder (no CMakeCache.txt); use --build-dir with the "
                     "folder you built cpsim in");
  const std::string target = "judge_" + exercise + (vm.count("solution") ? "_solution" : "");
  if (!vm.count("no-build")) {
    std::cout << "Building " << target << " ..." << std::endl;
    const std::string cmd = "cmake --build " + quoted(dir) + " --target " + target + " >&2";
    if (const int rc = exit_code(std::system(cmd.c_str())); rc != 0) {
      std::cerr << "cpsim: the build of " << target << " failed (exit " << rc << "); fix the errors above and "
                << "judge again\n";
      return 1;
    }
  }
  const fs::path judge = dir / "exercises" / target;
  if (!fs::exists(judge))
    throw UsageError("no judge at " + judge.string() + "; drop --no-build, or build the target " + target);
  std::cout.flush();
  return exit_code(std::system(quoted(judge).c_str()));
}

}  // namespace
CPSIM_COMMAND(judge, "build and run an exercise's judge on your file (zigzag_ring, ring_backward)", cmd_judge);
}  // namespace cpsim::cli
