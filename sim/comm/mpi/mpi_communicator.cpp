// The mpi communicator's point-to-point calls, all_gather, all_to_all, barrier and split (the reductions are in
// mpi_reductions.cpp). Design: mpi_communicator.hpp.
#include "sim/comm/mpi/mpi_communicator.hpp"

#include <exception>
#include <numeric>
#include <utility>

#include "sim/core/error.hpp"

namespace cpsim::mpi {
namespace {

std::string rank_word(int r) {
  return "rank " + std::to_string(r);
}

// The Error for a receive that did not get the size it posted. rc is the call's return code.
void check_received(int rc, const MPI_Status& st, std::size_t want, int me, int peer, int tag, const char* op) {
  const std::string posted = rank_word(me) + " posted " + op + " " + rank_word(peer) + " (tag " + std::to_string(tag) +
                             ") of " + std::to_string(want) + " bytes, but " + rank_word(peer);
  if (rc != MPI_SUCCESS) {
    int cls = 0;
    MPI_Error_class(rc, &cls);
    if (cls == MPI_ERR_TRUNCATE)
      throw Error(posted + " sent more than " + std::to_string(want) + " bytes: sizes must match");
    check(rc, rank_word(me) + " " + op + " " + rank_word(peer) + " (tag " + std::to_string(tag) + ")");
  }
  int got = 0;
  check(MPI_Get_count(&st, MPI_BYTE, &got), "MPI_Get_count");
  if (static_cast<std::size_t>(got) != want)
    throw Error(posted + " sent " + std::to_string(got) + " bytes: sizes must match");
}

}  // namespace

// A pending MPI_Isend / MPI_Irecv.
class MpiCommunicator::Req final : public Request::Impl {
 public:
  Req(std::shared_ptr<Watchdog> dog, const Call& call, bool receive, std::size_t bytes, int me)
      : dog_(std::move(dog)), call_(call), receive_(receive), bytes_(bytes), me_(me) {}
  ~Req() override {
    if (req_ == MPI_REQUEST_NULL) return;  // done (or never started)
    if (receive_) MPI_Cancel(&req_);       // an error path: the rank is about to fail anyway
    MPI_Request_free(&req_);
  }
  MPI_Request* handle() { return &req_; }

  void wait() override {
    if (req_ == MPI_REQUEST_NULL) return;
    // Waited by ~Request while an exception unwinds the rank: its peer may never come, and the job is about to
    // end (launch_mpi aborts it). Leave the request to ~Req rather than block the report of the real error.
    if (std::uncaught_exceptions() > 0) return;
    MPI_Status st;
    int rc = 0;
    {
      Watch w(*dog_, call_);
      rc = MPI_Wait(&req_, &st);
    }
    finish(rc, st);
  }
  bool test() override {
    if (req_ == MPI_REQUEST_NULL) return true;
    int done = 0;
    MPI_Status st;
    const int rc = MPI_Test(&req_, &done, &st);
    if (rc == MPI_SUCCESS && !done) return false;
    finish(rc, st);
    return true;
  }

 private:
  void finish(int rc, const MPI_Status& st) {
    req_ = MPI_REQUEST_NULL;
    if (receive_)
      check_received(rc, st, bytes_, me_, call_.peer, call_.tag, call_.op);
    else
      check(rc, rank_word(me_) + " " + call_.text());
  }

  std::shared_ptr<Watchdog> dog_;
  Call call_;
  bool receive_;
  std::size_t bytes_;
  int me_;
  MPI_Request req_ = MPI_REQUEST_NULL;
};

MpiCommunicator::MpiCommunicator(MPI_Comm comm, Recorder& rec, std::vector<int> world_ranks,
                                 std::shared_ptr<Watchdog> dog, bool native_reductions)
    : Communicator(
          [&] {
            int r = 0;
            MPI_Comm_rank(comm, &r);
            return r;
          }(),
          static_cast<int>(world_ranks.size()), rec, world_ranks),
      comm_(comm),
      dog_(std::move(dog)),
      native_reductions_(native_reductions) {
  check(MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN), "MPI_Comm_set_errhandler");
  int* ub = nullptr;
  int found = 0;
  MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_TAG_UB, &ub, &found);
  if (found && ub) tag_ub_ = *ub;
}

MpiCommunicator::~MpiCommunicator() {
  MPI_Comm_free(&comm_);
}

Call MpiCommunicator::p2p(const char* op, int peer, int tag) const {
  return Call{op, world_ranks()[peer], tag, -1, 0};
}

Call MpiCommunicator::collective(const char* op) {
  return Call{op, -1, -1, collectives_++, size()};
}

void MpiCommunicator::check_tag(int tag) const {
  require(
      tag <= tag_ub_,
      "tag " + std::to_string(tag) + " is above this MPI's largest tag (MPI_TAG_UB " + std::to_string(tag_ub_) + ")",
      "use a smaller tag");
}

std::byte* MpiCommunicator::scratch(std::size_t bytes) {
  if (scratch_.size() < bytes) scratch_.resize(bytes);
  return scratch_.data();
}

void MpiCommunicator::do_send(const void* buf, std::size_t bytes, int peer, int tag) {
  check_tag(tag);
  const Call call = p2p("send to", peer, tag);
  Watch w(*dog_, call);
  check(MPI_Send(buf, count_of(bytes, "send"), MPI_BYTE, peer, tag, comm_),
        rank_word(world_ranks()[rank()]) + " " + call.text());
}

