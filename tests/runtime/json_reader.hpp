// A small strict JSON reader for the tests: parse() returns a Value tree or throws std::runtime_error naming the
// offset of the first error (RFC 8259: objects, arrays, strings with escapes, numbers, true/false/null).
#pragma once
#include <cctype>
#include <cstdlib>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

namespace cpsim::test {

struct Value {
  enum class Type { null, boolean, number, string, array, object } type = Type::null;
  bool b = false;
  double num = 0;
  std::string str;
  std::vector<Value> arr;
  std::map<std::string, Value> obj;

  bool has(const std::string& k) const { return type == Type::object && obj.count(k) > 0; }
  const Value& operator[](const std::string& k) const {
    auto it = obj.find(k);
    if (type != Type::object || it == obj.end()) throw std::runtime_error("no key " + k);
    return it->second;
  }
  const Value& operator[](std::size_t i) const { return arr.at(i); }
  bool is_number() const { return type == Type::number; }
  bool is_string() const { return type == Type::string; }
};

class JsonReader {
 public:
  static Value parse(const std::string& text) {
    JsonReader r(text);
    r.ws();
    Value v = r.value();
    r.ws();
    if (r.i_ != text.size()) r.fail("text after the value");
    return v;
  }

 private:
  explicit JsonReader(const std::string& t) : t_(t) {}
  [[noreturn]] void fail(const std::string& what) const {
    throw std::runtime_error("JSON: " + what + " at offset " + std::to_string(i_));
  }
  void ws() {
    while (i_ < t_.size() && (t_[i_] == ' ' || t_[i_] == '\n' || t_[i_] == '\r' || t_[i_] == '\t')) ++i_;
  }
  char peek() const { return i_ < t_.size() ? t_[i_] : '\0'; }
  void expect(char c) {
    if (peek() != c) fail(std::string("expected '") + c + "'");
    ++i_;
  }
  void word(const char* w) {
    for (const char* p = w; *p; ++p) expect(*p);
  }
  Value value() {
    Value v;
    switch (peek()) {
      case '{':
        v.type = Value::Type::object;
        object(v);
        break;
      case '[':
        v.type = Value::Type::array;
        array(v);
        break;
      case '"':
        v.type = Value::Type::string;
        v.str = string();
        break;
      case 't':
        word("true");
        v.type = Value::Type::boolean;
        v.b = true;
        break;
      case 'f':
        word("false");
        v.type = Value::Type::boolean;
        break;
      case 'n':
        word("null");
        break;
      default:
        v.type = Value::Type::number;
        v.num = number();
    }
    return v;
  }
  void object(Value& v) {
    expect('{');
    ws();
    if (peek() == '}') return void(++i_);
    for (;;) {
      ws();
      const std::string k = string();
      ws();
      expect(':');
      ws();
      if (v.obj.count(k)) fail("duplicate key " + k);
      v.obj[k] = value();
      ws();
      if (peek() == '}') return void(++i_);
      expect(',');
    }
  }
  void array(Value& v) {
    expect('[');
    ws();
    if (peek() == ']') return void(++i_);
    for (;;) {
      ws();
      v.arr.push_back(value());
      ws();
      if (peek() == ']') return void(++i_);
      expect(',');
    }
  }
  std::string string() {
    expect('"');
    std::string s;
    for (;;) {
      if (i_ >= t_.size()) fail("unterminated string");
      const char c = t_[i_++];
      if (c == '"') return s;
      if (static_cast<unsigned char>(c) < 0x20) fail("control character in a string");
      if (c != '\\') {
        s += c;
        continue;
      }
      const char e = t_[i_++];
      switch (e) {
        case '"':
        case '\\':
        case '/':
          s += e;
          break;
        case 'b':
          s += '\b';
          break;
        case 'f':
          s += '\f';
          break;
        case 'n':
          s += '\n';
          break;
        case 'r':
          s += '\r';
          break;
        case 't':
          s += '\t';
          break;
        case 'u': {
          if (i_ + 4 > t_.size()) fail("short \\u escape");
          const unsigned long cp = std::strtoul(t_.substr(i_, 4).c_str(), nullptr, 16);
          i_ += 4;
          if (cp < 0x80)
            s += static_cast<char>(cp);
          else
            s += '?';  // the tests need ASCII only
          break;
        }
        default:
          fail("bad escape");
      }
    }
  }
  double number() {
    const std::size_t start = i_;
    if (peek() == '-') ++i_;
    if (!std::isdigit(static_cast<unsigned char>(peek()))) fail("expected a value");
    if (peek() == '0')
      ++i_;
    else
      while (std::isdigit(static_cast<unsigned char>(peek()))) ++i_;
    if (peek() == '.') {
      ++i_;
      if (!std::isdigit(static_cast<unsigned char>(peek()))) fail("expected a digit after '.'");
      while (std::isdigit(static_cast<unsigned char>(peek()))) ++i_;
    }
    if (peek() == 'e' || peek() == 'E') {
      ++i_;
      if (peek() == '+' || peek() == '-') ++i_;
      if (!std::isdigit(static_cast<unsigned char>(peek()))) fail("expected an exponent");
      while (std::isdigit(static_cast<unsigned char>(peek()))) ++i_;
    }
    return std::strtod(t_.substr(start, i_ - start).c_str(), nullptr);
  }

  const std::string& t_;
  std::size_t i_ = 0;
};

}  // namespace cpsim::test
