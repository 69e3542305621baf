// The layout of the processes backend's shared-memory segment, and the primitives in it.
//
//   [control] [status x C] [doorbell x (C+1)] [ring (src, dst) x C (C+1)] [token x kRefTokens x C] [heap: arena x C]
//
// Endpoints 0..C-1 are the ranks, endpoint C is the launcher (it only receives: each rank's result).
// - Doorbell (wait_policy.hpp): a 32-bit counter per endpoint. Whoever changes something an endpoint may wait
//   for (a slot filled for it, room in a ring it found full, a rank finished or failed) bumps the counter; a waiting
//   endpoint sleeps on it with futex(FUTEX_WAIT) and a timeout, so a dead peer can never leave it asleep for good.
// - Ring (src -> dst): slots_per_ring(C, arena) slots of kSlotBytes, one producer (src) and one consumer (dst),
//   lock-free (head/tail counters with acquire/release). A message is a header followed by its payload,
//   streamed through the slots in chunks of at most kSlotBytes; the first chunk of a message carries its
//   MessageHeader. Without a heap the rings are as deep as a fixed budget allows (kRingBudget for all C (C+1) of
//   them, between kMinSlotsPerRing and kMaxSlotsPerRing slots each): with C=4, 2 MiB each, so a sender streams a
//   1 MiB message without waiting for its receiver to be scheduled (4 ranks share 2 cores), and the two copies of a
//   message (into a slot, out of it) overlap. With a heap, a ring carries only what is not sent by reference (small
//   messages, one slot per reference, buffers outside the heap, the results to the launcher) and has
//   kMinSlotsPerRing slots: 256 KiB, 5 MiB for all 20 at C=4 instead of 40 MiB to back with pages and free.
// - Heap (shm_heap.hpp): rank r's arena holds the buffers rank r allocates; a send from a buffer there goes by
//   reference (shm_engine.hpp): its ring carries where the bytes lie and which of the sender's tokens to complete,
//   and the receiver copies the bytes once, straight out of the heap. Token states: free -> pending (the sender
//   posted) -> claimed (the receiver is copying) -> done (the sender may reuse its buffer) -> free, or pending ->
//   revoked (the sender gave up: its rank is failing; the receiver lands zeros instead).
#pragma once
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

#include "sim/comm/envelope.hpp"
#include "sim/comm/wait_policy.hpp"

namespace cpsim {

constexpr std::size_t kSlotBytes = 64 * 1024;
constexpr std::size_t kMinSlotsPerRing = 4;
constexpr std::size_t kMaxSlotsPerRing = 32;
constexpr std::size_t kRingBudget = std::size_t{64} << 20;
constexpr int kMaxProcessRanks = 64;
constexpr std::uint32_t kRefTokens = 256;  // sends by reference in flight per rank (more go through the rings)

enum class RefToken : std::uint32_t { free, pending, claimed, done, revoked };

// A rank's state as the other ranks and the launcher see it.
enum class ShmStatus : std::int32_t { running, finished, failed, stopped, dead };

struct SlotHeader {
  MessageHeader msg;      // valid in a message's first chunk
  std::uint64_t len = 0;  // payload bytes in this slot
  std::uint32_t first = 0;
  std::uint32_t by_reference = 0;  // the message's one slot holds a Reference, not its bytes
};

// Where a message sent by reference lies: bytes [offset, offset + msg.bytes) of the heap, and the sender's token.
struct Reference {
  std::uint64_t offset = 0;
  std::uint32_t token = 0;
};

struct RingCounters {
  alignas(64) std::atomic<std::uint64_t> head{0};  // slots published (producer)
  std::atomic<std::uint32_t> room_wanted{0};       // the producer found the ring full and may sleep until a release
  alignas(64) std::atomic<std::uint64_t> tail{0};  // slots consumed (consumer)
};

class Ring {
 public:
  Ring(RingCounters* c, std::byte* slots, std::size_t n) : c_(c), slots_(slots), n_(n) {}
  static constexpr std::size_t kHeaderStride = 64;
  static constexpr std::size_t kStride = kHeaderStride + kSlotBytes;
  static constexpr std::size_t bytes(std::size_t slots) { return sizeof(RingCounters) + slots * kStride; }

