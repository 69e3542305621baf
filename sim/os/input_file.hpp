// Reading an input file named on the command line (a machine file, an nccl-tests table, a bench or trace JSON):
// the one place every input is read, so that none can hang or exhaust memory.
//
//   read_input_file("--sendrecv", "sr.txt", "name the saved output of sendrecv_perf")  -> the file's bytes
//
// Refused at once with UsageError, one line "<flag> <path> <what is wrong>; <fix>" ("--sendrecv /dev/zero is a
// device, not a regular file; name ..."): a path that cannot be opened, anything
// but a regular file (a folder, a FIFO, /dev/zero: opened without blocking and checked with fstat before a byte is
// read), and a file larger than `max_bytes` (checked before reading, and again while reading, for a file that grows).
#pragma once
#include <cstdint>
#include <string>

namespace cpsim {

constexpr std::int64_t kMaxInputBytes = std::int64_t{64} << 20;  // 64 MiB: far above any input cpsim reads

std::string read_input_file(const std::string& flag, const std::string& path, const std::string& fix,
                            std::int64_t max_bytes = kMaxInputBytes);

}  // namespace cpsim
