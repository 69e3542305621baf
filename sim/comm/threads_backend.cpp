#include "sim/comm/threads_backend.hpp"

#include <memory>
#include <thread>

#include "sim/comm/backend_registry.hpp"
#include "sim/comm/launch_support.hpp"
#include "sim/comm/rank_binding.hpp"
#include "sim/comm/threads_world.hpp"

namespace cpsim {

namespace {

class ThreadsCommunicator final : public P2pCommunicator {
 public:
  ThreadsCommunicator(std::shared_ptr<ThreadsWorld> world, int rank, Recorder& rec, std::vector<int> world_ranks,
                      std::uint64_t context)
      : P2pCommunicator(rank, static_cast<int>(world_ranks.size()), rec, world_ranks, context),
        world_(std::move(world)),
        me_(world_ranks[rank]) {}
  std::string backend() const override { return "threads"; }

 protected:
  // Ranks in one address space: every message read from its sender's input (collectives.hpp).
  CollectiveAlgorithm backend_algorithm(std::size_t) const override { return CollectiveAlgorithm::direct; }
  Pending start_send(const Envelope& env, const void* buf, std::size_t bytes, int peer_world) override {
    return world_->send(me_, env, buf, bytes, peer_world);
  }
  Pending start_recv(const Envelope& env, void* buf, std::size_t bytes, int peer_world, const Landing& how) override {
    return world_->recv(me_, env, buf, bytes, peer_world, how);
  }
  std::unique_ptr<P2pCommunicator> make_sub(int rank, std::vector<int> world_ranks, std::uint64_t context) override {
    return std::make_unique<ThreadsCommunicator>(world_, rank, recorder(), std::move(world_ranks), context);
  }

 private:
  std::shared_ptr<ThreadsWorld> world_;
  int me_;
};

}  // namespace

std::vector<RankOutcome> launch_threads(const LaunchOptions& opt, const RankFn& fn) {
  const int c = opt.ranks;
  auto world = std::make_shared<ThreadsWorld>(c, opt.timeout);
  std::vector<RankOutcome> out = fresh_outcomes(c, opt.tracing);
  std::vector<std::thread> threads;
  threads.reserve(c);
  const std::vector<int> cpus = cpus_to_bind(opt.bind);
  for (int r = 0; r < c; ++r) {
    threads.emplace_back([&, r] {
      const RankBinding binding(r, cpus);
      try {
        ThreadsCommunicator comm(world, r, out[r].stats, rank_range(0, c), kWorldContext);
        comm.impose(opt.collectives);
        out[r].result = fn(comm);
        world->finish(r);
      } catch (const Aborted&) {
        world->finish(r);  // stopped because another rank failed: that rank is the one to report
      } catch (const std::exception& e) {
        world->fail(r, encoded(e));  // its fixes apart, for the program to word
      } catch (...) {
        world->fail(r, "threw an exception that is not a std::exception");
      }
    });
  }
  for (auto& t : threads) t.join();
  if (world->first_failed() >= 0) throw rank_failure(world->first_failed(), world->first_failure());
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
