// The all-to-all that transposes which dimension is distributed (Ulysses, and the A2A half of the hybrid).
//
// A group of A ranks holds A disjoint sets of rows with all N heads each. seq_to_heads gives every member all of
// the group's rows for N/A heads; heads_to_seq is its inverse:
//   seq_to_heads: [B, s, N, D] -> [B, A*s, N/A, D]   (rows: the group's positions, ascending)
//   heads_to_seq: [B, A*s, N/A, D] -> [B, s, N, D]
// Each is one all_to_all: member p's chunk holds the heads [p N/A, (p+1) N/A) of the sender's rows, so a rank
// sends and receives (A-1)/A of its data.
//
// KV replication (A > Nkv, --kv-replicate; the exercise in the ring-attention blog post): before their all-to-all,
// k and v become [B, s, A, D] with head j = KV head j Nkv / A, so that every member holds the one KV head its query
// heads read; the K and V all-to-alls then carry A/Nkv times the bytes, and the backward sums the replicas' dK/dV.
// to_heads and grads_to_seq do this, so a strategy never sees the replicas.
#pragma once
#include <string>
#include <vector>

#include "sim/comm/communicator.hpp"
#include "sim/kernels/device.hpp"
#include "sim/layout/layout.hpp"
#include "sim/strategies/strategy.hpp"

namespace cpsim {

class HeadsExchange {
 public:
  // group: the A2A communicator; member p of the group is rank members[p] of `fine` (rank_range(g A, A) for group
  // g). Its rows are fine.grouped(A).positions(g): contiguous or zigzag chunks, or, with striped sharding, the
  // members' rows interleaved. replicate_kv: copy each of the kv_heads KV heads onto A/Nkv members before the
  // all-to-all (Problem::replicates_kv); kv_heads matters only then.
  HeadsExchange(Communicator& group, Device& dev, const SeqLayout& fine, const std::vector<int>& members,
                std::int64_t kv_heads = 0, bool replicate_kv = false);

  // q, k, v: [B, s, N, D] -> [B, A*s, N/A, D] each (k and v replicated first when asked): three all-to-alls.
  struct Heads {
    Buffer q, k, v;
  };
  Heads to_heads(const Buffer& q, const Buffer& k, const Buffer& v) const;
  // dq, dk, dv: [B, A*s, N/A, D] -> [B, s, N, D] (the replicas' dK/dV summed back to Nkv heads): three all-to-alls.
  LocalGrads grads_to_seq(const Buffer& dq, const Buffer& dk, const Buffer& dv) const;

  // One tensor either way (out, dout).
  Buffer seq_to_heads(const Buffer& x, const std::string& name) const;
  Buffer heads_to_seq(const Buffer& y, const std::string& name) const;

  const Positions& group_positions() const { return group_positions_; }
  int size() const { return group_.size(); }
  int member() const { return group_.rank(); }

 private:
  struct Run {  // len rows of a member: local rows [local_row, +len) are group rows group_row, + group_step, ...
    std::int64_t local_row;  // first row in the member's local rows
    std::int64_t group_row;  // first row in the group's ascending rows
    std::int64_t len;
    std::int64_t group_step;  // 1, except where the members' rows interleave (striped sharding)
  };
  Buffer kv_to_heads(const Buffer& kv, const std::string& name) const;    // replicated first when asked
  Buffer sum_replicas(const Buffer& rep, const std::string& name) const;  // [B, s, A, D] -> [B, s, Nkv, D]

  Communicator& group_;
  Device& dev_;
  std::int64_t local_rows_ = 0, kv_heads_ = 0;
  bool replicate_kv_ = false;
  std::vector<std::vector<Run>> runs_;  // per member
  Positions group_positions_;
};

}  // namespace cpsim
