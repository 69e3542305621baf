#include "sim/model/nccl_table.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <numeric>
#include <set>
#include <sstream>

#include "sim/core/error.hpp"

namespace cpsim::model {

const char* nccl_test_name(NcclTest t) {
  switch (t) {
    case NcclTest::all_gather:
      return "all_gather_perf";
    case NcclTest::all_to_all:
      return "alltoall_perf";
    case NcclTest::sendrecv:
      return "sendrecv_perf";
  }
  return "?";
}

namespace {

std::vector<std::string> tokens(const std::string& line) {
  std::istringstream in(line);
  std::vector<std::string> out;
  for (std::string t; in >> t;) out.push_back(t);
  return out;
}

bool number(const std::string& s, double& out) {
  try {
    std::size_t used = 0;
    out = std::stod(s, &used);
    return used == s.size() && std::isfinite(out);
  } catch (const std::exception&) {
    return false;
  }
}

bool digits(std::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

// One run as read: its header's facts and its rows.
struct Run {
  int first_line = 0;
  std::string program;  // from "# Collective test starting: NAME"; empty when the version prints none
  int ranks = 0;
  std::set<std::string> hosts;
  std::size_t time_col = 5, in_place_col = 0;  // size count type redop root time ...; 0: no in-place column
  struct Row {
    double size, us, in_place_us;
  };
  std::vector<Row> rows;
};

}  // namespace

std::string strip_capture(std::string_view line) {
  std::string s(line);
  s.erase(std::remove(s.begin(), s.end(), '\r'), s.end());
  // 1. Open MPI --tag-output / --timestamp-output: everything up to the first "<stdout>:" (a date, "[1,0]"), and
  //    any later tag of output written in pieces.
  for (bool first = true;; first = false) {
    std::size_t at = std::string::npos;
    for (const char* marker : {"<stdout>:", "<stderr>:"}) at = std::min(at, s.find(marker));
    if (at == std::string::npos) break;
    std::size_t from = at;
    if (first) {
      from = 0;
    } else if (at > 0 && s[at - 1] == ']') {
      const std::size_t open = s.rfind('[', at - 1);
      if (open != std::string::npos) from = open;
    }
    s.erase(from, at + 9 - from);
  }
  // 2. MPICH / Intel MPI -prepend-rank: "[0]" tokens (a bracket of digits only; device ids are hex with x or ':').
  for (std::size_t open = s.find('['); open != std::string::npos; open = s.find('[', open)) {
    const std::size_t close = s.find(']', open);
    if (close != std::string::npos && digits(std::string_view(s).substr(open + 1, close - open - 1)))
      s.erase(open, close + 1 - open);
    else
      ++open;
  }
  // 3. Slurm --label: "0: " before the line.
  const std::size_t lead = s.find_first_not_of(' ');
  if (lead != std::string::npos) {
    const std::size_t colon = s.find(':', lead);
    if (colon != std::string::npos && colon > lead && digits(std::string_view(s).substr(lead, colon - lead)) &&
        (colon + 1 == s.size() || s[colon + 1] == ' '))
      s.erase(0, std::min(s.size(), colon + 2));
  }
  return s;
}

std::vector<NcclTable> parse_nccl_runs(NcclTest test, const std::string& text, const std::string& origin) {
  const std::string fix =
      std::string("save the whole output of ") + nccl_test_name(test) + " (e.g. -b 8 -e 1G -f 2), its header included";
  // 1. Split into runs: a new one starts where a header or a rank line follows rows.
  std::vector<Run> runs(1);
  std::istringstream in(text);
  int number_of_line = 0;
  for (std::string raw; std::getline(in, raw);) {
    ++number_of_line;
    const auto tok = tokens(strip_capture(raw));
    if (tok.empty()) continue;
    Run* run = &runs.back();
    const auto fresh = [&] {
      if (!run->rows.empty()) run = &runs.emplace_back();
      if (run->first_line == 0) run->first_line = number_of_line;
    };
    if (tok[0] == "#") {
      if (tok.size() < 2) continue;
      if (tok[1] == "nccl-tests" || tok[1] == "Collective" || tok[1] == "nThread") fresh();
      if (tok[1] == "Collective" && tok.size() >= 5 && tok[2] == "test") run->program = tok[4];
      // "#  Rank  0 Group  0 Pid 1234 on host device  0 [0x18] NVIDIA H100"
      if (tok[1] == "Rank" && tok.size() > 7) {
        fresh();
        ++run->ranks;
        const auto on = std::find(tok.begin(), tok.end(), "on");
        if (on != tok.end() && on + 1 != tok.end()) run->hosts.insert(*(on + 1));
      }
      // the header naming the columns: "# size count type redop root time algbw busbw #wrong time ..."
      if (tok[1] == "size") {
        std::vector<std::size_t> times;
        for (std::size_t i = 1; i < tok.size(); ++i)
          if (tok[i] == "time" || tok[i] == "cputime") times.push_back(i - 1);
        if (!times.empty()) run->time_col = times[0];
        run->in_place_col = times.size() > 1 ? times[1] : 0;
      }
      continue;
    }
    double size = 0, us = 0, in_place = 0;
    if (!number(tok[0], size)) continue;  // a launcher's or NCCL's own line
    require(tok.size() > run->time_col && number(tok[run->time_col], us),
            origin + " line " + std::to_string(number_of_line) + " is a row of " + std::to_string(tok.size()) +
                " columns without a time in column " + std::to_string(run->time_col + 1) +
                ", where its header puts it: not a table of " + nccl_test_name(test),
            fix);
    if (run->in_place_col > 0 && tok.size() > run->in_place_col) number(tok[run->in_place_col], in_place);
    if (size <= 0 || us <= 0) continue;  // nccl-tests prints size-0 rows when the count rounds to nothing
    if (run->first_line == 0) run->first_line = number_of_line;
    run->rows.push_back({size, us, in_place});
  }
  // 2. Each run with rows is a table, named by its run when the file holds several.
  std::vector<Run> with_rows;
  for (Run& r : runs)
    if (!r.rows.empty()) with_rows.push_back(std::move(r));
  require(!with_rows.empty(), origin + " holds no nccl-tests table of two sizes or more", fix);
  std::vector<NcclTable> out;
  for (std::size_t i = 0; i < with_rows.size(); ++i) {
    Run& r = with_rows[i];
    NcclTable t;
    t.test = test;
    t.origin = with_rows.size() == 1
                   ? origin
                   : origin + ", run " + std::to_string(i + 1) + " (line " + std::to_string(r.first_line) + ")";
    if (!r.program.empty() && r.program.find(nccl_test_name(test)) == std::string::npos) {
      const std::string wrong = t.origin + " is the output of " + r.program + ", not of " + nccl_test_name(test);
      for (const auto& [other, flag] :
           {std::pair{NcclTest::sendrecv, "--sendrecv"}, std::pair{NcclTest::all_gather, "--all-gather"},
            std::pair{NcclTest::all_to_all, "--all-to-all"}})
        if (r.program.find(nccl_test_name(other)) != std::string::npos)
          throw UsageError(wrong, {Fix{{std::string(flag) + " " + origin}, "", ", or ", "give it as "}});
      throw UsageError(wrong + "; calibrate reads the output of sendrecv_perf, all_gather_perf and alltoall_perf");
    }
    require(r.rows.size() >= 2, t.origin + " holds no nccl-tests table of two sizes or more", fix);
    require(r.ranks >= 2, t.origin + " names no ranks (nccl-tests' '#  Rank N ... on HOST' lines)", fix);
    std::stable_sort(r.rows.begin(), r.rows.end(), [](const auto& a, const auto& b) { return a.size < b.size; });
    bool in_place = r.in_place_col > 0;
    for (const auto& row : r.rows) {
      t.sizes.push_back(row.size);
      t.times_us.push_back(row.us);
      t.in_place_us.push_back(row.in_place_us);
      in_place = in_place && row.in_place_us > 0;
    }
    if (!in_place) t.in_place_us.clear();
    t.ranks = r.ranks;
    t.nodes = static_cast<int>(std::max<std::size_t>(1, r.hosts.size()));
    require(t.ranks % t.nodes == 0,
            t.origin + ": " + std::to_string(t.ranks) + " ranks on " + std::to_string(t.nodes) +
                " hosts is not the same count on every node",
            "run one rank per GPU on nodes of equal size");
    out.push_back(std::move(t));
  }
  return out;
}

double busbw_factor(const NcclTable& t) {
  return t.test == NcclTest::sendrecv ? 1.0 : (t.ranks - 1.0) / t.ranks;
}

namespace {

// t = a + b x over rows [begin, end), each weighted 1 / t^2 (relative error).
RegimeFit line_fit(const std::vector<double>& x, const std::vector<double>& t, std::size_t begin, std::size_t end) {
  double sw = 0, sx = 0, sy = 0, sxx = 0, sxy = 0;
  for (std::size_t i = begin; i < end; ++i) {
    const double w = 1 / (t[i] * t[i]);
    sw += w;
    sx += w * x[i];
    sy += w * t[i];
    sxx += w * x[i] * x[i];
    sxy += w * x[i] * t[i];
  }
  const double det = sw * sxx - sx * sx;
  const double b = det > 0 ? (sw * sxy - sx * sy) / det : 0, a = (sy - b * sx) / sw;
  RegimeFit f;
  f.begin = begin;
  f.end = end;
  f.intercept_us = a;
  f.gbps = b > 0 ? 1e-3 / b : 0;
  f.line = true;
  double e = 0;
  for (std::size_t i = begin; i < end; ++i) e += std::pow((a + b * x[i]) / t[i] - 1, 2);
  f.rms = std::sqrt(e / static_cast<double>(end - begin));
  return f;
}

}  // namespace

Regimes regimes_of(const NcclTable& t, double x_per_byte) {
  const std::size_t n = t.sizes.size();
  std::vector<double> x, busbw;
  for (std::size_t i = 0; i < n; ++i) {
    x.push_back(t.sizes[i] * x_per_byte);
    busbw.push_back(busbw_factor(t) * t.sizes[i] / t.times_us[i] * 1e-3);  // GB/s
  }
  const std::size_t top = static_cast<std::size_t>(std::max_element(busbw.begin(), busbw.end()) - busbw.begin());
  require(!(n >= 3 && top == 0 && busbw[n - 1] < 0.5 * busbw[0]),
          t.origin + ": busbw falls from " + std::to_string(busbw[0]) + " GB/s at " + size_text(t.sizes[0]) + " to " +
              std::to_string(busbw[n - 1]) + " at " + size_text(t.sizes[n - 1]) +
              "; an nccl-tests table's busbw grows with size",
          "check that the file is one run's table, sizes in the first column and times in the header's");
  Regimes r;
  // 1. The floor: the LL rows.
  std::size_t floor_end = 0;
  while (floor_end < n && t.sizes[floor_end] <= kFloorMaxBytes) ++floor_end;
  if (floor_end == 1) {
    r.floor = {0, 1, t.times_us[0], 0, 0, false};
  } else if (floor_end > 1) {
    r.floor = line_fit(x, t.times_us, 0, floor_end);
    if (r.floor.gbps <= 0 || r.floor.intercept_us <= 0) {  // a flat (or noisy) floor: its weighted mean
      double sw = 0, swt = 0, e = 0;
      for (std::size_t i = 0; i < floor_end; ++i) sw += 1 / std::pow(t.times_us[i], 2), swt += 1 / t.times_us[i];
      const double mean = swt / sw;
      for (std::size_t i = 0; i < floor_end; ++i) e += std::pow(mean / t.times_us[i] - 1, 2);
      r.floor = {0, floor_end, mean, 0, std::sqrt(e / static_cast<double>(floor_end)), false};
    }
  }
  // 2. The plateau: from the first row above the floor whose busbw reaches kPlateauShare of the largest.
  if (floor_end < n) {
    const double most = *std::max_element(busbw.begin() + static_cast<std::ptrdiff_t>(floor_end), busbw.end());
    std::size_t begin = floor_end;
    while (busbw[begin] < kPlateauShare * most) ++begin;
    const bool wide = n - begin >= 3 && x[n - 1] >= 4 * x[begin];
    if (wide) r.plateau = line_fit(x, t.times_us, begin, n);
    if (!wide || r.plateau.gbps <= 0) {  // too few rows for a slope: the mean rate x / t over them
      double sum = 0, e = 0;
      for (std::size_t i = begin; i < n; ++i) sum += x[i] / t.times_us[i];
      const double mean = sum / static_cast<double>(n - begin);
      for (std::size_t i = begin; i < n; ++i) e += std::pow(x[i] / t.times_us[i] / mean - 1, 2);
      r.plateau = {begin, n, 0, mean * 1e-3, std::sqrt(e / static_cast<double>(n - begin)), false};
    }
  }
  r.switch_begin = floor_end;
  r.switch_end = r.plateau.empty() ? n : r.plateau.begin;
  return r;
}

std::string size_text(double bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  while (u < 4 && bytes >= 1024) bytes /= 1024, ++u;
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.4g %s", bytes, units[u]);
  return buf;
}

std::string rows_text(const NcclTable& t, std::size_t begin, std::size_t end) {
  if (begin >= end) return "no rows";
  return size_text(t.sizes[begin]) + ".." + size_text(t.sizes[end - 1]) + " (" + std::to_string(end - begin) +
         (end - begin == 1 ? " row)" : " rows)");
}

}  // namespace cpsim::model
