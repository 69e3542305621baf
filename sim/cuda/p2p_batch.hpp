// When an NCCL communicator launches the point-to-point operations it has been handed.
//
// NCCL matches a send and a receive by their order between two ranks, and on one stream a send waits until its
// receiver has posted the receive. A ring step is isend(to next) + irecv(from previous) on every rank: launched
// one call at a time, every rank's send would wait for a receive queued behind its neighbour's own send, a cycle.
// So isend and irecv are held back and launched together, as one ncclGroupStart/End:
//   - when a receive is added to a batch that already holds a send (the exchange of a ring step: launched at once,
//     so that the transfer overlaps the compute that follows), or
//   - when any request of the batch is waited or tested, or any other call is made on the communicator.
// Tags are not sent: between two ranks, messages must be received in the order they were sent (true of every
// strategy in cpsim; the CPU backends also match by tag).
#pragma once
#include <cstddef>

namespace cpsim::cuda {

class P2pBatch {
 public:
  // Adds an operation; true when the batch is to be launched now.
  bool add(bool is_send) {
    ++ops_;
    if (is_send) {
      ++sends_;
      return false;
    }
    return sends_ > 0;
  }
  void clear() { ops_ = sends_ = 0; }
  bool empty() const { return ops_ == 0; }
  std::size_t size() const { return ops_; }

 private:
  std::size_t ops_ = 0, sends_ = 0;
};

}  // namespace cpsim::cuda
