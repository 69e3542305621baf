// The tests read cpsim's JSON outputs as cpsim reads its inputs (sim/core/json.hpp: nlohmann-json, a repeated key
// or deep nesting refused), so an output that would not read back fails the test that parses it.
#pragma once
#include <string>

#include "sim/core/json.hpp"

namespace cpsim::test {

inline Json parse_output(const std::string& text) {
  return parse_json(text, "the output", "cpsim wrote it, so its writer is wrong");
}

}  // namespace cpsim::test
