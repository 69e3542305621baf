// Moving host values (double) in and out of a device buffer of any CPU dtype (f32 values are rounded on the way in).
// Used by `cpsim attention`, the checks and the tests, which keep their inputs and the reference in double.
#pragma once
#include <vector>

#include "sim/kernels/device.hpp"

namespace cpsim {

// Uploads values (buffer's numel of them, in its layout) converted to the buffer's dtype (f32 or f64).
void upload_values(Device& dev, const Buffer& dst, const std::vector<double>& values);
// Downloads the whole buffer, widened to double.
std::vector<double> download_values(Device& dev, const Buffer& src);

}  // namespace cpsim
