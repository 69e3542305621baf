// The mpi communicator, run by ctest under `mpirun -np 4` (tests/mpi/mpi.cmake): every process runs every test
// case; each launch runs the rank function on the 4 processes and hands the outcomes to rank 0, which checks
// them (the other processes check nothing, so only rank 0's doctest can fail). The checks are the CPU
// backends' (tests/comm/backend_cases.hpp) where they fit 4 ranks, the 2-D mesh among them, and these: a barrier
// nobody leaves early, and counting identical to the threads backend's.
#include <doctest/doctest.h>
#include <mpi.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "../comm/backend_cases.hpp"

namespace cpsim::test {
namespace {

constexpr int kRanks = 4;  // mpirun -np 4

std::vector<std::size_t> sizes_with_large() {
  auto v = edge_sizes();
  v.push_back(std::size_t{3} << 20);  // 3 MiB: past Open MPI's eager and pipelined protocols
  return v;
}

TEST_CASE("the mpi send and recv deliver messages of every size between rank pairs") {
  check_send_recv(Backend::mpi, kRanks);
}

TEST_CASE("the mpi isend and irecv deliver every size whatever order they are waited in") {
  check_isend_irecv(Backend::mpi, kRanks);
}

TEST_CASE("the mpi sendrecv exchanges around rings in both directions with unequal sizes") {
  check_sendrecv_rings(Backend::mpi, kRanks, edge_sizes());
}

TEST_CASE("the mpi all_gather returns every rank's chunk in rank order, in place or not") {
  check_all_gather(Backend::mpi, kRanks, sizes_with_large());
}

TEST_CASE("the mpi reduce_scatter sums every rank's chunk in f32, f64 and i64") {
  check_reduce_scatter(Backend::mpi, kRanks);
}

TEST_CASE("the mpi all_to_all hands chunk p of every rank to rank p") {
  check_all_to_all(Backend::mpi, kRanks, sizes_with_large());
}

TEST_CASE("the mpi all_reduce computes sum, max and min for counts C does not divide, in place or not") {
  check_all_reduce(Backend::mpi, kRanks);
}

TEST_CASE("the mpi split orders groups by key and leaves negative colors out") {
  check_split_orders(Backend::mpi, kRanks);
}

TEST_CASE("the mpi split makes the 2-D mesh of 4 ranks: a2a groups [0,1],[2,3] and ring groups [0,2],[1,3]") {
  check_split_mesh(Backend::mpi, kRanks);
}

TEST_CASE("the mpi communicator survives a stress of random messages between collectives") {
  check_stress(Backend::mpi, kRanks, 11, 24);
}

// Every rank leaves a mark (a file in a folder all processes of the job see) before each barrier; after it, all
// marks of that round must be there. One rank is late each round, so a barrier that does not wait is caught.
TEST_CASE("nobody leaves an mpi barrier before every rank entered it") {
  const char* dir_env = std::getenv("CPSIM_TEST_DIR");
  REQUIRE_MESSAGE(dir_env != nullptr, "the test runs through tests/mpi/mpirun.sh, which sets CPSIM_TEST_DIR");
  const std::filesystem::path dir = std::filesystem::path(dir_env) / "barrier";
  std::filesystem::create_directories(dir);
  run_checked(Backend::mpi, kRanks, [&](Communicator& comm) {
    Complaints bad;
    for (int k = 0; k < 8; ++k) {
      if (k % comm.size() == comm.rank()) std::this_thread::sleep_for(std::chrono::milliseconds(20));
      std::ofstream(dir / (std::to_string(k) + "-" + std::to_string(comm.rank()))).put('x');
      comm.barrier();
      for (int p = 0; p < comm.size(); ++p)
        bad.expect(std::filesystem::exists(dir / (std::to_string(k) + "-" + std::to_string(p))),
                   "left barrier " + std::to_string(k) + " before rank " + std::to_string(p) + " entered it");
    }
    return bad.result();
  });
}

// Every kind of call, on the world and on a group; the counts must be the threads backend's, rank by rank.
std::string every_call(Communicator& comm) {
  const int r = comm.rank(), c = comm.size(), next = (r + 1) % c, prev = (r + c - 1) % c;
  std::vector<std::byte> a(256), z(256 * c);
  comm.sendrecv(a.data(), 10, next, z.data(), 10, prev);
  Request s = comm.isend(a.data(), 11, next);
  Request q = comm.irecv(z.data(), 11, prev);
  q.wait();
  s.wait();
  if (r == 0) comm.send(a.data(), 12, 1);
  if (r == 1) comm.recv(z.data(), 12, 0);
  comm.all_gather(a.data(), z.data(), 5);
  comm.reduce_scatter(z.data(), a.data(), 3, DType::f64);
  comm.all_to_all(z.data(), a.data(), 7);
  comm.all_reduce(z.data(), a.data(), 6, DType::f32, ReduceOp::max);
  comm.all_reduce(z.data(), a.data(), 7, DType::f64, ReduceOp::sum);
  comm.barrier();
  auto sub = comm.split(r % 2, -r);
  sub->all_gather(a.data(), z.data(), 4);
  return std::string();
}

TEST_CASE("the mpi backend counts every call, byte and message as the threads backend does") {
  const auto mpi = launch(options(Backend::mpi, kRanks), every_call);
  const auto threads = launch(options(Backend::threads, kRanks), every_call);
  if (mpi.empty()) return;  // not rank 0
  REQUIRE(mpi.size() == threads.size());
  for (std::size_t r = 0; r < mpi.size(); ++r) {
    CAPTURE(r);
    const CommCounts &m = mpi[r].stats.comm_counts(), &t = threads[r].stats.comm_counts();
    CHECK(m.calls == t.calls);
    CHECK(m.bytes_sent == t.bytes_sent);
    CHECK(m.bytes_received == t.bytes_received);
    CHECK(m.messages_sent == t.messages_sent);
    CHECK(m.messages_received == t.messages_received);
  }
}

TEST_CASE("the mpi backend says which backend it is and numbers ranks as the MPI world does") {
  run_checked(Backend::mpi, kRanks, [](Communicator& comm) {
    int world_rank = -1;
    MPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
    Complaints bad;
    bad.expect(comm.backend() == "mpi", "backend() is " + comm.backend());
    bad.expect(comm.rank() == world_rank && comm.size() == kRanks, "rank " + std::to_string(comm.rank()));
    bad.expect(launcher_rank() == world_rank, "launcher_rank() is " + std::to_string(launcher_rank()));
    return bad.result();
  });
}

}  // namespace
}  // namespace cpsim::test
