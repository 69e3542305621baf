#include "sim/core/sizes.hpp"

#include <cctype>
#include <cmath>
#include <cstdio>
#include <limits>

#include "sim/core/error.hpp"

namespace cpsim {

std::optional<std::int64_t> checked_mul(std::int64_t a, std::int64_t b) {
  std::int64_t r = 0;
  if (__builtin_mul_overflow(a, b, &r)) return std::nullopt;
  return r;
}

std::optional<std::int64_t> checked_add(std::int64_t a, std::int64_t b) {
  std::int64_t r = 0;
  if (__builtin_add_overflow(a, b, &r)) return std::nullopt;
  return r;
}

std::int64_t multiple_for_fix(std::int64_t x, std::int64_t m) {
  const std::int64_t below = x / m * m;
  if (below == x) return x;
  const std::optional<std::int64_t> above = checked_add(below, m);
  return above ? *above : below;
}

ReadSize read_size(std::string_view text) {
  std::size_t digits = 0;
  while (digits < text.size() && std::isdigit(static_cast<unsigned char>(text[digits]))) ++digits;
  if (digits == 0) return {SizeText::not_a_size};
  const std::string_view suffix = text.substr(digits);
  if (!suffix.empty() && (suffix[0] == '.' || suffix[0] == 'e' || suffix[0] == 'E'))  // "1.5", "1e6"
    return {SizeText::not_whole};
  int shift = -1;
  if (suffix.empty()) shift = 0;
  if (suffix.size() == 1) switch (std::toupper(static_cast<unsigned char>(suffix[0]))) {
      case 'K': shift = 10; break;
      case 'M': shift = 20; break;
      case 'G': shift = 30; break;
      case 'T': shift = 40; break;
    }
  if (shift < 0) return {SizeText::unknown_suffix};
  constexpr auto kMax = std::numeric_limits<std::uint64_t>::max();
  std::uint64_t v = 0;
  for (std::size_t i = 0; i < digits; ++i) {
    const unsigned d = static_cast<unsigned>(text[i] - '0');
    if (v > (kMax - d) / 10) return {SizeText::too_large};
    v = v * 10 + d;
  }
  if (v > (kMax >> shift)) return {SizeText::too_large};
  return {SizeText::ok, v << shift};
}

std::string format_bytes(double b) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  int u = 0;
  while (std::abs(b) >= 1024 && u < 6) {
    b /= 1024;
    ++u;
  }
  char buf[64];
  std::snprintf(buf, sizeof buf, u == 0 ? "%.0f %s" : "%.1f %s", b, units[u]);
  return buf;
}

std::int64_t tensor_bytes(const std::string& name, const std::vector<Extent>& extents, std::size_t elem_size,
                          const std::string& elem_name) {
  std::optional<std::int64_t> n = std::int64_t{1};
  double approx = 1;  // the exact product, as a double (it may exceed 64 bits)
  std::string letters, values;
  const Extent* largest = nullptr;
  for (const Extent& e : extents) {
    if (n) n = checked_mul(*n, e.value);
    approx *= static_cast<double>(e.value);
    letters += (letters.empty() ? "" : ", ") + std::string(e.letter);
    values += (values.empty() ? "" : ", ") + std::to_string(e.value);
    if (e.flag && *e.flag && (!largest || e.value > largest->value)) largest = &e;
  }
  std::optional<std::int64_t> bytes = n ? checked_mul(*n, static_cast<std::int64_t>(elem_size)) : std::nullopt;
  if (bytes && *bytes <= kAddressableBytes) return *bytes;
  char count[32];
  std::snprintf(count, sizeof count, "%.3g", approx);
  throw UsageError(name + " [" + letters + "] = [" + values + "] holds " + count + " values (" +
                       format_bytes(approx * static_cast<double>(elem_size)) + " as " + elem_name +
                       "), more than one process can address (" +
                       format_bytes(static_cast<double>(kAddressableBytes)) + ")",
                   {Fix{largest ? std::vector<std::string>{"a smaller --" + std::string(largest->flag)}
                                : std::vector<std::string>{},
                        "use a smaller shape"}});
}

std::int64_t total_bytes(const std::string& what, const std::vector<std::int64_t>& parts) {
  std::optional<std::int64_t> sum = std::int64_t{0};
  double approx = 0;
  for (std::int64_t p : parts) {
    if (sum) sum = checked_add(*sum, p);
    approx += static_cast<double>(p);
  }
  if (sum && *sum <= kAddressableBytes) return *sum;
  throw UsageError(what + " comes to " + format_bytes(approx) + ", more than one process can address (" +
                   format_bytes(static_cast<double>(kAddressableBytes)) + "); use a smaller shape");
}

}  // namespace cpsim
