#include "sim/comm/shm_segment.hpp"

#include <fcntl.h>

#include <boost/interprocess/shared_memory_object.hpp>
#include <cstdint>
#include <cstdio>
#include <fstream>

#include "sim/core/error.hpp"

namespace cpsim {

namespace bip = boost::interprocess;

std::string ShmSegment::random_name() {
  std::uint64_t bits = 0;
  std::ifstream urandom("/dev/urandom", std::ios::binary);
  if (!urandom.read(reinterpret_cast<char*>(&bits), sizeof bits))
    throw Error("cannot read /dev/urandom to name a shared-memory segment");
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(bits));
  return std::string("cpsim-") + hex;
}

ShmSegment::ShmSegment(std::size_t bytes, bool keep_name) : ShmSegment(random_name(), bytes, keep_name) {}

ShmSegment::ShmSegment(const std::string& name, std::size_t bytes, bool keep_name) : name_(name) {
  bip::permissions owner_only;
  owner_only.set_permissions(0600);
  bip::shared_memory_object shm;
  try {
    shm = bip::shared_memory_object(bip::create_only, name.c_str(), bip::read_write, owner_only);
  } catch (const bip::interprocess_exception& e) {
    throw Error("cannot create shared-memory segment " + name + ": " + e.what() +
                " (cpsim only uses segments it creates itself)");
  }
  named_ = true;
  try {
    shm.truncate(static_cast<bip::offset_t>(bytes));
    const int err = ::posix_fallocate(shm.get_mapping_handle().handle, 0, static_cast<off_t>(bytes));
    if (err != 0) {
      throw Error("the processes backend needs " + std::to_string(bytes >> 20) +
                  " MiB of shared memory and /dev/shm cannot provide it; use fewer ranks or --backend threads");
    }
    region_ = bip::mapped_region(shm, bip::read_write);
  } catch (const bip::interprocess_exception& e) {
    bip::shared_memory_object::remove(name.c_str());
    throw Error("cannot map shared-memory segment " + name + ": " + e.what());
  } catch (...) {
    bip::shared_memory_object::remove(name.c_str());
    throw;
  }
  if (!keep_name) {
    bip::shared_memory_object::remove(name.c_str());
    named_ = false;
  }
}

ShmSegment::~ShmSegment() {
  if (named_) bip::shared_memory_object::remove(name_.c_str());
}

}  // namespace cpsim
