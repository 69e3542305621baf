// cpsim judge: builds an exercise's judge on the learner's file and runs it, in bounded time.
//
//   cpsim judge zigzag_ring                cmake --build <build dir> --target judge_zigzag_ring, then runs it
//   cpsim judge zigzag_ring --solution     the same judge on the reference solution (exercises/<name>/solution/)
//   cpsim judge zigzag_ring --file F.cpp   the same judge on any file: F.cpp is copied into the build folder
//                                          (<build>/exercises/<name>/judged.cpp, target judge_<name>_file), with
//                                          `#line` so that compiler errors name F.cpp and its lines
// An exercise is one line of kExercises (and one cpsim_add_exercise in exercises/CMakeLists.txt).
// The build dir is the folder holding this cpsim binary (where CMake puts it), unless --build-dir names another.
//
// The judge runs as a child process (sim/os/child_process.hpp) in a process group of its own: past --time-limit
// (60 s), or when cpsim judge gets SIGINT, SIGTERM or SIGHUP, the whole group is stopped (SIGTERM, then SIGKILL) and
// nothing of it is left running, not even a process that left the group (setsid()). The judge tells which case it is
// on (tell_parent), so a crash, an abort or a hang is reported with the case and the signal; and it tells its end
// (tell_parent_end), so an exit() in the learner's code is a failure, never a pass. It may map at most
// kJudgeAddressSpace bytes (RLIMIT_AS), so a learner's runaway allocation fails at once rather than exhausting the
// machine. The build is bounded by signals only.
// Exit code: the judge's (0 every case passed, 1 a case failed, crashed or ran out of time); 1 when the build fails;
// 2 for bad input; 128 + the signal when stopped by one.
#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>

#include "sim/cli/cli.hpp"
#include "sim/core/error.hpp"
#include "sim/os/child_process.hpp"
#include "sim/os/input_file.hpp"
#include "sim/os/output_file.hpp"

