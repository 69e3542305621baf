#include "sim/comm/threads_backend.hpp"

#include <cstdlib>
#include <limits>
#include <memory>
#include <thread>

#include "sim/comm/backend_registry.hpp"
#include "sim/comm/launch_support.hpp"
#include "sim/comm/mailbox.hpp"

namespace cpsim {

namespace {

// Messages in flight live in the process's heap: the pool is never full.
class HeapPool final : public MessagePool {
 public:
  void* allocate(std::size_t bytes) override { return std::aligned_alloc(64, bytes); }
  void release(void* p) override { std::free(p); }
  std::size_t capacity() const override { return std::numeric_limits<std::size_t>::max() / 2; }
};

}  // namespace

std::vector<RankOutcome> launch_threads(const LaunchOptions& opt, const RankFn& fn) {
  const int c = opt.ranks;
  HeapPool pool;
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
        boxes.fail(r, e.what());
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
