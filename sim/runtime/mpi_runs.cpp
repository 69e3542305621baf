#include "sim/runtime/mpi_runs.hpp"

#include <cstdlib>

#include "sim/core/bytes.hpp"
#include "sim/core/error.hpp"

namespace cpsim {
namespace {

bool leading = false;
constexpr char kHello = 'h', kRun = 'r';

void release_followers() {
  std::string last;  // empty: no more runs
  broadcast_from_rank0(last);
}

}  // namespace

std::string encode_run(const RunConfig& c) {
  ByteWriter w;
  const Problem& p = c.problem;
  w.put(static_cast<std::uint8_t>(c.strategy));
  w.put(p.batch);
  w.put(p.seq);
  w.put(p.heads);
  w.put(p.kv_heads);
  w.put(p.head_dim);
  w.put(p.causal);
  w.put(p.scale);
  w.put(p.dtype);
  w.put(p.sharding);
  w.put(p.ranks);
  w.put(p.a2a);
  w.put(p.kv_replicate);
  w.put(p.docs.lengths);
  w.put(p.docs.random);
  w.put(p.docs.seed);
  w.put(p.docs.pad);
  w.put(p.docs.sample);
  w.put(p.docs.distribution);
  w.put(p.docs.distribution_file);
  w.put(p.window);
  w.put(p.chunk);
  w.put(static_cast<std::uint8_t>(c.backend));
  w.put(c.device.kernel);
  w.put(c.backward);
  w.put(c.check);
  w.put(c.seed);
  w.put(c.tracing);
  w.put(static_cast<std::int64_t>(c.timeout.count()));
  return w.take();
}

RunConfig decode_run(const std::string& bytes) {
  RunConfig c;
  Problem& p = c.problem;
  ByteReader r(bytes);
  c.strategy = static_cast<StrategyKind>(r.get<std::uint8_t>());
  r.get(p.batch);
  r.get(p.seq);
  r.get(p.heads);
  r.get(p.kv_heads);
  r.get(p.head_dim);
  r.get(p.causal);
  r.get(p.scale);
  r.get(p.dtype);
  r.get(p.sharding);
  r.get(p.ranks);
  r.get(p.a2a);
  r.get(p.kv_replicate);
  r.get(p.docs.lengths);
  r.get(p.docs.random);
  r.get(p.docs.seed);
  r.get(p.docs.pad);
  r.get(p.docs.sample);
  r.get(p.docs.distribution);
  r.get(p.docs.distribution_file);
  r.get(p.window);
  r.get(p.chunk);
  c.backend = static_cast<Backend>(r.get<std::uint8_t>());
  r.get(c.device.kernel);
  r.get(c.backward);
  r.get(c.check);
  r.get(c.seed);
  r.get(c.tracing);
  c.timeout = std::chrono::milliseconds(r.get<std::int64_t>());
  return c;
}

void lead_runs() {
  // STEP 1: meet the followers (this also starts MPI, so that releasing them at exit comes before MPI_Finalize:
  // atexit handlers run in reverse order).
  std::string hello(1, kHello);
  broadcast_from_rank0(hello);
  leading = true;
  expect_announced_launches();
  std::atexit(release_followers);
}

void follow_runs() {
  std::string msg;
  broadcast_from_rank0(msg);  // STEP 1: rank 0's hello
  for (;;) {
    // STEP 2: the next run, until the empty message.
    msg.clear();
    broadcast_from_rank0(msg);
    if (msg.empty()) return;
    try {
      run(decode_run(msg.substr(1)));
    } catch (const UsageError&) {
      // Rank 0 finds the same (in its own run of this config) and reports it; it then releases us.
    }
  }
}

void announce_run(const RunConfig& cfg) {
  if (!leading || cfg.backend != Backend::mpi) return;
  require(!cfg.step_hook && !cfg.tamper,
          "a run led by rank 0 of an MPI job carries no step_hook or tamper function to the other processes",
          "leave them unset for --backend mpi");
  std::string msg(1, kRun);
  msg += encode_run(cfg);
  broadcast_from_rank0(msg);
  announced_launch();
}

}  // namespace cpsim
