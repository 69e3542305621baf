// The per-rank recorder: what a rank computed, sent, received, held and waited for.
//
// Devices write work and allocations, communicators write calls and bytes, strategies mark
// phases and steps. One Recorder per rank, written by that rank's thread only; the memory meter is
// shared with buffer deleters and is atomic. With tracing off only counters are kept (no events).
#pragma once
#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace cpsim {

class ByteWriter;
class ByteReader;

// The sub-block an attention call covers (Transformer Engine's zigzag ring rule, reference-facts.md), shown by
// block_kind_name as "diagonal", "half-kv", ...:
//   diagonal: a causal block on the diagonal (partly masked), full: wholly visible,
//   half_kv: both local Q chunks x half of the owner's K/V, its early chunk (an owner before this rank),
//   half_q: half of the local Q, the late chunk, x both of the owner's K/V chunks (an owner after this rank),
//   skipped: wholly masked, nothing computed,
//   partial: a ring block off the diagonal that the mask covers in part (documents, a window, striped sharding).
enum class BlockKind : std::uint8_t { diagonal, half_kv, half_q, full, skipped, partial };
const char* block_kind_name(BlockKind k);

struct WorkCounts {
  std::int64_t calls = 0;           // attention calls that computed at least one visible pair
  std::int64_t skipped_calls = 0;   // calls whose whole block was masked
  std::int64_t tiles_computed = 0;  // kernel tiles touched
  std::int64_t tiles_skipped = 0;   // kernel tiles skipped without touching data (wholly masked)
  std::int64_t pairs = 0;           // visible (query, key) pairs, summed over batch and heads
  double flops = 0;                 // useful flops: 4*D per visible pair forward, 10*D backward
  WorkCounts& operator+=(const WorkCounts& o);
  bool operator==(const WorkCounts&) const = default;
};

struct CommCounts {
  std::map<std::string, std::int64_t> calls;  // per call kind: "isend", "all_gather", ...
  std::int64_t messages_sent = 0, messages_received = 0;
  std::int64_t bytes_sent = 0, bytes_received = 0;
  CommCounts& operator+=(const CommCounts& o);
  std::int64_t count(const std::string& kind) const {
    auto it = calls.find(kind);
    return it == calls.end() ? 0 : it->second;
  }
};

// Work of one step of one phase ("forward" step 2, say).
struct StepWork {
  std::string phase;
  int step = 0;
  WorkCounts work;
};

struct Span {  // a half-open range of global token positions [lo, hi)
  std::int64_t lo = 0, hi = 0;
};

struct TraceEvent {
  enum class Type : std::uint8_t { compute, comm, wait, step, phase };
  Type type = Type::compute;
  std::string name;         // "attention_forward", "all_gather", "wait", "step 3", "forward"
  double start_us = 0;      // since the run's epoch
  double dur_us = 0;
  std::string phase;        // "forward" / "backward"
  int step = -1;
  // compute
  BlockKind kind = BlockKind::full;
  std::vector<Span> q_spans, k_spans;
  std::int64_t pairs = 0;
  // communication
  int peer = -1;            // point-to-point peer (rank in the communicator's parent world), -1 for collectives
  std::vector<int> group;   // collective group as world ranks
  std::int64_t bytes_sent = 0, bytes_received = 0;
};

// Bytes a rank's device holds right now and the most it ever held: in all, and in the buffers it sends from or
// receives into (message: BufferUse::message, sim/kernels/device.hpp; what a processes-backend rank keeps in the
// shared heap). Shared with buffer deleters.
struct MemoryMeter {
  std::atomic<std::int64_t> current{0};
  std::atomic<std::int64_t> peak{0};
  std::atomic<std::int64_t> message_current{0};
  std::atomic<std::int64_t> message_peak{0};
  void add(std::int64_t bytes, bool message = false);
  void sub(std::int64_t bytes, bool message = false);
};

class Recorder {
 public:
  using Clock = std::chrono::steady_clock;
  explicit Recorder(int rank = 0, bool tracing = false);

  int rank() const { return rank_; }
  bool tracing() const { return tracing_; }
  void set_tracing(bool on) { tracing_ = on; }
  // All ranks of a run share an epoch, so traces from different processes line up.
  void set_epoch(Clock::time_point t) { epoch_ = t; }
  double now_us() const;
  // An untimed Recorder never reads the clock: now_us() is the time set_now_us last gave (0 at first). A counting
  // run's (its times mean nothing), and the model's clock's, whose marks land exactly on modeled time.
  void set_timed(bool on) { timed_ = on; }
  void set_now_us(double us) { untimed_now_us_ = us; }
  // Off: work is summed into total_work() only, and step_work() stays empty (a counting run for the model, which
  // reads totals and peaks: C ranks of C steps would hold O(C^2) entries).
  void set_step_work(bool on) { step_work_ = on; }

  // Strategy marks. A step hook (lessons' --step) runs at every step mark.
  void begin_phase(const std::string& phase);
  void end_phase();
  void step(int i);
  const std::string& phase() const { return phase_; }
  int current_step() const { return step_; }
  void set_step_hook(std::function<void(const std::string& phase, int step)> hook) { hook_ = std::move(hook); }

  // Device writes.
  void work(const WorkCounts& w, BlockKind kind, std::vector<Span> q, std::vector<Span> k, double start_us,
            double dur_us, const char* name);
  std::shared_ptr<MemoryMeter> memory() const { return memory_; }

  // Communicator writes. `kind` is the call ("isend", "all_gather", ...).
  void comm(const std::string& kind, std::int64_t bytes_sent, std::int64_t bytes_received, int messages_sent,
            int messages_received, int peer, const std::vector<int>& group, double start_us, double dur_us);
  void wait(const std::string& what, int peer, double start_us, double dur_us);

  // Read back.
  const WorkCounts& total_work() const { return total_; }
  const std::vector<StepWork>& step_work() const { return steps_; }
  const CommCounts& comm_counts() const { return comm_; }
  std::int64_t peak_bytes() const { return memory_->peak.load(); }
  std::int64_t message_peak_bytes() const { return memory_->message_peak.load(); }  // of message buffers
  double idle_us() const { return idle_us_; }
  const std::map<std::string, double>& phase_us() const { return phase_us_; }
  const std::vector<TraceEvent>& events() const { return events_; }

  // Counters, step work, phase times and events, for crossing a process boundary.
  void serialize(ByteWriter& w) const;
  static Recorder deserialize(ByteReader& r);

 private:
  StepWork& current_step_work();
  static constexpr std::size_t kNoStep = static_cast<std::size_t>(-1);

  int rank_ = 0;
  bool tracing_ = false;
  bool timed_ = true;
  bool step_work_ = true;
  double untimed_now_us_ = 0;
  Clock::time_point epoch_ = Clock::now();
  std::string phase_;
  int step_ = -1;
  double phase_start_us_ = 0;
  std::function<void(const std::string&, int)> hook_;
  WorkCounts total_;
  std::vector<StepWork> steps_;
  std::size_t current_ = kNoStep;         // steps_[current_] is the step in progress; kNoStep: not looked up yet
  std::map<std::string, int> last_step_;  // per phase: the highest step with an entry in steps_
  CommCounts comm_;
  double idle_us_ = 0;
  std::map<std::string, double> phase_us_;
  std::shared_ptr<MemoryMeter> memory_ = std::make_shared<MemoryMeter>();
  std::vector<TraceEvent> events_;
};

}  // namespace cpsim
