#include "sim/os/input_file.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "sim/core/error.hpp"

namespace cpsim {
namespace {

// Closes the descriptor however the read ends.
struct Fd {
  int fd;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

std::string mib(std::int64_t bytes) {
  return bytes % (1 << 20) == 0 ? std::to_string(bytes >> 20) + " MiB" : std::to_string(bytes) + " bytes";
}

}  // namespace

std::string read_input_file(const std::string& flag, const std::string& path, const std::string& fix,
                            std::int64_t max_bytes) {
  const std::string named = flag + " " + path;
  // O_NONBLOCK: opening a FIFO with no writer would otherwise wait forever; it is refused below before any read.
  const Fd f{::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC)};
  if (f.fd < 0) throw UsageError(named + " cannot be read (" + std::strerror(errno) + "); " + fix);
  struct stat st {};
  if (::fstat(f.fd, &st) != 0) throw UsageError(named + " cannot be read (" + std::strerror(errno) + "); " + fix);
  if (!S_ISREG(st.st_mode)) {
    const char* what = S_ISDIR(st.st_mode)    ? "a folder"
                       : S_ISFIFO(st.st_mode) ? "a FIFO"
                       : S_ISCHR(st.st_mode)  ? "a device"
                       : S_ISSOCK(st.st_mode) ? "a socket"
                                              : "not a regular file";
    throw UsageError(named + " is " + what + ", not a regular file; " + fix);
  }
  const auto too_big = [&] {
    return UsageError(named + " is larger than " + mib(max_bytes) + ", more than any input cpsim reads; " + fix);
  };
  if (st.st_size > max_bytes) throw too_big();
  // A regular file never blocks: back to blocking reads, so that a signal-free read loop is simple.
  ::fcntl(f.fd, F_SETFL, ::fcntl(f.fd, F_GETFL) & ~O_NONBLOCK);
  std::string text;
  text.reserve(static_cast<std::size_t>(st.st_size));
  char buf[1 << 16];
  for (;;) {
    const ssize_t n = ::read(f.fd, buf, sizeof buf);
    if (n == 0) break;
    if (n < 0) {
      if (errno == EINTR) continue;
      throw UsageError(named + " cannot be read (" + std::strerror(errno) + "); " + fix);
    }
    if (static_cast<std::int64_t>(text.size()) + n > max_bytes) throw too_big();  // it grew while being read
    text.append(buf, static_cast<std::size_t>(n));
  }
  return text;
}

}  // namespace cpsim
