// Host values (double) in and out of a device buffer, for every Device and every dtype a buffer can hold: the one
// place host values are converted. Used by the run, `cpsim attention`, the checks and the tests, which keep their
// inputs and the reference in double.
//
//   upload_values    f64 as is; f32 rounded to nearest; bf16 rounded to nearest even through f32 (sim/core/bf16.hpp)
//   download_values  widened to double, exactly
#pragma once
#include <cstddef>
#include <functional>
#include <string>
#include <vector>

#include "sim/kernels/device.hpp"

namespace cpsim {

// Uploads values (the buffer's numel of them, in its layout) converted to the buffer's dtype.
void upload_values(Device& dev, const Buffer& dst, const std::vector<double>& values);
// A buffer of dims/dtype/layout named `name` (for `use`: device.hpp), holding values.
Buffer upload_new(Device& dev, const std::vector<double>& values, Dims dims, DType dtype, Layout layout,
                  const std::string& name, BufferUse use = BufferUse::work);
// Fills dst with values made a chunk at a time: make(first, count, out) writes the buffer's elements [first,
// first + count), in its layout, as doubles, into out. Converted as upload_values converts; written straight into the
// buffer where the device is in host memory (Device::host_data), else through one staging copy and an upload. No
// vector of all the values as doubles is ever made.
using MakeValues = std::function<void(std::size_t first, std::size_t count, double* out)>;
void upload_made(Device& dev, const Buffer& dst, const MakeValues& make);
// Downloads the whole buffer, widened to double.
std::vector<double> download_values(Device& dev, const Buffer& src);

}  // namespace cpsim
