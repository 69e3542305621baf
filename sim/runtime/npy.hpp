// NumPy .npy files (format version 1.0, little-endian '<f8'), so a learner can np.load what cpsim computed.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace cpsim {

// Writes data with the given shape to path (C order). Throws Error when the file cannot be written.
void write_npy(const std::string& path, const std::vector<double>& data, const std::vector<std::int64_t>& shape);

}  // namespace cpsim
