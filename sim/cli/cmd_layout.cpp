// cpsim layout: which positions each rank owns, the grid under the mask, the per-rank and per-step work, and every
// sharding side by side with its imbalance. Everything is counted by formula on runs of positions, so any S is fast.
#include <algorithm>
#include <iomanip>
#include <iostream>
#include <numeric>
#include <sstream>

#include "sim/cli/cli.hpp"
#include "sim/cli/problem_options.hpp"
#include "sim/core/error.hpp"
#include "sim/core/json.hpp"
#include "sim/layout/grid.hpp"
#include "sim/layout/work_table.hpp"

namespace cpsim::cli {
namespace {

constexpr std::int64_t kMaxJsonSpans = 4096;  // per rank: beyond this "positions" is left out ("runs" stays)
constexpr int kMaxRankColumns = 8;            // wider tables show the max and the mean instead
constexpr int kMaxStepColumns = 16;
constexpr int kMaxJsonStepRanks = 64;          // per-step tables in JSON up to this C (C x C numbers each)
constexpr std::int64_t kMaxGridCells = 32;

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

std::string pad(const std::string& s, std::size_t w) {
  return s.size() >= w ? s + " " : s + std::string(w - s.size(), ' ');
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
  const Documents docs = p.documents();
  const Mask mask = p.mask();
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
  if (!mask.plain() || !mask.causal()) std::cout << "Mask: " << mask.describe() << "\n";
  if (!docs.empty()) std::cout << "Documents: " << docs.describe() << "\n";
  std::size_t pos_w = 27;  // the positions column: as wide as its longest entry
  for (int r = 0; r < C; ++r) pos_w = std::max(pos_w, positions_text(L.positions(r)).size() + 1);
  std::cout << "\nrank  chunks  " << pad("positions", pos_w) << "chunk blocks  visible pairs  ring blocks\n";
  for (int r = 0; r < C; ++r) {
    std::cout << std::left << std::setw(6) << r << std::setw(8) << (chunk_grid ? chunks_text(L.chunks(r)) : "-")
              << pad(positions_text(L.positions(r)), pos_w) << std::setw(14)
              << (notebook ? (std::ostringstream() << blocks[r]).str() : "-") << std::setw(15) << pairs[r] << ring[r]
              << "\n";
  }
  if (notebook)
    std::cout << "chunk blocks: t x t blocks, a diagonal one counting 1/2; visible pairs: query-key pairs the causal\n"
                 "mask lets through, per head; ring blocks: the ring's attention calls (a rank's queries x one rank's "
                 "keys)\n";
  else
    std::cout << "chunk blocks: only for the causal mask on 2C chunks; visible pairs: query-key pairs the mask lets\n"
                 "through, per head; ring blocks: the ring's attention calls (a rank's queries x one rank's keys)\n";
  std::cout << std::right << "\nimbalance (max/mean visible pairs): " << fixed2(imbalance(pairs)) << "\n";

  // 2. The ring's steps: at step i rank r holds the K/V of rank r - i; each step lasts as long as its busiest rank.
  if (C > 1 && C <= kMaxStepColumns) {
    std::cout << "\nWork per ring step (visible pairs per head; at step i rank r holds the K/V of rank r-i):\n"
              << "rank      ";
    for (int i = 0; i < C; ++i) std::cout << std::left << std::setw(9) << ("step " + std::to_string(i));
    std::cout << "total\n";
    for (int r = 0; r < C; ++r) {
      std::cout << std::left << std::setw(10) << r;
      for (std::int64_t x : steps[r]) std::cout << std::setw(9) << x;
      std::cout << pairs[r] << "\n";
    }
    std::cout << std::setw(10) << "max/mean";
    for (double x : step_imbalances(steps)) std::cout << std::setw(9) << fixed2(x);
    std::cout << fixed2(imbalance(pairs)) << "\n" << std::right;
  }
  if (C > 1)
    std::cout << "ring imbalance (each step's busiest rank, summed, over an even split): " << fixed2(ring_imbalance(steps))
              << "\n";

  // 3. Every sharding under the same mask (the name column as wide as the longest name).
  int name_w = 28;
  for (const ShardingWork& w : side) name_w = std::max(name_w, static_cast<int>(w.name.size()) + 2);
  std::cout << "\nShardings side by side (visible pairs per head, " << mask.describe() << "):\n"
            << std::left << std::setw(name_w) << "sharding";
  const bool per_rank_columns = C <= kMaxRankColumns;
  if (per_rank_columns)
    for (int r = 0; r < C; ++r) std::cout << std::setw(10) << ("rank " + std::to_string(r));
  else
    std::cout << std::setw(14) << "max" << std::setw(14) << "mean";
  std::cout << std::setw(10) << "max/mean" << "ring\n";
  std::vector<std::string> reasons;
  for (const ShardingWork& w : side) {
    std::cout << std::setw(name_w) << w.name;
    if (!w.why_not.empty()) {
      std::cout << "n/a (" << reasons.size() + 1 << ")\n";
      reasons.push_back(w.why_not);
      continue;
    }
    if (per_rank_columns)
      for (std::int64_t x : w.per_rank) std::cout << std::setw(10) << x;
    else
      std::cout << std::setw(14) << max_of(w.per_rank) << std::setw(14) << fixed2(mean_of(w.per_rank));
    std::cout << std::setw(10) << fixed2(w.imbalance) << fixed2(w.ring_imbalance) << "\n";
  }
  std::cout << std::right;
  for (std::size_t i = 0; i < reasons.size(); ++i) std::cout << "(" << i + 1 << ") " << reasons[i] << "\n";
  if (C > 1 && C <= kMaxStepColumns) {
    std::cout << "\nBusiest rank over the mean, per ring step:\n" << std::left << std::setw(name_w) << "sharding";
    for (int i = 0; i < C; ++i) std::cout << std::setw(8) << ("step " + std::to_string(i));
    std::cout << "\n";
    for (const ShardingWork& w : side) {
      if (!w.why_not.empty()) continue;
      std::cout << std::setw(name_w) << w.name;
      for (double x : step_imbalances(w.steps)) std::cout << std::setw(8) << fixed2(x);
      std::cout << "\n";
    }
    std::cout << std::right;
  }

  // 4. The grid, where its cells are few enough to draw.
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
