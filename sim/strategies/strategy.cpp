#include "sim/strategies/strategy.hpp"

#include <algorithm>
#include <atomic>
#include <functional>
#include <string>

#include "sim/core/error.hpp"
#include "sim/core/sizes.hpp"

namespace cpsim {

std::unique_ptr<Strategy> make_all_gather(Communicator& comm, Device& dev, const Problem& p);
std::unique_ptr<Strategy> make_ulysses(Communicator& comm, Device& dev, const Problem& p);
std::unique_ptr<Strategy> make_ring(Communicator& comm, Device& dev, const Problem& p);
std::unique_ptr<Strategy> make_hybrid(Communicator& comm, Device& dev, const Problem& p);
std::unique_ptr<Strategy> make_pruned_ring(Communicator& comm, Device& dev, const Problem& p);
std::unique_ptr<Strategy> make_mask_exchange(Communicator& comm, Device& dev, const Problem& p);

std::string_view strategy_name(StrategyKind k) {
  switch (k) {
    case StrategyKind::all_gather:
      return "all_gather";
    case StrategyKind::ulysses:
      return "ulysses";
    case StrategyKind::ring:
      return "ring";
    case StrategyKind::hybrid:
      return "hybrid";
    case StrategyKind::pruned_ring:
      return "pruned_ring";
    case StrategyKind::mask_exchange:
      return "mask_exchange";
  }
  return "?";
}

StrategyKind parse_strategy(std::string_view s) {
  for (StrategyKind k : all_strategies())
    if (strategy_name(k) == s) return k;
  if (s == "a2a" || s == "all_to_all") return StrategyKind::ulysses;
  if (s == "p2p") return StrategyKind::ring;
  throw UsageError("unknown strategy '" + std::string(s) + "'",
                   {Fix{{"--strategy all_gather, ulysses, ring, hybrid, pruned_ring or mask_exchange"},
                        "the strategies are all_gather, ulysses, ring, hybrid, pruned_ring and mask_exchange"}});
}

std::vector<StrategyKind> all_strategies() {
  return {StrategyKind::all_gather, StrategyKind::ulysses,     StrategyKind::ring,
          StrategyKind::hybrid,     StrategyKind::pruned_ring, StrategyKind::mask_exchange};
}

Documents Problem::documents() const {
  return resolve_documents(docs, seq, ranks);
}

Mask Problem::mask() const {
  return make_mask(causal, window, documents());
}

SeqLayout Problem::layout() const {
  LayoutOptions opt;
  opt.docs = documents();
  opt.mask = make_mask(causal, window, opt.docs);
  opt.chunk = chunk;
  return SeqLayout(ranks, seq, sharding, opt);
}

int Problem::lse_merges(StrategyKind k) const {
  // The pruned ring merges at most as often as the ring; the mask exchange merges one partial per stage after its
  // first, at most C - 1.
  if (k != StrategyKind::ring && k != StrategyKind::hybrid && k != StrategyKind::pruned_ring &&
      k != StrategyKind::mask_exchange)
    return 0;
  return std::max(0, ranks / std::max(1, a2a_size(k)) - 1);
}

int Problem::a2a_size(StrategyKind k) const {
  switch (k) {
    case StrategyKind::ulysses:
      return ranks;
    case StrategyKind::hybrid:
      return a2a > 0 ? a2a : (ranks % 2 == 0 ? 2 : 1);
    default:
      return 1;
  }
}

namespace {
std::string str(std::int64_t v) {
  return std::to_string(v);
}

using FixFn = std::function<Fix()>;  // made only when the check fails

// An A2A group of A ranks splits the heads A ways: Nq % A == 0, and Nkv % A == 0 unless KV heads are replicated.
void validate_heads_split(const Problem& p, int A, const std::string& who, const FixFn& fix_q, const FixFn& fix_kv) {
  if (p.heads % A != 0)
    require(false,
            who + " splits the " + str(p.heads) + " query heads over " + str(A) + " ranks, so Nq % " + str(A) +
                " must be 0 (Nq=" + str(p.heads) + ")",
            fix_q());
  if (p.kv_heads % A == 0) return;
  if (p.kv_replicate) {
    require(A % p.kv_heads == 0,
            "--kv-replicate copies each KV head onto A/Nkv ranks, so A must be a multiple of Nkv (A=" + str(A) +
                ", Nkv=" + str(p.kv_heads) + ")",
            "use a group size that is a multiple of " + str(p.kv_heads));
    return;
  }
  require(false,
          who + " splits the " + str(p.kv_heads) + " KV heads over " + str(A) + " ranks, so Nkv % " + str(A) +
              " must be 0 (Nkv=" + str(p.kv_heads) + ")",
          fix_kv());
}

// The largest rank count up to C that divides n (1 at least).
std::int64_t divisor_up_to(std::int64_t n, int C) {
  for (std::int64_t d = C; d > 1; --d)
    if (n % d == 0) return d;
  return 1;
}

std::atomic<std::int64_t> validation_count{0};

}  // namespace

std::int64_t validations() { return validation_count.load(); }

void validate(const Problem& p, StrategyKind kind) { (void)validated(p, kind); }

ValidProblem validated(const Problem& p, StrategyKind kind) {
  ++validation_count;
  require(p.batch >= 1, "the batch B must be at least 1 (got " + str(p.batch) + ")", Fix{{"--batch 1"}});
  require(p.heads >= 1, "the query heads Nq must be at least 1 (got " + str(p.heads) + ")", Fix{{"--heads 1 or more"}});
  require(p.kv_heads >= 1, "the KV heads Nkv must be at least 1 (got " + str(p.kv_heads) + ")",
          Fix{{"--kv-heads 1 or more"}});
  require(p.head_dim >= 1, "the head dim D must be at least 1 (got " + str(p.head_dim) + ")", Fix{{"--head-dim 64"}});
  if (p.heads % p.kv_heads != 0)
    require(
        false,
        "grouped-query attention shares each KV head among Nq/Nkv query heads, so Nq % Nkv must be 0 (Nq=" +
            str(p.heads) + ", Nkv=" + str(p.kv_heads) + ")",
        Fix{{"--kv-heads " + str(p.heads) + " (or a divisor of it)",
             "--heads " + str(multiple_for_fix(p.heads, p.kv_heads))}});
  require(p.window >= 0, "the window W must be 0 (none) or positive (got " + str(p.window) + ")",
          Fix{{"--window 256"}});
  require(p.chunk >= 0, "--chunk must be positive (got " + str(p.chunk) + ")", Fix{{"--chunk 16"}});
  require(p.chunk == 0 || p.sharding == Sharding::balanced, "--chunk sets the balanced sharding's chunk size",
          Fix{{"--sharding balanced"}, "drop --chunk"});
  require(!p.docs.pad || p.sharding == Sharding::zigzag || p.sharding == Sharding::doc_contiguous,
          "--pad-docs pads documents for per-document zigzag or contiguous per document (--sharding zigzag or "
          "doc-contiguous)",
          Fix{{"--sharding zigzag", "--sharding doc-contiguous"}, "drop --pad-docs"});
  (void)p.layout();  // throws for impossible documents and layouts
  // The largest copies a run makes are the whole tensors as doubles on the host: none may be more than one process
  // can address (and no product of extents may wrap).
  const Extent B{"B", p.batch, "batch"}, S{"S", p.seq, "seq"}, Nq{"Nq", p.heads, "heads"},
      Nkv{"Nkv", p.kv_heads, "kv-heads"}, D{"D", p.head_dim, "head-dim"};
  tensor_bytes("q", {B, S, Nq, D}, sizeof(double), "doubles");
  tensor_bytes("k", {B, S, Nkv, D}, sizeof(double), "doubles");
  if (p.kv_replicate)
    require(kind == StrategyKind::ulysses || kind == StrategyKind::hybrid,
            "--kv-replicate only applies to the all-to-all strategies", Fix{{"--strategy ulysses or hybrid"}});

  const int C = p.ranks;
  if (kind == StrategyKind::ulysses) {
    validate_heads_split(
        p, C, "ulysses",
        [&] {
          return Fix{{"--strategy ring", "--strategy hybrid --a2a A with A dividing Nq",
                      "--ranks " + str(divisor_up_to(p.heads, C)), "--heads " + str(multiple_for_fix(p.heads, C))}};
        },
        [&] {
          if (C % p.kv_heads == 0)
            return Fix{{"--kv-replicate (each KV head copied onto C/Nkv ranks)",
                        "--strategy hybrid --a2a " + str(p.kv_heads), "--ranks " + str(divisor_up_to(p.kv_heads, C))}};
          return Fix{{"--strategy hybrid --a2a A with A dividing Nkv", "--strategy ring",
                      "--ranks " + str(divisor_up_to(p.kv_heads, C))}};
        });
  }
  if (kind == StrategyKind::hybrid) {
    const int A = p.a2a_size(kind);
    if (A < 1 || C % A != 0)
      require(false,
              "the hybrid runs on a 2-D mesh C = A x R, so the A2A group size A must divide C (A=" + str(A) +
                  ", C=" + str(C) + ")",
              Fix{{C % 2 == 0 ? "--a2a 2" : "--a2a 1 or a divisor of C"}});
    validate_heads_split(
        p, A, "the hybrid's A2A group", [&] { return Fix{{"an --a2a that divides Nq"}}; },
        [&] {
          return Fix{{"--kv-replicate", "an --a2a that divides Nkv"}};
        });
  } else if (p.a2a > 0) {
    throw UsageError("--a2a sets the hybrid's A2A group size",
                     {Fix{{"--strategy hybrid"}}, Fix{{}, "drop --a2a", " or "}});
  }
  return ValidProblem(p, kind);
}

BufferUse kv_input_use(StrategyKind kind, int ranks) {
  return kind == StrategyKind::all_gather && ranks > 1 ? BufferUse::message : BufferUse::work;
}

std::unique_ptr<Strategy> make_strategy(StrategyKind kind, Communicator& comm, Device& dev, const Problem& p) {
  return make_strategy(validated(p, kind), comm, dev);
}

std::unique_ptr<Strategy> make_strategy(const ValidProblem& valid, Communicator& comm, Device& dev) {
  const Problem& p = valid.problem();
  const StrategyKind kind = valid.kind();
  if (comm.size() != p.ranks)
    throw UsageError("the communicator has " + str(comm.size()) + " ranks but the problem asks for " + str(p.ranks),
                     {Fix{{"--ranks " + str(comm.size())}, "give the problem as many ranks"}});
  switch (kind) {
    case StrategyKind::all_gather:
      return make_all_gather(comm, dev, p);
    case StrategyKind::ulysses:
      return make_ulysses(comm, dev, p);
    case StrategyKind::ring:
      return make_ring(comm, dev, p);
    case StrategyKind::hybrid:
      return make_hybrid(comm, dev, p);
    case StrategyKind::pruned_ring:
      return make_pruned_ring(comm, dev, p);
    case StrategyKind::mask_exchange:
      return make_mask_exchange(comm, dev, p);
  }
  throw Error("unknown strategy");
}

}  // namespace cpsim
