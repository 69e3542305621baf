// check_run (run.hpp): a run's tensors against the f64 reference, under the rule for its dtype and device.
#include "sim/comm/backend_registry.hpp"
#include "sim/kernels/device_registry.hpp"
#include "sim/runtime/inputs.hpp"
#include "sim/runtime/run.hpp"

namespace cpsim {

CheckReport check_run(const RunConfig& cfg, const GlobalTensors& t) {
  const Problem& p = cfg.problem;
  const bool gpu = device_info(built_in_backend(cfg.backend).device).gpu;
  const CheckRule rule = check_rule(p.dtype, gpu, p.kv_heads != p.heads);
  AttentionProblem whole = whole_problem(p, Inputs{t.q, t.k, t.v, t.dout});
  whole.merges = p.lse_merges(cfg.strategy);
  const RefForward got_f{t.out, t.lse};
  const RefBackward got_b{t.dq, t.dk, t.dv};
  const SeqLayout L = p.layout();
  std::vector<std::vector<Span>> owners;
  for (int r = 0; r < p.ranks; ++r) owners.push_back(L.spans(r));
  return check_against_reference(whole, rule, got_f, cfg.backward ? &got_b : nullptr, &owners);
}

}  // namespace cpsim
