// The counting communicator: every call is counted by the Communicator base (as on every backend) and appended
// to the rank's Program, but no byte moves and nothing blocks, except split, which must learn the other ranks'
// colors. Ranks run as threads of one process sharing a CountingWorld: the split rendezvous, the communicators'
// member lists, and run slots that bound how many ranks run at once (memory at C = 256, S = 1M). A freed slot goes
// to the rank that has waited longest, and only that rank is woken (waking every waiting rank at each release
// cost O(C^2) wake-ups at C = 1024); a split wakes only its own members.
#pragma once
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <utility>
#include <vector>

#include "sim/comm/communicator.hpp"
#include "sim/core/error.hpp"
#include "sim/model/program.hpp"

namespace cpsim::model {

// Thrown in the ranks still waiting in split after another rank failed.
struct SplitAbandoned : Error {
  SplitAbandoned() : Error("split abandoned: another rank failed") {}
};

class CountingWorld {
 public:
  // ranks: the world size; slots: ranks allowed to run at once (>= 1).
  CountingWorld(int ranks, int slots);

  // Run slots: a rank holds one while it runs, and lends it back while it waits in split.
  void acquire();
  void release();

  struct SplitResult {
    int context = -1;  // -1: a negative color joins no group
    int rank = 0;      // this rank's place in the new communicator
    std::vector<int> world_ranks;
  };
  // The `index`-th split of communicator `context`, called by its member `member` with (color, key). Blocks
  // until every member has called it; groups are ordered by (key, member). Throws Error after abort().
  SplitResult split(int context, std::int64_t index, int member, int color, int key);

  // A rank failed: wakes every waiting rank (they throw) so that the launch ends.
  void abort();
  std::vector<std::vector<int>> groups() const;  // groups[context]: world ranks, in communicator rank order

 private:
  struct Rendezvous {
    std::vector<std::pair<int, int>> color_key;  // per member: (color, key)
    int arrived = 0, left = 0;
    bool done = false;
    std::vector<SplitResult> result;  // per member
    std::condition_variable cv;       // its members wait here for the last one
  };
  struct Waiter {  // a rank waiting for a slot
    std::condition_variable cv;
    bool granted = false;
  };
  void resolve(int context, Rendezvous& r);
  void take_slot(std::unique_lock<std::mutex>& lock);  // waits for a slot (FIFO); returns at once after abort
  void give_slot();                                    // to the longest waiter, else back to the pool

  mutable std::mutex mu_;
  std::vector<std::vector<int>> groups_;
  std::map<std::pair<int, std::int64_t>, Rendezvous> splits_;
  std::deque<Waiter*> waiting_;  // ranks waiting for a slot, oldest first
  int free_slots_;
  bool aborted_ = false;
};

class CountingCommunicator : public Communicator {
 public:
  // The world communicator of `rank`.
  CountingCommunicator(int rank, int size, Recorder& rec, CountingWorld& world, Program& program);

  std::string backend() const override { return "counting"; }
  int context() const { return context_; }

 protected:
  void do_send(const void* buf, std::size_t bytes, int peer, int tag) override;
  void do_recv(void* buf, std::size_t bytes, int peer, int tag) override;
  std::unique_ptr<Request::Impl> do_isend(const void* buf, std::size_t bytes, int peer, int tag) override;
  std::unique_ptr<Request::Impl> do_irecv(void* buf, std::size_t bytes, int peer, int tag) override;
  void do_sendrecv(const void* sendbuf, std::size_t send_bytes, int dst, void* recvbuf, std::size_t recv_bytes, int src,
                   int tag) override;
  void do_all_gather(const void* sendbuf, void* recvbuf, std::size_t bytes_per_rank) override;
  void do_reduce_scatter(const void* sendbuf, void* recvbuf, std::size_t count_per_rank, DType dtype) override;
  void do_all_to_all(const void* sendbuf, void* recvbuf, std::size_t bytes_per_rank) override;
  void do_all_reduce(const void* sendbuf, void* recvbuf, std::size_t count, DType dtype, ReduceOp op) override;
  void do_barrier() override;
  std::unique_ptr<Communicator> do_split(int color, int key) override;

 private:
  CountingCommunicator(int rank, int size, Recorder& rec, std::vector<int> world_ranks, CountingWorld& world,
                       Program& program, int context);
  int post(OpKind kind, std::size_t bytes, int peer, int tag);  // appends an isend / irecv, returns its request
  void wait_for(int request);
  void collective(Collective c, std::size_t bytes);

  CountingWorld& world_;
  Program& program_;
  int context_ = 0;
  std::int64_t splits_ = 0;
};

}  // namespace cpsim::model
