// JSON in and out (sim/core/json.hpp): the text every output is written as, and the limits every input is read under.
#include "sim/core/json.hpp"

#include <doctest/doctest.h>

#include <cmath>
#include <limits>
#include <string>

#include "sim/core/error.hpp"

using namespace cpsim;

namespace {

// The UsageError parse_json throws for `text`, or "" when it parses.
std::string refusal(const std::string& text) {
  try {
    (void)parse_json(text, "--in x.json", "fix it");
  } catch (const UsageError& e) {
    return e.what();
  }
  return "";
}

std::string whole_refusal(const Json& v, std::int64_t lo, std::int64_t hi) {
  try {
    (void)json_whole(v, "b.json: \"head_dim\"", lo, hi);
  } catch (const UsageError& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("json_text writes keys in the order they were set, compact or two spaces per level") {
  Json j{{"b", 1}, {"a", Json::array({true, nullptr})}, {"e", Json::object()}};
  CHECK(json_text(j) == R"({"b":1,"a":[true,null],"e":{}})");
  CHECK(json_text(j, true) == "{\n  \"b\": 1,\n  \"a\": [\n    true,\n    null\n  ],\n  \"e\": {}\n}");
}

TEST_CASE("json_text writes doubles in the shortest text that reads back the same, and non-finite ones as null") {
  CHECK(json_text(Json(0.1)) == "0.1");
  CHECK(json_text(Json(2.0)) == "2.0");
  CHECK(json_text(Json(1e-6)) == "1e-06");
  CHECK(json_text(Json(std::int64_t{1} << 40)) == "1099511627776");
  CHECK(json_text(Json(std::numeric_limits<double>::infinity())) == "null");
  CHECK(json_text(Json(-std::numeric_limits<double>::infinity())) == "null");
  CHECK(json_text(Json(std::nan(""))) == "null");
  const double third = 1.0 / 3;
  CHECK(parse_json(json_text(Json(third)), "x", "").get<double>() == third);
}

TEST_CASE("json_text escapes quotes and control characters and writes bytes that are not UTF-8 as U+FFFD") {
  CHECK(json_text(Json("a\"b\\c\n\x01")) == "\"a\\\"b\\\\c\\n\\u0001\"");
  CHECK(json_text(Json(std::string("ok \xff"))) == "\"ok \xef\xbf\xbd\"");
}

TEST_CASE("parse_json reads a document, and names the input, the place and the fix when it is not JSON") {
  const Json j = parse_json(R"({"a": [1, 2.5, "x"], "b": {"c": null}})", "--in x.json", "fix it");
  CHECK(j["a"][1].get<double>() == 2.5);
  CHECK(j["b"]["c"].is_null());
  const std::string bad = refusal("{\"a\": 1,}");
  CHECK(bad.find("--in x.json is not valid JSON (") == 0);
  CHECK(bad.find("line 1, column 9") != std::string::npos);
  CHECK(bad.find("; fix it") != std::string::npos);
  CHECK(refusal("").find("not valid JSON") != std::string::npos);
  CHECK(refusal("1e400").find("number overflow") != std::string::npos);  // not read as inf
}

TEST_CASE("parse_json refuses nesting deeper than the limit in one line, however deep the input goes") {
  const auto nested = [](int depth) { return std::string(depth, '[') + std::string(depth, ']'); };
  CHECK(refusal(nested(kJsonMaxDepth)).empty());
  const std::string deeper = refusal(nested(kJsonMaxDepth + 1));
  CHECK(deeper == "--in x.json nests objects and arrays deeper than 64 levels; fix it");
  // 200 KB of '[' (the stack overflow a recursive reader would hit): the same line, long before the end.
  CHECK(refusal(std::string(200 << 10, '[')) == deeper);
  std::string objects;
  for (int i = 0; i <= kJsonMaxDepth; ++i) objects += "{\"k\":";
  CHECK(refusal(objects + "1" + std::string(kJsonMaxDepth + 1, '}')) == deeper);
}

TEST_CASE("parse_json refuses a key given twice in one object, naming the key and the input") {
  CHECK(refusal(R"({"gbps": 1, "gbps": 2})") == "--in x.json gives the key \"gbps\" twice in one object; keep one");
  CHECK(refusal(R"({"a": {"x": 1, "y": {"x": 2}, "x": 3}})").find("\"x\" twice") != std::string::npos);
  // The same key in different objects, or in objects side by side in an array, is not a repeat.
  CHECK(refusal(R"({"a": {"x": 1}, "b": {"x": 2}, "c": [{"x": 1}, {"x": 2}]})").empty());
}

TEST_CASE("json_whole takes whole numbers in range and refuses fractions, huge values and non-numbers by name") {
  CHECK(json_whole(Json(64), "f", 1, 1024) == 64);
  CHECK(json_whole(parse_json("64.0", "x", ""), "f", 1, 1024) == 64);
  CHECK(whole_refusal(Json(0.5), 1, 1024) == "b.json: \"head_dim\" is 0.5; give a whole number from 1 to 1024");
  CHECK(whole_refusal(parse_json("1e19", "x", ""), 1, 1024) ==
        "b.json: \"head_dim\" is 1e+19; give a whole number from 1 to 1024");
  CHECK(whole_refusal(parse_json("10000000000000000000", "x", ""), 1, 1024).find("is 10000000000000000000;") !=
        std::string::npos);
  CHECK(whole_refusal(Json(0), 1, 1024).find("is 0;") != std::string::npos);
  CHECK(whole_refusal(parse_json("0", "x", ""), 1, 1024).find("is 0;") != std::string::npos);  // read as unsigned
  CHECK(whole_refusal(parse_json("2000", "x", ""), 1, 1024).find("is 2000;") != std::string::npos);
  CHECK(whole_refusal(Json(-3), 1, 1024).find("is -3;") != std::string::npos);
  CHECK(whole_refusal(Json("64"), 1, 1024).find("is \"64\";") != std::string::npos);
  CHECK(whole_refusal(Json(), 1, 1024).find("is null;") != std::string::npos);
  CHECK(whole_refusal(Json(std::string(100, 'x')), 1, 1024).find("...;") != std::string::npos);  // cut short
}

TEST_CASE("json_real takes finite numbers in range and refuses the rest with the range") {
  CHECK(json_real(Json(2.5), "f", 0, 10) == 2.5);
  CHECK(json_real(Json(3), "f", 0, 10) == 3);
  const auto refused = [](const Json& v) {
    try {
      (void)json_real(v, "f", 1e-6, 1e7);
    } catch (const UsageError& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  CHECK(refused(Json(0)) == "f is 0; give a number from 1e-06 to 1e+07");
  CHECK(refused(Json(1e300)).find("is 1e+300;") != std::string::npos);
  CHECK(refused(Json(true)).find("is true;") != std::string::npos);
}
