#include "lessons/common/stepping.hpp"

#include <ostream>
#include <string>
#include <utility>

namespace cpsim::lesson {

namespace {
constexpr const char* kPrompt = "-- any key: next, q: stop stepping --";
}  // namespace

void Stepping::start(bool interactive, std::function<int()> keys, std::ostream& out) {
  on_ = true;
  interactive_ = interactive;
  keys_ = std::move(keys);
  out_ = &out;
}

bool Stepping::pause() {
  if (!on_ || !interactive_) return on_;
  *out_ << kPrompt << std::flush;
  const int key = keys_();
  *out_ << "\r" << std::string(std::char_traits<char>::length(kPrompt), ' ') << "\r" << std::flush;
  if (key < 0 || key == 'q' || key == 'Q') on_ = false;
  return on_;
}

Stepping& stepping() {
  static Stepping s;
  return s;
}

}  // namespace cpsim::lesson
