// The seeded inputs: their definition, each rank's shard, and their values pinned bit for bit.
#include "sim/runtime/inputs.hpp"

#include <doctest/doctest.h>

#include <cstdint>
#include <cstring>
#include <vector>

#include "sim/core/random.hpp"
#include "sim/kernels/cpu_device.hpp"
#include "sim/kernels/host_io.hpp"
#include "sim/layout/layout.hpp"

using namespace cpsim;

namespace {

Problem problem(int C, Sharding sh, DType dtype, std::int64_t B, std::int64_t S, std::int64_t Nq, std::int64_t Nkv,
                std::int64_t D) {
  Problem p;
  p.ranks = C;
  p.sharding = sh;
  p.dtype = dtype;
  p.batch = B;
  p.seq = S;
  p.heads = Nq;
  p.kv_heads = Nkv;
  p.head_dim = D;
  return p;
}

// FNV-1a (64-bit) of the tensor's bytes: equal hashes mean equal values, bit for bit.
std::uint64_t fnv1a(const std::vector<double>& v) {
  std::uint64_t h = 14695981039346656037ull;
  for (double d : v) {
    unsigned char b[sizeof d];
    std::memcpy(b, &d, sizeof d);
    for (unsigned char c : b) h = (h ^ c) * 1099511628211ull;
  }
  return h;
}

struct Hashes {
  std::uint64_t q, k, v, dout;
};
Hashes hashes(const Inputs& in) {
  return {fnv1a(in.q), fnv1a(in.k), fnv1a(in.v), fnv1a(in.dout)};
}
void check_hashes(const Inputs& in, const Hashes& want) {
  const Hashes got = hashes(in);
  CHECK(got.q == want.q);
  CHECK(got.k == want.k);
  CHECK(got.v == want.v);
  CHECK(got.dout == want.dout);
}

}  // namespace

TEST_CASE("element i of each input is normal_at(seed, stream, i), rounded to the dtype") {
  for (DType t : {DType::f64, DType::f32, DType::bf16}) {
    CAPTURE(dtype_name(t));
    const Problem p = problem(2, Sharding::zigzag, t, 2, 16, 4, 2, 3);
    const Inputs in = global_inputs(p, 9, true);
    const std::vector<std::pair<const std::vector<double>*, std::uint64_t>> tensors{
        {&in.q, 0}, {&in.k, 1}, {&in.v, 2}, {&in.dout, 3}};
    for (const auto& [x, stream] : tensors) {
      REQUIRE(x->size() == static_cast<std::size_t>(2 * 16 * (stream == 1 || stream == 2 ? 2 : 4) * 3));
      for (std::size_t i = 0; i < x->size(); ++i) CHECK((*x)[i] == round_to_dtype(normal_at(9, stream, i), t));
    }
  }
}

TEST_CASE("a rank's shard is the global tensors' rows at its positions, on every layout") {
  for (const Problem& p : {problem(4, Sharding::zigzag, DType::f64, 2, 32, 4, 2, 3),
                           problem(3, Sharding::contiguous, DType::f32, 1, 12, 2, 1, 5),
                           problem(8, Sharding::zigzag, DType::bf16, 1, 64, 2, 2, 2),
                           problem(1, Sharding::zigzag, DType::f64, 3, 6, 1, 1, 1)}) {
    CAPTURE(p.ranks);
    const Inputs all = global_inputs(p, 4, true);
    const SeqLayout L(p.ranks, p.seq, p.sharding);
    for (int r = 0; r < p.ranks; ++r) {
      const Inputs mine = rank_inputs(p, 4, r, true);
      CHECK(mine.q == shard(L, all.q, p.batch, p.heads * p.head_dim, r));
      CHECK(mine.k == shard(L, all.k, p.batch, p.kv_heads * p.head_dim, r));
      CHECK(mine.v == shard(L, all.v, p.batch, p.kv_heads * p.head_dim, r));
      CHECK(mine.dout == shard(L, all.dout, p.batch, p.heads * p.head_dim, r));
      CHECK(rank_input(p, 4, Input::dout, r) == mine.dout);
    }
  }
  CHECK(rank_inputs(problem(2, Sharding::zigzag, DType::f64, 1, 8, 1, 1, 1), 1, 0, false).dout.empty());
}

