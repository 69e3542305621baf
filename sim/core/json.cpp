#include "sim/core/json.hpp"

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <set>
#include <vector>

#include "sim/core/error.hpp"

namespace cpsim {

std::string json_text(const Json& j, bool pretty) {
  return j.dump(pretty ? 2 : -1, ' ', false, Json::error_handler_t::replace);
}

namespace {

// A value as written, cut short when long (a field given a whole document).
std::string shown(const Json& v) {
  const std::string t = json_text(v);
  return t.size() <= 40 ? t : t.substr(0, 37) + "...";
}

// The parser's callback sees every object and array open and close, and every key: it keeps the keys of each open
// object so that a repeated one is refused (nlohmann-json would keep the last silently), and refuses a document
// deeper than kJsonMaxDepth before it is built.
class Checks {
 public:
  Checks(const std::string& origin, const std::string& fix) : origin_(origin), fix_(fix) {}

  bool operator()(int /*depth*/, nlohmann::json::parse_event_t event, Json& parsed) {
    using E = nlohmann::json::parse_event_t;
    switch (event) {
      case E::object_start:
      case E::array_start:
        if (keys_.size() >= static_cast<std::size_t>(kJsonMaxDepth))
          throw UsageError(origin_ + " nests objects and arrays deeper than " + std::to_string(kJsonMaxDepth) +
                           " levels; " + fix_);
        keys_.emplace_back();
        break;
      case E::object_end:
      case E::array_end:
        keys_.pop_back();
        break;
      case E::key:
        if (!keys_.back().insert(parsed.get<std::string>()).second)
          throw UsageError(origin_ + " gives the key " + shown(parsed) + " twice in one object; keep one");
        break;
      case E::value:
        break;
    }
    return true;
  }

 private:
  const std::string& origin_;
  const std::string& fix_;
  std::vector<std::set<std::string>> keys_;  // per open object or array (an array's stays empty)
};

std::string range(double lo, double hi) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.6g to %.6g", lo, hi);
  return buf;
}

}  // namespace

Json parse_json(std::string_view text, const std::string& origin, const std::string& fix) {
  Checks checks(origin, fix);
  try {
    return Json::parse(text.begin(), text.end(), std::ref(checks));
  } catch (const Json::exception& e) {
    // e.what(): "[json.exception.parse_error.101] parse error at line 1, column 8: syntax error ..."
    std::string what = e.what();
    if (const auto at = what.find("] "); at != std::string::npos) what = what.substr(at + 2);
    throw UsageError(origin + " is not valid JSON (" + what + "); " + fix);
  }
}

std::int64_t json_whole(const Json& v, const std::string& where, std::int64_t lo, std::int64_t hi) {
  const std::string fits = "; give a whole number from " + std::to_string(lo) + " to " + std::to_string(hi);
  if (v.is_number_integer()) {  // signed, or unsigned (how nlohmann-json reads 0 and up): compared as int64 if it fits
    const bool fits_int64 = !v.is_number_unsigned() || v.get<std::uint64_t>() <= static_cast<std::uint64_t>(INT64_MAX);
    if (fits_int64 && v.get<std::int64_t>() >= lo && v.get<std::int64_t>() <= hi) return v.get<std::int64_t>();
    throw UsageError(where + " is " + shown(v) + fits);
  }
  if (v.is_number_float()) {  // 64.0 is a whole number; 0.5, 1e19 and 1e300 are not ones that fit
    const double d = v.get<double>();
    if (std::isfinite(d) && d == std::floor(d) && std::fabs(d) < 9e18 && d >= static_cast<double>(lo) &&
        d <= static_cast<double>(hi))
      return static_cast<std::int64_t>(d);
  }
  throw UsageError(where + " is " + shown(v) + fits);
}

double json_real(const Json& v, const std::string& where, double lo, double hi) {
  if (v.is_number()) {
    const double d = v.get<double>();
    if (std::isfinite(d) && d >= lo && d <= hi) return d;
  }
  throw UsageError(where + " is " + shown(v) + "; give a number from " + range(lo, hi));
}

}  // namespace cpsim
