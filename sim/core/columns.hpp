// The one way a text table pads its columns, by {fmt}: a cell and the width of its column.
//   left("ab", 4) == "ab  "   right("ab", 4) == "  ab"   a cell wider than its column is kept whole: left("abc", 2)
// Widths count characters, not bytes ("≤" is one column).
#pragma once
#include <cstddef>
#include <string>
#include <string_view>

#include <fmt/format.h>

namespace cpsim {

inline std::string left(std::string_view cell, std::size_t width) { return fmt::format("{:<{}}", cell, width); }
inline std::string right(std::string_view cell, std::size_t width) { return fmt::format("{:>{}}", cell, width); }

}  // namespace cpsim
