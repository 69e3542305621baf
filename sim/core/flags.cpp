#include "sim/core/flags.hpp"

#include <cctype>
#include <optional>
#include <utility>

namespace cpsim {
namespace {

std::optional<std::map<std::string, std::string>>& offered() {
  static std::optional<std::map<std::string, std::string>> names;
  return names;
}

bool flag_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_'; }

// The phrase with every "--name" in the program's spelling; nullopt when one of them is not offered.
std::optional<std::string> renamed(const std::string& phrase) {
  std::string out;
  for (std::size_t i = 0; i < phrase.size();) {
    if (phrase.compare(i, 2, "--") != 0 || (i > 0 && flag_char(phrase[i - 1]))) {
      out += phrase[i++];
      continue;
    }
    std::size_t end = i + 2;
    while (end < phrase.size() && flag_char(phrase[end])) ++end;
    const std::string f = flag(phrase.substr(i + 2, end - i - 2));
    if (f.empty()) return std::nullopt;
    out += f;
    i = end;
  }
  return out;
}

}  // namespace

void offer_flags(std::map<std::string, std::string> names) { offered() = std::move(names); }

void offer_all_flags() { offered().reset(); }

QuotingCpsimRun::QuotingCpsimRun() : saved_(std::exchange(offered(), std::nullopt)) {}
QuotingCpsimRun::~QuotingCpsimRun() { offered() = std::move(saved_); }

std::string flag(const std::string& name) {
  const auto& names = offered();
  if (!names) return "--" + name;
  const auto it = names->find(name);
  return it == names->end() ? "" : "--" + it->second;
}

std::string use(const std::vector<std::string>& alternatives, const std::string& otherwise) {
  std::vector<std::string> kept;
  for (const std::string& a : alternatives)
    if (auto r = renamed(a)) kept.push_back(*r);
  if (kept.empty()) return otherwise;
  std::string s = "use " + kept[0];
  for (std::size_t i = 1; i < kept.size(); ++i) s += (i + 1 == kept.size() ? " or " : ", ") + kept[i];
  return s;
}

std::string use_value(const std::string& name, const std::vector<std::string>& values, const std::string& otherwise) {
  const std::string f = flag(name);
  if (f.empty() || values.empty()) return otherwise;
  std::string s = "use " + f + " " + values[0];
  for (std::size_t i = 1; i < values.size(); ++i) s += (i + 1 == values.size() ? " or " : ", ") + values[i];
  return s;
}

}  // namespace cpsim
