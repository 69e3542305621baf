#include "exercises/common/judge.hpp"

#include <cmath>
#include <cstdio>
#include <iostream>
#include <sstream>

#include "lessons/common/lesson.hpp"

namespace cpsim::judge {

std::string Case::name() const {
  std::ostringstream os;
  os << "C=" << C << " S=" << S << " B=" << B << " Nq=" << Nq << " Nkv=" << Nkv << " D=" << D;
  if (sharpen != 1) os << ", scores x" << sharpen;
  return os.str();
}

double Case::scale() const {
  return sharpen / std::sqrt(static_cast<double>(D));
}

RunConfig Case::config() const {
  RunConfig cfg;
  cfg.problem.ranks = C;
  cfg.problem.seq = S;
  cfg.problem.batch = B;
  cfg.problem.heads = Nq;
  cfg.problem.kv_heads = Nkv;
  cfg.problem.head_dim = D;
  cfg.problem.sharding = Sharding::zigzag;
  cfg.seed = 11 + static_cast<std::uint64_t>(C);
  return cfg;
}

int run_checks(const std::string& exercise, const std::string& file, const std::vector<NamedCheck>& checks,
               const std::string& success) {
  std::cout << "Judging " << exercise << ": " << file << "\n";
  int passed = 0;
  const int total = static_cast<int>(checks.size());
  for (const NamedCheck& c : checks) {
    const std::optional<Failure> f = c.check();
    if (!f) {
      std::cout << "  ok    " << c.name << "\n";
      ++passed;
      continue;
    }
    std::cout << "  FAIL  " << c.name << "\n"
              << "        " << f->what << "\n"
              << "        expected " << f->expected << "\n"
              << "        actual   " << f->actual << "\n"
              << lesson::wrap("hint: " + f->hint, 78, "        ") << passed << " of " << total
              << " checks passed; fix the first failure and judge again.\n";
    return 1;
  }
  std::cout << "All " << total << " checks passed: " << success << "\n";
  return 0;
}

std::string num(double v) {
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.10g", v);
  return buf;
}

std::string ints(const std::vector<int>& v) {
  std::string s = "[";
  for (std::size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
  return s + "]";
}

Buffer upload_rows(Device& dev, const SeqLayout& L, const std::vector<double>& global, std::int64_t B, std::int64_t n,
                   std::int64_t D, int rank, const char* name) {
  const auto rows = shard(L, global, B, n * D, rank);
  Buffer b = dev.alloc({B, L.local_len(), n, D}, DType::f64, Layout::bsnd, name);
  dev.upload(b, rows.data());
  return b;
}

std::vector<double> download(Device& dev, const Buffer& b) {
  std::vector<double> host(static_cast<std::size_t>(b.numel()));
  dev.download(b, host.data());
  return host;
}

std::optional<Mismatch> first_mismatch(const std::vector<double>& got, const std::vector<double>& want,
                                       const SeqLayout& L, int rank, std::int64_t B, std::int64_t n, std::int64_t D) {
  const Positions pos = L.positions(rank);
  const std::int64_t s = L.local_len(), S = L.seq();
  for (std::int64_t b = 0; b < B; ++b)
    for (std::int64_t i = 0; i < s; ++i)
      for (std::int64_t h = 0; h < n; ++h)
        for (std::int64_t d = 0; d < D; ++d) {
          const double g = got[static_cast<std::size_t>(((b * s + i) * n + h) * D + d)];
          const double w = want[static_cast<std::size_t>(((b * S + pos[i]) * n + h) * D + d)];
          if (!(std::abs(g - w) <= kTolerance))
            return Mismatch{"batch " + std::to_string(b) + ", position " + std::to_string(pos[i]) + ", head " +
                                std::to_string(h) + ", dim " + std::to_string(d),
                            w, g, i};
        }
  return std::nullopt;
}

}  // namespace cpsim::judge
