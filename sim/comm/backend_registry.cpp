#include "sim/comm/backend_registry.hpp"

#include <map>


namespace cpsim {

namespace {
std::map<Backend, BackendInfo>& registry() {
  static std::map<Backend, BackendInfo> r;  // filled before main by the registering files' static initialisers
  return r;
}
}  // namespace

bool register_backend(void (*describe)(BackendInfo& info)) {
  BackendInfo info;
  describe(info);
  const Backend b = info.backend;
  if (!registry().emplace(b, std::move(info)).second)
    throw Error("backend '" + std::string(backend_name(b)) + "' is registered twice");
  return true;
}

const BackendInfo* find_backend(Backend b) {
  const auto it = registry().find(b);
  return it == registry().end() ? nullptr : &it->second;
}

const BackendInfo& built_in_backend(Backend b) {
  if (const BackendInfo* info = find_backend(b)) return *info;
  throw UsageError("backend '" + std::string(backend_name(b)) + "' is not built in (it needs " +
                       std::string(backend_requirement(b)) + ")",
                   {Fix{{"--backend threads or processes"}, "this build holds the threads and processes backends"}});
}

std::vector<Backend> built_in_backends() {
  std::vector<Backend> out;
  for (Backend b : all_backends())
    if (find_backend(b)) out.push_back(b);
  return out;
}

}  // namespace cpsim
