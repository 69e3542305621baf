// Errors a learner can act on.
//   UsageError: the input is impossible (a shape, a flag). The CLI prints its one line and exits 2.
//   Error:      something failed while running (a rank died, a wait timed out, a check could not run).
//
// A message is its constraint and, apart, the fixes that would lift it, as data: each Fix lists ways out, each a
// phrase that names the quantities it changes as "--name" under their own (cpsim run's) names, "--seq 16". The code
// that refuses does not know which program runs: `cpsim run` calls the sequence length --seq, `cpsim bench
// strategies` --seqs, and a lesson may have no --sharding at all. The program words the message (sim/cli/flag_names):
// every quantity under its own flag name, and a way whose flags it lacks left out.
//
//   throw UsageError("S must be divisible by 2C=8 for zigzag sharding (S=10)",
//                    {Fix{{"--seq 16", "--sharding contiguous"}}});
//     what()                     "S must be ...; use --seq 16 or --sharding contiguous"  (every flag, its own name)
//     cpsim bench strategies      "S must be ...; use --seqs 16 or --sharding contiguous"
//     a lesson without --sharding "S must be ...; use --seq 16"
//
// A message says: the constraint, then "; " and the fix when there is one. The fix is its parts in order, each
//   its verb and its kept ways ("use --seq 16, --ranks 2 or --sharding contiguous"), or its `otherwise` when none
//   is kept (or it has no ways: a fixed phrase), or nothing;
// joined by each later part's `lead` (", or "); when every part says nothing, the message's `none`.
// Errors cross rank boundaries as text (a forked rank's failure): encoded() keeps the parts apart, and a message
// read back with decoded() is worded as the original would be.
#pragma once
#include <functional>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace cpsim {

struct Fix {
  std::vector<std::string> ways;  // alternatives, each naming its quantities as "--name": "--seq 16"
  std::string otherwise;          // said when the program has the flags of no way ("": nothing)
  std::string lead;               // before this part, when an earlier part said something
  std::string verb;               // before the kept ways

  Fix(std::vector<std::string> ways, std::string otherwise = "", std::string lead = ", or ", std::string verb = "use ")
      : ways(std::move(ways)), otherwise(std::move(otherwise)), lead(std::move(lead)), verb(std::move(verb)) {}
};

// The program's name of a quantity, with its dashes ("seq" -> "--seqs"); "" when the program has no such flag.
using FlagSpelling = std::function<std::string(const std::string& quantity)>;
// Every quantity under its own name: "seq" -> "--seq".
std::string own_flag(const std::string& quantity);

// A message whose fixes the program that prints it words (the base of UsageError and Error).
class Worded : public std::runtime_error {
 public:
  explicit Worded(const std::string& text) : std::runtime_error(text), constraint_(text) {}
  Worded(std::string constraint, std::vector<Fix> fix, std::string none = "");

  const std::string& constraint() const { return constraint_; }
  const std::vector<Fix>& fix() const { return fix_; }
  const std::string& none() const { return none_; }
  // The message with each quantity spelled by `spelling` (what() is worded(own_flag)).
  std::string worded(const FlagSpelling& spelling) const;
  // The fix alone, as worded() says it after "; " ("" when it says nothing).
  std::string fix_worded(const FlagSpelling& spelling) const;

 private:
  std::string constraint_;
  std::vector<Fix> fix_;
  std::string none_;
};

struct UsageError : Worded {
  using Worded::Worded;
};

struct Error : Worded {
  using Worded::Worded;
};

// The exception as text for another process: a Worded's parts kept apart (read back by decoded()), else what().
std::string encoded(const std::exception& e);
struct Decoded {
  bool usage = false;  // it was a UsageError
  std::string constraint;
  std::vector<Fix> fix;
  std::string none;
};
// The parts of a text encoded() made from a Worded; nullopt for any other text (a plain message).
std::optional<Decoded> decoded(const std::string& text);

// require(ok, "S must be divisible by 2C for zigzag sharding (S=10, C=4)", "use a shorter sequence")
// throws UsageError("S must be ...; use a shorter sequence"): a fix that names no flag.
inline void require(bool ok, const std::string& constraint, const std::string& fix) {
  if (!ok) throw UsageError(fix.empty() ? constraint : constraint + "; " + fix);
}
// require(ok, "S must be ...", Fix{{"--seq 16", "--sharding contiguous"}}): a fix the program words.
inline void require(bool ok, const std::string& constraint, const Fix& fix) {
  if (!ok) throw UsageError(constraint, {fix});
}

}  // namespace cpsim
