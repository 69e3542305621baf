#include "sim/cli/parse.hpp"

#include <cctype>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <limits>
#include <optional>

#include "sim/cli/flag_names.hpp"
#include "sim/core/error.hpp"
#include "sim/core/sizes.hpp"

namespace cpsim::cli {
namespace {

// The range of an option's value type, when it is a number ("--ranks" holds an int).
struct NumberType {
  bool integer = true;
  std::string lo, hi;
};

template <class T>
std::optional<NumberType> number_type_of(const po::value_semantic* s) {
  if (!dynamic_cast<const po::typed_value<T>*>(s)) return std::nullopt;
  return NumberType{std::numeric_limits<T>::is_integer, std::to_string(std::numeric_limits<T>::lowest()),
                    std::to_string(std::numeric_limits<T>::max())};
}

std::optional<NumberType> number_type(const po::option_description& o) {
  const po::value_semantic* s = o.semantic().get();
  for (auto t : {number_type_of<int>(s), number_type_of<long>(s), number_type_of<long long>(s),
                 number_type_of<unsigned>(s), number_type_of<unsigned long>(s),
                 number_type_of<unsigned long long>(s), number_type_of<double>(s)})
    if (t) return t;
  return std::nullopt;
}

bool whole_number(const std::string& t) {
  std::size_t i = t[0] == '-' || t[0] == '+' ? 1 : 0;
  if (i >= t.size()) return false;
  for (; i < t.size(); ++i)
    if (!std::isdigit(static_cast<unsigned char>(t[i]))) return false;
  return true;
}

// The value Boost quotes in "the argument ('1e999') for option '--timeout' is invalid".
std::string quoted_value(const std::string& message) {
  const auto a = message.find("('"), b = message.rfind("')");
  return a == std::string::npos || b == std::string::npos || b < a ? "" : message.substr(a + 2, b - a - 2);
}

// Boost's "invalid value" as what is wrong with the value.
std::string invalid_value(const po::options_description& desc, const po::invalid_option_value& e) {
  const std::string name = e.get_option_name();  // "--ranks"
  const std::string text = quoted_value(e.what());
  const po::option_description* o = desc.find_nothrow(name.substr(name.find_first_not_of('-')), false);
  const auto type = o ? number_type(*o) : std::nullopt;
  if (!type || text.empty()) return e.what();
  if (type->integer) {
    if (!whole_number(text)) return name + " '" + text + "' is not a whole number";
    if (text[0] == '-' && type->lo == "0") return name + " " + text + " must not be negative";
    return name + " " + text + (text[0] == '-' ? " is too small (at least " + type->lo + ")"
                                               : " is too large (at most " + type->hi + ")");
  }
  char* end = nullptr;
  const double v = std::strtod(text.c_str(), &end);
  if (end != text.c_str() && *end == '\0' && std::isinf(v)) return name + " " + text + " is too large";
  return name + " '" + text + "' is not a number";
}

// Boost reads "-1" into an unsigned flag as 2^64 - 1 without a word: a sign on the value of an unsigned flag
// (--seed -1) is refused here, before it is stored.
void refuse_negative_unsigned(const po::options_description& desc, const po::parsed_options& parsed,
                              const std::string& see) {
  for (const po::option& opt : parsed.options) {
    const po::option_description* o = desc.find_nothrow(opt.string_key, false);
    const auto type = o ? number_type(*o) : std::nullopt;
    if (!type || !type->integer || type->lo != "0") continue;
    for (const std::string& v : opt.value) {
      const auto first = v.find_first_not_of(" \t");
      if (first != std::string::npos && v[first] == '-')
        throw UsageError("--" + opt.string_key + " " + v + " must not be negative (a whole number of 0 or more); " +
                         see);
    }
  }
}

// Every flag desc offers, under its own name, and the aliases.
void offer(const po::options_description& desc, const FlagAliases& aliases) {
  std::map<std::string, std::string> names;
  for (const auto& o : desc.options()) names[o->long_name()] = o->long_name();
  for (const auto& [canonical, own] : aliases)
    if (names.count(own)) names[canonical] = own;
  offer_flags(std::move(names));
}

}  // namespace

bool parse_program(const std::string& program, const po::options_description& desc,
                   const std::vector<std::string>& args, po::variables_map& vm, const FlagAliases& aliases,
                   const po::positional_options_description* positional) {
  po::options_description all(desc);
  all.add_options()("help,h", "show this help");
  offer(all, aliases);
  // Arguments no flag and no positional takes land in "stray", which no program offers.
  po::options_description with_stray(all);
  with_stray.add_options()("stray", po::value<std::vector<std::string>>());
  po::positional_options_description pos = positional ? *positional : po::positional_options_description();
  pos.add("stray", -1);
  const std::string see = "see `" + program + " --help`";
  try {
    const po::parsed_options parsed = po::command_line_parser(args).options(with_stray).positional(pos).run();
    refuse_negative_unsigned(all, parsed, see);
    po::store(parsed, vm);
    if (vm.count("help")) {
      std::cout << "usage: " << program << " [options]\n\n" << all << "\n";
      return false;
    }
    if (vm.count("stray")) {
      const std::string word = vm["stray"].as<std::vector<std::string>>()[0];
      if (!positional)
        throw UsageError(program + " takes no positional argument (got '" + word + "'); every input is a flag, " + see);
      throw UsageError("unexpected argument '" + word + "'; " + program + " takes " +
                       std::to_string(positional->max_total_count()) + " such argument (" + see + ")");
    }
    po::notify(vm);
  } catch (const po::invalid_option_value& e) {
    throw UsageError(invalid_value(all, e) + "; " + see);
  } catch (const po::error& e) {
    throw UsageError(std::string(e.what()) + "; " + see);
  }
  for (const auto& [name, value] : vm) {
    const po::option_description* o = all.find_nothrow(name, false);
    if (value.defaulted() || !o || o->semantic()->max_tokens() == 0) continue;  // a switch holds no value
    if (const auto* s = boost::any_cast<std::string>(&value.value()); s && s->empty())
      throw UsageError("--" + name + " got an empty value; " + see);
  }
  return true;
}

bool parse(const std::string& command, const po::options_description& desc, const std::vector<std::string>& args,
           po::variables_map& vm, const FlagAliases& aliases) {
  return parse_program("cpsim " + command, desc, args, vm, aliases);
}

std::vector<std::string> split_list(const std::string& flag, const std::string& text) {
  std::vector<std::string> out;
  for (std::size_t at = 0;;) {
    const std::size_t comma = text.find(',', at);
    out.push_back(text.substr(at, comma == std::string::npos ? std::string::npos : comma - at));
    if (comma == std::string::npos) break;
    at = comma + 1;
  }
  for (std::size_t i = 0; i < out.size(); ++i)
    if (out[i].find_first_not_of(" \t") == std::string::npos) {
      std::string kept;
      for (const std::string& e : out)
        if (e.find_first_not_of(" \t") != std::string::npos) kept += (kept.empty() ? "" : ",") + e;
      throw UsageError("--" + flag + " '" + text + "' has an empty entry (entry " + std::to_string(i + 1) + " of " +
                       std::to_string(out.size()) + "); separate the entries by single commas" +
                       (kept.empty() ? "" : ", e.g. --" + flag + " " + kept));
    }
  return out;
}

std::size_t parse_size(const std::string& flag, const std::string& text) {
  const std::string what = "--" + flag + " '" + text + "'";
  const ReadSize r = read_size(text);
  switch (r.status) {
    case SizeText::ok:
      break;
    case SizeText::not_a_size:
      throw UsageError(what + " is not a size; use a whole number with an optional K, M, G or T suffix");
    case SizeText::not_whole:
      throw UsageError(what + " is not a whole number; use a whole number with an optional K, M, G or T suffix");
    case SizeText::unknown_suffix:
      throw UsageError(what + " has an unknown suffix; use K, M, G or T (powers of 1024)");
    case SizeText::too_large:
      throw UsageError(what + " is too large for a size (at most 2^64 - 1); use a number such as 16K or 1M");
  }
  static_assert(sizeof(std::size_t) == sizeof(std::uint64_t));
  return static_cast<std::size_t>(r.value);
}

std::int64_t parse_size64(const std::string& flag, const std::string& text) {
  const std::size_t v = parse_size(flag, text);
  constexpr auto kMax = static_cast<std::size_t>(std::numeric_limits<std::int64_t>::max());
  if (v > kMax)
    throw UsageError("--" + flag + " '" + text + "' is too large (at most " + std::to_string(kMax) + ")");
  return static_cast<std::int64_t>(v);
}

po::typed_value<std::string>* size_value(const std::string& flag, std::int64_t* value) {
  return po::value<std::string>()->notifier([flag, value](const std::string& text) {
    *value = parse_size64(flag, text);
  });
}

std::string size_help(const std::string& text) {
  return text + " (K, M, G, T: powers of 1024)";
}

std::chrono::milliseconds parse_timeout(const std::string& flag, double seconds) {
  char text[32];
  std::snprintf(text, sizeof text, "%g", seconds);
  const std::string fix = "use --" + flag + " 120";
  require(!std::isnan(seconds), "--" + flag + " " + text + " is not a number of seconds", fix);
  require(seconds <= kMaxTimeoutSeconds, "--" + flag + " " + text + " is too large (at most 1000000 s)", fix);
  require(seconds >= 0.001, "--" + flag + " " + text + " is too small (at least 0.001 s, a millisecond)", fix);
  return std::chrono::milliseconds(static_cast<std::int64_t>(std::llround(seconds * 1000)));
}

}  // namespace cpsim::cli
