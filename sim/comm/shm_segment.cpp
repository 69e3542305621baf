#include "sim/comm/shm_segment.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/statvfs.h>

#include <algorithm>
#include <boost/interprocess/shared_memory_object.hpp>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>

#include "sim/core/error.hpp"

namespace cpsim {

namespace bip = boost::interprocess;

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23  // Linux 5.14's value, for C libraries that predate it (the kernel says EINVAL if older)
#endif

namespace {
constexpr std::size_t kPage = 4096;

std::string mib(std::uint64_t bytes) {
  char s[32];
  std::snprintf(s, sizeof s, "%.1f MiB", static_cast<double>(bytes) / (1 << 20));
  return s;
}

// /dev/shm's free bytes, or -1 when it cannot be asked.
std::int64_t free_bytes(int fd) {
  struct statvfs fs {};
  if (::fstatvfs(fd, &fs) != 0) return -1;
  return static_cast<std::int64_t>(static_cast<std::uint64_t>(fs.f_bavail) * fs.f_frsize);
}
}  // namespace

std::string ShmSegment::shortage(std::size_t bytes, const std::string& what, int err) {
  // EFAULT from a populate is the SIGBUS a write would have raised: tmpfs had no page to give.
  std::string why = std::strerror(err == EFAULT ? ENOSPC : err);
  const int fd = ::open("/dev/shm", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd >= 0) {
    if (const std::int64_t free = free_bytes(fd); free >= 0)
      why += ", " + mib(static_cast<std::uint64_t>(free)) + " free";
    ::close(fd);
  }
  return "the processes backend needs " + mib(bytes) + " of shared memory (" + what +
         ") and /dev/shm cannot provide it (" + why + "); use fewer ranks or a smaller problem, or --backend threads";
}

int populate_pages(void* at, std::size_t bytes) {
  if (bytes == 0) return 0;
  while (::madvise(at, bytes, MADV_POPULATE_WRITE) != 0) {
    if (errno != EINTR) return errno;
  }
  return 0;
}

int ShmSegment::populate(void* at, std::size_t bytes) const {
  return reserved_ ? 0 : populate_pages(at, bytes);
}

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
    // 1. Refused before a byte is taken when /dev/shm has not that much free.
    const std::int64_t free = free_bytes(fd);
    if (free >= 0 && bytes > static_cast<std::uint64_t>(free))
      throw UsageError(shortage(bytes, "its message rings and a heap for the ranks' buffers", ENOSPC));
    // 2. Sized and mapped; no page is taken yet (tmpfs backs a page when it is first written or populated).
    shm.truncate(static_cast<bip::offset_t>(bytes));
    region_ = bip::mapped_region(shm, bip::read_write);
    // 3. A kernel that cannot populate a range (EINVAL) gets every page reserved now, serially, instead.
    if (populate_pages(region_.get_address(), std::min(bytes, kPage)) == EINVAL) {
      if (const int err = ::posix_fallocate(fd, 0, static_cast<off_t>(bytes)); err != 0)
        throw UsageError(shortage(bytes, "its message rings and a heap for the ranks' buffers", err));
      reserved_ = true;
    }
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
