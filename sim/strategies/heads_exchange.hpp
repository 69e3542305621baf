// The all-to-all that transposes which dimension is distributed (Ulysses, and the A2A half of the hybrid).
//
// A group of A ranks holds A disjoint sets of rows with all N heads each. seq_to_heads gives every member all of
// the group's rows for N/A heads; heads_to_seq is its inverse:
//   seq_to_heads: [B, s, N, D] -> [B, A*s, N/A, D]   (rows: the group's positions, ascending)
//   heads_to_seq: [B, A*s, N/A, D] -> [B, s, N, D]
// Each is one all_to_all: member p's chunk holds the heads [p N/A, (p+1) N/A) of the sender's rows, so a rank
// sends and receives (A-1)/A of its data.
#pragma once
#include <string>
#include <vector>

#include "sim/comm/communicator.hpp"
#include "sim/kernels/device.hpp"
#include "sim/layout/layout.hpp"

namespace cpsim {

class HeadsExchange {
 public:
  // group: the A2A communicator; member p of the group is rank members[p] of `fine`.
  HeadsExchange(Communicator& group, Device& dev, const SeqLayout& fine, const std::vector<int>& members);

  Buffer seq_to_heads(const Buffer& x, const std::string& name) const;
  Buffer heads_to_seq(const Buffer& y, const std::string& name) const;
  const Positions& group_positions() const { return group_positions_; }
  int size() const { return group_.size(); }

 private:
  struct Run {
    std::int64_t local_row;  // first row in the member's local rows
    std::int64_t group_row;  // first row in the group's ascending rows
    std::int64_t len;
  };
  Communicator& group_;
  Device& dev_;
  std::int64_t local_rows_ = 0;
  std::vector<std::vector<Run>> runs_;  // per member
  Positions group_positions_;
};

// KV replication for A > Nkv (the handbook chapter's GQA exercise): [B, s, Nkv, D] -> [B, s, A, D], head j = KV
// head j Nkv / A, so that after the A2A every member holds the one KV head its query heads read.
Buffer replicate_kv_heads(Device& dev, const Buffer& kv, int A, const std::string& name);
// Backward of the replication: sums the replicas' gradients, [B, s, A, D] -> [B, s, Nkv, D].
Buffer sum_kv_replicas(Device& dev, const Buffer& dkv, std::int64_t kv_heads, const std::string& name);

}  // namespace cpsim
