#include "sim/comm/launch_support.hpp"

#include <cstdlib>

namespace cpsim {

RankFailure rank_failure(int rank, const std::string& what) {
  const std::optional<Decoded> d = decoded(what);  // a message sent as encoded() makes it, its fixes apart
  const std::string& text = d ? d->constraint : what;
  std::string own = text;
  for (const std::string& prefix : {"rank " + std::to_string(rank) + ": ", "rank " + std::to_string(rank) + " "})
    if (text.rfind(prefix, 0) == 0) {
      own = text.substr(prefix.size());
      break;
    }
  return d ? RankFailure(rank, own, d->fix, d->none) : RankFailure(rank, own);
}

std::vector<RankOutcome> fresh_outcomes(int n, bool tracing) {
  const auto epoch = Recorder::Clock::now();
  std::vector<RankOutcome> out(static_cast<std::size_t>(n));
  for (int r = 0; r < n; ++r) {
    out[r].rank = r;
    out[r].stats = Recorder(r, tracing);
    out[r].stats.set_epoch(epoch);
  }
  return out;
}

void put_outcome(ByteWriter& w, const std::string& result, const Recorder& rec) {
  w.put(result);
  rec.serialize(w);
}

RankOutcome get_outcome(int rank, ByteReader& rd) {
  RankOutcome o;
  o.rank = rank;
  rd.get(o.result);
  o.stats = Recorder::deserialize(rd);
  return o;
}

int env_int(std::initializer_list<const char*> names) {
  for (const char* name : names)
    if (const char* v = std::getenv(name); v != nullptr && *v != '\0') {
      char* end = nullptr;
      const long x = std::strtol(v, &end, 10);
      if (end != v && *end == '\0' && x >= 0 && x < (1L << 30)) return static_cast<int>(x);
    }
  return -1;
}

}  // namespace cpsim
