// Sizes that come from input: every element and byte count a command derives from its flags is computed here, with
// overflow-checked arithmetic, so that no product of extents wraps (B x S x N x D = 2^64 + 16 would be 16).
//
//   checked_mul / checked_add   a exact result, or nullopt when it does not fit in 64 bits
//   tensor_bytes                the bytes of one tensor of the given extents, refused (UsageError, exit 2) with a line
//                               naming the tensor, its size and a fix when it is more than one process could address
//   format_bytes                "1.5 GiB" (binary units), the one form sizes take in tables and messages
//   read_size                   "64M" -> 67108864: the one reading of a size typed by a user (a flag, a list)
//
// What one process could address: a 48-bit virtual address space (x86-64 with 4-level paging, AArch64), of which
// user space is the lower half, 2^47 bytes = 128 TiB. No tensor of cpsim may be larger, whatever the memory.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace cpsim {

inline constexpr std::int64_t kAddressableBytes = std::int64_t{1} << 47;

std::optional<std::int64_t> checked_mul(std::int64_t a, std::int64_t b);
std::optional<std::int64_t> checked_add(std::int64_t a, std::int64_t b);
// The multiple of m (>= 1) nearest above x (>= 1), for a fix ("use --seq 16"); the one below when the one above does
// not fit in 64 bits, so that no fix suggests a value that wraps negative.
std::int64_t multiple_for_fix(std::int64_t x, std::int64_t m);

// One extent of a tensor: its letter in the shape ("S"), its value, and the flag that sets it ("seq"; empty when no
// flag does).
struct Extent {
  const char* letter;
  std::int64_t value;
  const char* flag;
};

// The bytes of a tensor `name` of the given extents (each >= 0) and element size. UsageError when it exceeds
// kAddressableBytes (or 64 bits), e.g.
//   "q [B, S, Nq, D] = [1, 64, 288230376151711744, 16] holds 2.95e+20 values (2.1e+09 TiB as f64), more than one
//    process can address (128 TiB); use a smaller --heads"
// The fix names the flag of the largest extent (the program words it in its own flags: sim/core/error.hpp).
std::int64_t tensor_bytes(const std::string& name, const std::vector<Extent>& extents, std::size_t elem_size,
                          const std::string& elem_name);

// Sums byte counts, refusing (UsageError naming `what`) a total over kAddressableBytes.
std::int64_t total_bytes(const std::string& what, const std::vector<std::int64_t>& parts);

// A size as typed: digits and an optional K, M, G or T (powers of 1024, either case). The caller words the error.
enum class SizeText { ok, not_a_size, not_whole, unknown_suffix, too_large };
struct ReadSize {
  SizeText status = SizeText::not_a_size;
  std::uint64_t value = 0;  // when ok
};
ReadSize read_size(std::string_view text);

// "512 B", "4.0 KiB", "1.5 GiB": binary units, one decimal.
std::string format_bytes(double bytes);

}  // namespace cpsim
