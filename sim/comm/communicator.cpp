// The counting half of every communicator: the public calls check their arguments, call the backend (do_*),
// and record the call, its logical bytes and messages (conventions in communicator.hpp) and the time blocked.
#include "sim/comm/communicator.hpp"

#include <utility>

#include "sim/core/error.hpp"

namespace cpsim {

const char* algorithm_name(CollectiveAlgorithm a) {
  return a == CollectiveAlgorithm::ring ? "ring" : "direct";
}

std::vector<int> rank_range(int first, int count) {
  std::vector<int> v(static_cast<std::size_t>(count));
  for (int i = 0; i < count; ++i) v[static_cast<std::size_t>(i)] = first + i;
  return v;
}

Request::Request(std::unique_ptr<Impl> impl, Recorder* rec, std::string what, int peer)
    : impl_(std::move(impl)), rec_(rec), what_(std::move(what)), peer_(peer) {}

Request::~Request() {
  if (!impl_) return;
  try {
    impl_->wait();
  } catch (...) {  // destructors must not throw; the failure surfaces through the rank's other calls
  }
}

void Request::wait() {
  if (!impl_) return;
  auto impl = std::move(impl_);  // a request completes once; on error the backend cancels it in ~Impl
  const double t0 = rec_ ? rec_->now_us() : 0;
  impl->wait();
  if (rec_) rec_->wait(what_, peer_, t0, rec_->now_us() - t0);
}

bool Request::test() {
  if (!impl_) return true;
  if (!impl_->test()) return false;
  impl_.reset();
  return true;
}

Communicator::Communicator(int rank, int size, Recorder& rec, std::vector<int> world_ranks)
    : rank_(rank), size_(size), rec_(&rec), world_ranks_(std::move(world_ranks)) {}

namespace {

void check_peer(int peer, int size, const char* call) {
  if (peer < 0 || peer >= size) {
    throw UsageError(std::string(call) + " names rank " + std::to_string(peer) +
                     ", but this communicator has ranks 0.." + std::to_string(size - 1) +
                     "; use a rank of this communicator (sub-communicators renumber from 0)");
  }
}

// The checks below run on every call: their messages are built only when they fail (require joins them).
void check_tag(int tag, const char* call) {
  if (tag < 0)
    require(false, std::string(call) + " with tag " + std::to_string(tag) + ": tags must be >= 0", "use a tag >= 0");
}

void check_buffer(const void* buf, std::size_t bytes, const char* call) {
  if (buf == nullptr && bytes != 0)
    require(false, std::string(call) + " of " + std::to_string(bytes) + " bytes from a null buffer",
            "pass a buffer of that size (null is allowed for 0 bytes only)");
}

std::int64_t i64(std::size_t n) {
  return static_cast<std::int64_t>(n);
}

}  // namespace

// One blocking call: run it, then count it as a comm event and as idle time (the whole call).
template <class F>
static void timed(Recorder& rec, const char* kind, std::int64_t sent, std::int64_t received, int msgs_sent,
                  int msgs_received, int peer, const std::vector<int>& group, F&& call) {
  const double t0 = rec.now_us();
  call();
  const double dur = rec.now_us() - t0;
  rec.comm(kind, sent, received, msgs_sent, msgs_received, peer, group, t0, dur);
  rec.wait(kind, peer, t0, dur);
}

void Communicator::send(const void* buf, std::size_t bytes, int peer, int tag) {
  check_peer(peer, size_, "send");
  check_tag(tag, "send");
  check_buffer(buf, bytes, "send");
  timed(*rec_, "send", i64(bytes), 0, 1, 0, world_ranks_[peer], {}, [&] { do_send(buf, bytes, peer, tag); });
}

void Communicator::recv(void* buf, std::size_t bytes, int peer, int tag) {
  check_peer(peer, size_, "recv");
  check_tag(tag, "recv");
  check_buffer(buf, bytes, "recv");
  timed(*rec_, "recv", 0, i64(bytes), 0, 1, world_ranks_[peer], {}, [&] { do_recv(buf, bytes, peer, tag); });
}

Request Communicator::isend(const void* buf, std::size_t bytes, int peer, int tag) {
  check_peer(peer, size_, "isend");
  check_tag(tag, "isend");
  check_buffer(buf, bytes, "isend");
  const double t0 = rec_->now_us();
  auto impl = do_isend(buf, bytes, peer, tag);
  rec_->comm("isend", i64(bytes), 0, 1, 0, world_ranks_[peer], {}, t0, rec_->now_us() - t0);
  return Request(std::move(impl), rec_, "isend", world_ranks_[peer]);
}

Request Communicator::irecv(void* buf, std::size_t bytes, int peer, int tag) {
  check_peer(peer, size_, "irecv");
  check_tag(tag, "irecv");
  check_buffer(buf, bytes, "irecv");
  const double t0 = rec_->now_us();
  auto impl = do_irecv(buf, bytes, peer, tag);
  rec_->comm("irecv", 0, i64(bytes), 0, 1, world_ranks_[peer], {}, t0, rec_->now_us() - t0);
  return Request(std::move(impl), rec_, "irecv", world_ranks_[peer]);
}

void Communicator::sendrecv(const void* sendbuf, std::size_t send_bytes, int dst, void* recvbuf, std::size_t recv_bytes,
                            int src, int tag) {
  check_peer(dst, size_, "sendrecv (destination)");
  check_peer(src, size_, "sendrecv (source)");
  check_tag(tag, "sendrecv");
  check_buffer(sendbuf, send_bytes, "sendrecv (send)");
  check_buffer(recvbuf, recv_bytes, "sendrecv (receive)");
  // The trace names the destination as the peer; the source is the previous rank of the same ring.
  timed(*rec_, "sendrecv", i64(send_bytes), i64(recv_bytes), 1, 1, world_ranks_[dst], {},
        [&] { do_sendrecv(sendbuf, send_bytes, dst, recvbuf, recv_bytes, src, tag); });
}

void Communicator::all_gather(const void* sendbuf, void* recvbuf, std::size_t bytes_per_rank) {
  check_buffer(sendbuf, bytes_per_rank, "all_gather (send)");
  check_buffer(recvbuf, bytes_per_rank, "all_gather (receive)");
  const std::int64_t moved = i64(bytes_per_rank) * (size_ - 1);
  timed(*rec_, "all_gather", moved, moved, size_ - 1, size_ - 1, -1, world_ranks_,
        [&] { do_all_gather(sendbuf, recvbuf, bytes_per_rank); });
}

void Communicator::reduce_scatter(const void* sendbuf, void* recvbuf, std::size_t count_per_rank, DType dtype) {
  const std::size_t n = count_per_rank * dtype_size(dtype);
  check_buffer(sendbuf, n, "reduce_scatter (send)");
  check_buffer(recvbuf, n, "reduce_scatter (receive)");
  const std::int64_t moved = i64(n) * (size_ - 1);
  timed(*rec_, "reduce_scatter", moved, moved, size_ - 1, size_ - 1, -1, world_ranks_,
        [&] { do_reduce_scatter(sendbuf, recvbuf, count_per_rank, dtype); });
}

void Communicator::all_to_all(const void* sendbuf, void* recvbuf, std::size_t bytes_per_rank) {
  check_buffer(sendbuf, bytes_per_rank, "all_to_all (send)");
  check_buffer(recvbuf, bytes_per_rank, "all_to_all (receive)");
  const std::int64_t moved = i64(bytes_per_rank) * (size_ - 1);
  timed(*rec_, "all_to_all", moved, moved, size_ - 1, size_ - 1, -1, world_ranks_,
        [&] { do_all_to_all(sendbuf, recvbuf, bytes_per_rank); });
}

void Communicator::all_reduce(const void* sendbuf, void* recvbuf, std::size_t count, DType dtype, ReduceOp op) {
  const std::size_t n = count * dtype_size(dtype);
  check_buffer(sendbuf, n, "all_reduce (send)");
  check_buffer(recvbuf, n, "all_reduce (receive)");
  const std::int64_t moved = 2 * i64(n) * (size_ - 1) / size_;
  timed(*rec_, "all_reduce", moved, moved, 2 * (size_ - 1), 2 * (size_ - 1), -1, world_ranks_,
        [&] { do_all_reduce(sendbuf, recvbuf, count, dtype, op); });
}

void Communicator::barrier() {
  timed(*rec_, "barrier", 0, 0, 0, 0, -1, world_ranks_, [&] { do_barrier(); });
}

std::unique_ptr<Communicator> Communicator::split(int color, int key) {
  std::unique_ptr<Communicator> sub;
  const std::int64_t moved = 8 * std::int64_t{size_ - 1};
  timed(*rec_, "split", moved, moved, size_ - 1, size_ - 1, -1, world_ranks_, [&] { sub = do_split(color, key); });
  return sub;
}

}  // namespace cpsim
