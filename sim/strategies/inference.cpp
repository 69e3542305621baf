#include "sim/strategies/inference.hpp"

#include <algorithm>
#include <cstdint>
#include <string>

#include "sim/core/error.hpp"
#include "sim/core/sizes.hpp"

namespace cpsim {

std::unique_ptr<InferenceStrategy> make_prefill_pass_kv(const InferenceProblem& p, Communicator& comm, Device& dev);
std::unique_ptr<InferenceStrategy> make_prefill_pass_q(const InferenceProblem& p, Communicator& comm, Device& dev);
std::unique_ptr<InferenceStrategy> make_decode(const InferenceProblem& p, Communicator& comm, Device& dev);

std::string_view inference_name(InferenceKind k) {
  switch (k) {
    case InferenceKind::pass_kv:
      return "pass_kv";
    case InferenceKind::pass_q:
      return "pass_q";
    case InferenceKind::decode:
      return "decode";
  }
  return "?";
}

std::optional<InferenceKind> find_inference(std::string_view name) {
  for (InferenceKind k : all_inference())
    if (inference_name(k) == name) return k;
  if (name == "pass-kv") return InferenceKind::pass_kv;
  if (name == "pass-q") return InferenceKind::pass_q;
  return std::nullopt;
}

std::vector<InferenceKind> all_inference() {
  return {InferenceKind::pass_kv, InferenceKind::pass_q, InferenceKind::decode};
}

bool is_prefill(InferenceKind k) { return k != InferenceKind::decode; }

InferenceLayout InferenceProblem::layout(InferenceKind k) const {
  return InferenceLayout(ranks, new_tokens, cached,
                         is_prefill(k) ? NewTokenPlacement::zigzag : NewTokenPlacement::round_robin);
}

void validate(const InferenceProblem& p, InferenceKind k) {
  const auto str = [](std::int64_t v) { return std::to_string(v); };
  require(p.ranks >= 1, "the ranks C must be at least 1 (got " + str(p.ranks) + ")", Fix{{"--ranks 4"}});
  require(p.batch >= 1, "the batch B must be at least 1 (got " + str(p.batch) + ")", Fix{{"--batch 1"}});
  require(p.new_tokens >= 1, "an inference step has at least one new token (got " + str(p.new_tokens) + ")",
          Fix{{"--new-tokens 1"}});
  require(p.cached >= 0, "the cached tokens P must be 0 or more (got " + str(p.cached) + ")", Fix{{"--cached 0"}});
  require(p.heads >= 1, "the query heads Nq must be at least 1 (got " + str(p.heads) + ")", Fix{{"--heads 1 or more"}});
  require(p.kv_heads >= 1, "the KV heads Nkv must be at least 1 (got " + str(p.kv_heads) + ")",
          Fix{{"--kv-heads 1 or more"}});
  require(p.head_dim >= 1, "the head dim D must be at least 1 (got " + str(p.head_dim) + ")", Fix{{"--head-dim 64"}});
  require(p.window >= 0, "the window W must be 0 (none) or positive (got " + str(p.window) + ")",
          Fix{{"--window 256"}});
  if (p.heads % p.kv_heads != 0)
    require(false,
            "grouped-query attention shares each KV head among Nq/Nkv query heads, so Nq % Nkv must be 0 (Nq=" +
                str(p.heads) + ", Nkv=" + str(p.kv_heads) + ")",
            Fix{{"--kv-heads " + str(p.heads) + " (or a divisor of it)"}});
  require(p.cached <= INT64_MAX - p.new_tokens, "the cached and new tokens together must fit in 63 bits",
          Fix{{"--cached 128K"}});
  require(k != InferenceKind::decode || p.new_tokens <= 64,
          "decode computes a few new tokens per sequence (at most 64; got " + str(p.new_tokens) + ")",
          Fix{{"--strategy pass_kv or pass_q for a prefill", "--new-tokens 1"}});
  // The largest tensors as doubles on the host (the check's), and the visible pairs of one head.
  const Extent B{"B", p.batch, "batch"}, T{"T", p.new_tokens, "new-tokens"}, S{"T+P", p.seq(), "cached"},
      Nq{"Nq", p.heads, "heads"}, Nkv{"Nkv", p.kv_heads, "kv-heads"}, D{"D", p.head_dim, "head-dim"};
  tensor_bytes("q", {B, T, Nq, D}, sizeof(double), "doubles");
  tensor_bytes("k", {B, S, Nkv, D}, sizeof(double), "doubles");
  // Every visible pair of the step, over the batch and the heads (what the Recorders sum): B Nq (T P + T(T+1)/2).
  const PairCount T128 = p.new_tokens, pairs = static_cast<PairCount>(p.batch) * p.heads *
                                                 (T128 * p.cached + T128 * (T128 + 1) / 2);
  require(pairs <= INT64_MAX, "the step's visible pairs B Nq (T P + T(T+1)/2) = " + count_text(pairs) +
                                  " overflow 64 bits",
          Fix{{"--cached " + str(p.cached / 2), "--new-tokens " + str(std::max<std::int64_t>(1, p.new_tokens / 2))}});
}

InferenceBytes inference_bytes(const InferenceProblem& p, InferenceKind k) {
  const InferenceLayout L = p.layout(k);
  const std::int64_t C1 = p.ranks - 1, e = static_cast<std::int64_t>(dtype_size(p.dtype));
  const std::int64_t n = L.max_new(), m = L.max_kv();
  InferenceBytes b;
  if (k == InferenceKind::pass_kv) {
    b.kv = C1 * 2 * p.batch * m * p.kv_heads * p.head_dim * e;
    return b;
  }
  b.q = C1 * p.batch * n * p.heads * p.head_dim * e;
  b.partials = C1 * p.batch * n * p.heads * (p.head_dim + 1) * e;
  return b;
}

std::unique_ptr<InferenceStrategy> make_inference_strategy(InferenceKind k, const InferenceProblem& p,
                                                           Communicator& comm, Device& dev) {
  if (comm.size() != p.ranks)
    throw UsageError("the communicator has " + std::to_string(comm.size()) + " ranks but the problem asks for " +
                     std::to_string(p.ranks));
  switch (k) {
    case InferenceKind::pass_kv:
      return make_prefill_pass_kv(p, comm, dev);
    case InferenceKind::pass_q:
      return make_prefill_pass_q(p, comm, dev);
    case InferenceKind::decode:
      return make_decode(p, comm, dev);
  }
  throw Error("unknown inference strategy");
}

}  // namespace cpsim
