// A minimal binary writer/reader: how a rank's results and stats cross a process boundary
// (the processes backend returns them through shared memory, MPI through a gather).
#pragma once
#include <cstdint>
#include <cstring>
#include <map>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

#include "sim/core/error.hpp"

namespace cpsim {

class ByteWriter {
 public:
  template <class T>
    requires std::is_trivially_copyable_v<T>
  void put(const T& v) {
    const auto* p = reinterpret_cast<const char*>(&v);
    out_.insert(out_.end(), p, p + sizeof(T));
  }
  void put(const std::string& s) {
    put<std::uint64_t>(s.size());
    out_.insert(out_.end(), s.begin(), s.end());
  }
  template <class T>
  void put(std::span<const T> v) {  // as a vector of its elements (get(std::vector<T>&) reads it back)
    put<std::uint64_t>(v.size());
    if constexpr (std::is_trivially_copyable_v<T>) {
      const auto* p = reinterpret_cast<const char*>(v.data());
      out_.insert(out_.end(), p, p + v.size() * sizeof(T));
    } else {
      for (const auto& x : v) put(x);
    }
  }
  template <class T>
  void put(const std::vector<T>& v) {
    put(std::span<const T>(v));
  }
  template <class K, class V>
  void put(const std::map<K, V>& m) {
    put<std::uint64_t>(m.size());
    for (const auto& [k, v] : m) {
      put(k);
      put(v);
    }
  }
  void put_raw(const void* data, std::size_t n) {
    const auto* p = static_cast<const char*>(data);
    out_.insert(out_.end(), p, p + n);
  }
  void reserve(std::size_t bytes) { out_.reserve(bytes); }  // the whole size, when known: one buffer, no regrowth
  std::string take() { return std::move(out_); }
  const std::string& str() const { return out_; }

 private:
  std::string out_;
};

class ByteReader {
 public:
  explicit ByteReader(const std::string& s) : p_(s.data()), end_(s.data() + s.size()) {}
  ByteReader(const char* p, std::size_t n) : p_(p), end_(p + n) {}

  template <class T>
    requires std::is_trivially_copyable_v<T>
  void get(T& v) {
    need(sizeof(T));
    std::memcpy(&v, p_, sizeof(T));
    p_ += sizeof(T);
  }
  void get(std::string& s) {
    std::uint64_t n = 0;
    get(n);
    need(n);
    s.assign(p_, n);
    p_ += n;
  }
  template <class T>
  void get(std::vector<T>& v) {
    std::uint64_t n = 0;
    get(n);
    if constexpr (std::is_trivially_copyable_v<T>) {
      need(n * sizeof(T));
      v.resize(n);
      if (n > 0) std::memcpy(v.data(), p_, n * sizeof(T));  // an empty vector's data() may be null
      p_ += n * sizeof(T);
    } else {
      v.resize(n);
      for (auto& x : v) get(x);
    }
  }
  template <class K, class V>
  void get(std::map<K, V>& m) {
    std::uint64_t n = 0;
    get(n);
    m.clear();
    for (std::uint64_t i = 0; i < n; ++i) {
      K k{};
      V v{};
      get(k);
      get(v);
      m.emplace(std::move(k), std::move(v));
    }
  }
  template <class T>
  T get() {
    T v{};
    get(v);
    return v;
  }
  bool done() const { return p_ == end_; }

 private:
  void need(std::size_t n) const {
    if (static_cast<std::size_t>(end_ - p_) < n) throw Error("truncated result record (a rank's reply was cut short)");
  }
  const char* p_;
  const char* end_;
};

}  // namespace cpsim
