#include "sim/comm/shm_segment.hpp"

#include <doctest/doctest.h>
#include <sys/stat.h>

#include <cctype>
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
