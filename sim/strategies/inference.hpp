// Context parallelism for inference: one step of T new tokens per sequence over a KV cache of P tokens, forward
// only. Three strategies, each written once against the Communicator and Device seams (as strategy.hpp's are):
//
//   pass_kv   prefill. Q stays; K/V of every rank (its cache share and its new tokens: T+P tokens in all) travel the
//             ring, the transfer of step i+1 overlapping the block of step i; partials merged by LSE as they come
//             (prefill_pass_kv.cpp).
//   pass_q    prefill. K/V stay; Q (T tokens in all) travels the ring; each rank computes the partial out and LSE of
//             the Q it holds against its own K/V; an all-to-all returns every partial to its query's owner, which
//             merges the C partials by LSE (prefill_pass_q.cpp).
//   decode    a few new tokens per sequence over a cache spread on every rank: the Q of the new tokens to every rank
//             (all-gather), each rank's partial over its share, partials home by all-to-all and merged
//             (decode.cpp). The merge is the LSE merge of a ring step (merge.hpp), across ranks.
// Which sends less: pass-KV moves 2 Nkv D values per token of T+P, pass-Q Nq D per new token and then Nq (D + 1)
// per new token of partials home. Q is the smaller message when T/(T+P) < 2 Nkv / Nq (12.5% at Nq = 128, Nkv = 8);
// with the partials counted, near Nkv / Nq (inference_bytes below; sim/model/inference_plan.hpp models the times).
//
// Shards (sim/layout/inference_layout.hpp): rank r's
//   q: [B, n, Nq, D]      its new tokens' rows [0, n_r) at layout.new_positions(r), n = max_new() (padded)
//   k, v: [B, m, Nkv, D]  its cache share then its new tokens, rows [0, m_r) at kv_positions(r), m = max_kv()
// forward() returns out [B, n, Nq, D] and lse [B, Nq, n] (rows [0, n_r) hold the rank's new tokens' results).
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <string_view>
#include <vector>

#include "sim/comm/communicator.hpp"
#include "sim/core/buffer.hpp"
#include "sim/core/mask.hpp"
#include "sim/kernels/device.hpp"
#include "sim/layout/inference_layout.hpp"

namespace cpsim {

enum class InferenceKind { pass_kv, pass_q, decode };
std::string_view inference_name(InferenceKind k);  // "pass_kv", "pass_q", "decode"
// The kind named (also "pass-kv", "pass-q"), or none: strategy names that are not inference ones.
std::optional<InferenceKind> find_inference(std::string_view name);
std::vector<InferenceKind> all_inference();
bool is_prefill(InferenceKind k);

struct InferenceProblem {
  std::int64_t batch = 1, new_tokens = 16, cached = 48, heads = 4, kv_heads = 4, head_dim = 16;
  std::int64_t window = 0;  // sliding window W (--window): keys fewer than W positions back; 0: none
  double scale = 0;  // 0: 1/sqrt(D)
  DType dtype = DType::f64;
  int ranks = 1;
  // Zigzag new tokens for prefill, round-robin for decode.
  InferenceLayout layout(InferenceKind k) const;
  // Causal on global positions: the new token at P + i sees keys [0, P + i] (with a window W, the last W of them).
  // Blocks the mask hides wholly are skipped; the messages stay the same.
  Mask mask() const { return window > 0 ? Mask(true, window, {}) : Mask(true); }
  std::int64_t seq() const { return cached + new_tokens; }  // the K/V length after this step
};

// UsageError naming the constraint and a fix for every impossible problem (counts below 1, Nq % Nkv, sizes whose
// tensors or pair counts would not fit).
void validate(const InferenceProblem& p, InferenceKind k);

// The bytes rank r sends in one forward, by formula (e = the dtype's bytes; n, m the padded rows above):
//   pass_kv   kv       = (C-1) 2 B m Nkv D e             the K/V buffer, once per ring step but the last
//   pass_q    q        = (C-1) B n Nq D e                the Q buffer, likewise
//             partials = (C-1) B n Nq (D + 1) e          out and LSE of every other owner's rows, by all-to-all
//   decode    q        = (C-1) B n Nq D e                its new tokens' Q to every other rank (all-gather)
//             partials = (C-1) B n Nq (D + 1) e          as pass_q
// With 2C dividing T and P: n = T/C, m = (T+P)/C, so pass-KV moves (C-1)/C of the K/V of T+P tokens and pass-Q
// (C-1)/C of the Q of T tokens, each rank.
struct InferenceBytes {
  std::int64_t kv = 0, q = 0, partials = 0;
  std::int64_t total() const { return kv + q + partials; }
};
InferenceBytes inference_bytes(const InferenceProblem& p, InferenceKind k);

struct InferenceOutput {
  Buffer out;  // [B, n, Nq, D]
  Buffer lse;  // [B, Nq, n]
};

class InferenceStrategy {
 public:
  virtual ~InferenceStrategy() = default;
  virtual InferenceOutput forward(const Buffer& q, const Buffer& k, const Buffer& v) = 0;
};

// The strategy on this rank (comm must have the problem's C ranks; the problem validated).
std::unique_ptr<InferenceStrategy> make_inference_strategy(InferenceKind k, const InferenceProblem& p,
                                                           Communicator& comm, Device& dev);

}  // namespace cpsim
