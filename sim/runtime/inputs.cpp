#include "sim/runtime/inputs.hpp"

#include "sim/core/random.hpp"

namespace cpsim {

namespace {

// The rows at `positions` (in their order) of batch 0..batch-1 of a [batch, seq, row_elems] tensor: row (b, pos) is
// elements [(b seq + pos) row_elems, (b seq + pos + 1) row_elems) of the stream.
std::vector<double> seeded_rows(std::uint64_t seed, Input which, std::int64_t batch, std::int64_t seq,
                                std::int64_t row_elems, const Positions& positions, DType dtype) {
  std::vector<double> out;
  out.reserve(static_cast<std::size_t>(batch * positions.size() * row_elems));
  const auto stream = static_cast<std::uint64_t>(which);
  for (std::int64_t b = 0; b < batch; ++b)
    for (const Span& sp : positions.spans()) {
      const auto first = static_cast<std::uint64_t>((b * seq + sp.lo) * row_elems);
      const auto v = normals(seed, stream, static_cast<std::size_t>((sp.hi - sp.lo) * row_elems), first);
      out.insert(out.end(), v.begin(), v.end());
    }
  for (double& x : out) x = round_to_dtype(x, dtype);
  return out;
}

std::int64_t row_elems(const Problem& p, Input which) {
  return (which == Input::k || which == Input::v ? p.kv_heads : p.heads) * p.head_dim;
}

}  // namespace

std::vector<double> rank_input(const Problem& p, std::uint64_t seed, Input which, int rank) {
  return seeded_rows(seed, which, p.batch, p.seq, row_elems(p, which), p.layout().positions(rank), p.dtype);
}

Inputs rank_inputs(const Problem& p, std::uint64_t seed, int rank, bool with_dout) {
  Inputs in;
  in.q = rank_input(p, seed, Input::q, rank);
  in.k = rank_input(p, seed, Input::k, rank);
  in.v = rank_input(p, seed, Input::v, rank);
  if (with_dout) in.dout = rank_input(p, seed, Input::dout, rank);
  return in;
}

Inputs global_inputs(const Problem& p, std::uint64_t seed, bool with_dout) {
  const Positions all = Positions::range(0, p.seq);
  auto global = [&](Input which) {
    return seeded_rows(seed, which, p.batch, p.seq, row_elems(p, which), all, p.dtype);
  };
  Inputs in;
  in.q = global(Input::q);
  in.k = global(Input::k);
  in.v = global(Input::v);
  if (with_dout) in.dout = global(Input::dout);
  return in;
}

AttentionProblem whole_problem(const Problem& p, Inputs global) {
  AttentionProblem a;
  a.q = std::move(global.q);
  a.k = std::move(global.k);
  a.v = std::move(global.v);
  a.dout = std::move(global.dout);
  a.shape = AttentionShape{p.batch, p.seq, p.seq, p.heads, p.kv_heads, p.head_dim};
  a.q_pos = a.k_pos = iota_positions(0, p.seq);
  a.mask = p.mask();
  a.scale = p.scale;
  a.padding = p.documents().padding_spans();
  return a;
}

AttentionProblem attention_problem(const AttentionShape& sh, const Mask& mask, DType dtype, std::uint64_t seed,
                                   double scale) {
  AttentionProblem p;
  p.shape = sh;
  p.mask = mask;
  p.scale = scale;
  p.q = seeded_rows(seed, Input::q, sh.B, sh.Sq, sh.Nq * sh.D, Positions::range(0, sh.Sq), dtype);
  p.k = seeded_rows(seed, Input::k, sh.B, sh.Sk, sh.Nkv * sh.D, Positions::range(0, sh.Sk), dtype);
  p.v = seeded_rows(seed, Input::v, sh.B, sh.Sk, sh.Nkv * sh.D, Positions::range(0, sh.Sk), dtype);
  p.dout = seeded_rows(seed, Input::dout, sh.B, sh.Sq, sh.Nq * sh.D, Positions::range(0, sh.Sq), dtype);
  p.q_pos = iota_positions(0, sh.Sq);
  p.k_pos = iota_positions(0, sh.Sk);
  return p;
}

}  // namespace cpsim
