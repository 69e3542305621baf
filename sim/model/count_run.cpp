#include "sim/model/count_run.hpp"

#include <exception>
#include <mutex>
#include <thread>
#if defined(__GLIBC__)
#include <malloc.h>
#endif

#include "sim/core/error.hpp"
#include "sim/model/counting_comm.hpp"
#include "sim/model/counting_device.hpp"

namespace cpsim::model {
namespace {

// One rank, as run_rank (sim/runtime/rank_run.cpp) walks it (same buffers, same order, same lifetimes).
void count_rank(const ValidProblem& valid, bool backward, Communicator& comm, Program& program) {
  const Problem& p = valid.problem();
  const StrategyKind kind = valid.kind();
  Recorder& rec = comm.recorder();
  rec.set_step_hook([&](const std::string& phase, int step) { program.mark(OpKind::step, phase, step); });
  CountingDevice dev(rec, &program);
  const SeqLayout L(p.ranks, p.seq, p.sharding);
  const std::int64_t s = L.local_len();
  // 1. This rank's shards.   q: [B, s, Nq, D]   k, v: [B, s, Nkv, D]
  const Buffer q = dev.alloc({p.batch, s, p.heads, p.head_dim}, p.dtype, Layout::bsnd, "q");
  program.out_elements = p.batch * s * p.heads * p.head_dim;
  const BufferUse kv_use = kv_input_use(kind, p.ranks);
  const Buffer k = dev.alloc({p.batch, s, p.kv_heads, p.head_dim}, p.dtype, Layout::bsnd, "k", kv_use);
  const Buffer v = dev.alloc({p.batch, s, p.kv_heads, p.head_dim}, p.dtype, Layout::bsnd, "v", kv_use);
  // 2. Forward (and backward) through the strategy.
  auto strategy = make_strategy(valid, comm, dev);
  rec.begin_phase("forward");
  program.mark(OpKind::begin_phase, "forward");
  const LocalOutput o = strategy->forward(q, k, v);
  dev.synchronize();
  rec.end_phase();
  program.mark(OpKind::end_phase, "forward");
  if (backward) {
    const Buffer dout = dev.alloc({p.batch, s, p.heads, p.head_dim}, p.dtype, Layout::bsnd, "dout");
    rec.begin_phase("backward");
    program.mark(OpKind::begin_phase, "backward");
    const LocalGrads g = strategy->backward(dout);
    dev.synchronize();
    rec.end_phase();
    program.mark(OpKind::end_phase, "backward");
  }
  rec.set_step_hook(nullptr);
}

// The strategies allocate and free position lists of up to S entries at every step, in C threads. glibc gives such
// memory back to the system at each free and faults it in again at the next allocation, which made counting runs
// at C = 256, S = 1M eight times slower. Keep freed memory in the process instead (once, for the whole process).
void keep_freed_memory() {
#if defined(__GLIBC__)
  static std::once_flag once;
  std::call_once(once, [] {
    mallopt(M_TRIM_THRESHOLD, 1 << 30);
    mallopt(M_MMAP_THRESHOLD, 64 << 20);
  });
#endif
}

}  // namespace

CountResult count_run(const Problem& p, StrategyKind kind, const CountOptions& opt) {
  return count_run(validated(p, kind), opt);
}

CountResult count_run(const ValidProblem& valid, const CountOptions& opt) {
  const Problem& p = valid.problem();
  keep_freed_memory();
  const int C = p.ranks;
  const int slots = opt.slots > 0 ? opt.slots : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  CountingWorld world(C, slots);
  CountResult result;
  result.ranks.reserve(static_cast<std::size_t>(C));
  for (int r = 0; r < C; ++r) {
    Recorder& rec = result.ranks.emplace_back(r, false);
    rec.set_timed(false);
    rec.set_step_work(opt.step_work);
  }
  result.programs.ranks.resize(static_cast<std::size_t>(C));
  std::vector<std::exception_ptr> errors(static_cast<std::size_t>(C));

  std::vector<std::thread> threads;
  threads.reserve(static_cast<std::size_t>(C));
  for (int r = 0; r < C; ++r)
    threads.emplace_back([&, r] {
      const auto i = static_cast<std::size_t>(r);
      Program& program = result.programs.ranks[i];
      program.rank = r;
      program.spans = opt.spans;
      world.acquire();
      try {
        CountingCommunicator comm(r, C, result.ranks[i], world, program);
        count_rank(valid, opt.backward, comm, program);
      } catch (...) {
        errors[i] = std::current_exception();
        world.abort();
      }
      world.release();
    });
  for (auto& t : threads) t.join();

  // The first failure that is not another rank's abandoned split.
  auto abandoned = [](const std::exception_ptr& e) {
    try {
      std::rethrow_exception(e);
    } catch (const SplitAbandoned&) {
      return true;
    } catch (...) {
      return false;
    }
  };
  for (const auto& e : errors)
    if (e && !abandoned(e)) std::rethrow_exception(e);
  for (const auto& e : errors)
    if (e) std::rethrow_exception(e);
  result.programs.groups = world.groups();
  return result;
}

}  // namespace cpsim::model
