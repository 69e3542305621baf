// What to pass to the frameworks that run context-parallel attention, for one configuration cpsim models: the
// strategy (all_gather, ulysses, ring, hybrid A x R), the sharding and the KV replication, under the problem's
// mask. Each framework's answer is either its settings or, said plainly, why it cannot run that configuration.
//
// The names are those of each project's own source:
//   Megatron-LM   megatron/training/arguments.py: --cp-comm-type p2p | a2a | allgather | a2a+p2p, and
//                 --hierarchical-context-parallel-sizes (required with a2a+p2p); megatron/core/model_parallel_config.py:
//                 context_parallel_size (--context-parallel-size) and hierarchical_context_parallel_sizes ("2 4":
//                 adjacent pairs form the first level); megatron/core/utils.py get_batch_on_this_cp_rank: each
//                 rank takes chunks r and 2C-1-r of 2C (zigzag), the only sharding it offers.
//   Transformer Engine  transformer_engine/pytorch/attention/dot_product_attention/dot_product_attention.py
//                 set_context_parallel_group(cp_group, cp_global_ranks, cp_stream, cp_comm_type), cp_comm_type
//                 "p2p" | "all_gather" | "a2a" | "a2a+p2p", cp_group = [a2a group, p2p group] for a2a+p2p;
//                 .../context_parallel.py: a2a needs every head count divisible by the CP size, sliding windows
//                 only with a2a or all_gather, the load-balanced (zigzag) order in the dataloader.
//   PyTorch       torch/distributed/tensor/experimental/_context_parallel/_attention.py: context_parallel is ring
//                 attention over SDPA; set_rotate_method("alltoall") passes K/V around the ring,
//                 set_rotate_method("allgather") (the default) gathers them once but still runs the ring's C blocks
//                 and merges (_AllGatherRotater.next_buffer hands out one chunk a step): cpsim's ring, not its
//                 all-gather; _cp_options.enable_load_balance (head-tail, zigzag) needs is_causal; no
//                 head-exchanging (Ulysses) path.
#pragma once
#include <string>
#include <vector>

#include "sim/model/predict.hpp"
#include "sim/strategies/strategy.hpp"

namespace cpsim::model {

struct FrameworkSetting {
  std::string framework;  // "Megatron-LM", "Transformer Engine", "PyTorch context_parallel"
  bool runs = false;
  std::string settings;  // what to pass, when it runs
  std::string why_not;   // what it lacks, when it does not
};

// p: the problem as the candidate runs it (ranks, heads, mask, sharding, kv_replicate). On one rank every framework
// runs it without context parallelism.
std::vector<FrameworkSetting> framework_settings(const Problem& p, const StrategyChoice& c);

}  // namespace cpsim::model
