#include "sim/model/published.hpp"

#include "sim/core/error.hpp"

namespace cpsim::model {
namespace {

const std::vector<double> kSeqs = {512, 1024, 2048, 4096, 8192, 16384};

KernelSweep sweep(std::string source, int d, bool causal, bool backward, std::vector<double> tflops) {
  KernelSweep s;
  s.source = std::move(source);
  s.head_dim = d;
  s.causal = causal;
  s.backward = backward;
  s.seqs = kSeqs;
  s.tflops = std::move(tflops);
  return s;
}

}  // namespace

const std::vector<KernelSweep>& flash_attention_3_sweeps() {
  static const std::vector<KernelSweep> s = [] {
    const std::string p = "FlashAttention-3 paper (Shah et al. 2024), H100 SXM5 BF16, ";
    return std::vector<KernelSweep>{
        sweep(p + "Fig. 5 causal d=64", 64, true, false, {197, 265, 371, 420, 460, 473}),
        sweep(p + "Fig. 5 non-causal d=64", 64, false, false, {333, 392, 460, 476, 496, 497}),
        sweep(p + "Fig. 6 backward d=64", 64, false, true, {272, 363, 422, 453, 472, 474}),
        sweep(p + "Fig. 5 causal d=128", 128, true, false, {292, 423, 521, 579, 602, 616}),
        sweep(p + "Fig. 5 non-causal d=128", 128, false, false, {467, 565, 625, 638, 646, 648}),
        sweep(p + "Fig. 6 backward d=128", 128, false, true, {316, 424, 501, 542, 559, 561}),
        sweep(p + "Fig. 5 causal d=256", 256, true, false, {286, 427, 537, 612, 628, 642}),
        sweep(p + "Fig. 5 non-causal d=256", 256, false, false, {482, 639, 707, 736, 746, 756}),
    };
  }();
  return s;
}

const std::vector<KernelSweep>& flash_attention_2_sweeps() {
  static const std::vector<KernelSweep> s = [] {
    const std::string p = "FlashAttention-2 bars of the FlashAttention-3 paper (Shah et al. 2024), H100 SXM5 BF16, ";
    return std::vector<KernelSweep>{
        sweep(p + "Fig. 5 causal d=64", 64, true, false, {180, 229, 262, 284, 295, 299}),
        sweep(p + "Fig. 5 non-causal d=64", 64, false, false, {282, 306, 318, 321, 322, 324}),
        sweep(p + "Fig. 6 backward d=64", 64, false, true, {198, 238, 264, 279, 287, 291}),
        sweep(p + "Fig. 5 causal d=128", 128, true, false, {191, 260, 298, 319, 333, 335}),
        sweep(p + "Fig. 5 non-causal d=128", 128, false, false, {309, 350, 362, 368, 370, 370}),
        sweep(p + "Fig. 6 backward d=128", 128, false, true, {214, 260, 291, 310, 318, 322}),
        sweep(p + "Fig. 5 causal d=256", 256, true, false, {208, 251, 278, 293, 297, 298}),
        sweep(p + "Fig. 5 non-causal d=256", 256, false, false, {275, 313, 321, 323, 324, 326}),
    };
  }();
  return s;
}

const KernelSweep& find_sweep(const std::vector<KernelSweep>& sweeps, int head_dim, bool causal, bool backward) {
  for (const KernelSweep& s : sweeps)
    if (s.head_dim == head_dim && s.causal == causal && s.backward == backward) return s;
  throw Error("find_sweep: no published sweep at d=" + std::to_string(head_dim));
}

const std::vector<PublishedRingRun>& ring_flash_attention_runs() {
  static const std::vector<PublishedRingRun> runs = {
      {"h800-sxm-8", Sharding::zigzag, false, 63.0},     {"h800-sxm-8", Sharding::zigzag, true, 17.4},
      {"h800-sxm-8", Sharding::contiguous, false, 38.5}, {"h800-sxm-8", Sharding::contiguous, true, 10.4},
      {"a100-sxm-8", Sharding::zigzag, false, 38.2},     {"a100-sxm-8", Sharding::zigzag, true, 10.6},
      {"a100-sxm-8", Sharding::contiguous, false, 24.0}, {"a100-sxm-8", Sharding::contiguous, true, 6.2},
  };
  return runs;
}

const std::vector<PublishedRingRun>& ring_flash_attention_stripe_runs() {
  static const std::vector<PublishedRingRun> runs = {
      {"h800-sxm-8", Sharding::striped, false, 55.0},
      {"h800-sxm-8", Sharding::striped, true, 16.0},
      {"a100-sxm-8", Sharding::striped, false, 32.5},
      {"a100-sxm-8", Sharding::striped, true, 9.75},
  };
  return runs;
}

const PublishedOneGpu& ring_flash_attention_one_gpu(const std::string& machine) {
  static const std::vector<PublishedOneGpu> one = {{"h800-sxm-8", 591.5, 154.7}, {"a100-sxm-8", 373.4, 94.7}};
  for (const PublishedOneGpu& o : one)
    if (o.machine == machine) return o;
  throw Error("ring_flash_attention_one_gpu: no published run on " + machine);
}

Problem ring_flash_attention_problem(int ranks) {
  Problem p;
  p.ranks = ranks;
  p.batch = 1;
  p.heads = 32;
  p.kv_heads = 8;
  p.head_dim = 128;
  p.causal = true;
  p.dtype = DType::bf16;
  p.seq = static_cast<std::int64_t>(ranks) * 8192;
  return p;
}

}  // namespace cpsim::model
