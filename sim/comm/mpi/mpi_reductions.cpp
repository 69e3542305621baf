// The mpi communicator's reduce_scatter and all_reduce. Design: mpi_communicator.hpp.
//
// In the ring's order (the default), rank r's reduced chunk r is, as in collectives/ring_reduce_scatter.cpp,
//   combine(... combine(combine(x[r+1], x[r+2]), x[r+3]) ..., x[r])      (indices mod C)
// with x[p] = rank p's chunk r: the same operations on the same operands in the same order, so the same bits.
// Natively (CPSIM_MPI_REDUCTIONS=native, f32 / f64 / i64), MPI_Reduce_scatter_block and MPI_Allreduce.
#include <mpi.h>

#include <cstring>
#include <vector>

#include "sim/comm/collectives/collectives.hpp"
#include "sim/comm/collectives/reduce.hpp"
#include "sim/comm/mpi/mpi_communicator.hpp"

namespace cpsim::mpi {
namespace {

// MPI's type for a dtype; MPI_DATATYPE_NULL for bf16 (MPI has none).
MPI_Datatype mpi_type(DType t) {
  switch (t) {
    case DType::f32:
      return MPI_FLOAT;
    case DType::f64:
      return MPI_DOUBLE;
    case DType::i64:
      return MPI_INT64_T;
    case DType::bf16:
      return MPI_DATATYPE_NULL;
  }
  return MPI_DATATYPE_NULL;
}

MPI_Op mpi_op(ReduceOp op) {
  switch (op) {
    case ReduceOp::sum:
      return MPI_SUM;
    case ReduceOp::max:
      return MPI_MAX;
    case ReduceOp::min:
      return MPI_MIN;
  }
  return MPI_SUM;
}

// out = rank r's chunk reduced in the ring's order; slot p (stride bytes apart) holds rank p's contribution.
void reduce_in_ring_order(void* out, const std::byte* slots, std::size_t stride, int c, int r, std::size_t count,
                          DType dtype, ReduceOp op) {
  auto slot = [&](int k) { return slots + static_cast<std::size_t>((r + k) % c) * stride; };
  collectives::combine(out, slot(1), slot(2), count, dtype, op);
  for (int k = 3; k <= c; ++k) collectives::combine(out, out, slot(k), count, dtype, op);
}

bool overlaps(const void* a, std::size_t an, const void* b, std::size_t bn) {
  const auto* x = static_cast<const std::byte*>(a);
  const auto* y = static_cast<const std::byte*>(b);
  return an > 0 && bn > 0 && x < y + bn && y < x + an;
}

}  // namespace

void MpiCommunicator::do_reduce_scatter(const void* sendbuf, void* recvbuf, std::size_t count_per_rank, DType dtype) {
  const std::size_t n = count_per_rank * dtype_size(dtype);
  if (!native_reductions_ || dtype == DType::bf16)
    return ordered_reduce_scatter(sendbuf, recvbuf, count_per_rank, dtype);
  const Call call = collective("reduce_scatter");
  // recv may be our own chunk of send; MPI wants separate buffers.
  const void* send = sendbuf;
  if (overlaps(sendbuf, n * size(), recvbuf, n)) {
    std::byte* copy = scratch(n * size());
    std::memcpy(copy, sendbuf, n * size());
    send = copy;
  }
  Watch w(*dog_, call);
  check(MPI_Reduce_scatter_block(send, recvbuf, count_of(count_per_rank, "reduce_scatter"), mpi_type(dtype), MPI_SUM,
                                 comm_),
        call.text());
}

void MpiCommunicator::do_all_reduce(const void* sendbuf, void* recvbuf, std::size_t count, DType dtype, ReduceOp op) {
  // max and min are exact in any order; sums natively only when asked for.
  if (dtype == DType::bf16 || (op == ReduceOp::sum && !native_reductions_))
    return ordered_all_reduce(sendbuf, recvbuf, count, dtype, op);
  const Call call = collective("all_reduce");
  Watch w(*dog_, call);
  check(MPI_Allreduce(sendbuf == recvbuf ? MPI_IN_PLACE : sendbuf, recvbuf, count_of(count, "all_reduce"),
                      mpi_type(dtype), mpi_op(op), comm_),
        call.text());
}

void MpiCommunicator::ordered_reduce_scatter(const void* sendbuf, void* recvbuf, std::size_t count_per_rank,
                                             DType dtype) {
  const int c = size(), r = rank();
  const std::size_t n = count_per_rank * dtype_size(dtype);
  if (c == 1) {
    if (recvbuf != sendbuf && n > 0) std::memmove(recvbuf, sendbuf, n);
    return;
  }
  const Call call = collective("reduce_scatter");
  // STEP 1: every rank's chunk r, in slot p = rank p's.
  std::byte* slots = scratch(n * c);
  {
    Watch w(*dog_, call);
    const int k = count_of(n, "reduce_scatter");
    check(MPI_Alltoall(sendbuf, k, MPI_BYTE, slots, k, MPI_BYTE, comm_), call.text());
  }
  // STEP 2: add them up as the ring does.
  if (n > 0) reduce_in_ring_order(recvbuf, slots, n, c, r, count_per_rank, dtype, ReduceOp::sum);
}

void MpiCommunicator::ordered_all_reduce(const void* sendbuf, void* recvbuf, std::size_t count, DType dtype,
                                         ReduceOp op) {
  const int c = size(), r = rank();
  const std::size_t elem = dtype_size(dtype);
  if (c == 1) {
    if (recvbuf != sendbuf && count > 0) std::memmove(recvbuf, sendbuf, count * elem);
    return;
  }
  const Call call = collective("all_reduce");
  // The ring all-reduce's chunks: C runs whose lengths differ by at most one element.
  const collectives::Chunks chunks = collectives::Chunks::balanced(c, count, elem);
  std::vector<int> send_counts(c), send_displs(c), recv_counts(c), recv_displs(c), counts(c), displs(c);
  const std::size_t mine = chunks.bytes[r];
  for (int p = 0; p < c; ++p) {
    send_counts[p] = counts[p] = count_of(chunks.bytes[p], "all_reduce");
    send_displs[p] = displs[p] = count_of(chunks.offset[p], "all_reduce");
    recv_counts[p] = count_of(mine, "all_reduce");
    recv_displs[p] = count_of(mine * p, "all_reduce");
  }
  auto* out = static_cast<std::byte*>(recvbuf);
  std::byte* slots = scratch(mine * c);
  Watch w(*dog_, call);
  // STEP 1: every rank's chunk r, in slot p = rank p's (reduce-scatter's exchange).
  check(MPI_Alltoallv(sendbuf, send_counts.data(), send_displs.data(), MPI_BYTE, slots, recv_counts.data(),
                      recv_displs.data(), MPI_BYTE, comm_),
        call.text());
  // STEP 2: reduced chunk r at its place in the output (send may be recv: it was read in step 1).
  if (mine > 0) reduce_in_ring_order(out + chunks.offset[r], slots, mine, c, r, mine / elem, dtype, op);
  // STEP 3: every rank's reduced chunk (all-gather's exchange).
  check(MPI_Allgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, out, counts.data(), displs.data(), MPI_BYTE, comm_),
        call.text());
}

}  // namespace cpsim::mpi
