// Your file: ring attention, backward. Judge it with `cpsim judge ring_backward`.
//
// As handed out it builds and fails the judge: it computes only step 0, this rank's queries against the K/V it
// starts with, and writes their gradients straight into dq, dk and dv. That is right for C = 1 only: with more
// ranks those dk, dv belong to rank r+1's keys, and dq misses every other block.
// The interface and the library calls you need are described in exercise.hpp.
#include "exercises/ring_backward/exercise.hpp"

namespace cpsim::exercise {

void ring_attention_backward(Communicator& comm, Device& dev, const SeqLayout& layout, const Buffer& q,
                             const Buffer& k_last, const Buffer& v_last, const Buffer& out, const Buffer& lse,
                             const Buffer& dout, const Buffer& dq, const Buffer& dk, const Buffer& dv, double scale) {
  const int r = comm.rank(), C = comm.size();
  const AttentionOptions causal{true, scale, std::nullopt};

  // Step 0: my queries against the K/V I hold, rank r+1's. attention_backward uses the saved final out and lse
  // and ADDS the block's gradients into the dq, dk, dv views it is given.
  dev.attention_backward(View(q), layout.positions(r), View(k_last), View(v_last), layout.positions((r + 1) % C),
                         View(out), View(lse), View(dout), View(dq), View(dk), View(dv), causal);

  // TODO: steps 0 .. C-1, each on the K/V of owner o = (r + 1 + i) mod C.
  //   - keep a dK/dV accumulator beside the K/V you hold (zero at step 0) and add each block's dk, dv into it
  //     (the block's dq goes into dq: it stays here)
  //   - after every step but the last, pass K/V and the accumulator to rank r-1 and take the next pair from
  //     rank r+1 (start the K/V exchange before computing, wait before you reuse a buffer)
  //   - after the last step the accumulator is your own keys' dK/dV, complete: copy it into dk and dv
}

}  // namespace cpsim::exercise
