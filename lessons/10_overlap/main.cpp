// Lesson 10: overlapping communication with computation.
//
// The library's ring starts the next K/V exchange (isend/irecv) before computing the current block and waits
// after it; the trace shows that order. Beside it the lesson runs its own ring that computes first and then
// exchanges with one blocking sendrecv, so every transfer is waited for in full. A cost argument with
// published H100 figures says when the overlap can hide the transfer, and when it cannot.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <utility>

#include "lessons/common/lesson.hpp"
#include "sim/core/bytes.hpp"
#include "sim/kernels/check.hpp"
#include "sim/kernels/cpu_device.hpp"
#include "sim/kernels/reference.hpp"
#include "sim/model/predict.hpp"

using namespace cpsim;

namespace {

// A ring without overlap: compute on the K/V in hand, then swap it with the neighbours in one blocking call.
// Every step computes the rank's whole Q against the K/V in hand under the causal mask.
std::string sequential_ring(const RunConfig& cfg, Communicator& comm) {
  const Problem& p = cfg.problem;
  Recorder& rec = comm.recorder();
  CpuDevice dev(rec);
  const SeqLayout L(p.ranks, p.seq, p.sharding);
  const GlobalTensors in = make_inputs(cfg);
  const int r = comm.rank(), C = comm.size();
  const std::int64_t s = L.local_len(), qe = p.heads * p.head_dim, ke = p.kv_heads * p.head_dim;
  auto upload = [&](const std::vector<double>& host, Dims d, Layout lay, const char* name) {
    Buffer b = dev.alloc(d, DType::f64, lay, name);
    dev.upload(b, host.data());
    return b;
  };
  const Buffer q = upload(shard(L, in.q, p.batch, qe, r), {p.batch, s, p.heads, p.head_dim}, Layout::bsnd, "q");
  auto kv_host = shard(L, in.k, p.batch, ke, r);
  const auto v_host = shard(L, in.v, p.batch, ke, r);
  kv_host.insert(kv_host.end(), v_host.begin(), v_host.end());  // [2B, s, Nkv, D]: k then v
  Buffer kv = upload(kv_host, {2 * p.batch, s, p.kv_heads, p.head_dim}, Layout::bsnd, "kv");
  Buffer next = dev.alloc(kv.dims(), DType::f64, Layout::bsnd, "kv_next");
  const Buffer out = dev.alloc(q.dims(), DType::f64, Layout::bsnd, "out"),
               tile = dev.alloc(q.dims(), DType::f64, Layout::bsnd, "tile");
  const Dims ld{p.batch, s, p.heads, 1};
  const Buffer lse = dev.alloc(ld, DType::f64, Layout::bns, "lse"),
               tile_lse = dev.alloc(ld, DType::f64, Layout::bns, "tile_lse");
  dev.fill(View(lse), -INFINITY);
  rec.begin_phase("forward");
  for (int i = 0; i < C; ++i) {
    rec.step(i);
    const int owner = ((r - i) % C + C) % C;
    const View k = View(kv).batches(0, p.batch), v = View(kv).batches(p.batch, p.batch);
    dev.attention_forward(View(q), L.positions(r), k, v, L.positions(owner), View(tile), View(tile_lse));
    dev.merge(View(out), View(lse), View(tile), View(tile_lse));
    if (i + 1 < C) {  // only now does the next block start to move, and the rank waits for all of it
      comm.sendrecv(kv.data(), kv.bytes(), (r + 1) % C, next.data(), next.bytes(), (r - 1 + C) % C, 7);
      std::swap(kv, next);
    }
  }
  rec.end_phase();
  std::vector<double> host(static_cast<std::size_t>(out.numel()));
  dev.download(out, host.data());
  ByteWriter w;
  w.put(host);
  return w.take();
}

int run_lesson(int argc, char** argv) {
  lesson::Options o;
  o.mask_refusal =
      "lesson 10 models the ring's overlap on one causal sequence and takes no --docs or --window; "
      "`cpsim predict --docs ... --window ...` models a masked run (docs/predictions.md), and lesson 12 "
      "(lessons/12_documents) teaches masks";
  Problem& p = o.config.problem;
  p.ranks = 4;
  p.seq = 64;
  p.heads = p.kv_heads = 2;
  p.head_dim = 16;
  if (!lesson::parse_options(argc, argv, "Lesson 10: overlap", lesson::kShape | lesson::kSharding | lesson::kStep, o))
    return 0;
  o.config.strategy = StrategyKind::ring;
  o.config.tracing = true;
  validate(p, StrategyKind::ring);
  const int C = p.ranks;

  lesson::title("Lesson 10: overlapping communication with computation");
  lesson::shape(o.config.problem, "STEPs 3 and 4 model 64 heads of 128 on H100s");
  lesson::say(
      "A ring step needs two things: the attention of the block in hand, and the next block's transfer. "
      "They are independent, so the transfer can run while the block is computed: start the send and "
      "the receive first, compute, then wait. If the compute takes longer than the transfer, the wait "
      "costs nothing.");

  lesson::banner(1, "the library's ring starts the exchange before computing");
  const RunResult r = lesson::run_and_step(o.config, o);
  const int who = C > 1 ? 1 : 0, at = C > 1 ? 1 : 0;
  const std::string order = lesson::step_order(r, who, "forward", at);
  std::cout << "  Rank " << who << ", forward step " << at
            << ", the events it recorded, in order (#n: the n-th\n  request of the forward):\n";
  for (const std::string& line : lesson::step_events(r, who, "forward", at, "K/V", "K/V")) std::cout << line << "\n";
  if (C > 1)
    lesson::expect(order.rfind("start isend -> start irecv -> attention_forward", 0) == 0,
                   "the exchange starts before the attention call");
  // The backward: the next K/V and the dK/dV accumulator both travel; the accumulator a rank posts after its block
  // is waited for only after its next block, so that transfer runs while that block is computed.
  RunConfig with_backward = o.config;
  with_backward.backward = true;
  const RunResult rb = lesson::run_and_step(with_backward, o);
  const std::string back = lesson::step_order(rb, who, "backward", at);
  std::cout << "\n  Rank " << who << ", backward step " << at
            << " (K/V: started before the step's attention call,\n  dK/dV: after it):\n";
  for (const std::string& line : lesson::step_events(rb, who, "backward", at, "K/V", "dK/dV"))
    std::cout << line << "\n";
  std::cout << "\n";
  if (C > 2) {
    lesson::expect(back.rfind("start isend -> start irecv -> attention_backward -> wait irecv -> wait isend -> "
                              "start isend -> start irecv",
                              0) == 0,
                   "the backward waits for the last accumulator after its block, then posts its own");
    lesson::say(
        "Backward sends two things around the ring: the next K/V, started before the block as in the forward, "
        "and the dK/dV accumulator, which can leave only once the block has added to it. So a rank posts its "
        "accumulator at the end of a step and waits for the one coming to it only after the next step's "
        "attention_backward, just before adding that block's dK/dV to it: the accumulator's transfer, too, "
        "runs while a block is computed.");
  }

  lesson::banner(2, "a ring without overlap, for comparison");
  lesson::say(
      "The lesson's own ring computes first and exchanges afterwards with one blocking sendrecv: every "
      "transfer starts only when the block is done, and the rank waits for all of it.");
  RunConfig seq_cfg = o.config;
  LaunchOptions lo;
  lo.ranks = C;
  lo.backend = o.config.backend;
  const auto outcomes = launch(lo, [&](Communicator& comm) { return sequential_ring(seq_cfg, comm); });
  const GlobalTensors in = make_inputs(seq_cfg);
  const Positions all = iota_positions(0, p.seq);
  const RefForward ref =
      reference_forward(in.q, in.k, in.v, {p.batch, p.seq, p.seq, p.heads, p.kv_heads, p.head_dim}, all, all, true);
  const SeqLayout L(C, p.seq, p.sharding);
  std::vector<std::vector<double>> locals;
  for (const auto& oc : outcomes) {
    ByteReader rd(oc.result);
    locals.emplace_back();
    rd.get(locals.back());
  }
  const auto seq_out = unshard(L, locals, p.batch, p.heads * p.head_dim);
  std::cout << "  Measured on this machine (threads; a transfer is a memory copy between them):\n";
  for (int k = 0; k < C; ++k) {
    const Recorder& a = r.ranks[static_cast<std::size_t>(k)].stats;
    const Recorder& b = outcomes[static_cast<std::size_t>(k)].stats;
    lesson::expect(b.comm_counts().count("sendrecv") == C - 1, "the sequential ring makes C-1 blocking exchanges");
    std::cout << "  rank " << k << ": overlapped forward " << lesson::ms(a.phase_us().at("forward") / 1000)
              << ", waited " << lesson::ms(a.idle_us() / 1000) << "\n"
              << "          sequential forward " << lesson::ms(b.phase_us().at("forward") / 1000) << ", waited "
              << lesson::ms(b.idle_us() / 1000) << "\n";
  }
  std::cout << "\n";
  lesson::say(
      "Here a 'transfer' is a copy between threads, far faster than any real link, and on a small machine "
      "these times mostly show how the threads were scheduled, so they decide nothing either way. What "
      "decides the matter on real hardware is the ratio of compute time to transfer time, next.");

  lesson::banner(3, "when can the transfer hide? a cost argument, per ring step");
  // Published figures (H100 SXM, bf16): FlashAttention-3 causal forward at head dim 128 reaches about 616
  // TFLOP/s (Shah et al., "FlashAttention-3", 2024); NVLink 4 gives 450 GB/s per direction per GPU (NVIDIA H100
  // datasheet); one 400 Gb/s InfiniBand NIC carries at most 50 GB/s (its line rate).
  const double flops_rate = 616e12, nvlink = 450e9, ib = 50e9, bytes_per = 2;
  // The attention shape of the benchmark in the blog post "On Context Parallelism": 64 heads of 128, no GQA.
  const std::int64_t N = 64, D = 128;
  // One zigzag ring step with s tokens per rank (t = s/2 per chunk): compute 2t^2 pairs x N x 4D flops at F;
  // transfer K and V of s tokens, 2 x s x N x D x b bytes, at BW.
  const auto step_compute_us = [&](double s) { return 2 * (s / 2) * (s / 2) * N * 4 * D / flops_rate * 1e6; };
  const auto step_bytes = [&](double s) { return 2 * s * N * D * bytes_per; };
  lesson::say(
      "Take one step of a zigzag ring with N=64 heads of D=128 in bf16 (the benchmark shape of the blog post "
      "On Context Parallelism) and s tokens per rank, two chunks of t = s/2. Compute: 2t^2 pairs x N heads x "
      "4D flops at 616 TFLOP/s (FlashAttention-3, H100). Transfer: K and V of the s tokens, 2 x s x N x D x 2 "
      "bytes, over NVLink (450 GB/s, H100 datasheet) or one 400 Gb/s InfiniBand NIC (50 GB/s). Overlapped, a "
      "step costs max(compute, transfer); in sequence, the sum.");
  std::cout << "  one ring step:\n"
            << "  tokens/rank  compute    NVLink     hidden?  InfiniBand  hidden?\n";
  for (std::int64_t per_rank : {1024, 4096, 16384, 65536}) {
    const double tc = step_compute_us(static_cast<double>(per_rank)), bytes = step_bytes(static_cast<double>(per_rank));
    const double tn = bytes / nvlink * 1e6, ti = bytes / ib * 1e6;
    std::cout << "  " << lesson::left(std::to_string(per_rank), 13) << lesson::left(lesson::fixed(tc, 0) + " us", 11)
              << lesson::left(lesson::fixed(tn, 0) + " us", 11) << lesson::left(tc >= tn ? "yes" : "no", 9)
              << lesson::left(lesson::fixed(ti, 0) + " us", 12) << (tc >= ti ? "yes" : "no") << "\n";
  }
  // compute >= transfer  <=>  8 t^2 N D / F >= 4 t Nkv D b / BW  <=>  s = 2t >= Nkv b F / (N BW)   (Nkv = N here)
  const int s_nv = static_cast<int>(std::ceil(bytes_per * flops_rate / nvlink)),
            s_ib = static_cast<int>(std::ceil(bytes_per * flops_rate / ib));
  std::cout << "\n";
  lesson::say(
      "Compute grows as s^2, the transfer as s: compute >= transfer once a rank holds s >= Nkv b F / (Nq BW) "
      "tokens (b bytes per element, F the compute rate, BW the link's), about " +
      std::to_string(s_nv) + " tokens per rank on NVLink and " + std::to_string(s_ib) +
      " over one InfiniBand NIC. Below that the wait remains however early the transfer starts: short "
      "sequences, or many ranks over a slow link. GQA helps (K/V shrink by Nq/Nkv); so does a 2-D mesh that "
      "keeps the ring on fast links.");

  lesson::banner(4, "the same question, asked of cpsim's machine model");
  lesson::say(
      "cpsim predict (docs/model.md) counts the unchanged ring code and replays it on a model of H100s: "
      "each transfer starts when the ring posts it and runs beside the compute; a rank waits only "
      "for what the compute did not cover. The whole forward, C steps, of the same shape:");
  std::cout << "  machine     C   S     tokens/rank  compute   per step  TFLOP/s  wait\n";
  struct Row {
    std::string machine;
    std::int64_t per_rank;
    double per_step_us, rate, exposed_us;
  };
  std::vector<Row> rows;
  for (const auto& [machine, ranks] : {std::pair{"h100-sxm-8", 8}, std::pair{"h100-ib", 16}}) {
    const model::Machine m = model::load_machine(machine);
    for (std::int64_t S : {8192, 32768, 131072}) {
      Problem mp;
      mp.ranks = ranks;
      mp.seq = S;
      mp.heads = mp.kv_heads = N;
      mp.head_dim = D;
      mp.dtype = DType::bf16;
      mp.sharding = Sharding::zigzag;
      const model::Cell cell = model::predict_cell(mp, {StrategyKind::ring, 0}, m, false, 0);
      lesson::expect(cell.valid, "the modeled ring runs");
      // A zigzag rank's forward: (2t^2 + t) + (C-1) 2t^2 = 2t^2 C + t visible pairs per head, 4D flops each.
      const double t = static_cast<double>(S / ranks) / 2;
      const double rate = (2 * t * t * ranks + t) * N * 4 * D / (cell.compute_us * 1e-6) / 1e12;
      rows.push_back({machine, S / ranks, cell.compute_us / ranks, rate, cell.exposed_us});
      std::cout << "  " << lesson::left(machine, 12) << lesson::left(std::to_string(ranks), 4)
                << lesson::left(std::to_string(S / 1024) + "K", 6) << lesson::left(std::to_string(S / ranks), 13)
                << lesson::left(lesson::fixed(cell.compute_us, 0) + " us", 10)
                << lesson::left(lesson::fixed(cell.compute_us / ranks, 0) + " us", 10)
                << lesson::left(lesson::fixed(rate, 0), 9) << lesson::fixed(cell.exposed_us, 0) << " us\n";
    }
  }
  std::cout << "  compute: the slowest rank's attention over all C steps; per step: compute / C;\n"
            << "  TFLOP/s: its flops over that time, fixed costs included; wait: the time it\n"
            << "  waited for transfers the compute did not cover\n\n";
  // What the paragraphs below say, read from the rows above.
  const Row& first = rows.front();
  const double argued = step_compute_us(static_cast<double>(first.per_rank));
  lesson::expect(first.per_step_us > argued && first.rate < flops_rate / 1e12,
                 "at the shortest length the model's step costs more than the argument's, at a lower rate");
  lesson::say(
      "The two tables count differently: the cost argument gives one step at the kernel's best rate, "
      "the model the whole forward. At " +
      std::to_string(first.per_rank) + " tokens per rank the model's " + lesson::fixed(first.per_step_us, 0) +
      " us per step is above the argument's " + lesson::fixed(argued, 0) + " us because its kernel runs at " +
      lesson::fixed(first.rate, 0) +
      " TFLOP/s on blocks this short, not 616, and every call and step pays a fixed cost.");
  const auto first_hidden = [&](const std::string& machine) {
    std::int64_t from = -1;
    bool all_hidden_after = true;
    for (const Row& row : rows) {
      if (row.machine != machine) continue;
      const bool hidden = row.exposed_us < 0.5;
      if (hidden && from < 0) from = row.per_rank;
      if (!hidden && from >= 0) all_hidden_after = false;
    }
    return all_hidden_after ? from : -2;
  };
  const auto where = [&](const std::string& machine, const std::string& link) {
    const std::int64_t from = first_hidden(machine);
    if (from == -2) return "On " + link + " the wait comes and goes with the length. ";
    if (from < 0) return "On " + link + " the transfer outlasts the compute at every length here. ";
    return "On " + link + " the wait is zero from " + std::to_string(from) + " tokens per rank on. ";
  };
  // The model's NVLink send/recv rate (a measured one, below the datasheet's) in the same break-even formula.
  const double p2p_gbps = model::load_machine("h100-sxm-8").intra.p2p_gbps;
  const int s_p2p = static_cast<int>(std::ceil(bytes_per * flops_rate / (p2p_gbps * 1e9)));
  std::int64_t last_blocked = 0, first_clear = 0;
  for (const Row& row : rows) {
    if (row.machine != "h100-sxm-8") continue;
    if (row.exposed_us >= 0.5) last_blocked = row.per_rank;
    if (row.exposed_us < 0.5 && first_clear == 0) first_clear = row.per_rank;
  }
  lesson::expect(first_clear > 0 && last_blocked < s_p2p && s_p2p <= first_clear,
                 "the break-even at the model's send/recv rate lies between its last waiting and first clear length");
  lesson::say(where("h100-sxm-8", "NVLink (h100-sxm-8)") +
              where("h100-ib", "InfiniBand (h100-ib: 16 ranks on 2 nodes, the ring crossing between them)") +
              "The cost argument puts the break-even near " + std::to_string(s_nv) + " tokens per rank on NVLink and " +
              std::to_string(s_ib) +
              " over one InfiniBand NIC. The model moves the NVLink one: its send/recv between two H100s runs at " +
              lesson::fixed(p2p_gbps, 0) +
              " GB/s, what nccl-tests measures, not the datasheet's 450, and at that rate the same formula gives " +
              std::to_string(s_p2p) + " tokens per rank, between the last length where the model waits (" +
              std::to_string(last_blocked) + ") and the first it finds clear (" + std::to_string(first_clear) + ").");

  std::cout << "The library's overlapped ring, against the single-process reference:\n";
  const bool ok = lesson::verdicts(r, "overlapped");
  std::cout << "The lesson's sequential ring, against the same reference:\n";
  bool seq_ok = true;
  std::vector<std::string> entries;
  for (int k = 0; k < C; ++k) {
    double e = 0;
    for (std::int64_t b = 0; b < p.batch; ++b)
      for (const Span& sp : L.spans(k))
        for (std::int64_t i = (b * p.seq + sp.lo) * p.heads * p.head_dim;
             i < (b * p.seq + sp.hi) * p.heads * p.head_dim; ++i)
          e = std::max(e, std::abs(seq_out[static_cast<std::size_t>(i)] - ref.out[static_cast<std::size_t>(i)]));
    const bool good = e <= kF64Tolerance;
    seq_ok = seq_ok && good;
    entries.push_back("rank " + std::to_string(k) + ": " + (good ? "CORRECT" : "ERROR"));
  }
  lesson::verdict_lines("sequential", entries);
  return ok && seq_ok ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  return lesson::guarded("lesson 10_overlap", [&] { return run_lesson(argc, argv); });
}
