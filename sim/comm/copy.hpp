// The transports' copy of a message's bytes: memcpy, or streaming stores for copies too large to stay in a cache.
//
// A plain store to a line that is not in the cache first reads the line in (read for ownership), and the line is
// written back later: 3n bytes of memory traffic to copy n. A streaming (non-temporal) store writes whole lines
// past the caches without reading them: 2n. That pays once the destination would not stay in the caches anyway:
// when the bytes that all of a job's ranks land at once outgrow the last-level cache they share. Below that,
// memcpy's cached stores are faster (the receiver reads the data again from the cache). UCX has the same switch for its
// large copies (the x86 option NT_BUFFER_TRANSFER_MIN, "minimal threshold of buffer length for using non-temporal
// buffer transfer", ucs/arch/x86_64/global_opts.c). glibc's memcpy streams too, but only from
// glibc.cpu.x86_non_temporal_threshold, which it derives from the last-level cache (`ld.so --list-tunables` prints it):
// far beyond the messages ranks exchange on a machine with a large L3.
//
// The results are the same bytes either way; only the time differs (docs/performance/comm.md, "Streaming copies").
#pragma once
#include <cstddef>

namespace cpsim {

// From this many bytes a call lands in a rank, copy_bytes streams: the rank's share of the last-level cache when
// `ranks` ranks copy at once, LLC / ranks (sim/os/host_cache.hpp; 32 MiB where it is not known), and 1 MiB at the
// least. Measured on an AMD EPYC (Zen 3, 32 MiB L3), 4 ranks: streaming calls of 1-4 MiB a rank (the rule before,
// from half of one core's L2) made them up to 2.7 x slower; from 8 MiB a call streaming was about as fast as memcpy
// or faster, from 16 MiB faster at every call measured (docs/performance/comm.md, "Where streaming starts").
// Streaming from 256 KiB was slower still.
std::size_t stream_threshold(int ranks);
// The threshold for the ranks of the launch under way (RanksCopying); for one rank outside a launch.
std::size_t stream_threshold();

// While one lives, the copies of this process count `ranks` ranks copying at once on this machine: launch() holds
// one for its ranks (the processes backend's children inherit it). The one before comes back when it goes. Launches
// at the same time in one process would share the latest count: only their copies' speed depends on it.
class RanksCopying {
 public:
  explicit RanksCopying(int ranks);
  ~RanksCopying();
  RanksCopying(const RanksCopying&) = delete;
  RanksCopying& operator=(const RanksCopying&) = delete;

 private:
  std::size_t before_;  // the threshold before this one (0: none)
};

// Copies n bytes from `from` to `to` (not overlapping): stream_copy when this copy, or the whole call it is part of
// (`call_bytes`: every byte a collective lands in this rank, when that is more), reaches stream_threshold(), else
// memcpy. A call's many smaller copies do not stay in the cache together any more than one large one would.
// Where the destination lies 1 to 31 bytes past the source modulo 4 KiB, a copy of 2 KiB or more below the
// threshold is a line_copy instead: glibc's memcpy stalls there on AMD Zen 3 (copy.cpp).
void copy_bytes(void* to, const void* from, std::size_t n, std::size_t call_bytes = 0);

// Copies n bytes (not overlapping) 64 at a time with vector loads and cached stores (x86-64), else memcpy.
void line_copy(void* to, const void* from, std::size_t n);

// Copies n bytes with streaming stores where the machine has them (x86-64), else memcpy. Ends with a store fence:
// streaming stores are weakly ordered, and the caller's next store (a flag saying the copy is done) must not be
// seen before them.
void stream_copy(void* to, const void* from, std::size_t n);

}  // namespace cpsim
