// The threads backend: C ranks as std::threads of one process, exchanging messages through the mailboxes of
// mailbox.hpp, which live in the process's memory (their messages in its heap). docs/backends-threads-processes.md
// walks a message's path.
#pragma once
#include <vector>

#include "sim/comm/backend.hpp"

namespace cpsim {

constexpr int kMaxThreadsRanks = 1024;

std::vector<RankOutcome> launch_threads(const LaunchOptions& opt, const RankFn& fn);

}  // namespace cpsim
