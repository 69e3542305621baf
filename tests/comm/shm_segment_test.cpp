#include "sim/comm/shm_segment.hpp"

#include <doctest/doctest.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cstddef>
#include <cstring>

#include "sim/core/error.hpp"

using namespace cpsim;

namespace {
bool exists_in_dev_shm(const std::string& name) {
  struct stat st {};
  return ::stat(("/dev/shm/" + name).c_str(), &st) == 0;
}
}  // namespace

TEST_CASE("a segment name is cpsim- and 16 hex digits, different every time") {
  const std::string a = ShmSegment::random_name(), b = ShmSegment::random_name();
  CHECK(a != b);
  REQUIRE(a.size() == 6 + 16);
  CHECK(a.rfind("cpsim-", 0) == 0);
  for (char ch : a.substr(6)) CHECK(std::isxdigit(static_cast<unsigned char>(ch)));
}

TEST_CASE("a segment is created owner-only (0600), zero-filled and removed by its owner") {
  std::string name;
  {
    ShmSegment seg(1 << 16, /*keep_name=*/true);
    name = seg.name();
    struct stat st {};
    REQUIRE(::stat(("/dev/shm/" + name).c_str(), &st) == 0);
    CHECK((st.st_mode & 0777) == 0600);
    CHECK(st.st_uid == ::getuid());
    REQUIRE(seg.size() == (1u << 16));
    const auto* p = static_cast<const unsigned char*>(seg.data());
    bool zero = true;
    for (std::size_t i = 0; i < seg.size(); ++i) zero = zero && p[i] == 0;
    CHECK(zero);
  }
  CHECK_FALSE(exists_in_dev_shm(name));
}

TEST_CASE("a segment is never created over an existing one of the same name") {
  ShmSegment first(4096, /*keep_name=*/true);
  CHECK_THROWS_AS(ShmSegment(first.name(), 4096, true), Error);
  CHECK(exists_in_dev_shm(first.name()));  // the failed attempt did not remove the owner's segment
}

TEST_CASE("a launch's segment leaves /dev/shm as soon as it is mapped, and stays usable") {
  ShmSegment seg(4096);
  CHECK_FALSE(exists_in_dev_shm(seg.name()));
  std::memset(seg.data(), 0x5a, seg.size());
  CHECK(static_cast<const unsigned char*>(seg.data())[4095] == 0x5a);
}

TEST_CASE("a segment takes no page of /dev/shm until a range is populated, then exactly that range") {
  const std::size_t mib = std::size_t{1} << 20;
  ShmSegment seg(64 * mib, /*keep_name=*/true);
  struct stat st {};
  REQUIRE(::stat(("/dev/shm/" + seg.name()).c_str(), &st) == 0);
  CHECK(st.st_size == static_cast<off_t>(64 * mib));
  CHECK(static_cast<std::size_t>(st.st_blocks) * 512 <= 4096);  // the constructor's probe of the first page at most
  REQUIRE(seg.populate(static_cast<std::byte*>(seg.data()) + 8 * mib, 2 * mib) == 0);
  REQUIRE(::stat(("/dev/shm/" + seg.name()).c_str(), &st) == 0);
  CHECK(static_cast<std::size_t>(st.st_blocks) * 512 >= 2 * mib);
  CHECK(static_cast<std::size_t>(st.st_blocks) * 512 <= 2 * mib + 4096);
}

TEST_CASE("populating a range no page can back reports it, where a write would have died of SIGBUS") {
  // A shared mapping two pages long over a file one page long: its second page has no backing.
  const int fd = ::memfd_create("cpsim-test", MFD_CLOEXEC);
  REQUIRE(fd >= 0);
  REQUIRE(::ftruncate(fd, 4096) == 0);
  void* p = ::mmap(nullptr, 8192, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  REQUIRE(p != MAP_FAILED);
  CHECK(populate_pages(p, 4096) == 0);
  CHECK(populate_pages(p, 8192) == EFAULT);
  ::munmap(p, 8192);
  ::close(fd);
}

TEST_CASE("a need /dev/shm cannot meet is told in one line: the need, what for, why, and the fixes") {
  const std::string what = ShmSegment::shortage(std::size_t{3} << 20, "this rank's buffers", EFAULT);
  CHECK_MESSAGE(what.rfind("the processes backend needs 3.0 MiB of shared memory (this rank's buffers)", 0) == 0, what);
  CHECK_MESSAGE(what.find("/dev/shm cannot provide it (No space left on device") != std::string::npos, what);
  CHECK_MESSAGE(what.find("use fewer ranks or a smaller problem, or --backend threads") != std::string::npos, what);
  CHECK(what.find('\n') == std::string::npos);
}
