// A collective's view of its communicator: its rank and size, and sends/receives stamped with the call's
// envelope (kind + sequence number), so that ranks calling different collectives are caught.
#pragma once
#include <cstddef>

#include "sim/comm/p2p_communicator.hpp"

namespace cpsim::collectives {

struct Port {
  P2pCommunicator& comm;
  Envelope env;

  int rank() const { return comm.rank(); }
  int size() const { return comm.size(); }
  Pending send(const void* buf, std::size_t bytes, int peer) const { return comm.post_send(env, buf, bytes, peer); }
  Pending recv(void* buf, std::size_t bytes, int peer) const { return comm.post_recv(env, buf, bytes, peer); }
  // Receive-and-reduce: buf = op(message, fold.own) (fold.hpp).
  Pending recv_fold(void* buf, std::size_t bytes, int peer, const Fold& fold) const {
    return comm.post_recv(env, buf, bytes, peer, Landing{fold});
  }
};

}  // namespace cpsim::collectives
