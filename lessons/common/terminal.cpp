#include "lessons/common/terminal.hpp"

#include <termios.h>
#include <unistd.h>

#include <csignal>

namespace cpsim::lesson {

namespace {

termios g_saved;  // the settings to restore, valid while a read_key waits

void restore_and_reraise(int sig) {
  ::tcsetattr(STDIN_FILENO, TCSANOW, &g_saved);
  std::signal(sig, SIG_DFL);
  std::raise(sig);
}

}  // namespace

bool stdin_is_terminal() {
  return ::isatty(STDIN_FILENO) == 1;
}

int read_key() {
  if (::tcgetattr(STDIN_FILENO, &g_saved) != 0) {  // not a terminal: read a byte as it comes
    unsigned char c = 0;
    return ::read(STDIN_FILENO, &c, 1) == 1 ? c : -1;
  }
  // 1. Non-canonical, no echo: read() returns after one byte. Signals (Ctrl-C) still arrive.
  termios raw = g_saved;
  raw.c_lflag &= static_cast<tcflag_t>(~(ICANON | ECHO));
  raw.c_cc[VMIN] = 1;
  raw.c_cc[VTIME] = 0;
  auto* old_int = std::signal(SIGINT, restore_and_reraise);
  auto* old_term = std::signal(SIGTERM, restore_and_reraise);
  ::tcsetattr(STDIN_FILENO, TCSANOW, &raw);
  // 2. One byte, or the end of input.
  unsigned char c = 0;
  const bool got = ::read(STDIN_FILENO, &c, 1) == 1;
  // 3. The terminal as it was.
  ::tcsetattr(STDIN_FILENO, TCSANOW, &g_saved);
  std::signal(SIGINT, old_int);
  std::signal(SIGTERM, old_term);
  return got ? c : -1;
}

}  // namespace cpsim::lesson
