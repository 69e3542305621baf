// The CPU device: buffers in host memory, attention by the tiled Eigen kernel (tiled.hpp), f32 and f64.
//
// Every buffer is zero-filled at allocation and its bytes count in the rank's MemoryMeter until the last handle
// is dropped; a message buffer comes from the process's shared heap where it has one (host_pool.hpp). Every call
// honours view offsets (b0, s0, h0) and the buffers' strides. bf16 needs a GPU device.
// Eigen runs single-threaded: each simulated rank is one thread.
#pragma once
#include <string>

#include "sim/kernels/device.hpp"

namespace cpsim {

class CpuDevice : public Device {
 public:
  // Rows per query tile and per key tile; 128 is the fastest on the machines measured (docs/performance).
  static constexpr int kDefaultTile = 128;
  // The kernel keeps a tile x tile block of scores per thread: 4096 rows make it 128 MiB in f64.
  static constexpr int kMaxTile = 4096;

  explicit CpuDevice(Recorder& rec, int tile = kDefaultTile);

  std::string name() const override { return "cpu"; }
  int tile() const { return tile_; }

  void upload(const Buffer& dst, const void* host) override;
  void download(const Buffer& src, void* host) override;
  void* host_data(const Buffer& b) const override { return b.data(); }

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
  int tile_;
};

}  // namespace cpsim
