// The flags of the program that is running, so that a fix printed by shared code names only flags that program has.
//
// Validation in sim/strategies, sim/layout and the runtime is reached from several programs: `cpsim run` has
// --strategy, a lesson may not; `cpsim bench strategies` calls its lengths --seqs. Each program's parser says once
// which flags it offers (offer_flags), under the names `cpsim run` gives them; a fix then keeps the alternatives whose
// flags the program has, in that program's spelling:
//   use({"--seq 16", "--sharding contiguous"})   cpsim run:              "use --seq 16 or --sharding contiguous"
//                                                 cpsim bench strategies: "use --seqs 16 or --sharding contiguous"
//                                                 a lesson without --sharding: "use --seq 16"
// With no program registered (a library call, a test) every flag is offered under its own name.
// Set once by the parser, before any rank starts; read-only afterwards.
#pragma once
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace cpsim {

// names: cpsim run's name of each flag the program offers ("seq") -> its name in this program ("seqs").
void offer_flags(std::map<std::string, std::string> names);
// Back to "every flag, under its own name".
void offer_all_flags();

// While it lives, fixes are spelled as `cpsim run` spells them: for a program that quotes what cpsim says (a lesson
// showing a refusal "as cpsim says it"), not for its own errors. The program's flags come back at the end.
class QuotingCpsimRun {
 public:
  QuotingCpsimRun();
  ~QuotingCpsimRun();
  QuotingCpsimRun(const QuotingCpsimRun&) = delete;
  QuotingCpsimRun& operator=(const QuotingCpsimRun&) = delete;

 private:
  std::optional<std::map<std::string, std::string>> saved_;
};

// "--seq" (or the program's name for it), or "" when the program has no such flag.
std::string flag(const std::string& name);

// The alternatives (each a phrase naming flags as "--name", e.g. "--strategy hybrid --a2a 4") whose flags the program
// offers, renamed, as "use A, B or C"; `otherwise` when none is left.
std::string use(const std::vector<std::string>& alternatives, const std::string& otherwise = "");
// "use --dtype f32 or f64": one flag with the values it may take; `otherwise` when the program has no such flag.
std::string use_value(const std::string& name, const std::vector<std::string>& values,
                      const std::string& otherwise = "");

}  // namespace cpsim
