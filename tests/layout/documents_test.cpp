// --docs sample:K: lengths drawn from a document-length distribution (MagiAttention's, shipped, or one's own).
#include "sim/layout/documents.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <numeric>
#include <sstream>
#include <string>

#include "sim/core/error.hpp"

using namespace cpsim;

namespace {

std::string read_all(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

std::int64_t sum(const std::vector<std::int64_t>& v) { return std::accumulate(v.begin(), v.end(), std::int64_t{0}); }

}  // namespace

TEST_CASE("the shipped distribution reads as one range and count per line after the header, ranges ascending") {
  const std::string csv = read_all(shipped_length_distribution());
  REQUIRE(!csv.empty());
  const std::vector<std::int64_t> d = parse_length_distribution(csv, "shipped");
  const auto lines = std::count(csv.begin(), csv.end(), '\n');
  CHECK(static_cast<std::int64_t>(d.size()) == 3 * (lines - 1));  // a header, then a range per line
  for (std::size_t r = 0; r + 3 < d.size(); r += 3) CHECK(d[r + 1] < d[r + 3]);  // [lo, hi] ascending, disjoint
}

TEST_CASE("sample:K draws K lengths summing to S in multiples of 2C, the same for the same seed") {
  for (int C : {1, 2, 4, 8}) {
    DocSpec spec = parse_docs("sample:8");
    spec.seed = 3;
    const std::int64_t S = 256 * C;
    const Documents d = resolve_documents(spec, S, C);
    REQUIRE(d.count() == 8);
    CHECK(d.total() == S);
    for (std::int64_t L : d.lengths) {
      CHECK(L % (2 * C) == 0);
      CHECK(L >= 2 * C);
    }
    CHECK(resolve_documents(spec, S, C).lengths == d.lengths);
  }
  DocSpec a = parse_docs("sample:16"), b = a;
  a.seed = 1;
  b.seed = 2;
  CHECK(resolve_documents(a, 1 << 16, 4).lengths != resolve_documents(b, 1 << 16, 4).lengths);
}

TEST_CASE("sample:K:FILE draws from one's own distribution: one length only gives equal documents") {
  const std::string path = "cpsim_documents_test.csv";
  {
    std::ofstream out(path);
    out << "range,number\n\"[100, 100]\",7\n\"[1, 50]\",0\n";
  }
  DocSpec spec = parse_docs("sample:4:" + path);
  std::remove(path.c_str());
  CHECK(spec.distribution_file == path);
  const Documents d = resolve_documents(spec, 800, 1);
  CHECK(d.lengths == std::vector<std::int64_t>{200, 200, 200, 200});
  CHECK(sum(d.lengths) == 800);
}

TEST_CASE("a distribution line that is not a range and a count is refused with its line number") {
  CHECK_THROWS_WITH_AS(parse_length_distribution("h\n\"[1, 5]\",x\n", "mine.csv"),
                       doctest::Contains("mine.csv line 2 is not a range and a count"), UsageError);
  CHECK_THROWS_WITH_AS(parse_length_distribution("h\n\"[1, 5]\",0\n", "mine.csv"),
                       doctest::Contains("holds no document"), UsageError);
  CHECK_THROWS_WITH_AS(parse_docs("sample:0"), doctest::Contains("K >= 1 after sample:"), UsageError);
  CHECK_THROWS_AS(parse_docs("sample:2:/no/such/file.csv"), UsageError);
  DocSpec spec = parse_docs("sample:9");
  CHECK_THROWS_WITH_AS(resolve_documents(spec, 64, 4), doctest::Contains("needs at least 8 tokens per document"),
                       UsageError);
}

TEST_CASE("document lengths take the size suffixes the other flags take: 4K is 4096") {
  CHECK(parse_docs("4K,512,1M").lengths == std::vector<std::int64_t>{4096, 512, 1 << 20});
  CHECK_THROWS_WITH_AS(parse_docs("4X,8"), doctest::Contains("'4X' is not a document length"), UsageError);
  CHECK_THROWS_WITH_AS(parse_docs("8,0"), doctest::Contains("'0' is not a document length"), UsageError);
  // 9000000 x 2^40 fits 64 bits unsigned, not a signed length (past 2^63 - 1)
  CHECK_THROWS_WITH_AS(parse_docs("8,9000000T"), doctest::Contains("is not a document length"), UsageError);
}
