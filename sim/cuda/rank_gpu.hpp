// One rank's GPU: which device, its two streams, and how the host waits for them.
//
// Streams: `compute` runs the device's kernels, copies and allocations; `comm` runs communication (NCCL calls, the
// cuda-threads copies). Communication reads what compute wrote, so it starts after an event recorded on compute;
// compute reads what communication delivered, so Request::wait makes compute wait on the communication's event.
// The host blocks only where a result must be complete (downloads, blocking collectives, synchronize()).
//
// The launchers create one RankGpu per rank and make it the thread's current one; make_cuda_device(rec) picks it
// up, so the rank's device and communicator share the streams.
#pragma once
#include <cuda_runtime.h>

#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace cpsim::cuda {

class RankGpu {
 public:
  // Makes `device` current on the calling thread and creates the streams. rank: for messages.
  RankGpu(int device, int rank, std::chrono::milliseconds timeout);
  ~RankGpu();
  RankGpu(const RankGpu&) = delete;
  RankGpu& operator=(const RankGpu&) = delete;

  int device() const { return device_; }
  int rank() const { return rank_; }
  cudaStream_t compute() const { return compute_; }
  cudaStream_t comm() const { return comm_; }
  std::chrono::milliseconds timeout() const { return timeout_; }

  // Stream ordering without blocking the host.
  void comm_waits_for_compute();
  void compute_waits_for_comm();
  void compute_waits_for(cudaEvent_t e);

  // Blocks until the stream is idle. Polls, so that a failed NCCL call is reported when seen and a transfer that
  // never completes becomes an Error after the timeout naming `what` (the watches are aborted first).
  void wait(cudaStream_t stream, const std::string& what);

  // NCCL communicators register a check for asynchronous errors ("" when none) and an abort.
  struct Watch {
    std::function<std::string()> error;
    std::function<void()> abort;
  };
  void add_watch(const void* key, Watch w);
  void remove_watch(const void* key);

  // The RankGpu of the rank running on this thread (null outside a launch).
  static std::shared_ptr<RankGpu> current();
  static void set_current(std::shared_ptr<RankGpu> gpu);

 private:
  std::string watch_errors();
  void abort_watches();

  int device_, rank_;
  std::chrono::milliseconds timeout_;
  cudaStream_t compute_ = nullptr, comm_ = nullptr;
  cudaEvent_t compute_done_ = nullptr, comm_done_ = nullptr;
  std::mutex watch_m_;
  std::vector<std::pair<const void*, Watch>> watches_;
};

// Whether this process has used CUDA (forking ranks after that is not allowed: launch_nccl checks it).
void note_cuda_used();
bool cuda_used();

}  // namespace cpsim::cuda
