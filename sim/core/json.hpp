// A small streaming JSON writer for `--json` outputs, traces and benchmark results.
//   JsonWriter j; j.begin_object(); j.key("passed").value(true); j.end_object(); j.str();
// Non-finite numbers are written as null (JSON has no inf); -inf LSE values are reported that way.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace cpsim {

class JsonWriter {
 public:
  explicit JsonWriter(bool pretty = false) : pretty_(pretty) {}
  JsonWriter& begin_object();
  JsonWriter& end_object();
  JsonWriter& begin_array();
  JsonWriter& end_array();
  JsonWriter& key(std::string_view k);
  JsonWriter& value(std::string_view s);
  JsonWriter& value(const char* s) { return value(std::string_view(s)); }
  JsonWriter& value(const std::string& s) { return value(std::string_view(s)); }
  JsonWriter& value(bool b);
  JsonWriter& value(double d);
  JsonWriter& value(std::int64_t i);
  JsonWriter& value(int i) { return value(static_cast<std::int64_t>(i)); }
  JsonWriter& null();
  JsonWriter& raw(std::string_view json);  // an already-serialised value
  template <class T>
  JsonWriter& array(const std::vector<T>& xs) {
    begin_array();
    for (const auto& x : xs) value(x);
    return end_array();
  }
  const std::string& str() const { return out_; }

  static std::string escape(std::string_view s);

 private:
  void before_value();
  void newline();
  std::string out_;
  std::vector<bool> first_;  // per open container: no element written yet
  bool after_key_ = false;
  bool pretty_ = false;
};

}  // namespace cpsim
