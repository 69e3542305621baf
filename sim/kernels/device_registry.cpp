#include "sim/kernels/device_registry.hpp"

#include <algorithm>
#include <map>

#include "sim/core/error.hpp"

namespace cpsim {

namespace {
std::map<std::string, DeviceInfo>& registry() {
  static std::map<std::string, DeviceInfo> r;  // filled before main by the registering files' static initialisers
  return r;
}
}  // namespace

bool register_device(void (*describe)(DeviceInfo& info)) {
  DeviceInfo info;
  describe(info);
  const std::string name = info.name;
  if (!registry().emplace(name, std::move(info)).second) throw Error("device '" + name + "' is registered twice");
  return true;
}

const DeviceInfo& device_info(const std::string& name) {
  const auto it = registry().find(name);
  if (it == registry().end()) throw Error("no device '" + name + "' is built in");
  return it->second;
}

std::unique_ptr<Device> make_device(const std::string& name, Recorder& rec, const DeviceSettings& settings) {
  return device_info(name).make(rec, settings);
}

bool computes_in(const DeviceInfo& device, DType dtype) {
  return std::find(device.dtypes.begin(), device.dtypes.end(), dtype) != device.dtypes.end();
}

bool offers_kernel(const DeviceInfo& device, const std::string& kernel) {
  return kernel == "auto" || std::find(device.kernels.begin(), device.kernels.end(), kernel) != device.kernels.end();
}

}  // namespace cpsim
