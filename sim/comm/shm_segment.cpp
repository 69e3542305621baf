#include "sim/comm/shm_segment.hpp"

#include <fcntl.h>
#include <sys/statvfs.h>

#include <boost/interprocess/shared_memory_object.hpp>
#include <cstdint>
#include <cstdio>
#include <cerrno>
#include <cstring>
#include <fstream>

#include "sim/core/error.hpp"

namespace cpsim {

namespace bip = boost::interprocess;

namespace {
std::string mib(std::uint64_t bytes) {
  char s[32];
  std::snprintf(s, sizeof s, "%.1f MiB", static_cast<double>(bytes) / (1 << 20));
  return s;
}
}  // namespace

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
    const int fd = shm.get_mapping_handle().handle;
    // Refused before a byte is reserved when /dev/shm has not that much free; else reserved now, all of it.
    struct statvfs fs {};
    const bool sized = ::fstatvfs(fd, &fs) == 0;
    const std::uint64_t free = sized ? static_cast<std::uint64_t>(fs.f_bavail) * fs.f_frsize : 0;
    int err = sized && bytes > free ? ENOSPC : 0;
    if (err == 0) {
      shm.truncate(static_cast<bip::offset_t>(bytes));
      err = ::posix_fallocate(fd, 0, static_cast<off_t>(bytes));
    }
    if (err != 0) {
      throw UsageError("the processes backend needs " + mib(bytes) +
                       " of shared memory (its message rings and a heap for the ranks' buffers) and /dev/shm cannot "
                       "provide it (" + std::strerror(err) + (sized ? ", " + mib(free) + " free" : std::string()) +
                       "); use fewer ranks or a smaller problem, or --backend threads");
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
