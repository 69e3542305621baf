#include "sim/model/inference_count.hpp"

#include "sim/model/counting_comm.hpp"
#include "sim/model/counting_device.hpp"

namespace cpsim::model {

namespace {

// One rank, as run_inference (sim/runtime/inference_run.cpp) walks it.
void count_rank(const InferenceProblem& p, InferenceKind kind, Communicator& comm, Program& program) {
  Recorder& rec = comm.recorder();
  rec.set_step_hook([&](const std::string& phase, int step) { program.mark(OpKind::step, phase, step); });
  CountingDevice dev(rec, &program);
  const InferenceLayout L = p.layout(kind);
  // 1. This rank's padded shards.   q: [B, n, Nq, D]   k, v: [B, m, Nkv, D]
  const Buffer q = dev.alloc({p.batch, L.max_new(), p.heads, p.head_dim}, p.dtype, Layout::bsnd, "q");
  program.out_elements = p.batch * L.max_new() * p.heads * p.head_dim;
  const Buffer k = dev.alloc({p.batch, L.max_kv(), p.kv_heads, p.head_dim}, p.dtype, Layout::bsnd, "k");
  const Buffer v = dev.alloc({p.batch, L.max_kv(), p.kv_heads, p.head_dim}, p.dtype, Layout::bsnd, "v");
  // 2. Forward through the strategy.
  auto strategy = make_inference_strategy(kind, p, comm, dev);
  rec.begin_phase("forward");
  program.mark(OpKind::begin_phase, "forward");
  const InferenceOutput o = strategy->forward(q, k, v);
  dev.synchronize();
  rec.end_phase();
  program.mark(OpKind::end_phase, "forward");
  rec.set_step_hook(nullptr);
}

}  // namespace

InferenceCount count_inference(const InferenceProblem& p, InferenceKind kind, bool spans) {
  validate(p, kind);
  const int C = p.ranks;
  // The counting communicator never blocks outside split, which these strategies do not call: one rank at a time.
  CountingWorld world(C, 1);
  InferenceCount result;
  result.ranks.reserve(static_cast<std::size_t>(C));
  result.programs.ranks.resize(static_cast<std::size_t>(C));
  for (int r = 0; r < C; ++r) {
    Recorder& rec = result.ranks.emplace_back(r, false);
    rec.set_timed(false);
    rec.set_step_work(false);
    Program& program = result.programs.ranks[static_cast<std::size_t>(r)];
    program.rank = r;
    program.spans = spans;
    world.acquire();
    try {
      CountingCommunicator comm(r, C, rec, world, program);
      count_rank(p, kind, comm, program);
    } catch (...) {
      world.release();
      throw;
    }
    world.release();
  }
  result.programs.groups = world.groups();
  return result;
}

}  // namespace cpsim::model
