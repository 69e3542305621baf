// Global token positions, held as runs so that their memory does not grow with the sequence.
//
// A rank's rows are generally not one range (zigzag owns two chunks, striped every C-th token), so every kernel
// takes the global position of each row. A Positions is an ascending list of positions stored as runs:
//   PosRun{first, count, stride, width}: `count` positions in blocks of `width` consecutive ones, block b starting
//   at first + b * stride; position i is first + (i / width) * stride + i % width.
//     contiguous [8, 16)                     {8, 8, 1, 1}                 one run
//     zigzag, C=4, rank 1 of S=16: [2,4) [12,14)   {2, 2, 1, 1} {12, 2, 1, 1}   two runs
//     striped, C=4, rank 1: 1, 5, 9, 13      {1, 4, 4, 1}                 one strided run
//     the hybrid's group of A=2 striped ranks: 2,3, 6,7, ...   {2, S/2, 4, 2}  one run of blocks
//   per-document zigzag holds two runs per document, a balanced layout one run per chunk it owns.
// Positions are strictly ascending by construction (append refuses a run that does not start after the last
// position). Kernels that need one position per row expand() the rows they hold.
#pragma once
#include <boost/container/small_vector.hpp>
#include <cstdint>
#include <initializer_list>
#include <iterator>
#include <span>
#include <string>
#include <vector>

#include "sim/core/recorder.hpp"

namespace cpsim {

struct PosRun {
  std::int64_t first = 0, count = 0, stride = 1, width = 1;
  std::int64_t at(std::int64_t i) const { return first + (i / width) * stride + i % width; }
  std::int64_t last() const { return at(count - 1); }
  bool operator==(const PosRun&) const = default;
};

class Positions {
 public:
  Positions() = default;
  Positions(std::initializer_list<std::int64_t> list);  // strictly ascending values, compressed into runs
  static Positions from_list(const std::vector<std::int64_t>& list);
  static Positions range(std::int64_t first, std::int64_t count);  // [first, first + count)

  // Appends `count` positions as described by the run; merges with the last run where it continues it.
  // Throws Error when the run does not start after the last position or is malformed.
  void append(PosRun run);
  void append(const Positions& more);

  std::int64_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  std::span<const PosRun> runs() const { return {runs_.data(), runs_.size()}; }

  std::int64_t at(std::int64_t i) const;  // the i-th position: O(log runs)
  std::int64_t operator[](std::int64_t i) const { return at(i); }
  std::int64_t front() const { return runs_.front().first; }
  std::int64_t back() const { return runs_.back().last(); }
  // The index of the first position >= p (lower) or > p (upper): O(log runs).
  std::int64_t lower_bound(std::int64_t p) const;
  std::int64_t upper_bound(std::int64_t p) const;

  Positions slice(std::int64_t first, std::int64_t count) const;  // positions [first, first + count) of the list
  std::vector<std::int64_t> expand() const;                       // one value per row: O(size) memory
  std::vector<Span> spans() const;                                // maximal ranges of consecutive positions
  std::string text() const;                                       // "[0,4) [12,16)" or "1, 5, ..., 13 (step 4)"

  // Element-wise equality (two run lists may describe the same positions).
  bool operator==(const Positions& o) const;

  class const_iterator {
   public:
    using iterator_category = std::forward_iterator_tag;
    using value_type = std::int64_t;
    using difference_type = std::ptrdiff_t;
    using pointer = const std::int64_t*;
    using reference = std::int64_t;
    const_iterator() = default;
    const_iterator(const Positions* p, std::size_t run, std::int64_t i) : p_(p), run_(run), i_(i) {}
    std::int64_t operator*() const { return p_->runs_[run_].at(i_); }
    const_iterator& operator++();
    const_iterator operator++(int) {
      const_iterator t = *this;
      ++*this;
      return t;
    }
    bool operator==(const const_iterator& o) const { return run_ == o.run_ && i_ == o.i_; }

   private:
    const Positions* p_ = nullptr;
    std::size_t run_ = 0;
    std::int64_t i_ = 0;
  };
  const_iterator begin() const { return {this, 0, 0}; }
  const_iterator end() const { return {this, runs_.size(), 0}; }

 private:
  // A rank's positions are one or two runs but in a few layouts (per-document zigzag, balanced chunks): those are
  // held in place, so that the lists strategies make at every step allocate nothing.
  template <class T>
  using RunList = boost::container::small_vector<T, 2>;
  RunList<PosRun> runs_;
  RunList<std::int64_t> starts_;  // index of each run's first position
  std::int64_t size_ = 0;
};

Positions iota_positions(std::int64_t first, std::int64_t count);  // [first, first+count)
Positions slice(const Positions& p, std::int64_t first, std::int64_t count);
Positions concat(const Positions& a, const Positions& b);  // b must start after a ends
std::vector<Span> to_spans(const Positions& p);            // runs of consecutive positions

}  // namespace cpsim
