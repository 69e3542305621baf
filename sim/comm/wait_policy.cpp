#include "sim/comm/wait_policy.hpp"

#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <climits>
#include <cstdlib>
#include <ctime>
#include <string>

#include "sim/core/error.hpp"

namespace cpsim {

namespace {

// No FUTEX_PRIVATE_FLAG: the word may live in a shared mapping (processes backend).
long futex(std::atomic<std::uint32_t>* word, int op, std::uint32_t val, const timespec* timeout) {
  return ::syscall(SYS_futex, reinterpret_cast<std::uint32_t*>(word), op, val, timeout, nullptr, 0);
}

constexpr std::chrono::microseconds kDefaultSpin{1000};
constexpr long kMostSpinUs = 1000000;

}  // namespace

std::optional<std::chrono::microseconds> parse_wait_spin(const char* text) {
  if (text == nullptr || *text < '0' || *text > '9') return std::nullopt;
  char* end = nullptr;
  const long us = std::strtol(text, &end, 10);
  if (*end != '\0' || us > kMostSpinUs) return std::nullopt;
  return std::chrono::microseconds(us);
}

std::chrono::microseconds wait_spin() {
  static const std::chrono::microseconds spin = [] {
    const char* v = std::getenv("CPSIM_WAIT_SPIN_US");
    return v ? parse_wait_spin(v).value_or(kDefaultSpin) : kDefaultSpin;
  }();
  return spin;
}

void check_wait_spin() {
  const char* v = std::getenv("CPSIM_WAIT_SPIN_US");
  require(v == nullptr || parse_wait_spin(v).has_value(),
          "CPSIM_WAIT_SPIN_US=" + std::string(v ? v : "") +
              " is not a number of microseconds from 0 to " + std::to_string(kMostSpinUs),
          "unset it (a waiting rank then polls 1 ms before it sleeps), or give e.g. CPSIM_WAIT_SPIN_US=1000");
}

static_assert(std::atomic<std::uint32_t>::is_always_lock_free, "doorbells must be lock-free to work across processes");

void Doorbell::ring() {
  seq.fetch_add(1);
  if (sleepers.load() > 0) futex(&seq, FUTEX_WAKE, INT_MAX, nullptr);
}

void Doorbell::sleep(std::uint32_t seen, std::chrono::microseconds max) {
  // Dekker-style: we count ourselves a sleeper before checking seq (inside futex), the ringer bumps seq before
  // checking for sleepers; with sequentially consistent atomics one of us sees the other.
  sleepers.fetch_add(1);
  if (seq.load() == seen) {
    timespec ts{static_cast<time_t>(max.count() / 1000000), static_cast<long>(max.count() % 1000000) * 1000};
    futex(&seq, FUTEX_WAIT, seen, &ts);
  }
  sleepers.fetch_sub(1);
}

}  // namespace cpsim