void MpiCommunicator::do_recv(void* buf, std::size_t bytes, int peer, int tag) {
  check_tag(tag);
  MPI_Status st;
  int rc = 0;
  {
    Watch w(*dog_, p2p("recv from", peer, tag));
    rc = MPI_Recv(buf, count_of(bytes, "recv"), MPI_BYTE, peer, tag, comm_, &st);
  }
  check_received(rc, st, bytes, world_ranks()[rank()], world_ranks()[peer], tag, "recv from");
}

std::unique_ptr<Request::Impl> MpiCommunicator::do_isend(const void* buf, std::size_t bytes, int peer, int tag) {
  check_tag(tag);
  const Call call = p2p("isend to", peer, tag);
  auto req = std::make_unique<Req>(dog_, call, false, bytes, world_ranks()[rank()]);
  check(MPI_Isend(buf, count_of(bytes, "isend"), MPI_BYTE, peer, tag, comm_, req->handle()),
        rank_word(world_ranks()[rank()]) + " " + call.text());
  return req;
}

std::unique_ptr<Request::Impl> MpiCommunicator::do_irecv(void* buf, std::size_t bytes, int peer, int tag) {
  check_tag(tag);
  const Call call = p2p("irecv from", peer, tag);
  auto req = std::make_unique<Req>(dog_, call, true, bytes, world_ranks()[rank()]);
  check(MPI_Irecv(buf, count_of(bytes, "irecv"), MPI_BYTE, peer, tag, comm_, req->handle()),
        rank_word(world_ranks()[rank()]) + " " + call.text());
  return req;
}

void MpiCommunicator::do_sendrecv(const void* sendbuf, std::size_t send_bytes, int dst, void* recvbuf,
                                  std::size_t recv_bytes, int src, int tag) {
  check_tag(tag);
  MPI_Status st;
  int rc = 0;
  {
    Watch w(*dog_, p2p("sendrecv from", src, tag));
    rc = MPI_Sendrecv(sendbuf, count_of(send_bytes, "sendrecv (send)"), MPI_BYTE, dst, tag, recvbuf,
                      count_of(recv_bytes, "sendrecv (receive)"), MPI_BYTE, src, tag, comm_, &st);
  }
  check_received(rc, st, recv_bytes, world_ranks()[rank()], world_ranks()[src], tag, "sendrecv from");
}

void MpiCommunicator::do_all_gather(const void* sendbuf, void* recvbuf, std::size_t bytes_per_rank) {
  const int n = count_of(bytes_per_rank, "all_gather");
  // Our chunk already at its place in the output: MPI wants MPI_IN_PLACE rather than overlapping buffers.
  const bool in_place = sendbuf == static_cast<std::byte*>(recvbuf) + bytes_per_rank * rank();
  const Call call = collective("all_gather");
  Watch w(*dog_, call);
  check(MPI_Allgather(in_place ? MPI_IN_PLACE : sendbuf, n, MPI_BYTE, recvbuf, n, MPI_BYTE, comm_), call.text());
}

void MpiCommunicator::do_all_to_all(const void* sendbuf, void* recvbuf, std::size_t bytes_per_rank) {
  const int n = count_of(bytes_per_rank, "all_to_all");
  const Call call = collective("all_to_all");
  Watch w(*dog_, call);
  check(MPI_Alltoall(sendbuf == recvbuf ? MPI_IN_PLACE : sendbuf, n, MPI_BYTE, recvbuf, n, MPI_BYTE, comm_),
        call.text());
}

void MpiCommunicator::do_barrier() {
  const Call call = collective("barrier");
  Watch w(*dog_, call);
  check(MPI_Barrier(comm_), call.text());
}

std::unique_ptr<Communicator> MpiCommunicator::do_split(int color, int key) {
  // STEP 1: MPI orders the group by (key, old rank), as the interface asks; a negative color joins no group.
  MPI_Comm sub = MPI_COMM_NULL;
  {
    const Call call = collective("split");
    Watch w(*dog_, call);
    check(MPI_Comm_split(comm_, color < 0 ? MPI_UNDEFINED : color, key, &sub), call.text());
  }
  if (sub == MPI_COMM_NULL) return nullptr;
  // STEP 2: the group's members as world ranks of the launch: their ranks here, then ours' world ranks.
  int n = 0;
  MPI_Comm_size(sub, &n);
  MPI_Group sub_group, parent_group;
  MPI_Comm_group(sub, &sub_group);
  MPI_Comm_group(comm_, &parent_group);
  std::vector<int> in_sub(n), in_parent(n);
  std::iota(in_sub.begin(), in_sub.end(), 0);
  MPI_Group_translate_ranks(sub_group, n, in_sub.data(), parent_group, in_parent.data());
  MPI_Group_free(&sub_group);
  MPI_Group_free(&parent_group);
  std::vector<int> world(n);
  for (int i = 0; i < n; ++i) world[i] = world_ranks()[in_parent[i]];
  return std::make_unique<MpiCommunicator>(sub, recorder(), std::move(world), dog_, native_reductions_);
}

}  // namespace cpsim::mpi
