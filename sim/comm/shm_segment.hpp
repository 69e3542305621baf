// A shared-memory segment that only this run can reach.
//
// Created exclusively (create_only: never an existing segment) under an unpredictable name, "cpsim-" and 16 hex
// digits from /dev/urandom, readable and writable by its owner only (0600). The launcher maps it, then removes the
// name at once: the ranks are forked children and inherit the mapping, nothing ever attaches by name, and no exit
// path (a crash, SIGKILL of the launcher included) can leave it behind in /dev/shm.
//
// Its pages are not reserved up front. A segment larger than /dev/shm's free space is refused at once (a UsageError
// naming the need); then each part is backed with pages by whoever will write it, before the first write, with
// populate() (MADV_POPULATE_WRITE): the launcher what it lays out, each rank its own rings' slots and its arena of
// the heap, in parallel (shm_world.hpp). A /dev/shm that ran out meanwhile (another program took it) is then an
// error returned by populate(), never a SIGBUS on a later touch. Where the kernel cannot populate (before Linux
// 5.14) the constructor reserves every page instead (posix_fallocate: serial, in the launcher), as before.
#pragma once
#include <boost/interprocess/mapped_region.hpp>
#include <cstddef>
#include <string>

namespace cpsim {

// Backs the pages of [at, at + bytes) of a shared mapping now (MADV_POPULATE_WRITE), in this process's page tables
// too: 0, or the errno of the kernel's refusal where a write would raise SIGBUS or the memory is gone (EFAULT,
// ENOMEM), or EINVAL where the kernel cannot populate (before Linux 5.14).
int populate_pages(void* at, std::size_t bytes);

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

  // populate_pages of a page-aligned range of this mapping (0 at once where the constructor reserved every page):
  // EFAULT or ENOMEM when /dev/shm has no room left. Callable in a forked rank.
  int populate(void* at, std::size_t bytes) const;
  // The words for a need /dev/shm cannot meet: "the processes backend needs 20.9 MiB of shared memory (what) and
  // /dev/shm cannot provide it (reason); use fewer ranks ...".
  static std::string shortage(std::size_t bytes, const std::string& what, int err);

  static std::string random_name();  // "cpsim-" + 16 hex digits from /dev/urandom

 private:
  std::string name_;
  bool named_ = false;     // the name still exists (keep_name)
  bool reserved_ = false;  // every page reserved by the constructor (a kernel that cannot populate)
  boost::interprocess::mapped_region region_;
};

}  // namespace cpsim
