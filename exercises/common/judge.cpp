#include "exercises/common/judge.hpp"

#include <cmath>
#include <cstdio>
#include <iostream>
#include <sstream>
#include <utility>

#include "lessons/common/lesson.hpp"
#include "sim/core/bytes.hpp"
#include "sim/kernels/cpu_device.hpp"
#include "sim/os/child_process.hpp"
#include "sim/runtime/memory_need.hpp"

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
  cfg.check = true;  // every case is held against the reference
  return cfg;
}

std::vector<Case> standard_cases() {
  return {{1, 8, 1, 2, 2, 4, 1},  {2, 8, 1, 2, 2, 4, 1},   {4, 16, 1, 2, 2, 4, 1}, {3, 24, 1, 1, 1, 4, 1},
          {4, 32, 2, 4, 2, 8, 1}, {4, 16, 1, 2, 2, 4, 30}, {8, 32, 1, 1, 1, 4, 1}};
}

std::optional<Failure> run_ranks(const Case& c, const std::string& what, const RankBody& body,
                                 std::vector<RankRun>& runs) {
  LaunchOptions lo;
  lo.ranks = c.C;
  lo.tracing = true;
  lo.timeout = std::chrono::seconds(20);
  try {
    auto outcomes = launch(lo, [&](Communicator& comm) {
      CpuDevice dev(comm.recorder());
      ByteWriter w;
      w.put(body(comm, dev));
      return w.take();
    });
    runs.clear();
    for (auto& oc : outcomes) {
      ByteReader rd(oc.result);
      RankRun rr;
      rd.get(rr.tensors);
      rr.stats = std::move(oc.stats);
      runs.push_back(std::move(rr));
    }
  } catch (const std::exception& e) {
    return Failure{"running " + what, "every rank returns", e.what(),
                   "a rank threw, or waited too long: every isend needs the neighbour's matching irecv (same tag, "
                   "same size), and both requests must be waited before their buffers are reused"};
  }
  return std::nullopt;
}

std::optional<Failure> no_collectives(const Recorder& rec, const std::string& who, const std::string& hint) {
  const CommCounts& cc = rec.comm_counts();
  for (const char* coll : {"all_gather", "reduce_scatter", "all_to_all", "all_reduce"})
    if (cc.count(coll) > 0)
      return Failure{who + ", collective calls", "none (a ring only talks to its neighbours)",
                     std::string(coll) + " " + std::to_string(cc.count(coll)), hint};
  return std::nullopt;
}

namespace {
std::string at_step(int step) {
  return step < 0 ? std::string() : ", step " + std::to_string(step);
}
}  // namespace

std::optional<Failure> overlapped(const Recorder& rec, const std::string& who) {
  struct Posted {
    std::string kind;
    int peer, step;
    bool computed_beside;  // an attention call was recorded after the post
  };
  std::vector<Posted> open;  // posted, not yet waited
  const char* why =
      "start the exchange of the next K/V (isend to r+1, irecv from r-1) before this step's attention call and wait "
      "for it after: the transfer then runs while the block computes (the chapter's second exercise; lesson 10)";
  for (const TraceEvent& e : rec.events()) {
    const std::string at = at_step(e.step);
    if (e.type == TraceEvent::Type::compute && e.kind != BlockKind::skipped) {
      for (Posted& p : open) p.computed_beside = true;
    } else if (e.type == TraceEvent::Type::comm && (e.name == "send" || e.name == "recv" || e.name == "sendrecv")) {
      return Failure{who + at + ", how the K/V moves",
                     "isend and irecv started before the step's attention call, waited after it",
                     "a blocking " + e.name + " (nothing computes while it runs: no overlap)", why};
    } else if (e.type == TraceEvent::Type::comm && (e.name == "isend" || e.name == "irecv")) {
      open.push_back({e.name, e.peer, e.step, false});
    } else if (e.type == TraceEvent::Type::wait && (e.name == "isend" || e.name == "irecv")) {
      for (auto it = open.begin(); it != open.end(); ++it) {
        if (it->kind != e.name || it->peer != e.peer) continue;
        if (!it->computed_beside)
          return Failure{who + at_step(it->step) + ", the " + e.name +
                             (e.name == "isend" ? " to rank " : " from rank ") + std::to_string(e.peer),
                         "an attention call between its start and its wait",
                         "waited with no attention call beside it (no overlap)", why};
        open.erase(it);
        break;
      }
    }
  }
  return std::nullopt;
}

std::optional<Failure> no_masked_calls(const Recorder& rec, const Positions& own, std::int64_t batch_heads,
                                       const std::string& who, const std::string& hint) {
  auto owned = [&](std::int64_t p) {
    for (std::int64_t x : own)
      if (x == p) return true;
    return false;
  };
  for (const TraceEvent& e : rec.events()) {
    if (e.type != TraceEvent::Type::compute || e.kind == BlockKind::skipped) continue;
    std::int64_t rows = 0, keys = 0;
    bool diagonal = true;
    for (const Span& sp : e.q_spans) rows += sp.hi - sp.lo;
    for (const Span& sp : e.k_spans) {
      keys += sp.hi - sp.lo;
      for (std::int64_t p = sp.lo; p < sp.hi; ++p) diagonal = diagonal && owned(p);
    }
    if (diagonal || rows * keys * batch_heads == e.pairs) continue;
    return Failure{
        who + at_step(e.step) + ", " + e.name + ", query-key pairs computed (per batch and head)",
        std::to_string(e.pairs / batch_heads) + " (the visible ones)",
        std::to_string(rows * keys) + " (" + std::to_string(rows) + " rows x " + std::to_string(keys) + " keys)", hint};
  }
  return std::nullopt;
}

int run_checks(const std::string& exercise, const std::string& file, const std::vector<NamedCheck>& checks,
               const std::string& success) {
  const std::string program = "judge_" + exercise;
  const int code = lesson::guarded(program.c_str(), [&] {
    for (const NamedCheck& c : checks)
      if (c.run) check_memory(*c.run);  // 1.
    std::cout << "Judging " << exercise << ": " << file << "\n";
    int passed = 0;
    const int total = static_cast<int>(checks.size());
    for (const NamedCheck& c : checks) {
      tell_parent(c.name);  // 2.
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
  });
  // 4. The judge ends here and says so: an exit() in the learner's code (exit code 0 or not) is not a verdict.
  tell_parent_end(code);
  return code;
}

const CheckRule& rule() {
  static const CheckRule r = check_rule(DType::f64, false, false);
  return r;
}

std::string expected(double want) {
  return num(want) + " (" + rule().words + ")";
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
          if (!within(g, w, rule()))
            return Mismatch{"batch " + std::to_string(b) + ", position " + std::to_string(pos[i]) + ", head " +
                                std::to_string(h) + ", dim " + std::to_string(d),
                            w, g, i, static_cast<std::size_t>(((b * s + i) * n + h) * D + d)};
        }
  return std::nullopt;
}

}  // namespace cpsim::judge
