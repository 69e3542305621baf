// The flags of the program that is running, and its errors in their words.
//
// Code below the command line refuses with the fixes apart (sim/core/error.hpp): each way out names its quantities
// as "--name" under cpsim run's names. Each program's parser says once which flags it offers (offer_flags), under
// those names; worded() then says an error's fix with the ways whose flags the program has, in its own spelling:
//   Fix{{"--seq 16", "--sharding contiguous"}}   cpsim run:                   "use --seq 16 or --sharding contiguous"
//                                                 cpsim bench strategies:      "use --seqs 16 or --sharding contiguous"
//                                                 a lesson without --sharding: "use --seq 16"
// With no program registered (a library call, a test) every flag is offered under its own name, as what() says it.
// Set once by the parser, before any rank starts; read-only afterwards.
#pragma once
#include <exception>
#include <map>
#include <string>

#include "sim/core/error.hpp"

namespace cpsim {

// names: cpsim run's name of each flag the program offers ("seq") -> its name in this program ("seqs").
void offer_flags(std::map<std::string, std::string> names);
// Back to "every flag, under its own name".
void offer_all_flags();

// "--seq" (or the program's name for it), or "" when the program has no such flag.
std::string flag(const std::string& name);

// The error as this program says it: a Worded (UsageError, Error, a rank's failure) with its fixes in the program's
// flags, anything else as what() says it.
std::string worded(const std::exception& e);

}  // namespace cpsim
