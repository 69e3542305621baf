// The transports' copy of a message's bytes: memcpy, or streaming stores for copies too large to stay in a cache.
//
// A plain store to a line that is not in the cache first reads the line in (read for ownership), and the line is
// written back later: 3n bytes of memory traffic to copy n. A streaming (non-temporal) store writes whole lines
// past the caches without reading them: 2n. That pays once a copy's destination would not stay in the core's L2
// anyway, which is where a rank's large receives land; below, memcpy's cached stores are faster (the data is read
// again from the cache). UCX has the same switch for its large copies (the x86 option NT_BUFFER_TRANSFER_MIN,
// "minimal threshold of buffer length for using non-temporal buffer transfer", ucs/arch/x86_64/global_opts.c).
// glibc's memcpy streams too, but only from glibc.cpu.x86_non_temporal_threshold, which it derives from the
// last-level cache (`ld.so --list-tunables` prints it): far beyond the messages ranks exchange on a machine with a
// large L3.
//
// The results are the same bytes either way; only the time differs (docs/performance/comm.md, "Streaming copies").
#pragma once
#include <cstddef>

namespace cpsim {

// From this many bytes on, copy_bytes streams: half of one core's L2 (sysconf), within [1 MiB, 4 MiB]; 1 MiB
// where the C library does not know the L2. The floor is measured: on a core with a 512 KiB L2 (AMD Zen 3),
// streaming from 256 KiB made 256 KiB-1 MiB calls slower than streaming from 1 MiB (docs/performance/comm.md,
// "Streaming copies").
std::size_t stream_threshold();

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
