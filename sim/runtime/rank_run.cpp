#include "sim/runtime/rank_run.hpp"

#include "sim/comm/backend_registry.hpp"
#include "sim/core/bytes.hpp"
#include "sim/kernels/device_registry.hpp"
#include "sim/kernels/host_io.hpp"
#include "sim/runtime/inputs.hpp"

namespace cpsim {

std::string RankResult::serialize() const {
  // One buffer of the exact size (memory_need.cpp counts the results twice at this point: doubles and bytes).
  const std::size_t doubles = out.size() + lse.size() + dq.size() + dk.size() + dv.size();
  ByteWriter w;
  w.reserve(8 * doubles + 6 * 8 + sizeof lse_heads + sizeof lse_head0 + lse_positions.runs().size() * sizeof(PosRun));
  w.put(out);
  w.put(lse);
  w.put(dq);
  w.put(dk);
  w.put(dv);
  w.put(lse_heads);
  w.put(lse_head0);
  w.put(lse_positions.runs());
  return w.take();
}

RankResult RankResult::deserialize(const std::string& bytes) {
  ByteReader r(bytes);
  RankResult x;
  r.get(x.out);
  r.get(x.lse);
  r.get(x.dq);
  r.get(x.dk);
  r.get(x.dv);
  r.get(x.lse_heads);
  r.get(x.lse_head0);
  std::vector<PosRun> runs;
  r.get(runs);
  for (const PosRun& run : runs) x.lse_positions.append(run);
  return x;
}

std::string run_rank(const RunConfig& cfg, const ValidProblem& valid, Communicator& comm) {
  const Problem& p = valid.problem();
  Recorder& rec = comm.recorder();
  if (cfg.step_hook) rec.set_step_hook([&](const std::string& phase, int step) { cfg.step_hook(comm, phase, step); });
  // A GPU rank's device: its launcher's GPU and streams.
  const auto dev_owner = make_device(built_in_backend(cfg.backend).device, rec, cfg.device);
  Device& dev = *dev_owner;
  const int r = comm.rank();
  const std::int64_t s = p.seq / p.ranks;  // S/C rows on every rank, in every sharding
  const Dims qd{p.batch, s, p.heads, p.head_dim}, kd{p.batch, s, p.kv_heads, p.head_dim};

  // 1. This rank's shard of the seeded inputs, made straight into its buffers.   q: [B, s, Nq, D]   k, v: [B, s, Nkv, D]
  //    K and V are message buffers where the strategy sends them as they are (strategy.hpp: kv_input_use).
  const BufferUse kv_use = kv_input_use(cfg.strategy, p.ranks);
  Buffer q, k, v;
  if (cfg.tamper) {
    Inputs in = rank_inputs(p, cfg.seed, r, false);
    cfg.tamper(r, in.q, in.k, in.v);
    q = upload_new(dev, in.q, qd, p.dtype, Layout::bsnd, "q");
    k = upload_new(dev, in.k, kd, p.dtype, Layout::bsnd, "k", kv_use);
    v = upload_new(dev, in.v, kd, p.dtype, Layout::bsnd, "v", kv_use);
  } else {
    q = rank_input_buffer(dev, p, cfg.seed, Input::q, r, "q");
    k = rank_input_buffer(dev, p, cfg.seed, Input::k, r, "k", kv_use);
    v = rank_input_buffer(dev, p, cfg.seed, Input::v, r, "v", kv_use);
  }

  // 2. Forward (and backward) through the strategy.
  auto strategy = make_strategy(valid, comm, dev);
  RankResult res;
  rec.begin_phase("forward");
  const LocalOutput o = strategy->forward(q, k, v);
  dev.synchronize();
  rec.end_phase();
  const bool keep = keeps_outputs(cfg);
  if (keep) {
    res.out = download_values(dev, o.out);
    res.lse = download_values(dev, o.lse);
    res.lse_heads = o.lse.dims().n;
    res.lse_head0 = o.lse_head0;
    res.lse_positions = o.lse_positions;
  }
  if (cfg.backward) {
    const Buffer dout = rank_input_buffer(dev, p, cfg.seed, Input::dout, r, "dout");
    rec.begin_phase("backward");
    const LocalGrads g = strategy->backward(dout);
    dev.synchronize();
    rec.end_phase();
    if (keep) {
      res.dq = download_values(dev, g.dq);
      res.dk = download_values(dev, g.dk);
      res.dv = download_values(dev, g.dv);
    }
  }
  return res.serialize();
}

}  // namespace cpsim
