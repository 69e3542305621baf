#include "sim/strategies/heads_exchange.hpp"

#include "sim/core/error.hpp"

namespace cpsim {

HeadsExchange::HeadsExchange(Communicator& group, Device& dev, const SeqLayout& fine, const std::vector<int>& members,
                             std::int64_t kv_heads, bool replicate_kv)
    : group_(group), dev_(dev), local_rows_(fine.local_len()), kv_heads_(kv_heads), replicate_kv_(replicate_kv) {
  if (replicate_kv && group.size() % kv_heads != 0)
    throw Error("KV replication needs the group size to be a multiple of Nkv (A=" + std::to_string(group.size()) +
                ", Nkv=" + std::to_string(kv_heads) + ")");
  const int A = group.size();
  if (members.empty() || static_cast<int>(members.size()) != A || members.front() % A != 0)
    throw Error("an A2A group is A consecutive ranks starting at a multiple of A");
  // The group's rows: what its rank owns in the layout of C/A groups (ascending; the members' rows interleaved).
  group_positions_ = fine.grouped(A).positions(members.front() / A);
  // Each progression of a member's rows lands on a progression of the group's rows.
  for (int m : members) {
    std::vector<Run> runs;
    for_each_progression(fine.positions(m),
                         [&](std::int64_t row, std::int64_t first, std::int64_t n, std::int64_t step) {
                           const std::int64_t at = group_positions_.lower_bound(first);
                           const std::int64_t every = n > 1 ? group_positions_.lower_bound(first + step) - at : 1;
                           if (group_positions_.at(at + (n - 1) * every) != first + (n - 1) * step)
                             throw Error("a member's rows do not fall on a progression of its group's rows");
                           runs.push_back(Run{row, at, n, every});
                         });
    runs_.push_back(std::move(runs));
  }
}

Buffer HeadsExchange::seq_to_heads(const Buffer& x, const std::string& name) const {
  const int A = group_.size();
  const Dims d = x.dims();  // x: [B, s, N, D]
  const std::int64_t nh = d.n / A;
  // 1. Pack: chunk p (batches [pB, (p+1)B)) holds the heads member p will own.   send: [A*B, s, N/A, D]
  const BufferUse exchanged = A > 1 ? BufferUse::message : BufferUse::work;  // send and recv: sent as they are
  Buffer send = dev_.alloc({A * d.b, d.s, nh, d.d}, x.dtype(), Layout::bsnd, name + ".a2a_send", exchanged);
  for (int p = 0; p < A; ++p) dev_.copy(View(send).batches(p * d.b, d.b), View(x).heads(p * nh, nh));
  // 2. Exchange: chunk p goes to member p; chunk p received holds member p's rows.   recv: [A*B, s, N/A, D]
  Buffer recv = dev_.alloc(send.dims(), x.dtype(), Layout::bsnd, name + ".a2a_recv", exchanged);
  group_.all_to_all(send.data(), recv.data(), send.bytes() / static_cast<std::size_t>(A));
  // 3. Unpack every member's runs into sequence order.   y: [B, A*s, N/A, D]
  Buffer y = dev_.alloc({d.b, A * d.s, nh, d.d}, x.dtype(), Layout::bsnd, name);
  for (int p = 0; p < A; ++p)
    for (const Run& r : runs_[p])
      dev_.copy(View(y).strided_rows(r.group_row, r.len, r.group_step),
                View(recv).batches(p * d.b, d.b).rows(r.local_row, r.len));
  return y;
}

Buffer HeadsExchange::heads_to_seq(const Buffer& y, const std::string& name) const {
  const int A = group_.size();
  const Dims d = y.dims();  // y: [B, A*s, N/A, D]
  const std::int64_t s = local_rows_;
  // 1. Pack: chunk p holds member p's rows (its runs, in its local order).   send: [A*B, s, N/A, D]
  const BufferUse exchanged = A > 1 ? BufferUse::message : BufferUse::work;
  Buffer send = dev_.alloc({A * d.b, s, d.n, d.d}, y.dtype(), Layout::bsnd, name + ".a2a_send", exchanged);
  for (int p = 0; p < A; ++p)
    for (const Run& r : runs_[p])
      dev_.copy(View(send).batches(p * d.b, d.b).rows(r.local_row, r.len),
                View(y).strided_rows(r.group_row, r.len, r.group_step));
  // 2. Exchange: chunk p received holds my rows for member p's heads.
  Buffer recv = dev_.alloc(send.dims(), y.dtype(), Layout::bsnd, name + ".a2a_recv", exchanged);
  group_.all_to_all(send.data(), recv.data(), send.bytes() / static_cast<std::size_t>(A));
  // 3. Unpack the head groups side by side.   x: [B, s, N, D]
  Buffer x = dev_.alloc({d.b, s, A * d.n, d.d}, y.dtype(), Layout::bsnd, name);
  for (int p = 0; p < A; ++p) dev_.copy(View(x).heads(p * d.n, d.n), View(recv).batches(p * d.b, d.b));
  return x;
}

HeadsExchange::Heads HeadsExchange::to_heads(const Buffer& q, const Buffer& k, const Buffer& v) const {
  return Heads{seq_to_heads(q, "q_heads"), kv_to_heads(k, "k"), kv_to_heads(v, "v")};
}

LocalGrads HeadsExchange::grads_to_seq(const Buffer& dq, const Buffer& dk, const Buffer& dv) const {
  LocalGrads g{heads_to_seq(dq, "dq"), heads_to_seq(dk, "dk"), heads_to_seq(dv, "dv")};
  if (replicate_kv_) {
    g.dk = sum_replicas(g.dk, "dk");
    g.dv = sum_replicas(g.dv, "dv");
  }
  return g;
}

Buffer HeadsExchange::kv_to_heads(const Buffer& kv, const std::string& name) const {
  if (!replicate_kv_) return seq_to_heads(kv, name + "_heads");
  const int A = group_.size();
  const Dims d = kv.dims();  // kv: [B, s, Nkv, D] -> rep: [B, s, A, D], head j = KV head j Nkv / A
  Buffer rep = dev_.alloc({d.b, d.s, A, d.d}, kv.dtype(), Layout::bsnd, name + "_rep");
  for (int j = 0; j < A; ++j) dev_.copy(View(rep).heads(j, 1), View(kv).heads(j * d.n / A, 1));
  return seq_to_heads(rep, name + "_heads");
}

Buffer HeadsExchange::sum_replicas(const Buffer& rep, const std::string& name) const {
  const Dims d = rep.dims();  // rep: [B, s, A, D] -> [B, s, Nkv, D]: dkv[h] = sum of the replicas j with j Nkv / A = h
  Buffer out = dev_.alloc({d.b, d.s, kv_heads_, d.d}, rep.dtype(), Layout::bsnd, name);
  for (std::int64_t j = 0; j < d.n; ++j) dev_.add(View(out).heads(j * kv_heads_ / d.n, 1), View(rep).heads(j, 1));
  return out;
}

}  // namespace cpsim
