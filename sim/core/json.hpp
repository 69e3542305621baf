// JSON in and out, with nlohmann-json: every `--json` output, trace, benchmark result and machine file is a Json
// (keys kept in the order they are set) turned into text by json_text, and every JSON input goes through parse_json.
//
//   Json j; j["passed"] = true; j["ranks"] = Json::array({0, 1});  json_text(j) == R"({"passed":true,"ranks":[0,1]})"
//
// Numbers: integers as written; doubles in the shortest text that reads back as the same double (2.0, 0.1, 1e-06);
// non-finite doubles as null (JSON has no inf: a -inf LSE is reported that way).
// Inputs are refused (UsageError, one line) when they are not JSON, nest deeper than kJsonMaxDepth, or repeat a key
// within one object; json_whole and json_real refuse a field that is not a number in the range the caller needs.
#pragma once
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

namespace cpsim {

using Json = nlohmann::ordered_json;

// The text of `j`: one line, or with `pretty` one value per line indented by two spaces ("key": value). No final
// newline. Strings that are not UTF-8 have their bad bytes written as U+FFFD.
std::string json_text(const Json& j, bool pretty = false);

// Objects and arrays nested deeper than this are refused: no input cpsim reads nests more than a few levels.
constexpr int kJsonMaxDepth = 64;

// The document in `text`, read from `origin` (what the user gave, e.g. "--machine my.json"). UsageError
// "<origin> <what is wrong>; <fix>" when it is not JSON (with the line and column), nests deeper than
// kJsonMaxDepth, or repeats a key within one object (naming the key).
Json parse_json(std::string_view text, const std::string& origin, const std::string& fix);

// A number field of a parsed document, named by `where` (e.g. "--gpu-attention b.json: \"head_dim\""): a whole
// number in [lo, hi], or a finite number in [lo, hi]. UsageError naming the field, the value as written and the
// range otherwise (a string, 0.5 where a count is needed, 1e19, a missing field: null).
std::int64_t json_whole(const Json& v, const std::string& where, std::int64_t lo, std::int64_t hi);
double json_real(const Json& v, const std::string& where, double lo, double hi);

}  // namespace cpsim
