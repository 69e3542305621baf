#include "sim/comm/threads_backend.hpp"

#include <sys/mman.h>

#include <memory>
#include <thread>

#include "sim/comm/backend_registry.hpp"
#include "sim/comm/launch_support.hpp"
#include "sim/comm/mailbox.hpp"

namespace cpsim {

namespace {

// The messages in flight: a private mapping whose pages are backed only where messages are written (64 GiB of
// addresses, fewer where the system will not map that many), freed when the launch ends.
class Region {
 public:
  Region() {
    for (bytes_ = std::size_t{64} << 30; bytes_ >= (std::size_t{1} << 20); bytes_ /= 2) {
      base_ = ::mmap(nullptr, bytes_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
      if (base_ != MAP_FAILED) return;
    }
    throw Error("cannot map memory for the messages in flight");
  }
  ~Region() { ::munmap(base_, bytes_); }
  Region(const Region&) = delete;
  Region& operator=(const Region&) = delete;
  std::byte* base() const { return static_cast<std::byte*>(base_); }
  std::size_t bytes() const { return bytes_; }

 private:
  std::size_t bytes_ = 0;
  void* base_ = MAP_FAILED;
};

}  // namespace

std::vector<RankOutcome> launch_threads(const LaunchOptions& opt, const RankFn& fn) {
  const int c = opt.ranks;
  Region region;
  RegionPool pool(region.base(), region.bytes());
  std::vector<std::byte> memory(Mailboxes::bytes_needed(c) + 64);
  void* aligned = memory.data() + (64 - reinterpret_cast<std::uintptr_t>(memory.data()) % 64) % 64;
  Mailboxes boxes(aligned, c, pool, true);
  std::vector<RankOutcome> out = fresh_outcomes(c, opt.tracing);
  std::vector<std::thread> threads;
  threads.reserve(c);
  for (int r = 0; r < c; ++r) {
    threads.emplace_back([&, r] {
      try {
        Postbox box(boxes, r, opt.timeout);
        MailboxCommunicator comm(box, "threads", r, out[r].stats, rank_range(0, c), kWorldContext);
        comm.impose(opt.collectives);
        out[r].result = fn(comm);
        boxes.set_status(r, RankStatus::finished);
      } catch (const Aborted&) {
        boxes.set_status(r, RankStatus::stopped);  // another rank failed: that rank is the one to report
      } catch (const std::exception& e) {
        boxes.fail(r, encoded(e));  // its fixes apart, for the program to word
      } catch (...) {
        boxes.fail(r, "threw an exception that is not a std::exception");
      }
    });
  }
  for (auto& t : threads) t.join();
  boxes.discard_unreceived();
  if (boxes.first_failed() >= 0) throw rank_failure(boxes.first_failed(), boxes.failure());
  return out;
}

CPSIM_BACKEND(threads) {
  info.backend = Backend::threads;
  info.device = "cpu";
  info.max_ranks = kMaxThreadsRanks;
  info.max_ranks_fix = "use fewer ranks";
  info.launch = launch_threads;
}

}  // namespace cpsim
