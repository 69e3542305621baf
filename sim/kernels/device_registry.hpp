// The devices a build holds, by name. Each registers itself beside its implementation, as the backends do
// (sim/comm/backend_registry.hpp), and a backend names the device its ranks compute on:
//
//   CPSIM_DEVICE(cpu) {
//     info.name = "cpu";
//     info.dtypes = {DType::f32, DType::f64};
//     info.make = [](Recorder& rec) -> std::unique_ptr<Device> { return std::make_unique<CpuDevice>(rec); };
//   }
//
// The runtime makes each rank's device as make_device(backend's device, rank's recorder), so it never names one.
#pragma once
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "sim/kernels/device.hpp"

namespace cpsim {

struct DeviceInfo {
  std::string name;           // "cpu", "cuda"
  std::vector<DType> dtypes;  // what its buffers hold and its kernels compute in
  bool gpu = false;           // results are checked by the GPU rules (sim/kernels/check.hpp)
  bool any_mask = true;       // implements every mask (documents, windows); false: the causal and full masks only
  // The device of one rank, called on the rank's own thread (a GPU rank gets the GPU its launcher gave it).
  std::function<std::unique_ptr<Device>(Recorder& rec)> make;
};

// Registers the device `describe` fills in (once per name; a second registration is an Error). Returns true.
bool register_device(void (*describe)(DeviceInfo& info));
// The registered device of that name; Error when the build holds none (a backend naming a device it lacks).
const DeviceInfo& device_info(const std::string& name);
std::unique_ptr<Device> make_device(const std::string& name, Recorder& rec);
// Whether the device computes in the dtype.
bool computes_in(const DeviceInfo& device, DType dtype);

// CPSIM_DEVICE(id) { info.name = ...; }: the braces are the body of a function filling `info`.
#define CPSIM_DEVICE(id)                                                                                       \
  static void cpsim_describe_device_##id(::cpsim::DeviceInfo& info);                                           \
  [[maybe_unused]] static const bool cpsim_device_##id = ::cpsim::register_device(cpsim_describe_device_##id); \
  static void cpsim_describe_device_##id(::cpsim::DeviceInfo& info)

}  // namespace cpsim