  // Producer: the next free slot, or null when the ring is full; publish() hands it to the consumer.
  SlotHeader* free_slot() const;
  void publish() const { c_->head.store(c_->head.load(std::memory_order_relaxed) + 1, std::memory_order_release); }
  // Producer, after free_slot() found none: asks the consumer to ring when it frees one. True when one is free now
  // (the consumer may have freed it before seeing the request).
  bool want_room() const;
  // Consumer: the oldest filled slot, or null when empty; release() hands it back.
  SlotHeader* filled_slot() const;
  void release() const { c_->tail.store(c_->tail.load(std::memory_order_relaxed) + 1, std::memory_order_seq_cst); }
  // Consumer, after releasing: whether the producer asked for room since the last time (then ring its doorbell). A
  // producer waiting for its receives, not for room, is not woken by every slot its consumer drains.
  bool room_was_wanted() const { return c_->room_wanted.exchange(0, std::memory_order_seq_cst) != 0; }

  static std::byte* payload(SlotHeader* s) { return reinterpret_cast<std::byte*>(s) + kHeaderStride; }

 private:
  SlotHeader* slot(std::uint64_t i) const { return reinterpret_cast<SlotHeader*>(slots_ + (i % n_) * kStride); }
  RingCounters* c_;
  std::byte* slots_;
  std::size_t n_;
};

struct ShmControl {
  std::uint64_t magic = 0;
  std::int32_t ranks = 0;
  std::atomic<std::int32_t> aborted{0};
  std::atomic<std::int32_t> forked{0};         // the launcher has forked every rank: they may start
  std::atomic<std::int32_t> failed_rank{-1};   // the first rank that failed, -1 while none has
  std::atomic<std::int32_t> failure_ready{0};  // failure text written
  char failure[4096] = {};
};

// A view of a segment laid out as above. The launcher constructs it once (init = true) before forking.
class ShmWorld {
 public:
  // The segment for C ranks with arenas of arena bytes each (shm_heap.hpp's arena_bytes; 0: no heap).
  static std::size_t bytes_needed(int ranks, std::size_t arena = 0);
  static std::size_t slots_per_ring(int ranks, std::size_t arena);
  // Where the heap starts.
  static std::size_t heap_offset(int ranks, std::size_t arena);
  // Who backs which pages with memory before writing them (ShmSegment::populate). The launcher: everything before
  // the heap but the rings' slots (launcher_pages: control, status, doorbells, each ring's counters, the tokens),
  // before it lays them out. Each rank, in parallel, before its first send: the slots of its own rings (rings_of:
  // it is their only writer; 1.25 MiB at C = 4 with a heap) and its arena.
  struct Pages {
    std::size_t offset = 0, bytes = 0;  // from the segment's start, whole pages
  };
  static std::vector<Pages> launcher_pages(int ranks, std::size_t arena);
  static Pages rings_of(int src, int ranks, std::size_t arena);
  ShmWorld(void* base, int ranks, std::size_t arena, bool init);

  int ranks() const { return ranks_; }
  ShmControl& control() const { return *control_; }
  std::atomic<std::int32_t>& status(int rank) const { return status_[rank]; }
  ShmStatus status_of(int rank) const { return static_cast<ShmStatus>(status_[rank].load()); }
  void set_status(int rank, ShmStatus s) const { status_[rank].store(static_cast<std::int32_t>(s)); }
  Doorbell& bell(int endpoint) const { return bells_[endpoint]; }
  Ring ring(int src, int dst) const;  // src a rank, dst a rank or the launcher (ranks())
  std::atomic<std::uint32_t>& token(int rank, std::uint32_t i) const {
    return tokens_[static_cast<std::size_t>(rank) * kRefTokens + i];
  }
  // The heap: rank r's arena, and where a buffer lies in the heap (its offset when all of it is there).
  std::size_t arena_size() const { return arena_; }
  std::byte* arena(int rank) const { return heap_ + static_cast<std::size_t>(rank) * arena_; }
  bool in_heap(const void* p, std::size_t bytes, std::uint64_t* offset) const;
  const std::byte* heap_at(std::uint64_t offset) const { return heap_ + offset; }

  bool aborted() const { return control_->aborted.load() != 0; }
  // Records the first failure (later ones are ignored), marks the rank, stops every wait.
  void fail(int rank, std::string_view what, ShmStatus status = ShmStatus::failed) const;
  void ring_all() const;
  std::string failure() const;  // the first failure's text (after failure_ready)

 private:
  int ranks_;
  ShmControl* control_;
  std::atomic<std::int32_t>* status_;
  Doorbell* bells_;
  std::byte* rings_;
  std::size_t slots_;  // per ring
  std::atomic<std::uint32_t>* tokens_;
  std::size_t arena_;  // bytes per rank
  std::byte* heap_;
};

}  // namespace cpsim
