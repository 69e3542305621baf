// cpsim layout: which chunks and positions each rank owns, the causal grid, and the per-rank work table.
#include <iomanip>
#include <iostream>
#include <sstream>

#include "sim/cli/cli.hpp"
#include "sim/core/json.hpp"
#include "sim/layout/grid.hpp"
#include "sim/layout/work_table.hpp"

namespace cpsim::cli {
namespace {

std::string spans_text(const std::vector<Span>& spans) {
  std::string s;
  for (const Span& sp : spans) s += (s.empty() ? "" : ", ") + ("[" + std::to_string(sp.lo) + ", " + std::to_string(sp.hi) + ")");
  return s;
}

std::string chunks_text(const std::vector<int>& chunks) {
  std::string s;
  for (int c : chunks) s += (s.empty() ? "" : ",") + std::to_string(c);
  return s;
}

int cmd_layout(const std::vector<std::string>& args) {
  po::options_description desc("cpsim layout: who owns which tokens, and the per-rank causal work");
  int ranks = 4;
  std::int64_t seq = 16;
  std::string sharding = "zigzag";
  desc.add_options()("ranks,C", po::value(&ranks)->default_value(4), "context-parallel ranks C")(
      "seq,S", po::value(&seq)->default_value(16), "sequence length S (tokens)")(
      "sharding", po::value(&sharding)->default_value("zigzag"), "zigzag | contiguous")(
      "json", "print one JSON object instead of the tables");
  po::variables_map vm;
  if (!parse("layout", desc, args, vm)) return 0;
  const SeqLayout L(ranks, seq, parse_sharding(sharding));
  const bool grid_ok = seq % (2 * ranks) == 0;
  const auto pairs = visible_pairs_per_rank(L);
  const auto ring = ring_blocks(L);
  std::vector<double> blocks = grid_ok ? chunk_blocks(L) : std::vector<double>{};
  std::vector<double> pairs_d(pairs.begin(), pairs.end());

  if (vm.count("json")) {
    JsonWriter j;
    j.begin_object();
    j.key("config").begin_object().key("ranks").value(ranks).key("seq").value(seq).key("sharding").value(sharding);
    j.key("chunk_len").value(grid_ok ? L.chunk_len() : std::int64_t{0}).end_object();
    j.key("ranks").begin_array();
    for (int r = 0; r < ranks; ++r) {
      j.begin_object().key("rank").value(r);
      if (grid_ok) j.key("chunks").array(L.chunks(r));
      j.key("positions").begin_array();
      for (const Span& sp : L.spans(r)) j.begin_array().value(sp.lo).value(sp.hi).end_array();
      j.end_array();
      if (grid_ok) j.key("chunk_blocks").value(blocks[r]);
      j.key("visible_pairs").value(pairs[r]).key("ring_blocks").value(ring[r]).end_object();
    }
    j.end_array();
    j.key("imbalance").value(imbalance(pairs_d));
    j.end_object();
    std::cout << j.str() << "\n";
    return 0;
  }

  std::cout << "Layout: S=" << seq << " tokens over C=" << ranks << " ranks, " << sharding << " sharding";
  if (grid_ok) std::cout << " (2C=" << 2 * ranks << " chunks of t=" << L.chunk_len() << ")";
  std::cout << "\n\n";
  std::cout << "rank  chunks  positions                  chunk blocks  visible pairs  ring blocks\n";
  for (int r = 0; r < ranks; ++r) {
    std::ostringstream pos;
    pos << spans_text(L.spans(r));
    std::cout << std::left << std::setw(6) << r << std::setw(8) << (grid_ok ? chunks_text(L.chunks(r)) : "-")
              << std::setw(27) << pos.str() << std::setw(14)
              << (grid_ok ? (std::ostringstream() << blocks[r]).str() : "-") << std::setw(15) << pairs[r] << ring[r]
              << "\n";
  }
  std::cout << "chunk blocks: t x t blocks, a diagonal one counting 1/2; visible pairs: query-key pairs the causal\n"
               "mask lets through, per head; ring blocks: the ring's attention calls (a rank's queries x one rank's keys)\n";
  std::cout << std::right << "\nimbalance (max/mean visible pairs): " << std::fixed << std::setprecision(2)
            << imbalance(pairs_d) << "\n";
  if (grid_ok && 2 * ranks <= 32) {
    std::cout << "\nCausal grid (rows: query chunks, columns: key chunks):\n\n"
              << draw_grid(owner_grid(L)) << grid_legend("owns the query chunk", false, "");
  }
  return 0;
}

}  // namespace
CPSIM_COMMAND(layout, "which chunks and positions each rank owns, and the per-rank work", cmd_layout);
}  // namespace cpsim::cli
