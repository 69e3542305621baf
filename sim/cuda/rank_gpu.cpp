#include "sim/cuda/rank_gpu.hpp"

#include <atomic>
#include <cstdint>
#include <thread>

#include "sim/cuda/cuda_check.hpp"

namespace cpsim::cuda {
namespace {
std::atomic<bool> g_cuda_used{false};
thread_local std::shared_ptr<RankGpu> t_current;

std::string seconds(std::chrono::milliseconds t) {
  const long long ds = t.count() / 100;  // tenths of a second
  return std::to_string(ds / 10) + "." + std::to_string(ds % 10) + " s";
}
}  // namespace

void note_cuda_used() {
  g_cuda_used.store(true);
}
bool cuda_used() {
  return g_cuda_used.load();
}

RankGpu::RankGpu(int device, int rank, std::chrono::milliseconds timeout)
    : device_(device), rank_(rank), timeout_(timeout) {
  note_cuda_used();
  const std::string who = "rank " + std::to_string(rank) + ": ";
  check(cudaSetDevice(device), who + "selecting GPU " + std::to_string(device));
  check(cudaStreamCreateWithFlags(&compute_, cudaStreamNonBlocking), who + "creating the compute stream");
  check(cudaStreamCreateWithFlags(&comm_, cudaStreamNonBlocking), who + "creating the communication stream");
  check(cudaEventCreateWithFlags(&compute_done_, cudaEventDisableTiming), who + "creating an event");
  check(cudaEventCreateWithFlags(&comm_done_, cudaEventDisableTiming), who + "creating an event");
  // Freed blocks stay in the stream-ordered pool instead of going back to the driver between steps.
  cudaMemPool_t pool = nullptr;
  check(cudaDeviceGetDefaultMemPool(&pool, device), who + "reading the memory pool");
  std::uint64_t keep = UINT64_MAX;
  check(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep), who + "configuring the memory pool");
}

RankGpu::~RankGpu() {
  cudaSetDevice(device_);
  cudaStreamSynchronize(comm_);
  cudaStreamSynchronize(compute_);
  cudaEventDestroy(comm_done_);
  cudaEventDestroy(compute_done_);
  cudaStreamDestroy(comm_);
  cudaStreamDestroy(compute_);
}

void RankGpu::comm_waits_for_compute() {
  check(cudaEventRecord(compute_done_, compute_), "recording a compute event");
  check(cudaStreamWaitEvent(comm_, compute_done_, 0), "ordering communication after compute");
}

void RankGpu::compute_waits_for_comm() {
  check(cudaEventRecord(comm_done_, comm_), "recording a communication event");
  check(cudaStreamWaitEvent(compute_, comm_done_, 0), "ordering compute after communication");
}

void RankGpu::compute_waits_for(cudaEvent_t e) {
  check(cudaStreamWaitEvent(compute_, e, 0), "ordering compute after communication");
}

void RankGpu::wait(cudaStream_t stream, const std::string& what) {
  const std::string who = "rank " + std::to_string(rank_) + ": ";
  const auto deadline = std::chrono::steady_clock::now() + timeout_;
  for (long spins = 0;; ++spins) {
    const cudaError_t e = cudaStreamQuery(stream);
    if (e == cudaSuccess) return;
    if (e != cudaErrorNotReady) check(e, who + what);
    if (spins % 256 == 255) {
      const std::string err = watch_errors();
      if (!err.empty()) {
        abort_watches();
        throw Error(who + what + " failed: " + err);
      }
      if (std::chrono::steady_clock::now() > deadline) {
        abort_watches();
        throw Error(who + what + " did not complete within " + seconds(timeout_) +
                    ": likely a deadlock (a peer never posted the matching send or receive) or a peer that stopped; "
                    "see the other ranks' errors");
      }
    }
    if (spins < 2000)
      std::this_thread::yield();
    else
      std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
}

void RankGpu::add_watch(const void* key, Watch w) {
  std::lock_guard lk(watch_m_);
  watches_.emplace_back(key, std::move(w));
}

void RankGpu::remove_watch(const void* key) {
  std::lock_guard lk(watch_m_);
  std::erase_if(watches_, [&](const auto& p) { return p.first == key; });
}

std::string RankGpu::watch_errors() {
  std::lock_guard lk(watch_m_);
  for (auto& [key, w] : watches_) {
    std::string e = w.error();
    if (!e.empty()) return e;
  }
  return "";
}

void RankGpu::abort_watches() {
  std::lock_guard lk(watch_m_);
  for (auto& [key, w] : watches_) w.abort();
}

std::shared_ptr<RankGpu> RankGpu::current() {
  return t_current;
}
void RankGpu::set_current(std::shared_ptr<RankGpu> gpu) {
  t_current = std::move(gpu);
}

}  // namespace cpsim::cuda
