#include "sim/os/output_file.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <iostream>

#include "sim/core/error.hpp"

namespace cpsim {
namespace {

namespace fs = std::filesystem;

fs::path folder_of(const fs::path& p) { return p.has_parent_path() ? p.parent_path() : fs::path("."); }

// The permissions a file created with open(0666) gets under this process's umask.
mode_t default_mode() {
  const mode_t mask = ::umask(0);
  ::umask(mask);
  return 0666 & ~mask;
}

}  // namespace

OutputFile::OutputFile(std::string path) : path_(std::move(path)) {
  const fs::path p(path_);
  std::string temp = (folder_of(p) / ("." + p.filename().string() + ".XXXXXX")).string();
  fd_ = ::mkstemp(temp.data());
  if (fd_ < 0) fail("cannot create a file in the folder of", errno);
  temp_ = temp;
  ::fchmod(fd_, default_mode());
}

OutputFile::~OutputFile() {
  if (fd_ >= 0) ::close(fd_);
  if (!temp_.empty()) ::unlink(temp_.c_str());
}

void OutputFile::fail(const std::string& what, int err) {
  throw Error(what + " " + path_ + ": " + std::strerror(err));
}

void OutputFile::write(const void* data, std::size_t bytes) {
  const char* p = static_cast<const char*>(data);
  while (bytes > 0) {
    const ssize_t n = ::write(fd_, p, bytes);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) fail("cannot write", n < 0 ? errno : ENOSPC);
    p += n;
    bytes -= static_cast<std::size_t>(n);
  }
}

void OutputFile::commit() {
  const int fd = std::exchange(fd_, -1);
  if (::close(fd) != 0) fail("cannot write", errno);
  if (::rename(temp_.c_str(), path_.c_str()) != 0) fail("cannot write", errno);
  temp_.clear();
}

void write_file(const std::string& path, std::string_view text) {
  OutputFile f(path);
  f.write(text);
  f.commit();
}

void check_output_file(const std::string& flag, const std::string& path) {
  const std::string what = "--" + flag + " " + path;
  const fs::path p(path), dir = folder_of(p);
  std::error_code ec;
  if (!fs::is_directory(dir, ec))
    throw UsageError(what + ": the folder " + dir.string() + " does not exist; create it or name a file in an " +
                     "existing folder");
  if (fs::is_directory(p, ec)) throw UsageError(what + " is a folder; name a file in it");
  if (fs::exists(p, ec) && !fs::is_regular_file(p, ec))
    throw UsageError(what + " is not a regular file; name a file to write");
  if (::access(dir.c_str(), W_OK | X_OK) != 0)
    throw UsageError(what + ": cannot write into the folder " + dir.string() + " (" + std::strerror(errno) +
                     "); name a file in a folder you can write");
  if (fs::exists(p, ec) && ::access(p.c_str(), W_OK) != 0)
    throw UsageError(what + " exists and is read-only; name another file or make it writable");
}

void check_output_folder(const std::string& flag, const std::string& dir) {
  const std::string what = "--" + flag + " " + dir;
  const fs::path p(dir);
  std::error_code ec;
  // One look at it (another process of an mpirun job may create and remove it between two): a folder that is there
  // is checked; one that is gone by the time it is checked is treated as not there.
  const fs::file_status st = fs::status(p, ec);
  if (fs::exists(st)) {
    if (!fs::is_directory(st)) throw UsageError(what + " exists and is not a folder; name a new or existing folder");
    if (::access(p.c_str(), W_OK | X_OK) == 0) return;
    if (errno != ENOENT)
      throw UsageError(what + ": cannot write into it (" + std::string(std::strerror(errno)) +
                       "); name a folder you can write");
  }
  const fs::path parent = folder_of(p.has_filename() ? p : p.parent_path());
  if (!fs::is_directory(parent, ec))
    throw UsageError(what + ": the folder " + parent.string() + " does not exist; create it or name a folder in an " +
                     "existing one");
  if (::access(parent.c_str(), W_OK | X_OK) != 0)
    throw UsageError(what + ": cannot create it in " + parent.string() + " (" + std::strerror(errno) +
                     "); name a folder you can write");
  // Permissions do not tell everything (root, /proc, a read-only mount): make it once, and leave nothing until the run.
  // Another process of the same job (mpirun) may be probing it at the same moment: EEXIST is theirs.
  if (::mkdir(p.c_str(), 0777) != 0) {
    if (errno == EEXIST) return;
    throw UsageError(what + ": cannot create it (" + std::string(std::strerror(errno)) + "); name a folder you can write");
  }
  ::rmdir(p.c_str());  // fails harmlessly when another process has written into it meanwhile
}

void check_distinct(const std::vector<std::pair<std::string, std::string>>& paths) {
  std::vector<std::pair<std::string, fs::path>> seen;
  for (const auto& [flag, path] : paths) {
    if (path.empty()) continue;
    std::error_code ec;
    fs::path canonical = fs::weakly_canonical(fs::absolute(path, ec), ec);
    if (ec) canonical = fs::absolute(path);
    for (const auto& [other, p] : seen)
      if (p == canonical)
        throw UsageError("--" + other + " and --" + flag + " name the same file " + path + "; give each its own");
    seen.emplace_back(flag, canonical);
  }
}

bool flush_stdout(const std::string& program) {
  std::cout.flush();
  errno = 0;
  const bool flushed = std::fflush(stdout) == 0;
  int err = errno;
  if (flushed && std::cout.good() && !std::ferror(stdout)) return true;
  // A write failed earlier, when the buffer filled, and its errno is gone: one more byte says why (the output is
  // already incomplete).
  if (err == 0 && ::write(STDOUT_FILENO, "\n", 1) < 0) err = errno;
  std::cerr << program << ": error: cannot write the output ("
            << (err != 0 ? std::strerror(err) : "a write to standard output failed") << ")\n";
  return false;
}

}  // namespace cpsim