namespace cpsim::cli {
namespace {

namespace fs = std::filesystem;

// The judge's address-space limit: 4 GiB, over 5 times what it maps (both judges pass under `prlimit --as` at
// 768 MiB, not at 640 MiB: 8 rank threads, each reserving an 8 MiB stack and a 64 MiB allocator arena, and the
// cases' few MiB of tensors). Not under a sanitizer, whose shadow memory alone maps terabytes of address space.
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
constexpr std::int64_t kJudgeAddressSpace = -1;
#else
constexpr std::int64_t kJudgeAddressSpace = std::int64_t{4} << 30;
#endif

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

// One line per exercise, the summaries aligned (--help and --list).
void print_exercises() {
  std::size_t width = 0;
  for (const Exercise& e : kExercises) width = std::max(width, std::string(e.name).size());
  for (const Exercise& e : kExercises)
    std::cout << "  " << e.name << std::string(width + 2 - std::string(e.name).size(), ' ') << e.summary << "\n";
}

// The learner's file as the judge's copy: a #line mark first, so that the compiler names the original.
void stage_copy(const fs::path& from, const fs::path& to) {
  const std::string text = read_input_file("--file", from.string(), "name the file to judge");
  std::string quoted;
  for (char c : fs::absolute(from).string())
    quoted += (c == '"' || c == '\\') ? std::string("\\") + c : std::string(1, c);
  const std::string copy = "#line 1 \"" + quoted + "\"\n" + text;
  std::ifstream old(to, std::ios::binary);
  std::stringstream old_text;
  old_text << old.rdbuf();
  if (old && old_text.str() == copy) return;  // unchanged: nothing to rebuild
  write_file(to.string(), copy);
}

// 128 + the signal that stopped cpsim judge, after saying what was stopped.
int stopped(const std::string& what, const ChildResult& r) {
  std::cerr << "cpsim: judge: " << what << " stopped by " << signal_words(r.interrupted)
            << "; its processes are gone\n";
  return 128 + r.interrupted;
}

int cmd_judge(const std::vector<std::string>& args) {
  po::options_description desc("cpsim judge <exercise>: build the judge on your file and run it");
  std::string exercise, build_dir, file;
  double time_limit = 60;
  desc.add_options()("exercise", po::value(&exercise), ("the exercise: " + exercise_names()).c_str())(
      "solution", "judge the reference solution instead of your file")(
      "file", po::value(&file)->value_name("PATH"), "judge this file instead of exercises/<exercise>/<exercise>.cpp")(
      "time-limit", po::value(&time_limit)->default_value(time_limit),
      "seconds the judge may run (the build is not counted); past them it is stopped and the case named")(
      "no-build", "run the judge as last built, without calling cmake --build")(
      "build-dir", po::value(&build_dir), "the CMake build folder (default: the folder of this cpsim binary)")(
      "list", "list the exercises");
  po::positional_options_description pos;
  pos.add("exercise", 1);
  po::variables_map vm;
  if (!parse_program("cpsim judge", desc, args, vm, {}, &pos)) {
    std::cout << "exercises:\n";
    print_exercises();
    return 0;
  }
  if (vm.count("list")) {
    print_exercises();
    return 0;
  }
  bool known = false;
  for (const Exercise& e : kExercises) known = known || exercise == e.name;
  if (!known)
    throw UsageError((exercise.empty() ? "name the exercise to judge" : "unknown exercise '" + exercise + "'") +
                     "; use `cpsim judge <exercise>` with one of " + exercise_names());
  require(!(vm.count("solution") && vm.count("file")), "--solution and --file each name the file to judge",
          "give one of them");
  const auto limit = parse_timeout("time-limit", time_limit);
  if (!file.empty()) {
    // The path goes into a `#line` mark, a line of its own: a line break in it would end the mark early.
    require(file.find_first_of("\n\r") == std::string::npos,
            "--file names a path with a line break in it, which a #line mark cannot quote",
            "rename the file (or copy it) to a path without one");
    std::error_code ec;
    require(fs::is_regular_file(file, ec), "--file " + file + " is not a file", "name the .cpp file to judge");
    require(!vm.count("no-build"), "--file builds the judge on that file", "drop --no-build");
  }

  const fs::path dir = build_dir.empty() ? fs::read_symlink("/proc/self/exe").parent_path() : fs::path(build_dir);
  if (!fs::exists(dir / "CMakeCache.txt"))
    throw UsageError(dir.string() +
                     " is not a CMake build folder (no CMakeCache.txt); use --build-dir with the "
                     "folder you built cpsim in");
  const std::string target = "judge_" + exercise + (vm.count("solution") ? "_solution" : !file.empty() ? "_file" : "");
  if (!file.empty()) {
    const fs::path copy = dir / "exercises" / exercise / "judged.cpp";
    std::error_code ec;
    fs::create_directories(copy.parent_path(), ec);
    stage_copy(file, copy);
  }
  if (!vm.count("no-build")) {
    std::cout << "Building " << target << " ..." << std::endl;
    ChildOptions build;
    build.stdout_to_stderr = true;  // the build's output beside its errors, apart from the judge's report
    const ChildResult b = run_child({"cmake", "--build", dir.string(), "--target", target}, build);
    if (b.interrupted) return stopped("the build of " + target, b);
    if (b.exit_code != 0) {
      std::cerr << "cpsim: the build of " << target << " failed ("
                << (b.signal ? signal_words(b.signal) : "exit " + std::to_string(b.exit_code))
                << "); fix the errors above and judge again\n";
      return 1;
    }
  }
  const fs::path judge = dir / "exercises" / target;
  if (!fs::exists(judge))
    throw UsageError("no judge at " + judge.string() + "; drop --no-build, or build the target " + target);
  if (!flush_stdout("cpsim")) return 1;

  ChildOptions run;
  run.time_limit = limit;
  run.progress = true;
  run.address_space_limit = kJudgeAddressSpace;
  const ChildResult r = run_child({judge.string()}, run);
  const std::string at = r.progress.empty() ? "" : " while judging " + r.progress;
  if (r.interrupted) return stopped("the judge of " + exercise + at, r);
  if (r.timed_out) {
    std::cerr << "cpsim: judge: " << exercise << " did not finish within " << time_limit << " s (--time-limit)" << at
              << "; look for a loop that never ends, or a rank waiting for a message no rank sends\n";
    return 1;
  }
  if (r.signal) {
    std::cerr << "cpsim: judge: " << exercise << " crashed with " << signal_words(r.signal) << at
              << "; fix that case and judge again\n";
    return 1;
  }
  if (r.told_end != r.exit_code) {  // it ended, but not through the judge's own end: its checks were not all made
    std::cerr << "cpsim: judge: " << exercise << " exited with code " << r.exit_code << at
              << " before the judge reached its verdict, so nothing passed; look for a call to exit() in your file "
                 "and return from the function instead\n";
    return 1;
  }
  return r.exit_code;
}

}  // namespace
CPSIM_COMMAND(judge, "build and run an exercise's judge on your file (zigzag_ring, ring_backward)", cmd_judge);
}  // namespace cpsim::cli
