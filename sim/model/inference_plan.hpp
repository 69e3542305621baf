// Which inference strategy to use, and what it costs: each strategy of sim/strategies/inference.hpp counted
// (inference_count.hpp) and replayed on a machine (clock.hpp), with the reasons an engineer checks.
//
// Prefill, pass-KV against pass-Q (Yang et al., "Context Parallelism for Scalable Million-Token Inference",
// arXiv 2411.01783, section 3.3 states these conditions; the numbers here are this model's):
//   1. message size: a Q message is smaller than a K/V message when T Nq < 2 (T+P) Nkv, i.e.
//        T/(T+P) < 2 Nkv / Nq
//   2. bytes with the partials: pass-Q also returns out and LSE (Nq (D + 1) values per new token), so it sends fewer
//      bytes in all when T Nq (2D + 1) < 2 (T+P) Nkv D, i.e.  T/(T+P) < 2 Nkv D / (Nq (2D + 1))  (about Nkv / Nq)
//   3. overlap: pass-KV's transfer of one step ((T+P)/C tokens of K/V on the link) hides behind the step's block
//      (T/C queries over (T+P)/C keys) when the block takes longer; pass-Q's all-to-all of the partials hides
//      behind nothing. With the kernel at its peak rate F on every block (the paper's condition) the block takes
//      4 D Nq (T/C) ((T+P)/C) / F and the transfer 2 (T+P)/C Nkv D e / BW, so pass-KV hides from
//        T >= C Nkv e F / (2 Nq BW)
//      The clock's kernel is slower on small blocks (a block of fewer row tiles than the GPU has SMs leaves the
//      others idle), so its blocks hide the transfer from fewer new tokens than that.
//   4. the modeled times of both (the slowest rank's forward), which weigh all of the above: the choice
//   5. memory: when only one of the two fits a GPU (its peak per rank), that one
// Decode: the modeled time of one decode step (T new tokens per sequence), and per token.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "sim/model/machine.hpp"
#include "sim/strategies/inference.hpp"

namespace cpsim::model {

struct InferenceTime {
  InferenceKind kind = InferenceKind::pass_kv;
  double us = 0;                // the slowest rank's forward
  double exposed_us = 0;        // the slowest rank's time blocked on communication
  double compute_us = 0;        // the slowest rank's attention time
  std::int64_t bytes_sent = 0;  // the most one rank sends
  std::int64_t peak_bytes = 0;  // the most one rank holds
};

// The strategy counted and replayed on the machine (UsageError for an impossible problem or machine).
InferenceTime model_inference(const InferenceProblem& p, InferenceKind k, const Machine& m);

struct PrefillChoice {
  InferenceTime pass_kv, pass_q;
  InferenceKind choice = InferenceKind::pass_kv;  // the faster, modeled
  double new_share = 0;      // T / (T+P)
  double message_bound = 0;  // 2 Nkv / Nq                      (condition 1)
  double bytes_bound = 0;    // 2 Nkv D / (Nq (2D + 1))         (condition 2)
  double kv_step_us = 0;     // one K/V message on the ring's link, latency included (condition 3)
  double block_us = 0;       // pass-KV's attention per step, modeled (its compute / C)
  double peak_tokens = 0;    // T >= this hides pass-KV's transfer at the kernel's peak rate (condition 3)
  std::vector<std::string> reasons;  // one line per condition, in order
};
PrefillChoice choose_prefill(const InferenceProblem& p, const Machine& m);
// Whether the strategy's peak per rank fits one GPU of the machine.
bool fits(const Machine& m, const InferenceTime& t);
// The fewest ranks of C x 2, C x 4, ... (at most `most`) on which pass-KV or pass-Q fits a GPU, each modeled
// there; 0 when none does.
int fewest_ranks_that_fit(const InferenceProblem& p, const Machine& m, int most);

// The machine with `ranks` ranks of the CP group on each node (and no more NICs per node than ranks): a CP group
// laid across nodes, one rank per node, when tensor parallelism fills each node (--ranks-per-node 1).
Machine with_ranks_per_node(Machine m, int ranks);
// The machine of the paper's measurements as this model takes it: h100-ib's H100 and network, each CP rank a node
// of its own (the paper runs TP8 inside a node and CP across nodes, GPU g of one node talking to GPU g of the next
// over its own 400 Gb/s NIC): one GPU per node, one NIC.
Machine paper_machine();
// The paper's model on one GPU of a TP8 node: Llama 3 405B's 128 query and 8 KV heads split 8 ways (16 and 1),
// D = 128, bf16, batch 1, with T new tokens after P cached on C ranks.
InferenceProblem paper_problem(std::int64_t new_tokens, std::int64_t cached, int ranks);

}  // namespace cpsim::model
