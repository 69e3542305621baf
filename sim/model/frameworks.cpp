#include "sim/model/frameworks.hpp"

namespace cpsim::model {
namespace {

// Why no framework runs the pruned ring or the mask exchange: each moves the K/V of every block to every rank.
constexpr const char* kMovesEveryBlock =
    "it moves every K/V block to every rank whatever the mask: no pass sends only the K/V a mask sees";

std::string str(std::int64_t x) {
  return std::to_string(x);
}

// The A2A group size A and ring size R of a choice on C ranks (A = C for Ulysses, 1 for the ring).
std::pair<int, int> mesh(const Problem& p, const StrategyChoice& c) {
  const int C = p.ranks;
  if (c.kind == StrategyKind::ulysses) return {C, 1};
  if (c.kind == StrategyKind::hybrid) return {c.a2a, C / c.a2a};
  return {1, C};
}

// The ranks of each A2A group and each ring group, as cpsim lays them out: A2A groups of A adjacent ranks,
// rings of R ranks at stride A ("[0,1] [2,3] ..." ).
std::string groups_text(int A, int R, bool a2a) {
  std::string out;
  const int groups = a2a ? R : A, size = a2a ? A : R;
  for (int g = 0; g < groups && g < 2; ++g) {
    out += out.empty() ? "[" : " [";
    for (int i = 0; i < size && i < 4; ++i) out += (i ? "," : "") + str(a2a ? g * A + i : g + i * A);
    out += size > 4 ? ",...]" : "]";
  }
  return out + (groups > 2 ? " ..." : "");
}

bool zigzag_like(const Problem& p) {
  return p.sharding == Sharding::zigzag;
}

FrameworkSetting megatron(const Problem& p, const StrategyChoice& c) {
  FrameworkSetting f{"Megatron-LM", false, "", ""};
  const auto [A, R] = mesh(p, c);
  if (!zigzag_like(p)) {
    f.why_not = "it shards zigzag only (get_batch_on_this_cp_rank takes chunks r and 2C-1-r), not " +
                std::string(sharding_name(p.sharding));
    return f;
  }
  if (p.kv_replicate && p.replicates_kv(c.kind)) {
    f.why_not = "its a2a splits the KV heads A ways and has no KV replication (Nkv=" + str(p.kv_heads) +
                " does not split " + str(A) + " ways)";
    return f;
  }
  if (p.window > 0 && (c.kind == StrategyKind::ring || c.kind == StrategyKind::hybrid)) {
    f.why_not = "Transformer Engine, which runs its attention, takes a sliding window only with a2a or allgather";
    return f;
  }
  const std::string base = "--context-parallel-size " + str(p.ranks) + " --cp-comm-type ";
  switch (c.kind) {
    case StrategyKind::all_gather:
      f.settings = base + "allgather";
      break;
    case StrategyKind::ulysses:
      f.settings = base + "a2a";
      break;
    case StrategyKind::ring:
      f.settings = base + "p2p";
      break;
    case StrategyKind::hybrid:
      f.settings = base + "a2a+p2p --hierarchical-context-parallel-sizes " + str(A) + " " + str(R);
      break;
    case StrategyKind::pruned_ring:
    case StrategyKind::mask_exchange:
      f.why_not = kMovesEveryBlock;
      return f;
  }
  f.runs = !f.settings.empty();
  if (!f.runs) f.why_not = "it has no such communication type";
  if (p.docs.any()) f.settings += " (packed documents: THD format with cu_seqlens_padded to a multiple of 2C)";
  return f;
}

FrameworkSetting transformer_engine(const Problem& p, const StrategyChoice& c) {
  FrameworkSetting f{"Transformer Engine", false, "", ""};
  const auto [A, R] = mesh(p, c);
  if (!zigzag_like(p)) {
    f.why_not = "its causal p2p and a2a paths expect the load-balanced (zigzag) order, not " +
                std::string(sharding_name(p.sharding));
    return f;
  }
  if (p.replicates_kv(c.kind)) {
    f.why_not = "a2a asserts num_heads % cp_size == 0 for Q, K and V: repeat the KV heads to a multiple of " +
                str(A) + " before the call, or choose the candidate without KV replication";
    return f;
  }
  if (p.window > 0 && (c.kind == StrategyKind::ring || c.kind == StrategyKind::hybrid)) {
    f.why_not = "it takes a sliding window only with cp_comm_type a2a or all_gather";
    return f;
  }
  const std::string call = "DotProductAttention.set_context_parallel_group(cp_group, cp_global_ranks, cp_stream, ";
  switch (c.kind) {
    case StrategyKind::all_gather:
      f.settings = call + "cp_comm_type=\"all_gather\"), cp_group: the " + str(p.ranks) + " ranks";
      break;
    case StrategyKind::ulysses:
      f.settings = call + "cp_comm_type=\"a2a\"), cp_group: the " + str(p.ranks) + " ranks";
      break;
    case StrategyKind::ring:
      f.settings = call + "cp_comm_type=\"p2p\"), cp_group: the " + str(p.ranks) + " ranks in ring order";
      break;
    case StrategyKind::hybrid:
      f.settings = call + "cp_comm_type=\"a2a+p2p\"), cp_group = [a2a group of " + str(A) + " adjacent ranks " +
                   groups_text(A, R, true) + ", p2p group of " + str(R) + " ranks at stride " + str(A) + " " +
                   groups_text(A, R, false) + "]";
      break;
    case StrategyKind::pruned_ring:
    case StrategyKind::mask_exchange:
      f.why_not = kMovesEveryBlock;
      return f;
  }
  f.runs = !f.settings.empty();
  if (!f.runs) f.why_not = "it has no such cp_comm_type";
  return f;
}

FrameworkSetting pytorch(const Problem& p, const StrategyChoice& c) {
  FrameworkSetting f{"PyTorch context_parallel", false, "", ""};
  if (c.kind == StrategyKind::pruned_ring || c.kind == StrategyKind::mask_exchange) {
    f.why_not = kMovesEveryBlock;
    return f;
  }
  if (c.kind == StrategyKind::ulysses || c.kind == StrategyKind::hybrid) {
    f.why_not = "it runs ring attention only; it has no head all-to-all (Ulysses) path";
    return f;
  }
  if (p.docs.any() || p.window > 0) {
    f.why_not = "its SDPA path takes causal or full attention only, not documents or a window";
    return f;
  }
  if (c.kind == StrategyKind::all_gather) {
    f.why_not = "its allgather rotate gathers the K/V once and then runs its ring's C blocks and merges on them "
                "(one chunk a step), not one call per local chunk; the ring's settings with "
                "set_rotate_method(\"allgather\") run that";
    return f;
  }
  std::string balance;
  if (p.sharding == Sharding::zigzag && p.causal) {
    balance = "_cp_options.enable_load_balance = True (head-tail: zigzag)";
  } else if (p.sharding == Sharding::contiguous) {
    balance = "_cp_options.enable_load_balance = False (contiguous)";
  } else {
    f.why_not = "its load balancer is head-tail (zigzag, causal only) or none (contiguous), not " +
                std::string(sharding_name(p.sharding));
    return f;
  }
  f.runs = true;
  f.settings = "set_rotate_method(\"alltoall\"), " + balance + ", context_parallel(mesh of " + str(p.ranks) + " ranks)";
  return f;
}

}  // namespace

std::vector<FrameworkSetting> framework_settings(const Problem& p, const StrategyChoice& c) {
  // One rank: no context parallelism to set up, whatever cpsim calls the (trivial) strategy.
  if (p.ranks == 1)
    return {{"Megatron-LM", true, "--context-parallel-size 1 (the default: no context parallelism)", ""},
            {"Transformer Engine", true, "no set_context_parallel_group call (one rank: no context parallelism)", ""},
            {"PyTorch context_parallel", true, "no context_parallel context (one rank: plain SDPA)", ""}};
  return {megatron(p, c), transformer_engine(p, c), pytorch(p, c)};
}

}  // namespace cpsim::model
