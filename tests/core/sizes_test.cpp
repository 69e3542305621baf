// Sizes from input: checked products and sums, one line naming a tensor too large to address, binary units.
#include "sim/core/sizes.hpp"

#include <doctest/doctest.h>

#include <limits>
#include <map>
#include <string>

#include "sim/core/error.hpp"

using namespace cpsim;

TEST_CASE("checked arithmetic gives the exact result or nothing when 64 bits cannot hold it") {
  constexpr auto kMax = std::numeric_limits<std::int64_t>::max();
  CHECK(checked_mul(1 << 20, 1 << 20) == std::int64_t{1} << 40);
  CHECK_FALSE(checked_mul(std::int64_t{1} << 32, std::int64_t{1} << 31).has_value());
  CHECK(checked_mul(kMax, 1) == kMax);
  CHECK_FALSE(checked_mul(kMax, 2).has_value());
  CHECK(checked_add(kMax - 1, 1) == kMax);
  CHECK_FALSE(checked_add(kMax, 1).has_value());
}

TEST_CASE("a tensor's bytes are its extents' product times the element size, up to what a process can address") {
  CHECK(tensor_bytes("q", {{"B", 2, "batch"}, {"S", 64, "seq"}, {"Nq", 4, "heads"}, {"D", 16, "head-dim"}}, 8,
                     "doubles") == 2 * 64 * 4 * 16 * 8);
  // 2^47 bytes exactly is the limit; one element more is refused.
  CHECK(tensor_bytes("x", {{"S", std::int64_t{1} << 44, "seq"}}, 8, "doubles") == kAddressableBytes);
  CHECK_THROWS_AS(tensor_bytes("x", {{"S", (std::int64_t{1} << 44) + 1, "seq"}}, 8, "doubles"), UsageError);
}

TEST_CASE("a shape whose product wraps 64 bits is refused in one line naming the tensor, its size and the flag") {
  // 2^58 heads x 64 x 16 = 2^68 values: the product wraps to 0 in 64 bits.
  const std::int64_t heads = std::int64_t{1} << 58;
  CHECK_THROWS_WITH_AS(
      tensor_bytes("q", {{"B", 1, "batch"}, {"S", 64, "seq"}, {"Nq", heads, "heads"}, {"D", 16, "head-dim"}}, 8,
                   "doubles"),
      "q [B, S, Nq, D] = [1, 64, 288230376151711744, 16] holds 2.95e+20 values (2048.0 EiB as doubles), more than "
      "one process can address (128.0 TiB); use a smaller --heads",
      UsageError);
}

// The program's words for a message (sim/cli/flag_names.hpp) from its flag table.
std::string worded_in(const UsageError& e, const std::map<std::string, std::string>& names) {
  return e.worded([&](const std::string& q) {
    const auto it = names.find(q);
    return it == names.end() ? std::string() : "--" + it->second;
  });
}

TEST_CASE("the fix names the program's own flag, or the shape when the program has none for that extent") {
  try {
    tensor_bytes("k", {{"B", 1, "batch"}, {"S", std::int64_t{1} << 50, "seq"}}, 8, "doubles");
    FAIL("not refused");
  } catch (const UsageError& e) {
    CHECK(worded_in(e, {{"seq", "seqs"}}).find("; use a smaller --seqs") != std::string::npos);
    CHECK(worded_in(e, {}).find("; use a smaller shape") != std::string::npos);
  }
}

TEST_CASE("a fix rounds up to the next multiple, or down where the one above would not fit in 64 bits") {
  constexpr auto kMax = std::numeric_limits<std::int64_t>::max();
  CHECK(multiple_for_fix(10, 8) == 16);
  CHECK(multiple_for_fix(16, 8) == 16);
  CHECK(multiple_for_fix(3, 8) == 8);
  CHECK(multiple_for_fix(kMax, 6) == kMax / 6 * 6);  // the multiple above wraps: the one below
  CHECK(multiple_for_fix(kMax - 1, 2) == kMax - 1);
  CHECK(multiple_for_fix(kMax, 2) == kMax - 1);
}

TEST_CASE("byte totals are summed with checks too") {
  CHECK(total_bytes("run", {1, 2, 3}) == 6);
  CHECK_THROWS_WITH_AS(total_bytes("the run's memory", {kAddressableBytes, 1}),
                       doctest::Contains("the run's memory comes to 128.0 TiB, more than one process can address"),
                       UsageError);
}

TEST_CASE("sizes print in binary units with one decimal") {
  CHECK(format_bytes(512) == "512 B");
  CHECK(format_bytes(4096) == "4.0 KiB");
  CHECK(format_bytes(1.5 * (1 << 30)) == "1.5 GiB");
  CHECK(format_bytes(static_cast<double>(kAddressableBytes)) == "128.0 TiB");
}

TEST_CASE("a typed size is digits and an optional K, M, G or T, in powers of 1024, or what is wrong with it") {
  CHECK(read_size("64").value == 64);
  CHECK(read_size("4k").value == 4096);
  CHECK(read_size("1M").value == 1u << 20);
  CHECK(read_size("2T").value == std::uint64_t{2} << 40);
  CHECK(read_size("").status == SizeText::not_a_size);
  CHECK(read_size("-1").status == SizeText::not_a_size);
  CHECK(read_size("1.5K").status == SizeText::not_whole);
  CHECK(read_size("1e6").status == SizeText::not_whole);
  CHECK(read_size("4KB").status == SizeText::unknown_suffix);
  CHECK(read_size("18446744073709551615").status == SizeText::ok);
  CHECK(read_size("18446744073709551616").status == SizeText::too_large);
  CHECK(read_size("16777216T").status == SizeText::too_large);  // 2^24 x 2^40 = 2^64
}
