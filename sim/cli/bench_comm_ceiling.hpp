// The ceiling `cpsim bench comm` compares its busbw with: what the machine gives one rank when all C ranks copy
// at once with no messages at all.
//
// A communicator that copies each message once can at best have every rank copying all the time. On a machine
// with fewer cores than ranks (4 ranks on 2 cores) the ranks share the cores, and all of them share the memory
// bandwidth, so a rank copies at most cores/C as fast as a lone memcpy, and less where the memory cannot feed
// all cores at once. This measures it: C threads each copy `bytes`-byte pieces, cycling through their share of
// `working_set`, started together; the result is the bytes one thread copied per second (best of 3 runs).
// busbw / memcpy of sendrecv, all_gather and all_to_all cannot exceed this / memcpy (reduce_scatter also adds).
#pragma once
#include <cstddef>

namespace cpsim::cli {

double parallel_memcpy_gbps(std::size_t bytes, std::size_t working_set, int threads);

}  // namespace cpsim::cli
