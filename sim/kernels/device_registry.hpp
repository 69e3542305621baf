// The devices a build holds, by name. Each registers itself beside its implementation, as the backends do
// (sim/comm/backend_registry.hpp), and a backend names the device its ranks compute on:
//
//   CPSIM_DEVICE(cpu) {
//     info.name = "cpu";
//     info.dtypes = {DType::f32, DType::f64};
//     info.make = [](Recorder& rec, const DeviceSettings&) -> std::unique_ptr<Device> {
//       return std::make_unique<CpuDevice>(rec);
//     };
//   }
//
// The runtime makes each rank's device as make_device(backend's device, rank's recorder, the run's settings), so it
// never names one.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "sim/core/error.hpp"
#include "sim/kernels/device.hpp"

namespace cpsim {

// What a run asks of every rank's device (`--kernel`); the defaults suit every device.
struct DeviceSettings {
  std::string kernel = "auto";  // the attention kernels: "auto" (the device's choice per call) or one it offers
};

struct DeviceInfo {
  std::string name;           // "cpu", "cuda"
  std::vector<DType> dtypes;  // what its buffers hold and its kernels compute in
  bool gpu = false;           // results are checked by the GPU rules (sim/kernels/check.hpp)
  bool any_mask = true;       // implements every mask (documents, windows); false: the causal and full masks only
  // The attention kernels a run may choose besides "auto" (the cuda device: mma2, mma1, simt); none: auto only.
  std::vector<std::string> kernels;
  // None when the kernel (one of `kernels`) computes attention in that dtype and head dim, else the UsageError to
  // throw (the constraint and a fix); unset: every offered kernel takes every problem the device computes.
  std::function<std::optional<UsageError>(const std::string& kernel, DType dtype, std::int64_t head_dim)>
      kernel_problem;
  // The device of one rank, called on the rank's own thread (a GPU rank gets the GPU its launcher gave it).
  std::function<std::unique_ptr<Device>(Recorder& rec, const DeviceSettings& settings)> make;
};

// Registers the device `describe` fills in (once per name; a second registration is an Error). Returns true.
bool register_device(void (*describe)(DeviceInfo& info));
// The registered device of that name; Error when the build holds none (a backend naming a device it lacks).
const DeviceInfo& device_info(const std::string& name);
std::unique_ptr<Device> make_device(const std::string& name, Recorder& rec, const DeviceSettings& settings = {});
// Whether the device computes in the dtype.
bool computes_in(const DeviceInfo& device, DType dtype);
// Whether a run may ask the device for these attention kernels ("auto", or one of device.kernels).
bool offers_kernel(const DeviceInfo& device, const std::string& kernel);

// CPSIM_DEVICE(id) { info.name = ...; }: the braces are the body of a function filling `info`.
#define CPSIM_DEVICE(id)                                                                                       \
  static void cpsim_describe_device_##id(::cpsim::DeviceInfo& info);                                           \
  [[maybe_unused]] static const bool cpsim_device_##id = ::cpsim::register_device(cpsim_describe_device_##id); \
  static void cpsim_describe_device_##id(::cpsim::DeviceInfo& info)

}  // namespace cpsim
