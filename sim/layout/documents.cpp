#include "sim/layout/documents.hpp"

#include <algorithm>
#include <charconv>
#include <limits>
#include <numeric>
#include <set>
#include <utility>

#include "sim/core/error.hpp"
#include "sim/core/random.hpp"
#include "sim/core/sizes.hpp"
#include "sim/os/input_file.hpp"

namespace cpsim {

namespace {

std::string num(std::int64_t v) {
  return std::to_string(v);
}

bool parse_int(std::string_view s, std::int64_t& out) {
  const auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
  return ec == std::errc() && p == s.data() + s.size();
}

std::int64_t round_up(std::int64_t x, std::int64_t m) {  // x + m - 1 could wrap near 2^63
  return x / m * m + (x % m != 0 ? m : 0);
}

std::string list_text(const std::vector<std::int64_t>& v, std::size_t most = 8) {
  std::string s;
  for (std::size_t i = 0; i < v.size() && i < most; ++i) s += (i ? ", " : "") + num(v[i]);
  if (v.size() > most) s += ", ...";
  return s;
}

// K lengths, multiples of `unit`, each at least one unit, summing to n * unit: K - 1 distinct cut points among the
// n - 1 inner unit boundaries, drawn by Floyd's algorithm from splitmix64 of (seed, draw).
std::vector<std::int64_t> random_lengths(std::int64_t K, std::int64_t n, std::int64_t unit, std::uint64_t seed) {
  std::set<std::int64_t> cuts;
  const std::int64_t pool = n - 1;  // cut points 1 .. n-1
  std::uint64_t draw = 0;
  for (std::int64_t j = pool - (K - 1) + 1; j <= pool; ++j) {
    const auto x = splitmix64(seed * 0x9e3779b97f4a7c15ULL + 0x646f6373ULL + draw++);  // "docs"
    const std::int64_t t = 1 + static_cast<std::int64_t>(x % static_cast<std::uint64_t>(j));
    if (!cuts.insert(t).second) cuts.insert(j);
  }
  std::vector<std::int64_t> out;
  std::int64_t prev = 0;
  for (std::int64_t c : cuts) {
    out.push_back((c - prev) * unit);
    prev = c;
  }
  out.push_back((n - prev) * unit);
  return out;
}

// K lengths drawn from the distribution (flat (lo, hi, count) triples) and scaled to n units of `unit` tokens, each
// at least one unit:
//   1. draw i: a range with probability count / all (splitmix64 of (seed, 2i)), a length uniform in it (of 2i + 1)
//   2. units_i = floor(L_i n / sum L) (at least 1), then the units left go to the largest remainders, or the units
//      over are taken from the longest documents
std::vector<std::int64_t> sampled_lengths(std::int64_t K, std::int64_t n, std::int64_t unit, std::uint64_t seed,
                                          const std::vector<std::int64_t>& dist) {
  __int128 all = 0;
  for (std::size_t r = 2; r < dist.size(); r += 3) all += dist[r];
  std::vector<std::int64_t> drawn;
  __int128 sum = 0;
  for (std::int64_t i = 0; i < K; ++i) {
    const auto mix = [&](std::int64_t k) {
      return splitmix64(seed * 0x9e3779b97f4a7c15ULL + 0x73616d70ULL + static_cast<std::uint64_t>(k));  // "samp"
    };
    __int128 pick = static_cast<__int128>(mix(2 * i) % static_cast<unsigned __int128>(all));
    std::size_t r = 0;
    while (pick >= dist[r + 2]) pick -= dist[r + 2], r += 3;
    const std::int64_t lo = std::max<std::int64_t>(1, dist[r]), hi = std::max(lo, dist[r + 1]);
    drawn.push_back(lo + static_cast<std::int64_t>(mix(2 * i + 1) % static_cast<std::uint64_t>(hi - lo + 1)));
    sum += drawn.back();
  }
  std::vector<std::int64_t> units(drawn.size());
  std::vector<std::pair<__int128, std::size_t>> rest;  // remainders, for the units left
  std::int64_t given = 0;
  for (std::size_t i = 0; i < drawn.size(); ++i) {
    const __int128 x = static_cast<__int128>(drawn[i]) * n;
    units[i] = std::max<std::int64_t>(1, static_cast<std::int64_t>(x / sum));
    rest.emplace_back(x % sum, i);
    given += units[i];
  }
  std::stable_sort(rest.begin(), rest.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
  for (std::size_t j = 0; given < n; j = (j + 1) % rest.size(), ++given) ++units[rest[j].second];
  while (given > n) {
    auto it = std::max_element(units.begin(), units.end());
    --*it;
    --given;
  }
  for (std::int64_t& u : units) u *= unit;
  return units;
}

// The tokens the listed documents make (each padded up to a multiple of two_c when pad), refused when the sum
// passes what a sequence length holds (2^63 - 1): summed in 128 bits, so the message names the true sum.
std::int64_t listed_total(const DocSpec& spec, std::int64_t two_c) {
  __int128 sum = 0;
  for (std::int64_t L : spec.lengths) sum += spec.pad ? (__int128{L} + two_c - 1) / two_c * two_c : __int128{L};
  if (sum <= std::numeric_limits<std::int64_t>::max()) return static_cast<std::int64_t>(sum);
  throw UsageError("--docs lengths" + std::string(spec.pad ? ", padded to multiples of 2C," : "") + " sum to " +
                   count_text(sum) +
                   " tokens, more than a sequence holds (at most 9223372036854775807); use shorter documents");
}

}  // namespace

std::string shipped_length_distribution() {
  return std::string(CPSIM_DATA_DIR) + "/magiattention/doc_length_distribution.csv";
}

std::vector<std::int64_t> parse_length_distribution(const std::string& csv, const std::string& source) {
  std::vector<std::int64_t> out;
  std::size_t at = 0;
  int line = 0;
  const std::string fix = "give a CSV of lines \"[lo, hi]\",count after a header line (MagiAttention's format)";
  while (at < csv.size()) {
    const std::size_t end = std::min(csv.find('\n', at), csv.size());
    std::string row = csv.substr(at, end - at);
    at = end + 1;
    if (++line == 1 || row.find_first_not_of(" \r") == std::string::npos) continue;  // the header, blank lines
    // "[lo, hi]",count,...
    std::int64_t lo = 0, hi = 0, count = 0;
    const std::size_t open = row.find('['), comma = row.find(',', open), close = row.find(']', comma);
    const std::size_t after = close == std::string::npos ? close : row.find(',', close);
    const auto trim = [](std::string_view v) {
      while (!v.empty() && v.front() == ' ') v.remove_prefix(1);
      while (!v.empty() && (v.back() == ' ' || v.back() == '\r')) v.remove_suffix(1);
      return v;
    };
    const bool ok =
        open != std::string::npos && comma != std::string::npos && close != std::string::npos &&
        after != std::string::npos && parse_int(trim(std::string_view(row).substr(open + 1, comma - open - 1)), lo) &&
        parse_int(trim(std::string_view(row).substr(comma + 1, close - comma - 1)), hi) &&
        parse_int(trim(std::string_view(row).substr(after + 1, row.find(',', after + 1) - after - 1)), count) &&
        lo >= 0 && hi >= lo && count >= 0;
    require(ok, source + " line " + num(line) + " is not a range and a count (\"[lo, hi]\",count)", fix);
    out.insert(out.end(), {lo, hi, count});
  }
  std::int64_t all = 0;
  for (std::size_t r = 2; r < out.size(); r += 3)
    require(!__builtin_add_overflow(all, out[r], &all), source + ": the counts sum past 2^63 - 1", fix);
  require(all > 0, source + " holds no document (no range with a count above 0)", fix);
  return out;
}

DocSpec parse_docs(const std::string& text) {
  DocSpec d;
  const Fix fix{{"--docs L1,L2,... (document lengths summing to S)", "--docs random:K", "--docs sample:K"}};
  if (text.rfind("sample:", 0) == 0) {
    const std::string_view rest = std::string_view(text).substr(7);
    const std::size_t colon = rest.find(':');
    require(parse_int(rest.substr(0, colon), d.sample) && d.sample >= 1,
            "--docs " + text + " needs a whole number of documents K >= 1 after sample:", fix);
    d.distribution_file = colon == std::string_view::npos ? "" : std::string(rest.substr(colon + 1));
    const std::string path = d.distribution_file.empty() ? shipped_length_distribution() : d.distribution_file;
    d.distribution = parse_length_distribution(
        read_input_file("--docs", path, "name a CSV of document-length ranges and counts"), path);
    return d;
  }
  if (text.rfind("random:", 0) == 0) {
    require(parse_int(std::string_view(text).substr(7), d.random) && d.random >= 1,
            "--docs " + text + " needs a whole number of documents K >= 1 after random:", fix);
    return d;
  }
  std::string_view rest(text);
  while (!rest.empty()) {
    const auto comma = rest.find(',');
    const std::string_view item = rest.substr(0, comma);
    const ReadSize L = read_size(item);  // 4096, 4K, 1M
    require(L.status == SizeText::ok && L.value >= 1 &&
                L.value <= static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()),
            "--docs " + text + ": '" + std::string(item) +
                "' is not a document length (a whole number >= 1, with an optional K, M, G or T: powers of 1024)",
            fix);
    d.lengths.push_back(static_cast<std::int64_t>(L.value));
    if (comma == std::string_view::npos) break;
    rest = rest.substr(comma + 1);
    require(!rest.empty(), "--docs " + text + " ends in a comma; every entry is a document length", fix);
  }
  require(!d.lengths.empty(), "--docs needs at least one document", fix);
  return d;
}

std::int64_t Documents::total() const {
  return std::accumulate(padded.begin(), padded.end(), std::int64_t{0});
}

std::int64_t Documents::padding() const {
  return total() - std::accumulate(lengths.begin(), lengths.end(), std::int64_t{0});
}

std::int64_t Documents::shortest() const {
  return lengths.empty() ? 0 : *std::min_element(lengths.begin(), lengths.end());
}

std::vector<std::int64_t> Documents::starts() const {
  std::vector<std::int64_t> s{0};
  for (std::int64_t P : padded) s.push_back(s.back() + P);
  return s;
}

std::vector<std::int64_t> Documents::mask_bounds() const {
  std::vector<std::int64_t> b{0};
  std::int64_t at = 0;
  for (std::size_t i = 0; i < lengths.size(); ++i) {
    b.push_back(at + lengths[i]);
    if (padded[i] > lengths[i]) b.push_back(at + padded[i]);
    at += padded[i];
  }
  return b;
}

std::vector<Span> Documents::padding_spans() const {
  std::vector<Span> out;
  std::int64_t at = 0;
  for (std::size_t i = 0; i < lengths.size(); ++i) {
    if (padded[i] > lengths[i]) out.push_back(Span{at + lengths[i], at + padded[i]});
    at += padded[i];
  }
  return out;
}

std::string Documents::describe() const {
  std::string s = num(count()) + (count() == 1 ? " document (" : " documents (") + list_text(lengths) +
                  (count() > 1 ? " tokens; shortest " + num(shortest()) : " tokens");
  if (padding() > 0) s += "; padded to " + list_text(padded) + ": " + num(padding()) + " padding tokens";
  return s + ")";
}

std::int64_t documents_seq(const DocSpec& spec, int ranks) {
  return listed_total(spec, 2 * static_cast<std::int64_t>(ranks));
}

Documents resolve_documents(const DocSpec& spec, std::int64_t seq, int ranks) {
  Documents d;
  if (!spec.any()) return d;
  const std::int64_t two_c = 2 * static_cast<std::int64_t>(ranks);
  if (spec.sample > 0) {
    require(!spec.pad, "--pad-docs pads listed documents; sample:K already cuts S into multiples of 2C",
            "drop --pad-docs");
    const std::int64_t unit = seq % two_c == 0 ? two_c : 1, n = seq / unit;
    require(spec.sample <= n,
            "--docs sample:" + num(spec.sample) + " needs at least " + num(unit) +
                " tokens per document (S=" + num(seq) + " holds " + num(n) + ")",
            Fix{{"--docs sample:" + num(std::max<std::int64_t>(1, n)), "a longer --seq"}});
    d.lengths = sampled_lengths(spec.sample, n, unit, spec.seed, spec.distribution);
    d.padded = d.lengths;
    return d;
  }
  if (spec.random > 0) {
    require(!spec.pad, "--pad-docs pads listed documents; random:K already cuts S into multiples of 2C",
            "drop --pad-docs");
    const std::int64_t unit = seq % two_c == 0 ? two_c : 1, n = seq / unit;
    require(spec.random <= n,
            "--docs random:" + num(spec.random) + " needs at least " + num(unit) +
                " tokens per document (S=" + num(seq) + " holds " + num(n) + ")",
            Fix{{"--docs random:" + num(std::max<std::int64_t>(1, n)), "a longer --seq"}});
    d.lengths = random_lengths(spec.random, n, unit, spec.seed);
    d.padded = d.lengths;
    return d;
  }
  d.lengths = spec.lengths;
  (void)listed_total(spec, two_c);  // refuses a sum past 2^63 - 1: every sum below then fits
  for (std::int64_t L : d.lengths) d.padded.push_back(spec.pad ? round_up(L, two_c) : L);
  const std::int64_t real = std::accumulate(d.lengths.begin(), d.lengths.end(), std::int64_t{0});
  if (spec.pad)
    require(d.total() == seq,
            "--docs with --pad-docs makes a sequence of " + num(d.total()) + " tokens (the " + num(real) +
                " listed, padded to multiples of 2C=" + num(two_c) + "), not S=" + num(seq),
            "drop --seq (S is then " + num(d.total()) + ") or change the lengths");
  else
    require(real == seq, "--docs lengths must sum to S (they sum to " + num(real) + ", S=" + num(seq) + ")",
            Fix{{"--seq " + num(real)}, "change the lengths"});
  return d;
}

Mask make_mask(bool causal, std::int64_t window, const Documents& docs) {
  return Mask(causal, window, docs.empty() ? std::vector<std::int64_t>{} : docs.mask_bounds());
}

std::string describe_mask(const Mask& mask, const Documents& docs) {
  const auto runs = static_cast<std::int64_t>(docs.padding_spans().size());
  if (runs == 0 || !mask.has_documents()) return mask.describe();
  std::string s = std::string(mask.causal() ? "causal" : "full") + ", " + num(docs.count()) +
                  (docs.count() == 1 ? " document + " : " documents + ") + num(runs) +
                  (runs == 1 ? " padding run" : " padding runs") + " masked apart";
  if (mask.window() > 0) s += ", window " + num(mask.window());
  return s;
}

}  // namespace cpsim
