// cpsim layout: which positions each rank owns, the grid under the mask, the per-rank and per-step work, and every
// sharding side by side with its imbalance. Everything is counted by formula on runs of positions, so any S is fast.
#include <algorithm>
#include <iomanip>
#include <iostream>
#include <numeric>
#include <sstream>

#include "sim/cli/cli.hpp"
#include "sim/cli/problem_options.hpp"
#include "sim/core/columns.hpp"
#include "sim/core/error.hpp"
#include "sim/core/json.hpp"
#include "sim/layout/grid.hpp"
#include "sim/layout/kv_need.hpp"
#include "sim/layout/work_table.hpp"
#include "sim/strategies/pruned_ring.hpp"

namespace cpsim::cli {
namespace {

constexpr std::int64_t kMaxJsonSpans = 4096;  // per rank: beyond this "positions" is left out ("runs" stays)
constexpr int kMaxRankColumns = 8;            // wider tables show the max and the mean instead
constexpr int kMaxStepColumns = 16;
constexpr int kMaxJsonStepRanks = 64;          // per-step tables in JSON up to this C (C x C numbers each)
constexpr std::int64_t kMaxGridCells = 32;
constexpr std::int64_t kMaxLayoutWork = std::int64_t{1} << 24;  // C^2 x (documents + 1): ~10 s of counting
constexpr std::int64_t kMaxStripedNeed = std::int64_t{1} << 24;  // striped: the need walks every row (kv_need.hpp)
constexpr int kMaxKvRanks = 256;  // the K/V table: C^2 owner-rank pairs (the pruned ring's route)

// "[0, 2), [14, 16)" for ranges, the runs' own text for strided positions; long lists end in "... (N runs)".
std::string positions_text(const Positions& p) {
  const auto& runs = p.runs();
  bool ranges = true;
  for (const PosRun& r : runs) ranges = ranges && r.stride == 1;
  if (!ranges) return p.text();
  std::string s;
  for (std::size_t i = 0; i < runs.size() && i < 2; ++i)
    s += (i ? ", " : "") + ("[" + std::to_string(runs[i].first) + ", " + std::to_string(runs[i].first + runs[i].count) +
                            ")");
  if (runs.size() > 2) s += ", ... (" + std::to_string(runs.size()) + " runs)";
  return s;
}

std::string chunks_text(const std::vector<int>& chunks) {
  std::string s;
  for (int c : chunks) s += (s.empty() ? "" : ",") + std::to_string(c);
  return s.empty() ? "-" : s;
}

std::string fixed2(double v) {
  std::ostringstream os;
  os << std::fixed << std::setprecision(2) << v;
  return os.str();
}

// A cell in a column of `w`, with at least one space after it.
std::string cell(const std::string& s, std::size_t w) { return left(s, w - 1) + " "; }

// A column's width: its usual width, or its longest entry and one space.
std::size_t width_of(const std::vector<std::string>& cells, std::size_t usual) {
  std::size_t w = usual;
  for (const std::string& c : cells) w = std::max(w, c.size() + 1);
  return w;
}

std::int64_t max_of(const std::vector<std::int64_t>& v) { return v.empty() ? 0 : *std::max_element(v.begin(), v.end()); }
double mean_of(const std::vector<std::int64_t>& v) {
  return v.empty() ? 0 : static_cast<double>(std::accumulate(v.begin(), v.end(), std::int64_t{0})) / double(v.size());
}

Json json_work(const ShardingWork& w, int ranks) {
  Json j{{"sharding", sharding_name(w.sharding)}, {"name", w.name}, {"valid", w.why_not.empty()}};
  if (!w.why_not.empty()) {
    j["why_not"] = w.why_not;
    return j;
  }
  j["visible_pairs"] = w.per_rank;
  j["imbalance"] = w.imbalance;
  j["ring_imbalance"] = w.ring_imbalance;
  j["step_imbalance"] = step_imbalances(w.steps);
  if (ranks <= kMaxJsonStepRanks) j["ring_step_pairs"] = w.steps;
  return j;
}

// Forward K/V rows each rank receives: the need (rows of other ranks its queries see, kv_need.hpp), the ring's
// (C - 1 blocks of s rows), the pruned ring's (the blocks whose route passes the rank, pruned_ring.hpp) and the mask
// exchange's (the need), with the redundancy sent / need - 1. In bytes each row is 2 B Nkv D x the dtype's size.
void print_kv_rows(const SeqLayout& L, const Mask& mask) {
  const int C = L.ranks();
  const std::int64_t s = L.local_len();
  const RingRoute route = ring_route(L, mask);
  const auto pct = [](std::int64_t sent, std::int64_t need) {
    if (need == 0) return std::string(sent == 0 ? "0%" : "all");
    return fixed2(100.0 * (static_cast<double>(sent) / static_cast<double>(need) - 1.0)) + "%";
  };
  std::cout << "\nK/V rows each rank receives in the forward (need: rows of other ranks its queries see;\n"
               "redundancy: sent / need - 1; bytes: rows x 2 B Nkv D x the dtype's size; the backward moves them\n"
               "again and returns as many dK/dV rows):\n"
            << "rank  " << cell("need", 12) << cell("ring", 12) << cell("redundancy", 12) << cell("pruned_ring", 13)
            << cell("redundancy", 12) << "mask_exchange\n";
  std::int64_t all_need = 0, all_ring = 0, all_pruned = 0;
  for (int r = 0; r < C; ++r) {
    const std::int64_t need = needed_total(L, r, mask), ring = (C - 1) * s, pruned = route.blocks_received(r) * s;
    all_need += need, all_ring += ring, all_pruned += pruned;
    std::cout << cell(std::to_string(r), 6) << cell(std::to_string(need), 12) << cell(std::to_string(ring), 12)
              << cell(pct(ring, need), 12) << cell(std::to_string(pruned), 13) << cell(pct(pruned, need), 12) << need
              << "\n";
  }
  std::cout << cell("all", 6) << cell(std::to_string(all_need), 12) << cell(std::to_string(all_ring), 12)
            << cell(pct(all_ring, all_need), 12) << cell(std::to_string(all_pruned), 13)
            << cell(pct(all_pruned, all_need), 12) << all_need << "\n";
}

// Whether the K/V table is counted: more than one rank, at most kMaxKvRanks, and a striped S the need can walk.
bool kv_table(const Problem& p, int C, std::int64_t S) {
  return C > 1 && C <= kMaxKvRanks && (p.sharding != Sharding::striped || S <= kMaxStripedNeed);
}

int cmd_layout(const std::vector<std::string>& args) {
  po::options_description desc("cpsim layout: who owns which tokens, and the per-rank work under the mask");
  ProblemOptions o;
  o.ranks = 4;
  std::string seq_text = "16";
  desc.add_options()("ranks,C", po::value(&o.ranks)->default_value(4), "context-parallel ranks C")(
      "seq,S", po::value(&seq_text)->default_value("16"), "sequence length S (tokens; K, M, G = 1024, 1024^2, 1024^3)");
  const unsigned flags = kFlagSharding | kFlagFull | kFlagSeed | kFlagsMask;
  add_problem_options(desc, o, flags);
  desc.add_options()("json", "print one JSON object instead of the tables");
  po::variables_map vm;
  if (!parse("layout", desc, args, vm)) return 0;
  RunConfig cfg;
  Problem& p = cfg.problem;
  p.ranks = o.ranks;
  p.seq = static_cast<std::int64_t>(parse_size("seq", seq_text));
  apply_problem_options(o, vm, flags, cfg);
  require(p.ranks >= 1, "the number of ranks C must be at least 1 (got C=" + std::to_string(p.ranks) + ")",
          "use --ranks 1 or more");
  // The ring-step tables count every rank pair in every document: about C^2 (documents + 1) steps per sharding.
  // Known from the flags, before the documents are drawn (random:K draws K lengths): with --pad-docs each listed
  // document may add a padding run, which the mask counts as a document.
  const std::int64_t rank_pairs = std::int64_t{p.ranks} * p.ranks,
                     docs_n = p.docs.random > 0 ? p.docs.random
                                                : std::max<std::int64_t>(1, static_cast<std::int64_t>(
                                                                                p.docs.lengths.size() * (p.docs.pad ? 2 : 1)));
  require(docs_n + 1 <= kMaxLayoutWork / rank_pairs,
          "cpsim layout counts each of the C^2 = " + std::to_string(rank_pairs) + " rank pairs in each of the " +
              std::to_string(docs_n) + (docs_n == 1 ? " document" : " documents") +
              ", more than it counts in bounded time (C^2 x (documents + 1) at most " + std::to_string(kMaxLayoutWork) +
              ")",
          Fix{{"fewer --ranks", "fewer documents (--docs random:" +
                                    std::to_string(std::max<std::int64_t>(1, kMaxLayoutWork / rank_pairs - 1)) + ")"}});
  const Documents docs = p.documents();
  const Mask mask = p.mask();
  // Every count below is a part of the whole sequence's visible pairs per head: when that fits in 64 bits, they do.
  PairCount whole = 0;
  const bool countable = pair_count_fits(p.seq, mask, &whole);  // before the message that names `whole` is made
  require(countable,
          "the " + mask.describe() + " mask lets " + count_text(whole) + " query-key pairs through per head at S=" +
              std::to_string(p.seq) + ", more than a 64-bit count holds (9223372036854775807)",
          Fix{{"a smaller --seq (causal: at most 4294967295)", "--window W"}});
  const SeqLayout L = p.layout();
  const int C = p.ranks;
  const std::int64_t S = p.seq;
  const bool chunk_grid = S % (2 * C) == 0 && !L.chunks(0).empty();
  const bool notebook = chunk_grid && mask == Mask(true);  // the handbook chapter's chunk-block table
  const auto pairs = visible_pairs_per_rank(L, mask);
  const auto steps = ring_step_pairs(L, mask);
  std::vector<int> ring;
  for (const auto& st : steps)
    ring.push_back(static_cast<int>(std::count_if(st.begin(), st.end(), [](std::int64_t x) { return x > 0; })));
  const std::vector<double> blocks = notebook ? chunk_blocks(L) : std::vector<double>{};
  LayoutOptions lo;
  lo.docs = docs;
  lo.mask = mask;
  lo.chunk = p.chunk;
  const std::vector<ShardingWork> side = compare_shardings(C, S, lo);

  if (vm.count("json")) {
    Json config{{"ranks", C},
                {"seq", S},
                {"sharding", o.sharding},
                {"layout", L.describe()},
                {"mask", mask.describe()},
                {"window", p.window},
                {"chunk_len", chunk_grid ? L.chunk_len() : std::int64_t{0}}};
    if (p.sharding == Sharding::balanced) config["balance_chunk"] = L.balance_chunk();
    if (!docs.empty()) {
      config["documents"] = docs.lengths;
      config["padded_documents"] = docs.padded;
      config["padding"] = docs.padding();
      config["shortest_document"] = docs.shortest();
    }
    Json ranks = Json::array();
    const bool kv = kv_table(p, C, S);
    const RingRoute route = kv ? ring_route(L, mask) : RingRoute{};
    for (int r = 0; r < C; ++r) {
      const Positions pos = L.positions(r);
      Json rank{{"rank", r}};
      if (chunk_grid) rank["chunks"] = L.chunks(r);
      if (p.sharding == Sharding::balanced) rank["balanced_chunks"] = L.balanced_chunks(r);
      Json& runs = rank["runs"] = Json::array();
      for (const PosRun& run : pos.runs()) runs.push_back(Json::array({run.first, run.count, run.stride, run.width}));
      const std::vector<Span> spans = pos.spans();
      if (static_cast<std::int64_t>(spans.size()) <= kMaxJsonSpans) {
        Json& positions = rank["positions"] = Json::array();
        for (const Span& sp : spans) positions.push_back(Json::array({sp.lo, sp.hi}));
      }
      if (notebook) rank["chunk_blocks"] = blocks[r];
      rank["visible_pairs"] = pairs[r];
      if (kv) {
        // Forward K/V rows each way of moving K/V sends the rank, against its need (print_kv_rows).
        const std::int64_t s = L.local_len();
        rank["kv_rows"] = {{"need", needed_total(L, r, mask)},
                           {"ring", (C - 1) * s},
                           {"pruned_ring", route.blocks_received(r) * s},
                           {"mask_exchange", needed_total(L, r, mask)}};
      }
      rank["ring_blocks"] = ring[r];
      if (C <= kMaxJsonStepRanks) rank["ring_step_pairs"] = steps[r];
      ranks.push_back(std::move(rank));
    }
    Json shardings = Json::array();
    for (const ShardingWork& w : side) shardings.push_back(json_work(w, C));
    const Json j{{"config", std::move(config)},
                 {"ranks", std::move(ranks)},
                 {"imbalance", imbalance(pairs)},
                 {"ring_imbalance", ring_imbalance(steps)},
                 {"step_imbalance", step_imbalances(steps)},
                 {"shardings", std::move(shardings)}};
    std::cout << json_text(j) << "\n";
    return 0;
  }

  // 1. Who owns what.
  std::cout << "Layout: S=" << S << " tokens over C=" << C << " ranks, " << L.describe() << " sharding";
  if (chunk_grid) std::cout << " (2C=" << 2 * C << " chunks of t=" << L.chunk_len() << ")";
  std::cout << "\n";
  if (!mask.plain() || !mask.causal()) std::cout << "Mask: " << describe_mask(mask, docs) << "\n";
  if (!docs.empty()) std::cout << "Documents: " << docs.describe() << "\n";
  // Every column as wide as its longest entry (at least its usual width), so no two ever run together.
  std::vector<std::string> chunks_col, pos_col, blocks_col, pairs_col;
  for (int r = 0; r < C; ++r) {
    chunks_col.push_back(chunk_grid ? chunks_text(L.chunks(r)) : "-");
    pos_col.push_back(positions_text(L.positions(r)));
    blocks_col.push_back(notebook ? (std::ostringstream() << blocks[r]).str() : "-");
    pairs_col.push_back(std::to_string(pairs[r]));
  }
  const std::size_t chunks_w = width_of(chunks_col, 8), pos_w = width_of(pos_col, 27),
                    pairs_w = width_of(pairs_col, 15), blocks_w = width_of(blocks_col, 16);
  std::cout << "\nrank  " << cell("chunks", chunks_w) << cell("positions", pos_w) << cell("visible pairs", pairs_w)
            << cell("chapter: t x t", blocks_w) << "chapter: ring\n";
  for (int r = 0; r < C; ++r) {
    const std::size_t i = static_cast<std::size_t>(r);
    std::cout << cell(std::to_string(r), 6) << cell(chunks_col[i], chunks_w) << cell(pos_col[i], pos_w)
              << cell(pairs_col[i], pairs_w) << cell(blocks_col[i], blocks_w) << ring[r] << "\n";
  }
  std::cout << "visible pairs: query-key pairs the mask lets through, per (batch, head): cpsim's unit of work.\n";
  if (notebook)
    std::cout << "The handbook chapter's counts, from them: t x t = its balance program's blocks, a diagonal one\n"
                 "counting 1/2: a chunk c holds c t^2 + t(t+1)/2 pairs, so (pairs - t) / t^2 for two chunks;\n"
                 "ring = its ring program's blocks computed, a rank's queries x one rank's keys\n";
  else
    std::cout << "The handbook chapter's counts: t x t only for the causal mask on 2C chunks; ring = its ring\n"
                 "program's blocks computed, a rank's queries x one rank's keys\n";
  std::cout << "\nimbalance (max/mean visible pairs): " << fixed2(imbalance(pairs)) << "\n";

  // 2. The ring's steps: at step i rank r holds the K/V of rank r - i; each step lasts as long as its busiest rank.
  if (C > 1 && C <= kMaxStepColumns) {
    std::vector<std::string> cells;  // every step's count, for one width that fits them all
    for (const auto& row : steps)
      for (std::int64_t x : row) cells.push_back(std::to_string(x));
    const std::size_t step_w = width_of(cells, 9);
    std::cout << "\nWork per ring step (visible pairs per (batch, head); at step i rank r holds the K/V of rank r-i):\n"
              << "rank      ";
    for (int i = 0; i < C; ++i) std::cout << cell("step " + std::to_string(i), step_w);
    std::cout << "total\n";
    for (int r = 0; r < C; ++r) {
      std::cout << cell(std::to_string(r), 10);
      for (std::int64_t x : steps[r]) std::cout << cell(std::to_string(x), step_w);
      std::cout << pairs[r] << "\n";
    }
    std::cout << cell("max/mean", 10);
    for (double x : step_imbalances(steps)) std::cout << cell(step_imbalance_text(x), step_w);
    std::cout << fixed2(imbalance(pairs)) << "\n";
  }
  if (C > 1)
    std::cout << "ring imbalance (each step's busiest rank, summed, over an even split): " << fixed2(ring_imbalance(steps))
              << "\n";

  // 3. The K/V each rank needs and what each way of moving K/V sends it.
  if (kv_table(p, C, S)) print_kv_rows(L, mask);

  // 4. Every sharding under the same mask (the name column as wide as the longest name).
  int name_w = 28;
  for (const ShardingWork& w : side) name_w = std::max(name_w, static_cast<int>(w.name.size()) + 2);
  std::vector<std::string> counts;  // the per-rank (or max and mean) cells, for one width that fits them all
  for (const ShardingWork& w : side)
    if (w.why_not.empty()) {
      for (std::int64_t x : w.per_rank) counts.push_back(std::to_string(x));
      counts.push_back(fixed2(mean_of(w.per_rank)));
    }
  const bool per_rank_columns = C <= kMaxRankColumns;
  const std::size_t count_w = width_of(counts, per_rank_columns ? 10 : 14);
  std::cout << "\nShardings side by side (visible pairs per (batch, head), " << describe_mask(mask, docs) << "):\n"
            << left("sharding", static_cast<std::size_t>(name_w));
  if (per_rank_columns)
    for (int r = 0; r < C; ++r) std::cout << cell("rank " + std::to_string(r), count_w);
  else
    std::cout << cell("max", count_w) << cell("mean", count_w);
  std::cout << left("max/mean", 10) << "ring\n";
  std::vector<std::string> reasons;
  for (const ShardingWork& w : side) {
    std::cout << left(w.name, static_cast<std::size_t>(name_w));
    if (!w.why_not.empty()) {
      std::cout << "n/a (" << reasons.size() + 1 << ")\n";
      reasons.push_back(w.why_not);
      continue;
    }
    if (per_rank_columns)
      for (std::int64_t x : w.per_rank) std::cout << cell(std::to_string(x), count_w);
    else
      std::cout << cell(std::to_string(max_of(w.per_rank)), count_w) << cell(fixed2(mean_of(w.per_rank)), count_w);
    std::cout << cell(fixed2(w.imbalance), 10) << fixed2(w.ring_imbalance) << "\n";
  }
  for (std::size_t i = 0; i < reasons.size(); ++i) std::cout << "(" << i + 1 << ") " << reasons[i] << "\n";
  if (C > 1 && C <= kMaxStepColumns) {
    std::cout << "\nBusiest rank over the mean, per ring step:\n" << left("sharding", static_cast<std::size_t>(name_w));
    for (int i = 0; i < C; ++i) std::cout << left("step " + std::to_string(i), 8);
    std::cout << "\n";
    for (const ShardingWork& w : side) {
      if (!w.why_not.empty()) continue;
      std::cout << left(w.name, static_cast<std::size_t>(name_w));
      for (double x : step_imbalances(w.steps)) std::cout << cell(step_imbalance_text(x), 8);
      std::cout << "\n";
    }
  }

  // 5. The grid, where its cells are few enough to draw.
  std::int64_t cell = grid_cell(L, mask);
  if (S % (2 * C) == 0) cell = std::gcd(cell, L.chunk_len());
  if (S / cell <= kMaxGridCells) {
    if (notebook)
      std::cout << "\nCausal grid (rows: query chunks, columns: key chunks):\n\n"
                << draw_grid(mask_grid(L, mask, cell)) << grid_legend("owns the query chunk", false, "");
    else
      std::cout << "\nGrid under the mask (rows: query cells, columns: key cells, " << cell << " tokens each):\n\n"
                << draw_grid(mask_grid(L, mask, cell)) << grid_legend("owns the query cell", false, "", true);
  }
  return 0;
}

}  // namespace
CPSIM_COMMAND(layout, "which positions each rank owns, the work under the mask, and every sharding compared",
              cmd_layout);
}  // namespace cpsim::cli
