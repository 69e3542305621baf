// nccl-tests output read as captured (launcher prefixes, CRLF, several runs), and a table split into its regimes.
#include "sim/model/nccl_table.hpp"

#include <doctest/doctest.h>

#include <array>
#include <string>
#include <vector>

#include "sim/core/error.hpp"

using namespace cpsim;
using namespace cpsim::model;

namespace {

// One run of all_gather_perf on two ranks of host h: rows (size, out-of-place us, in-place us).
std::string run_text(const std::string& host, const std::vector<std::array<double, 3>>& rows) {
  std::string out =
      "# Collective test starting: all_gather_perf\n# nThread 1 nGpus 1 minBytes 8\n"
      "#  Rank  0 Group  0 Pid 1 on " +
      host +
      " device  0 [0000:18:00] NVIDIA H100\n"
      "#  Rank  1 Group  0 Pid 2 on " +
      host +
      " device  1 [0000:2a:00] NVIDIA H100\n"
      "#       size         count      type   redop    root     time   algbw   busbw #wrong     time   "
      "algbw   busbw #wrong\n";
  for (const auto& [size, us, in_place] : rows)
    out += "  " + std::to_string(static_cast<long long>(size)) + "  1  float  none  -1  " + std::to_string(us) +
           "  0.1  0.1  0  " + std::to_string(in_place) + "  0.1  0.1  0\n";
  return out;
}

}  // namespace

TEST_CASE("a captured line loses its launcher's prefixes and its CR, and nothing of nccl-tests' own text") {
  const std::string row = "     1048576        262144     float    none      -1    27.76   37.78   33.06      0";
  CHECK(strip_capture("[1,0]<stdout>:" + row + "\r") == row);
  CHECK(strip_capture("Mon Dec  7 10:00:00 2026[1,0]<stdout>:" + row) == row);
  CHECK(strip_capture("Mon Dec  7 10:00:00 2026<stdout>:" + row) == row);
  CHECK(strip_capture("0: " + row) == row);
  // Output written in pieces, each tagged (MPICH's -prepend-rank, Open MPI's tags mid-line).
  CHECK(strip_capture("[0]   1048576  262144  float  none  -1[0]  27.76  37.78") ==
        "   1048576  262144  float  none  -1  27.76  37.78");
  CHECK(strip_capture("[1,0]<stdout>:  1024  256[1,0]<stdout>:  9.5") == "  1024  256  9.5");
  // Device ids in brackets stay.
  const std::string rank = "#  Rank  0 Group  0 Pid   4349 on host device  0 [0x01] NVIDIA A100 [0000:18:00]";
  CHECK(strip_capture(rank) == rank);
}

TEST_CASE("every run of a file is a table of its own, named by its run, with both time columns") {
  const std::string text = run_text("a", {{{1024, 10, 9.9}, {2048, 11, 10.9}}}) +
                           run_text("b", {{{4096, 20, 19}, {8192, 30, 29}, {16384, 40, 39}}});
  for (const bool crlf : {false, true}) {
    std::string t = text;
    if (crlf)
      for (std::size_t at = t.find('\n'); at != std::string::npos; at = t.find('\n', at + 2)) t.insert(at, "\r");
    const auto tables = parse_nccl_runs(NcclTest::all_gather, t, "ag.txt");
    REQUIRE(tables.size() == 2);
    CHECK(tables[0].origin == "ag.txt, run 1 (line 1)");
    CHECK(tables[1].origin == "ag.txt, run 2 (line 8)");
    CHECK(tables[0].ranks == 2);
    CHECK(tables[1].sizes == std::vector<double>{4096, 8192, 16384});
    CHECK(tables[1].times_us == std::vector<double>{20, 30, 40});
    CHECK(tables[1].in_place_us == std::vector<double>{19, 29, 39});
  }
  CHECK(parse_nccl_runs(NcclTest::all_gather, run_text("a", {{{1024, 10, 9}, {2048, 11, 10}}}), "one.txt")[0].origin ==
        "one.txt");
  CHECK_THROWS_WITH_AS(
      parse_nccl_runs(NcclTest::sendrecv, text, "ag.txt"),
      doctest::Contains("ag.txt, run 1 (line 1) is the output of all_gather_perf, not of sendrecv_perf"), UsageError);
}

TEST_CASE("a real-shaped table splits into the LL floor, the protocol switch and the busbw plateau") {
  // t = 10 + x / 50 GB/s up to 64 KiB (LL), then the faster of 27 + x / 270 and 32 + x / 300 (LL128, Simple).
  NcclTable t;
  t.test = NcclTest::all_gather;
  t.origin = "shaped";
  t.ranks = 8;
  t.nodes = 1;
  const double per_byte = 7.0 / 8;
  for (double size = 1024; size <= (1 << 30); size *= 2) {
    const double x = size * per_byte;
    t.sizes.push_back(size);
    t.times_us.push_back(size <= 65536 ? 10 + x / 50e3 : std::min(27 + x / 270e3, 32 + x / 300e3));
  }
  const Regimes r = regimes_of(t, per_byte);
  CHECK(r.floor.begin == 0);
  CHECK(t.sizes[r.floor.end - 1] == 65536);
  CHECK(r.floor.intercept_us == doctest::Approx(10).epsilon(1e-9));
  CHECK(r.floor.gbps == doctest::Approx(50).epsilon(1e-9));
  CHECK(r.switch_begin == r.floor.end);
  CHECK(r.switch_end == r.plateau.begin);
  // The plateau starts where busbw first reaches 80% of its largest; its slope is Simple's rate within 1%.
  const double busbw_first = per_byte * t.sizes[r.plateau.begin] / t.times_us[r.plateau.begin] / 1e3;
  CHECK(busbw_first >= kPlateauShare * 300 * 0.99);
  CHECK(r.plateau.line);
  CHECK(r.plateau.gbps == doctest::Approx(300).epsilon(0.01));
  CHECK(rows_text(t, r.floor.begin, r.floor.end) == "1 KiB..64 KiB (7 rows)");
}
