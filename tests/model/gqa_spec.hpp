// The prediction the levels' tests ask for: 8 ranks, 64 query heads sharing 8 KV heads of 128 (a 70B-class
// model's attention), bf16, on a machine preset.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "sim/model/predict.hpp"

namespace cpsim::model::test_specs {

inline PredictSpec gqa_70b(const std::string& machine, std::vector<std::int64_t> seqs,
                           std::vector<StrategyChoice> strategies) {
  PredictSpec spec;
  spec.problem.ranks = 8;
  spec.problem.heads = 64;
  spec.problem.kv_heads = 8;
  spec.problem.head_dim = 128;
  spec.problem.dtype = DType::bf16;
  spec.seqs = std::move(seqs);
  spec.strategies = std::move(strategies);
  spec.machine = load_machine(machine);
  return spec;
}

}  // namespace cpsim::model::test_specs
