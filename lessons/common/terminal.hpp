// The terminal a lesson talks to when stepping: whether stdin is one, and one key read from it without Enter.
#pragma once

namespace cpsim::lesson {

// Whether standard input is a terminal (when it is not, --step never pauses).
bool stdin_is_terminal();

// One key from the terminal on standard input, read without waiting for Enter and without echo; the terminal's
// settings are restored before it returns, and also when a signal (Ctrl-C) ends the program during the wait.
// Returns the key's byte, or -1 at the end of input.
int read_key();

}  // namespace cpsim::lesson
