// The shape and strategy flags shared by `cpsim run`, `cpsim bench strategies` and the lessons: one table of flags
// (name, short form, help, where the value goes), of which each user offers a subset (problem_flags.hpp).
//
// One --kv-heads rule everywhere: 0 means "as many as --heads" (no grouped-query attention). One --docs rule: listed
// lengths make S (their sum, padded with --pad-docs) unless --seq is given, when they must sum to it. Defaults taken
// from a configuration (a lesson's) show 0 when it has Nkv = Nq, so a new --heads carries Nkv along; a grouped default
// (Nkv < Nq) shows its Nkv, which a new --heads keeps.
#pragma once
#include <string>
#include <utility>

#include "sim/cli/cli.hpp"
#include "sim/cli/problem_flags.hpp"
#include "sim/runtime/run.hpp"

namespace cpsim::cli {

struct ProblemOptions {
  std::string strategy = "ring", sharding = "zigzag", dtype = "f64", backend = "threads", kernel = "auto";
  std::string docs;  // --docs L1,L2,... or random:K; empty: one sequence
  int ranks = 4, a2a = 0;
  std::int64_t batch = 1, seq = 64, heads = 4, kv_heads = 0, head_dim = 16;
  std::int64_t window = 0, chunk = 0;
  std::uint64_t seed = 1;
  double timeout_s = 120;
  std::string memory_limit;  // --memory-limit BYTES (K, M, G, T suffixes); empty: what the machine has left
};

// The flags in `flags`, each with its value in o as the default shown and parsed into o.
void add_problem_options(po::options_description& desc, ProblemOptions& o, unsigned flags = kAllProblemFlags);

// A configuration's values as option values (the defaults a lesson shows).
ProblemOptions problem_options(const RunConfig& config);

// Writes the values of the flags in `flags` into config; the other fields keep their values. UsageError for a value
// no configuration can hold (an unknown name, a negative --a2a, a timeout out of range, a memory limit that is not a
// size); shapes are validated by the run.
void apply_problem_options(const ProblemOptions& o, const po::variables_map& vm, unsigned flags, RunConfig& config);

// Every flag applied to a fresh configuration, then validated as run() validates it (check_config: UsageError for
// impossible combinations), and --kv-replicate refused where nothing needs replicating (check_kv_replicate).
// Returns the configuration and its validated problem, for run(config, problem): the run validates it once.
std::pair<RunConfig, ValidProblem> to_run_config(const ProblemOptions& o, const po::variables_map& vm);
void check_kv_replicate(const RunConfig& c);

}  // namespace cpsim::cli
