// --step: where a lesson pauses, and what the learner's key does.
//
// With --step a lesson pauses before every `STEP n:` banner and after every page of a replayed run (its last
// frame included, so nothing scrolls away unread). At a terminal a pause waits for one key, no Enter needed:
// q ends stepping for the rest of the lesson (no more pauses, no more replays), any other key goes on. Without a
// terminal on stdin nothing waits and the replays print straight through (that is how the transcript tests run).
#pragma once
#include <functional>
#include <iosfwd>

namespace cpsim::lesson {

class Stepping {
 public:
  // Turns stepping on. keys() returns the next key, -1 at the end of input; it is called only when interactive.
  void start(bool interactive, std::function<int()> keys, std::ostream& out);
  bool active() const { return on_; }  // --step given and not yet ended with q
  bool interactive() const { return interactive_; }
  // At a terminal: prints the prompt, waits for a key and erases the prompt; q (or the end of input) ends
  // stepping. Without a terminal returns at once. Returns active() afterwards.
  bool pause();

 private:
  bool on_ = false, interactive_ = false;
  std::function<int()> keys_;
  std::ostream* out_ = nullptr;
};

// The lesson's stepping state (one per program; parse_options starts it when --step is given).
Stepping& stepping();

}  // namespace cpsim::lesson
