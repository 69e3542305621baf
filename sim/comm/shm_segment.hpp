// A shared-memory segment that only this run can reach.
//
// Created exclusively (create_only: never an existing segment) under an unpredictable name, "cpsim-" and 16 hex
// digits from /dev/urandom, readable and writable by its owner only (0600). Its bytes are reserved up front
// (posix_fallocate), so a full /dev/shm is refused now (a UsageError naming the need) rather than a SIGBUS later. The launcher maps it,
// then removes the name at once: the ranks are forked children and inherit the mapping, nothing ever attaches
// by name, and no exit path (a crash, SIGKILL of the launcher included) can leave it behind in /dev/shm.
#pragma once
#include <boost/interprocess/mapped_region.hpp>
#include <cstddef>
#include <string>

namespace cpsim {

class ShmSegment {
 public:
  // A fresh random name; the name is removed before the constructor returns unless keep_name (tests).
  explicit ShmSegment(std::size_t bytes, bool keep_name = false);
  // The given name; throws Error if a segment of that name exists already.
  ShmSegment(const std::string& name, std::size_t bytes, bool keep_name);
  ~ShmSegment();
  ShmSegment(const ShmSegment&) = delete;
  ShmSegment& operator=(const ShmSegment&) = delete;

  void* data() const { return region_.get_address(); }
  std::size_t size() const { return region_.get_size(); }
  const std::string& name() const { return name_; }

  static std::string random_name();  // "cpsim-" + 16 hex digits from /dev/urandom

 private:
  std::string name_;
  bool named_ = false;  // the name still exists (keep_name)
  boost::interprocess::mapped_region region_;
};

}  // namespace cpsim
