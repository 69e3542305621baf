#include "sim/core/error.hpp"

#include <cctype>
#include <utility>

namespace cpsim {
namespace {

bool flag_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_'; }

// The phrase with every "--name" spelled by `spelling`; nullopt when the program lacks one of them.
std::optional<std::string> spelled(const std::string& phrase, const FlagSpelling& spelling) {
  std::string out;
  for (std::size_t i = 0; i < phrase.size();) {
    if (phrase.compare(i, 2, "--") != 0 || (i > 0 && flag_char(phrase[i - 1]))) {
      out += phrase[i++];
      continue;
    }
    std::size_t end = i + 2;
    while (end < phrase.size() && flag_char(phrase[end])) ++end;
    const std::string f = spelling(phrase.substr(i + 2, end - i - 2));
    if (f.empty()) return std::nullopt;
    out += f;
    i = end;
  }
  return out;
}

// One part: its verb and its kept ways ("use A, B or C"), or its `otherwise`.
std::string part_worded(const Fix& part, const FlagSpelling& spelling) {
  std::vector<std::string> kept;
  for (const std::string& way : part.ways)
    if (auto s = spelled(way, spelling)) kept.push_back(std::move(*s));
  if (kept.empty()) return part.otherwise;
  std::string s = part.verb + kept[0];
  for (std::size_t i = 1; i < kept.size(); ++i) s += (i + 1 == kept.size() ? " or " : ", ") + kept[i];
  return s;
}

std::string fix_text(const std::vector<Fix>& fix, const std::string& none, const FlagSpelling& spelling) {
  std::string out;
  for (const Fix& part : fix) {
    const std::string s = part_worded(part, spelling);
    if (!s.empty()) out += (out.empty() ? "" : part.lead) + s;
  }
  return out.empty() ? none : out;
}

std::string message(const std::string& constraint, const std::vector<Fix>& fix, const std::string& none,
                    const FlagSpelling& spelling) {
  const std::string f = fix_text(fix, none, spelling);
  return f.empty() ? constraint : constraint + "; " + f;
}

// The wire form: kMark, then fields separated by kField; each part is its lead, verb, otherwise, then its ways.
constexpr char kMark = '\x1e', kField = '\x1f', kPart = '\x1d';

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out(1);
  for (char c : s)
    if (c == sep)
      out.emplace_back();
    else
      out.back() += c;
  return out;
}

}  // namespace

std::string own_flag(const std::string& quantity) { return "--" + quantity; }

Worded::Worded(std::string constraint, std::vector<Fix> fix, std::string none)
    : std::runtime_error(message(constraint, fix, none, own_flag)),
      constraint_(std::move(constraint)),
      fix_(std::move(fix)),
      none_(std::move(none)) {}

std::string Worded::worded(const FlagSpelling& spelling) const {
  return message(constraint_, fix_, none_, spelling);
}

std::string Worded::fix_worded(const FlagSpelling& spelling) const { return fix_text(fix_, none_, spelling); }

std::string encoded(const std::exception& e) {
  const auto* w = dynamic_cast<const Worded*>(&e);
  if (!w) return e.what();
  std::string s(1, kMark);
  s += dynamic_cast<const UsageError*>(w) ? "u" : "e";
  s += kField + w->constraint() + kField + w->none();
  for (const Fix& part : w->fix()) {
    s += kField + part.lead + kPart + part.verb + kPart + part.otherwise;
    for (const std::string& way : part.ways) s += kPart + way;
  }
  return s;
}

std::optional<Decoded> decoded(const std::string& text) {
  if (text.size() < 2 || text[0] != kMark) return std::nullopt;
  const std::vector<std::string> fields = split(text.substr(2), kField);
  if (fields.size() < 3) return std::nullopt;  // [0] is the empty text before the first separator
  Decoded d;
  d.usage = text[1] == 'u';
  d.constraint = fields[1];
  d.none = fields[2];
  for (std::size_t i = 3; i < fields.size(); ++i) {
    const std::vector<std::string> p = split(fields[i], kPart);
    if (p.size() < 3) break;  // cut short (a failure text has a bounded size): the parts before it stand
    d.fix.push_back(Fix{std::vector<std::string>(p.begin() + 3, p.end()), p[2], p[0], p[1]});
  }
  return d;
}

}  // namespace cpsim
