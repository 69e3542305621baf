#include "sim/cli/flag_names.hpp"

#include <optional>
#include <utility>

namespace cpsim {
namespace {

std::optional<std::map<std::string, std::string>>& offered() {
  static std::optional<std::map<std::string, std::string>> names;
  return names;
}

}  // namespace

void offer_flags(std::map<std::string, std::string> names) { offered() = std::move(names); }

void offer_all_flags() { offered().reset(); }

std::string flag(const std::string& name) {
  const auto& names = offered();
  if (!names) return "--" + name;
  const auto it = names->find(name);
  return it == names->end() ? "" : "--" + it->second;
}

std::string worded(const std::exception& e) {
  const auto* w = dynamic_cast<const Worded*>(&e);
  return w ? w->worded(flag) : e.what();
}

}  // namespace cpsim
