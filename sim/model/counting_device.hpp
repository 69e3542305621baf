// The counting device: a Device that does no math and holds no data, so the unchanged strategy code runs at sizes
// no machine here could hold (C = 256, S = 1M) and reports exactly what it would compute, move and hold.
//
//   alloc        a Buffer with real dims and dtype (a bf16 log-sum-exp is f32, as on the GPU) whose bytes count in the
//   rank's MemoryMeter until its last
//                handle is dropped (as on the CPU device), so the peak is exact; its storage is a shared "no data"
//                address that nothing may read or write (the Communicator refuses null buffers of nonzero size)
//   attention    the visible pairs and flops the Device base counts, and the kernel tiles the CPU device's tiled
//                kernel (tiled.cpp) would compute and skip at the same tile size, found from the positions alone
//   copy, add, merge, fill: nothing happens; the bytes they would read and write go into the Program
#pragma once
#include <string>

#include "sim/kernels/cpu_device.hpp"
#include "sim/kernels/device.hpp"
#include "sim/model/program.hpp"

namespace cpsim::model {

// Useful flops per visible (query, key) pair and unit of head dim, as Device::attention_* counts them
// (device.cpp): forward S = QK^T and O = PV; backward recomputes S and forms dV, dP, dQ, dK.
inline constexpr double kForwardFlopsPerPairDim = 4.0;
inline constexpr double kBackwardFlopsPerPairDim = 10.0;

// Tiles of `tile` rows the tiled kernel computes and skips on one (batch, head) of a block. Positions ascending.
// A (query tile, key tile) pair is skipped when causal and its first key lies after its last query; the
// forward stops at the first such key tile, the backward visits them all: both count the same pairs.
TileCounts tile_counts(const Positions& q_pos, const Positions& k_pos, bool causal, int tile);

class CountingDevice : public Device {
 public:
  // program: where the ops go (null: count only). tile: the tiled kernel's rows per tile.
  explicit CountingDevice(Recorder& rec, Program* program = nullptr, int tile = CpuDevice::kDefaultTile);

  std::string name() const override { return "counting"; }

  Buffer alloc(Dims dims, DType dtype, Layout layout, const std::string& name) override;
  void upload(const Buffer&, const void*) override {}
  void download(const Buffer&, void*) override {}

  void fill(const View& dst, double value) override;
  void copy(const View& dst, const View& src) override;
  void add(const View& dst, const View& src) override;
  void merge(const View& out_acc, const View& lse_acc, const View& out_t, const View& lse_t) override;

 protected:
  TileCounts do_attention_forward(const View& q, const Positions& q_pos, const View& k, const View& v,
                                  const Positions& k_pos, const View& out, const View& lse, bool causal,
                                  double scale) override;
  TileCounts do_attention_backward(const View& q, const Positions& q_pos, const View& k, const View& v,
                                   const Positions& k_pos, const View& out, const View& lse, const View& dout,
                                   const View& dq, const View& dk, const View& dv, bool causal, double scale) override;

 private:
  TileCounts attention(const View& q, const Positions& q_pos, const View& k, const Positions& k_pos, bool causal,
                       bool backward, std::int64_t grad_elements);
  void memory(const char* name, std::int64_t bytes, std::int64_t elements = 0);

  Program* program_;
  int tile_;
};

}  // namespace cpsim::model
