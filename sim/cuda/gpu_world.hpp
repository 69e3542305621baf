// The shared state of a cuda-threads launch: C ranks as threads of one process, all on one GPU.
//
// Matching happens on the host, the bytes move on the GPU:
//   - isend / irecv post an operation with an event recorded on the poster's compute stream (the send buffer is
//     written / the receive buffer is free). The rank that completes a match (same communicator, source,
//     destination and tag; oldest first) queues the device-to-device copy on its own comm stream, after both events,
//     and records a `done` event; both requests then make their rank's compute stream wait on it.
//   - collectives meet at a host rendezvous where every member publishes its buffers and events; each member copies
//     (or reduces) what it receives on its comm stream, and, at a second rendezvous, learns when the others have
//     finished reading its send buffer, which its compute stream then waits for before writing it again.
// The host waits only for matches and rendezvous (never for the GPU), with the launch's timeout, and stops waiting
// when a peer has failed or finished.
#pragma once
#include <cuda_runtime.h>

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace cpsim::cuda {

// A matched message: queued (issued) or refused (error), and the event after its copy.
struct Transfer {
  bool issued = false;
  std::string error;
  cudaEvent_t done = nullptr;
  ~Transfer();
};

struct PostedOp {
  std::uint64_t context = 0;
  int src = 0, dst = 0, tag = 0;  // world ranks
  void* ptr = nullptr;            // the send or receive buffer
  std::size_t bytes = 0;
  cudaEvent_t ready = nullptr;  // recorded on the poster's compute stream; owned
  cudaStream_t poster_comm = nullptr;
  std::shared_ptr<Transfer> transfer = std::make_shared<Transfer>();
  ~PostedOp();
};

// One communicator's members, meeting at rendezvous. Member i records slot i's events and the others wait on
// them, so the events belong to the group (which lives as long as the launch): a member that has finished may not
// take them away from one that is still to wait.
struct GpuGroup {
  explicit GpuGroup(std::vector<int> members);
  ~GpuGroup();
  GpuGroup(const GpuGroup&) = delete;
  GpuGroup& operator=(const GpuGroup&) = delete;
  struct Slot {
    const void* send = nullptr;
    void* recv = nullptr;
    cudaEvent_t ready = nullptr, done = nullptr;  // created by member i on its first use of the group
    int color = 0, key = 0;
  };
  std::vector<int> members;  // world ranks, in group order
  std::vector<Slot> slots;
  int arrived = 0;
  std::uint64_t generation = 0;
};

class GpuWorld {
 public:
  GpuWorld(int size, std::chrono::milliseconds timeout);
  int size() const { return size_; }

  // P2P. Returns the transfer both sides wait on. Throws when the launch has failed.
  std::shared_ptr<Transfer> post(std::unique_ptr<PostedOp> op, bool is_send);
  void cancel(const std::shared_ptr<Transfer>& t);  // an unmatched operation whose request is gone
  void wait_transfer(int me, const Transfer& t, int peer, const std::string& what);
  bool transfer_done(const Transfer& t);

  // Waits until every member of g has arrived (me is a world rank).
  void rendezvous(int me, GpuGroup& g, const std::string& what);
  // The group with this id, created with these members by the first member to ask.
  std::shared_ptr<GpuGroup> group(std::uint64_t id, const std::vector<int>& members);
  std::mutex& mutex() { return m_; }

  void finish(int rank);
  void fail(int rank, const std::string& what);
  int first_failed() const;
  std::string first_failure() const;

 private:
  enum Status { running, finished, failed };
  template <class Done>
  void wait_for(std::unique_lock<std::mutex>& lk, int me, Done done, const std::vector<int>& peers,
                const std::string& what);
  void issue(PostedOp& send, PostedOp& recv, cudaStream_t stream);

  int size_;
  std::chrono::milliseconds timeout_;
  mutable std::mutex m_;
  std::condition_variable cv_;
  std::vector<Status> status_;
  bool aborted_ = false;
  int first_failed_ = -1;
  std::string first_failure_;
  std::vector<std::deque<std::unique_ptr<PostedOp>>> sends_, recvs_;  // unmatched, per destination rank
  std::map<std::uint64_t, std::shared_ptr<GpuGroup>> groups_;
};

}  // namespace cpsim::cuda
