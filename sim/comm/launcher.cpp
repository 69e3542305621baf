// launch(): validates the options and hands the run to the backend's registered launch function.
#include "sim/comm/launcher.hpp"

#include <utility>

#include "sim/comm/backend_registry.hpp"
#include "sim/comm/launch_support.hpp"

namespace cpsim {

namespace {
bool expecting_announced = false, announced = false;  // expect_announced_launches(), announced_launch()

// The backend whose ranks are this process's launcher job (mpi), when this process is one rank of such a job.
const BackendInfo* job_backend() {
  if (launcher_rank() < 0) return nullptr;
  for (Backend b : built_in_backends())
    if (const BackendInfo* info = find_backend(b); info->job_ranks && info->run_on_rank0) return info;
  return nullptr;
}
}  // namespace

void check_launch(const LaunchOptions& opt) {
  require(opt.ranks >= 1, "the number of ranks must be at least 1 (got " + std::to_string(opt.ranks) + ")",
          Fix{{"--ranks 1 or more"}});
  require(opt.timeout.count() > 0, "the wait timeout must be positive", "give a timeout of at least 1 ms");
  const BackendInfo& b = built_in_backend(opt.backend);
  const std::string name(backend_name(opt.backend));
  if (b.max_ranks > 0)
    require(opt.ranks <= b.max_ranks,
            "the " + name + " backend runs at most " + std::to_string(b.max_ranks) + " ranks (asked for " +
                std::to_string(opt.ranks) + ")",
            b.max_ranks_fix);
}

std::vector<RankOutcome> launch(const LaunchOptions& opt, const RankFn& fn) {
  check_launch(opt);
  const BackendInfo& b = built_in_backend(opt.backend);
  const std::string name(backend_name(opt.backend));
  if (b.job_ranks)
    require(!expecting_announced || std::exchange(announced, false),
            "this program launches on the " + name +
                " backend outside the runs rank 0 announces to the job's other processes, which they cannot follow",
            "run it with --backend threads or processes");
  return b.launch(opt, fn);
}

int launcher_rank() {
  return env_int({"OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK"});
}

void run_on_rank0(const std::function<void()>& fn) {
  if (const BackendInfo* job = job_backend()) return job->run_on_rank0(fn);
  fn();
}

void broadcast_from_rank0(std::string& bytes) {
  if (const BackendInfo* job = job_backend(); job && job->broadcast_from_rank0) job->broadcast_from_rank0(bytes);
}

void expect_announced_launches() {
  expecting_announced = true;
}

void announced_launch() {
  announced = true;
}

}  // namespace cpsim
