// The threads backend against the definitions of every call (backend_cases.hpp), for C in {1, 2, 3, 4} (and 8 in
// the mesh).
// These cases also run under ThreadSanitizer (ctest comm.tsan, CMakeLists.tsan.cmake).
#include "backend_cases.hpp"

using namespace cpsim;
using namespace cpsim::test;

namespace {
constexpr Backend kB = Backend::threads;
const int kRanks[] = {1, 2, 3, 4};
}  // namespace

TEST_CASE("threads: blocking send and recv deliver every size between paired ranks") {
  for (int c : kRanks) {
    CAPTURE(c);
    check_send_recv(kB, c);
  }
}

TEST_CASE("threads: isend and irecv complete in any wait order, and test() polls them to completion") {
  for (int c : kRanks) {
    CAPTURE(c);
    check_isend_irecv(kB, c);
  }
}

TEST_CASE("threads: sendrecv rings run forwards and backwards without deadlock") {
  for (int c : kRanks) {
    CAPTURE(c);
    check_sendrecv_rings(kB, c, edge_sizes());
  }
}

TEST_CASE("threads: all_gather returns every rank's bytes in rank order, in place too") {
  for (int c : kRanks) {
    CAPTURE(c);
    check_all_gather(kB, c, edge_sizes());
  }
}

TEST_CASE("threads: reduce_scatter leaves each rank the sum of its chunk over all ranks") {
  for (int c : kRanks) {
    CAPTURE(c);
    check_reduce_scatter(kB, c);
  }
}

TEST_CASE("threads: a receive with a fold lands op(message, own), whichever rank makes the pass") {
  check_receive_with_fold(kB);
}

TEST_CASE("threads: all_to_all delivers chunk p of every rank to rank p") {
  for (int c : kRanks) {
    CAPTURE(c);
    check_all_to_all(kB, c, edge_sizes());
  }
}

TEST_CASE("threads: all_reduce computes sum, max and min for counts C does not divide") {
  for (int c : kRanks) {
    CAPTURE(c);
    check_all_reduce(kB, c);
  }
}

TEST_CASE("threads: no rank leaves a barrier before the last one arrives") {
  for (int c : kRanks) {
    CAPTURE(c);
    check_barrier(kB, c);
  }
}

TEST_CASE("threads: split builds the 2-D mesh of C=8, A=2 and keeps its messages apart from the world's") {
  check_split_mesh(kB);
}

TEST_CASE("threads: split orders groups by key and leaves negative colors out") {
  for (int c : kRanks) {
    CAPTURE(c);
    check_split_orders(kB, c);
  }
}

TEST_CASE("threads: random messages in random orders arrive intact (seeded)") {
  check_stress(kB, 4, 20240601, 40);
  check_stress(kB, 3, 7, 30);
}

TEST_CASE("threads: messages sent before their receives arrive intact while the receives race the sends") {
  // Rank 0 posts every message at once without waiting, so most wait in rank 1's mailbox; rank 1 posts its receives
  // at the same time, taking some as they arrive.
  constexpr int kMessages = 200;
  run_checked(kB, 2, [](Communicator& comm) {
    Complaints bad;
    std::vector<Bytes> bufs(kMessages);
    std::vector<Request> reqs;
    auto size_of = [](int i) { return std::size_t{1} + (static_cast<std::size_t>(i) * 331) % 20000; };
    for (int i = 0; i < kMessages; ++i) {
      const std::size_t n = size_of(i);
      bufs[i] = comm.rank() == 0 ? payload(0, n, i) : Bytes(n);
      reqs.push_back(comm.rank() == 0 ? comm.isend(bufs[i].data(), n, 1, 3) : comm.irecv(bufs[i].data(), n, 0, 3));
    }
    for (Request& q : reqs) q.wait();
    if (comm.rank() == 1)
      for (int i = 0; i < kMessages; ++i)
        bad.add(expect_payload(bufs[i].data(), 0, size_of(i), i, tag_of("small message", size_of(i))));
    return bad.result();
  });
}

TEST_CASE("threads: every call is counted by the conventions, with peers and groups in world ranks") {
  check_counting(kB);
}

TEST_CASE("threads: a rank that throws fails the run within seconds, naming the rank and its error") {
  check_a_rank_that_throws(kB);
}

TEST_CASE("threads: a deadlock is reported by the timeout, naming the rank, the call and the peer") {
  check_a_deadlock_is_reported(kB);
}

TEST_CASE("threads: a receive of a different size than the send is an error naming both sizes") {
  check_mismatched_sizes(kB, 100);
  check_mismatched_sizes(kB, 70001);
}

TEST_CASE("threads: ranks calling different collectives are told so") {
  check_mismatched_collectives(kB);
}

TEST_CASE("threads: a collective that one rank never calls fails once that rank has finished") {
  check_a_collective_called_by_some_ranks_only(kB);
}

TEST_SUITE("slow") {
  TEST_CASE("threads: 64 MiB messages cross sendrecv rings, all_gather and all_to_all intact") {
    const std::size_t big = std::size_t{64} << 20;
    check_sendrecv_rings(kB, 4, {big});
    check_all_gather(kB, 4, {big / 4});
    check_all_to_all(kB, 4, {big / 4});
  }
}
