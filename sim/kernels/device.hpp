// The Device seam: everything a strategy asks of one rank's compute device.
//
// A strategy allocates buffers, moves rows and heads between them, runs attention on one (Q rows) x
// (K/V rows) block with the global positions of both under a mask (sim/core/mask.hpp), and merges partial results
// by their log-sum-exp.
// Implementations: CpuDevice (Eigen, f32/f64), the counting device (sizes only, sim/model), CUDA (sim/cuda).
//
// The public calls are the same for every device and record into the rank's Recorder: visible pairs and
// useful flops are computed here from the positions and the mask, by formula on the runs (so every device reports
// identical work), the device reports the kernel tiles it computed and skipped. A device that does not implement
// a mask refuses it with an Error naming the masks it does implement; it never computes another one.
#pragma once
#include <cstdint>
#include <optional>
#include <string>

#include "sim/core/buffer.hpp"
#include "sim/core/mask.hpp"
#include "sim/core/positions.hpp"
#include "sim/core/recorder.hpp"

namespace cpsim {

struct AttentionOptions {
  Mask mask;                       // causal unless given (a bool converts: true causal, false full)
  double scale = 0;                // 0 means 1/sqrt(D)
  std::optional<BlockKind> kind;   // the strategy's label for this block; unset: derived from the mask
};

// What a buffer is for. message: the strategy sends from it or receives into it, as it is (a ring's K/V blocks, an
// all-to-all's send and receive buffers, the K/V shards an all-gather gathers). A rank of the processes backend
// keeps these in the run's shared heap, where its peers copy a message once, straight out of it; the CPU device's
// other buffers stay in the process's own memory, cheaper to back with pages (docs/backends-threads-processes.md).
// Every device counts a message buffer's bytes apart as well (Recorder::message_peak_bytes: what sizes the heap).
// A buffer sent as work is still sent correctly, only through the slot rings (two copies).
enum class BufferUse { work, message };

// What a device's kernel reports about one call (the rest of WorkCounts is derived from positions).
struct TileCounts {
  std::int64_t computed = 0;
  std::int64_t skipped = 0;
};

class Device {
 public:
  explicit Device(Recorder& rec) : rec_(rec) {}
  virtual ~Device() = default;
  Device(const Device&) = delete;
  Device& operator=(const Device&) = delete;

  virtual std::string name() const = 0;
  Recorder& recorder() const { return rec_; }

  // A zero-filled buffer. Its bytes count toward the rank's peak (and a message buffer's toward its message peak)
  // until the last handle is dropped.
  Buffer alloc(Dims dims, DType dtype, Layout layout, const std::string& name, BufferUse use = BufferUse::work) {
    return do_alloc(dims, dtype, layout, name, use);
  }
  // Host <-> device copies of a whole buffer; host memory holds the buffer's dtype (bf16 as uint16_t).
  virtual void upload(const Buffer& dst, const void* host) = 0;
  virtual void download(const Buffer& src, void* host) = 0;
  // The buffer's bytes where the host may write them directly (a device in host memory), or null (a GPU: upload).
  virtual void* host_data(const Buffer&) const { return nullptr; }

  virtual void fill(const View& dst, double value) = 0;    // zero: 0; a fresh LSE: -inf
  virtual void copy(const View& dst, const View& src) = 0;  // same extent; dtypes may differ (converts)
  virtual void add(const View& dst, const View& src) = 0;   // dst += src

  // Forward of one block.
  //   q: [B, sq, Nq, D] at q_pos (ascending global positions of its rows); k, v: [B, sk, Nkv, D] at k_pos
  //   -> out: [B, sq, Nq, D], lse: [B, Nq, sq] (overwritten). Query head h reads K/V head h / (Nq/Nkv).
  //   A row that sees no key gets out = 0 and lse = -inf. Key k is visible to query q when opt.mask says so.
  WorkCounts attention_forward(const View& q, const Positions& q_pos, const View& k, const View& v,
                               const Positions& k_pos, const View& out, const View& lse,
                               const AttentionOptions& opt = {});

  // Backward of one block: ADDS this block's contributions into dq [B, sq, Nq, D] and dk, dv [B, sk, Nkv, D].
  //   out, lse are the final forward results of the q rows (merged over all blocks): the probabilities are
  //   p = exp(s - lse) and D = rowsum(dout * out) belongs to the whole row, not to this block.
  WorkCounts attention_backward(const View& q, const Positions& q_pos, const View& k, const View& v,
                                const Positions& k_pos, const View& out, const View& lse, const View& dout,
                                const View& dq, const View& dk, const View& dv, const AttentionOptions& opt = {});

  // Merges a block's partial result into an accumulator over the same rows:
  //   lse = logaddexp(lse_acc, lse_t);  out_acc = exp(lse_acc - lse) * out_acc + exp(lse_t - lse) * out_t
  // Two -inf inputs leave out_acc unchanged and lse -inf (never NaN).
  virtual void merge(const View& out_acc, const View& lse_acc, const View& out_t, const View& lse_t) = 0;

  // Records a block the strategy decided not to compute (wholly masked), for the work tables and trace.
  void record_skip(const Positions& q_pos, const Positions& k_pos, const char* phase_call);

  virtual void synchronize() {}

 protected:
  virtual Buffer do_alloc(Dims dims, DType dtype, Layout layout, const std::string& name, BufferUse use) = 0;
  virtual TileCounts do_attention_forward(const View& q, const Positions& q_pos, const View& k, const View& v,
                                          const Positions& k_pos, const View& out, const View& lse,
                                          const Mask& mask, double scale) = 0;
  virtual TileCounts do_attention_backward(const View& q, const Positions& q_pos, const View& k, const View& v,
                                           const Positions& k_pos, const View& out, const View& lse,
                                           const View& dout, const View& dq, const View& dk, const View& dv,
                                           const Mask& mask, double scale) = 0;

 private:
  Recorder& rec_;
};

// Checks shared by every device (extents, head grouping, positions count); throws Error on misuse.
void check_attention_args(const View& q, const Positions& q_pos, const View& k, const View& v,
                          const Positions& k_pos, const View& out, const View& lse);

}  // namespace cpsim