// The values below were printed by the code this module replaced (each rank's own generation inside run(),
// make_inputs, and random_problem for single-device problems), for these shapes; they must never change.
TEST_CASE("the inputs are pinned bit for bit: the first values of `cpsim run`'s default seed") {
  const Inputs in = global_inputs(problem(4, Sharding::zigzag, DType::f64, 1, 64, 4, 4, 16), 1, false);
  CHECK(in.q[0] == -0x1.840a5972a202fp-1);
  CHECK(in.q[1] == 0x1.4c333caf19a48p+0);
  CHECK(in.q[2] == 0x1.92840665122e6p-1);
  CHECK(in.k[0] == -0x1.5caa127c6d4fdp+0);
  CHECK(in.v[0] == -0x1.69e8459af317dp-4);
}

TEST_CASE("the inputs are pinned bit for bit: C=4 zigzag f64, seed 1 (every rank and the whole tensors)") {
  const Problem p = problem(4, Sharding::zigzag, DType::f64, 1, 64, 4, 4, 16);
  check_hashes(global_inputs(p, 1, true),
               {0x3c05149abd414adf, 0x4531c03a30167180, 0x757a79314bab16b3, 0x63d594a8524688bd});
  const Hashes ranks[] = {{0xe11ded69205f8bd3, 0xa1e24a27bb31fea9, 0x079291c495915a19, 0x00be4c61c44c684d},
                          {0x6802611a6a5b13a9, 0x39c354c96cdbedb0, 0x5b6ab5afa01a5dc1, 0x82c4fa0a7244fbae},
                          {0x2b332325e82a05bc, 0x29006ffdf26f9966, 0x7ceada9225eed290, 0xbf7e54fd7d74a88c},
                          {0xb9ac458ccc9459d4, 0x7774a835e777ec42, 0x0343dd3434037a46, 0x5896c16af28f95f7}};
  for (int r = 0; r < 4; ++r) check_hashes(rank_inputs(p, 1, r, true), ranks[r]);
}

TEST_CASE("the inputs are pinned bit for bit: C=3 contiguous f32, B=2, GQA 4/2, seed 7") {
  const Problem p = problem(3, Sharding::contiguous, DType::f32, 2, 48, 4, 2, 8);
  check_hashes(global_inputs(p, 7, true),
               {0x258b35ed3484db83, 0x386a0cae830fa5a1, 0x2da61167be2e0703, 0xd6ab8a7d35f0e383});
  const Hashes ranks[] = {{0x733a8e7da8fdcebd, 0xed0c3477111103e5, 0x8b737208c9595cbe, 0xb2547fa4f1d0da44},
                          {0x8ce1b6fffcfe2a58, 0x60a27a93a425bacb, 0x37938be0314cdcde, 0xa36d61651d3259b3},
                          {0x8f09e31a9b10e4b6, 0xccd8003380f86a97, 0x3c6efc69d84bf983, 0x1e41b76bcd3fbb18}};
  for (int r = 0; r < 3; ++r) check_hashes(rank_inputs(p, 7, r, true), ranks[r]);
}

