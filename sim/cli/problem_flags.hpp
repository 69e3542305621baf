// Which of the problem flags (problem_options.hpp) a command or lesson offers: one bit per flag of the table.
#pragma once

namespace cpsim::cli {

enum ProblemFlag : unsigned {
  kFlagStrategy = 1u << 0,                                           // --strategy
  kFlagSharding = 1u << 1,                                           // --sharding
  kFlagRanks = 1u << 2,                                              // --ranks, -C
  kFlagA2a = 1u << 3,                                                // --a2a
  kFlagKvReplicate = 1u << 4,                                        // --kv-replicate
  kFlagBatch = 1u << 5,                                              // --batch, -B
  kFlagSeq = 1u << 6,                                                // --seq, -S
  kFlagHeads = 1u << 7,                                              // --heads, -N
  kFlagKvHeads = 1u << 8,                                            // --kv-heads
  kFlagHeadDim = 1u << 9,                                            // --head-dim, -D
  kFlagDtype = 1u << 10,                                             // --dtype
  kFlagFull = 1u << 11,                                              // --full
  kFlagBackend = 1u << 12,                                           // --backend
  kFlagBackward = 1u << 13,                                          // --backward
  kFlagSeed = 1u << 14,                                              // --seed
  kFlagTimeout = 1u << 15,                                           // --timeout
  kFlagKernel = 1u << 16,                                            // --kernel
  kFlagMemoryLimit = 1u << 17,                                       // --memory-limit
  kFlagDocs = 1u << 18,                                              // --docs
  kFlagPadDocs = 1u << 19,                                           // --pad-docs
  kFlagWindow = 1u << 20,                                            // --window
  kFlagChunk = 1u << 21,                                             // --chunk
  kFlagsMask = kFlagDocs | kFlagPadDocs | kFlagWindow | kFlagChunk,  // the mask and the shardings it needs
  kAllProblemFlags = (1u << 22) - 1,
};

}  // namespace cpsim::cli
