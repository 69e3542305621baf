#include "sim/core/positions.hpp"

#include <algorithm>

#include "sim/core/error.hpp"

namespace cpsim {

namespace {

// One run in its simplest form: a single block, or blocks that touch, become one range of consecutive positions.
PosRun canonical(PosRun r) {
  if (r.count < 1 || r.width < 1 || r.stride < 1 || r.count % r.width != 0 || (r.width > 1 && r.stride < r.width))
    throw Error("positions: malformed run {first " + std::to_string(r.first) + ", count " + std::to_string(r.count) +
                ", stride " + std::to_string(r.stride) + ", width " + std::to_string(r.width) + "}");
  if (r.width > 1 && (r.stride == r.width || r.count == r.width)) return PosRun{r.first, r.count, 1, 1};
  if (r.count == 1) r.stride = 1;
  return r;
}

// The merged run when `next` continues `last` (same pattern, next block where the pattern puts it).
bool merge_into(PosRun& last, const PosRun& next) {
  if (last.width != next.width) return false;
  if (last.width == 1) {
    if (last.stride == 1 && next.stride == 1 && next.first == last.last() + 1) {
      last.count += next.count;
      return true;
    }
    if (last.count == 1 && next.count == 1) {  // two single positions start a progression
      last.stride = next.first - last.first;
      last.count = 2;
      return true;
    }
    const bool next_fits = next.count == 1 || next.stride == last.stride;
    if (last.count > 1 && next_fits && next.first == last.last() + last.stride) {
      last.count += next.count;
      return true;
    }
    return false;
  }
  if (next.stride == last.stride && next.first == last.first + (last.count / last.width) * last.stride) {
    last.count += next.count;
    return true;
  }
  return false;
}

std::string num(std::int64_t v) {
  return std::to_string(v);
}

}  // namespace

Positions::Positions(std::initializer_list<std::int64_t> list) {
  for (std::int64_t x : list) append(PosRun{x, 1, 1, 1});
}

Positions Positions::from_list(const std::vector<std::int64_t>& list) {
  Positions p;
  for (std::int64_t x : list) p.append(PosRun{x, 1, 1, 1});
  return p;
}

Positions Positions::range(std::int64_t first, std::int64_t count) {
  Positions p;
  if (count > 0) p.append(PosRun{first, count, 1, 1});
  return p;
}

void Positions::append(PosRun run) {
  if (run.count == 0) return;
  run = canonical(run);
  if (!runs_.empty() && run.first <= back())
    throw Error("positions must be strictly ascending (a run starting at " + num(run.first) + " follows position " +
                num(back()) + ")");
  size_ += run.count;
  if (!runs_.empty() && merge_into(runs_.back(), run)) return;
  starts_.push_back(size_ - run.count);
  runs_.push_back(run);
}

void Positions::append(const Positions& more) {
  for (const PosRun& r : more.runs_) append(r);
}

std::int64_t Positions::at(std::int64_t i) const {
  if (i < 0 || i >= size_) throw Error("positions: index " + num(i) + " out of range (size " + num(size_) + ")");
  const auto k = static_cast<std::size_t>(std::upper_bound(starts_.begin(), starts_.end(), i) - starts_.begin() - 1);
  return runs_[k].at(i - starts_[k]);
}

std::int64_t Positions::lower_bound(std::int64_t p) const {
  // The first run whose last position is >= p; inside it, the first block position >= p.
  const auto it = std::partition_point(runs_.begin(), runs_.end(), [&](const PosRun& r) { return r.last() < p; });
  if (it == runs_.end()) return size_;
  const PosRun& r = *it;
  const std::int64_t base = starts_[static_cast<std::size_t>(it - runs_.begin())];
  if (p <= r.first) return base;
  const std::int64_t off = p - r.first, block = off / r.stride, within = off % r.stride;
  return base + (within < r.width ? block * r.width + within : (block + 1) * r.width);
}

std::int64_t Positions::upper_bound(std::int64_t p) const {
  return lower_bound(p + 1);
}

Positions Positions::slice(std::int64_t first, std::int64_t count) const {
  if (first < 0 || count < 0 || first + count > size_)
    throw Error("positions slice [" + num(first) + ", " + num(first + count) + ") out of range (size " + num(size_) +
                ")");
  Positions out;
  const std::int64_t end = first + count;
  for (std::size_t k = 0; k < runs_.size() && starts_[k] < end; ++k) {
    const PosRun& r = runs_[k];
    std::int64_t a = std::max<std::int64_t>(first - starts_[k], 0);
    const std::int64_t b = std::min(end - starts_[k], r.count);
    if (a >= b) continue;
    if (r.width == 1) {
      out.append(PosRun{r.at(a), b - a, r.stride, 1});
      continue;
    }
    const std::int64_t w = r.width;
    if (a % w != 0) {  // the end of a block
      const std::int64_t e = std::min(b, (a / w + 1) * w);
      out.append(PosRun{r.at(a), e - a, 1, 1});
      a = e;
    }
    const std::int64_t whole = (b - a) / w * w;
    if (whole > 0) out.append(PosRun{r.at(a), whole, r.stride, w});
    a += whole;
    if (a < b) out.append(PosRun{r.at(a), b - a, 1, 1});  // the start of a block
  }
  return out;
}

std::vector<std::int64_t> Positions::expand() const {
  std::vector<std::int64_t> v;
  v.reserve(static_cast<std::size_t>(size_));
  for (const PosRun& r : runs_)
    for (std::int64_t i = 0; i < r.count; ++i) v.push_back(r.at(i));
  return v;
}

std::vector<Span> Positions::spans() const {
  std::vector<Span> out;
  auto add = [&](std::int64_t lo, std::int64_t hi) {
    if (!out.empty() && out.back().hi == lo)
      out.back().hi = hi;
    else
      out.push_back(Span{lo, hi});
  };
  for (const PosRun& r : runs_) {
    if (r.stride == 1) {
      add(r.first, r.first + r.count);
      continue;
    }
    for (std::int64_t b = 0; b < r.count / r.width; ++b) add(r.first + b * r.stride, r.first + b * r.stride + r.width);
  }
  return out;
}

std::string Positions::text() const {
  std::string s;
  auto put = [&](const std::string& x) { s += (s.empty() ? "" : " ") + x; };
  auto range = [](std::int64_t lo, std::int64_t hi) { return "[" + num(lo) + "," + num(hi) + ")"; };
  for (const PosRun& r : runs_) {
    if (r.stride == 1) {
      put(range(r.first, r.first + r.count));
    } else if (r.width == 1) {
      put(r.count <= 3
              ? num(r.first) + (r.count > 1 ? "," + num(r.at(1)) : "") + (r.count > 2 ? "," + num(r.at(2)) : "")
              : num(r.first) + "," + num(r.at(1)) + ",..," + num(r.last()) + " (every " + num(r.stride) + ")");
    } else {
      const std::int64_t blocks = r.count / r.width;
      put(range(r.first, r.first + r.width) + " " + range(r.at(r.width), r.at(r.width) + r.width) +
          (blocks > 2 ? " .. " + range(r.last() + 1 - r.width, r.last() + 1) : "") + " (every " + num(r.stride) + ")");
    }
  }
  return s.empty() ? "-" : s;
}

bool Positions::operator==(const Positions& o) const {
  if (size_ != o.size_) return false;
  return std::equal(begin(), end(), o.begin());
}

Positions::const_iterator& Positions::const_iterator::operator++() {
  if (++i_ == p_->runs_[run_].count) {
    ++run_;
    i_ = 0;
  }
  return *this;
}

Positions iota_positions(std::int64_t first, std::int64_t count) {
  return Positions::range(first, count);
}

Positions slice(const Positions& p, std::int64_t first, std::int64_t count) {
  return p.slice(first, count);
}

Positions concat(const Positions& a, const Positions& b) {
  Positions r = a;
  r.append(b);
  return r;
}

std::vector<Span> to_spans(const Positions& p) {
  return p.spans();
}

}  // namespace cpsim