TEST_CASE("the inputs are pinned bit for bit: C=8 zigzag f64, GQA 2/1, D=4, seed 123456789") {
  const Problem p = problem(8, Sharding::zigzag, DType::f64, 1, 32, 2, 1, 4);
  check_hashes(global_inputs(p, 123456789, true),
               {0xd30a2d94df595c3b, 0x01e10a5e622c3247, 0x24b7acdbdfe078ad, 0x4d8398cdfb71b4e3});
  const Hashes ranks[] = {{0x1d04a0cce577db35, 0x92822eecd5757d72, 0xbca81aeeaf2f729d, 0x7afd8d5841a30946},
                          {0x3df8c4d21f43a357, 0x9b20d0d3ca1046c3, 0xb511a61bdd2f8117, 0xd82423545165004f},
                          {0x72e2cbbc02549b0c, 0x5356a6472d900f41, 0xe7ae0131b6055d34, 0x1eb792a20022da7e},
                          {0xe2d7ac51cc70112d, 0xebb6469eef93eb2a, 0xc234fdfb30321ca0, 0xd2114067cd28cf50},
                          {0x0c992e87a9c087a1, 0x8badffd138ec20aa, 0x39c0b6a1b7565623, 0xd8c1bacf931b25d9},
                          {0x20ca7554c478026e, 0x1db21a09875b309e, 0x69d76e7be6569ed2, 0x4b2978842fee77c8},
                          {0x6cf89fcdf632df46, 0x7f542c23826a84dd, 0xb6dbc94a68c0d3fc, 0x70c71759959faed2},
                          {0x60ee1fb80717cb18, 0xb05e76381546082d, 0x1c36e0145f932a7b, 0xab59f8a6558ad112}};
  for (int r = 0; r < 8; ++r) check_hashes(rank_inputs(p, 123456789, r, true), ranks[r]);
}

TEST_CASE("the inputs are pinned bit for bit: one rank in f32, and bf16") {
  const Problem one = problem(1, Sharding::zigzag, DType::f32, 1, 16, 2, 2, 4);
  const Hashes h{0x9793935ea5d6003b, 0x2eda386f761c9d51, 0x220645788e61b207, 0x14556a187c3fa24f};
  check_hashes(global_inputs(one, 0, true), h);
  check_hashes(rank_inputs(one, 0, 0, true), h);
  const Inputs bf16 = global_inputs(problem(1, Sharding::zigzag, DType::bf16, 1, 32, 2, 2, 8), 3, true);
  check_hashes(bf16, {0x1a8aa3f6b74673ac, 0x08ac9fbfdb9c0846, 0x4e02e6e434711f30, 0x1130ff14585d8d30});
  CHECK(bf16.q[0] == -0x1.4p-1);
  CHECK(bf16.q[1] == 0x1.88p-1);
  CHECK(bf16.q[2] == 0x1.bcp-9);
}

TEST_CASE("the inputs are pinned bit for bit: a single-device problem with Sq != Sk, f64 and f32") {
  const AttentionShape sh{.B = 2, .Sq = 24, .Sk = 40, .Nq = 4, .Nkv = 2, .D = 8};
  const AttentionProblem f64 = attention_problem(sh, true, DType::f64, 5);
  check_hashes({f64.q, f64.k, f64.v, f64.dout},
               {0x759afa7ea1390727, 0xfbe2eb381760f197, 0xd521a674a41f2516, 0xe69c8c497bf452b3});
  const AttentionProblem f32 = attention_problem(sh, true, DType::f32, 5);
  check_hashes({f32.q, f32.k, f32.v, f32.dout},
               {0x861d12cc04602301, 0x6070c0efc6cb4349, 0x466a6f97994c384a, 0x28bbaf8c30526227});
  CHECK(f64.q_pos == iota_positions(0, 24));
  CHECK(f64.k_pos == iota_positions(0, 40));
}

TEST_CASE("a rank's shard made straight into a device buffer holds exactly rank_input's values") {
  for (const Problem& p : {problem(4, Sharding::zigzag, DType::f64, 2, 64, 4, 2, 3),
                           problem(3, Sharding::contiguous, DType::f32, 1, 12, 2, 1, 5),
                           problem(2, Sharding::zigzag, DType::f32, 3, 2048, 2, 1, 8)}) {  // chunks span pieces
    CAPTURE(p.ranks);
    Recorder rec;
    CpuDevice dev(rec);
    for (int r = 0; r < p.ranks; ++r)
      for (Input which : {Input::q, Input::k, Input::v, Input::dout}) {
        const Buffer b = rank_input_buffer(dev, p, 3, which, r, "x");
        const std::int64_t n = which == Input::k || which == Input::v ? p.kv_heads : p.heads;
        CHECK(b.dims() == Dims{p.batch, SeqLayout(p.ranks, p.seq, p.sharding).local_len(), n, p.head_dim});
        CHECK(download_values(dev, b) == rank_input(p, 3, which, r));
      }
  }
}
