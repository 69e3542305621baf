// The counting device: a Device that does no math and holds no data, so the unchanged strategy code runs at sizes
// no machine here could hold (C = 256, S = 1M) and reports exactly what it would compute, move and hold.
//
//   alloc        a Buffer with real dims and dtype (a bf16 log-sum-exp is f32, as on the GPU) whose bytes count in the
//   rank's MemoryMeter until its last
//                handle is dropped (as on the CPU device), so the peak is exact; its storage is a shared "no data"
//                address that nothing may read or write (the Communicator refuses null buffers of nonzero size)
//   attention    the visible pairs and flops the Device base counts, and the kernel tiles the CPU device's tiled
//                kernel (tiled.cpp) would compute and skip at the same tile size, found from the runs of positions
//                alone (tile_counts)
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

// Tiles of `tile` rows the tiled kernel computes and skips on one (batch, head) of a block: a (query tile, key
// tile) pair is computed when it holds a visible pair under the mask (tiled.cpp), skipped otherwise; forward and
// backward count the same pairs. Found from the runs, never one position at a time: per query tile, the key tiles
// between its first row's first visible key and its last row's last one are the candidates; for causal and full
// masks each of them holds a visible pair, for the others each is decided by one of its corner pairs or, failing
// that, by counting its visible pairs (mask.hpp). O(query tiles x log) for causal and full masks.
TileCounts tile_counts(const Positions& q_pos, const Positions& k_pos, const Mask& mask, int tile);

class CountingDevice : public Device {
 public:
  // program: where the ops go (null: count only). tile: the tiled kernel's rows per tile.
  explicit CountingDevice(Recorder& rec, Program* program = nullptr, int tile = CpuDevice::kDefaultTile);

  std::string name() const override { return "counting"; }

  void upload(const Buffer&, const void*) override {}
  void download(const Buffer&, void*) override {}

  void fill(const View& dst, double value) override;
  void copy(const View& dst, const View& src) override;
  void add(const View& dst, const View& src) override;
  void merge(const View& out_acc, const View& lse_acc, const View& out_t, const View& lse_t) override;

 protected:
  Buffer do_alloc(Dims dims, DType dtype, Layout layout, const std::string& name, BufferUse use) override;
  TileCounts do_attention_forward(const View& q, const Positions& q_pos, const View& k, const View& v,
                                  const Positions& k_pos, const View& out, const View& lse, const Mask& mask,
                                  double scale) override;
  TileCounts do_attention_backward(const View& q, const Positions& q_pos, const View& k, const View& v,
                                   const Positions& k_pos, const View& out, const View& lse, const View& dout,
                                   const View& dq, const View& dk, const View& dv, const Mask& mask,
                                   double scale) override;

 private:
  TileCounts attention(const View& q, const Positions& q_pos, const View& k, const Positions& k_pos, const Mask& mask,
                       bool backward, std::int64_t grad_elements);
  void memory(const char* name, std::int64_t bytes, std::int64_t elements = 0);

  Program* program_;
  int tile_;
};

}  // namespace cpsim::model
