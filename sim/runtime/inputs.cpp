#include "sim/runtime/inputs.hpp"

#include <algorithm>

#include "sim/core/random.hpp"
#include "sim/kernels/host_io.hpp"

namespace cpsim {

namespace {

// The pieces of a [batch, seq, row_elems] tensor that the rows `spans` of every batch make, in local order: piece
// (b, span) holds stream elements [(b seq + lo) row_elems, (b seq + hi) row_elems).
struct Piece {
  std::uint64_t first;  // its first stream element
  std::size_t count;    // its elements
};
std::vector<Piece> pieces(std::int64_t batch, std::int64_t seq, std::int64_t row_elems,
                          const std::vector<Span>& spans) {
  std::vector<Piece> out;
  for (std::int64_t b = 0; b < batch; ++b)
    for (const Span& sp : spans)
      out.push_back({static_cast<std::uint64_t>((b * seq + sp.lo) * row_elems),
                     static_cast<std::size_t>((sp.hi - sp.lo) * row_elems)});
  return out;
}

// Local elements [first, first + count) of the tensor the pieces make, rounded to dtype, into out.
void make_local(std::uint64_t seed, Input which, const std::vector<Piece>& ps, DType dtype, std::size_t first,
                std::size_t count, double* out) {
  std::size_t start = 0;  // local index of the piece's first element
  for (const Piece& pc : ps) {
    if (count == 0) return;
    if (first < start + pc.count) {
      const std::size_t skip = first - start, n = std::min(count, pc.count - skip);
      rounded_normals(seed, static_cast<std::uint64_t>(which), pc.first + skip, n, dtype, out);
      out += n;
      first += n;
      count -= n;
    }
    start += pc.count;
  }
}

// The rows at `positions` (in their order) of batch 0..batch-1 of a [batch, seq, row_elems] tensor, rounded to dtype.
std::vector<double> seeded_rows(std::uint64_t seed, Input which, std::int64_t batch, std::int64_t seq,
                                std::int64_t row_elems, const Positions& positions, DType dtype) {
  const std::vector<Piece> ps = pieces(batch, seq, row_elems, positions.spans());
  std::size_t total = 0;
  for (const Piece& pc : ps) total += pc.count;
  std::vector<double> out(total);
  make_local(seed, which, ps, dtype, 0, total, out.data());
  return out;
}

std::int64_t row_elems(const Problem& p, Input which) {
  return (which == Input::k || which == Input::v ? p.kv_heads : p.heads) * p.head_dim;
}

}  // namespace

std::vector<double> rank_input(const Problem& p, std::uint64_t seed, Input which, int rank) {
  return seeded_rows(seed, which, p.batch, p.seq, row_elems(p, which), p.layout().positions(rank), p.dtype);
}

Buffer rank_input_buffer(Device& dev, const Problem& p, std::uint64_t seed, Input which, int rank,
                         const std::string& name, BufferUse use) {
  const SeqLayout L = p.layout();
  const std::int64_t n = which == Input::k || which == Input::v ? p.kv_heads : p.heads;
  const Buffer b = dev.alloc({p.batch, L.local_len(), n, p.head_dim}, p.dtype, Layout::bsnd, name, use);
  const std::vector<Piece> ps = pieces(p.batch, p.seq, row_elems(p, which), L.spans(rank));
  upload_made(dev, b, [&](std::size_t first, std::size_t count, double* out) {
    make_local(seed, which, ps, p.dtype, first, count, out);
  });
  return b;
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
