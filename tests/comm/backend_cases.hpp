// The checks every CPU backend must pass, written once; threads_backend_test.cpp and processes_backend_test.cpp
// run them on their backend. Each check launches C ranks whose function does the calls and compares what
// arrived with what the definition of the call says must arrive.
#pragma once
#include <algorithm>
#include <random>

#include "comm_test_support.hpp"
#include "sim/comm/collectives/reduce.hpp"
#include "sim/comm/p2p_communicator.hpp"

namespace cpsim::test {

// The mailboxes (sim/comm/mailbox.hpp) take one path whatever a message's size, so the sizes are the edges of a
// copy: none, one byte, a few bytes short of a line, and odd sizes of many pages (no multiple of a line or a page).
inline std::vector<std::size_t> edge_sizes() {
#ifdef CPSIM_TSAN  // ThreadSanitizer is about 10x slower: the largest size adds no path
  return {0, 1, 61, 70001};
#endif
  return {0, 1, 61, 70001, (std::size_t{1} << 20) + 13};
}

inline std::string tag_of(const char* what, std::size_t n) {
  return std::string(what) + " of " + std::to_string(n) + " bytes";
}

// Blocking send/recv between rank pairs (0,1), (2,3), ...: the even rank sends first, the odd rank receives
// first, then the other way. An unpaired last rank sends to itself with isend + recv.
inline void check_send_recv(Backend b, int c) {
  run_checked(b, c, [](Communicator& comm) {
    Complaints bad;
    const int r = comm.rank();
    const int partner = (r % 2 == 0) ? r + 1 : r - 1;
    std::uint64_t salt = 0;
    for (std::size_t n : edge_sizes()) {
      ++salt;
      Bytes in(n);
      if (partner >= comm.size()) {
        Bytes out = payload(r, n, salt);
        Request s = comm.isend(out.data(), n, r, 5);
        comm.recv(in.data(), n, r, 5);
        s.wait();
        bad.add(expect_payload(in.data(), r, n, salt, tag_of("self message", n)));
        continue;
      }
      const Bytes out = payload(r, n, salt);
      if (r % 2 == 0) {
        comm.send(out.data(), n, partner, 5);
        comm.recv(in.data(), n, partner, 5);
      } else {
        comm.recv(in.data(), n, partner, 5);
        comm.send(out.data(), n, partner, 5);
      }
      bad.add(expect_payload(in.data(), partner, n, salt, tag_of("recv", n)));
    }
    return bad.result();
  });
}

// isend to the next rank, irecv from the previous one, waited in three orders (receive first, send first,
// polling test()).
inline void check_isend_irecv(Backend b, int c) {
  run_checked(b, c, [](Communicator& comm) {
    Complaints bad;
    const int r = comm.rank(), c = comm.size();
    const int next = (r + 1) % c, prev = (r - 1 + c) % c;
    std::uint64_t salt = 100;
    int order = 0;
    for (std::size_t n : edge_sizes()) {
      ++salt;
      const Bytes out = payload(r, n, salt);
      Bytes in(n);
      Request s = comm.isend(out.data(), n, next, 1);
      Request q = comm.irecv(in.data(), n, prev, 1);
      switch (order++ % 3) {
        case 0:
          q.wait();
          s.wait();
          break;
        case 1:
          s.wait();
          q.wait();
          break;
        default:
          while (!(q.test() & s.test())) std::this_thread::yield();
          bad.expect(!q.valid() && !s.valid(), "test() returned true but left the request pending");
      }
      bad.add(expect_payload(in.data(), prev, n, salt, tag_of("irecv", n)));
    }
    return bad.result();
  });
}

// Ring exchanges with sendrecv, forwards (to r+1, from r-1) and backwards, with every rank sending a
// different size (rank r sends n + r bytes).
inline void check_sendrecv_rings(Backend b, int c, const std::vector<std::size_t>& sizes) {
  run_checked(b, c, [&](Communicator& comm) {
    Complaints bad;
    const int r = comm.rank(), c = comm.size();
    const int next = (r + 1) % c, prev = (r - 1 + c) % c;
    std::uint64_t salt = 200;
    for (std::size_t n : sizes) {
      for (int dir : {+1, -1}) {
        ++salt;
        const int to = dir > 0 ? next : prev, from = dir > 0 ? prev : next;
        const Bytes out = payload(r, n + r, salt);
        Bytes in(n + from);
        comm.sendrecv(out.data(), out.size(), to, in.data(), in.size(), from, 7);
        bad.add(
            expect_payload(in.data(), from, in.size(), salt, tag_of(dir > 0 ? "forward ring" : "backward ring", n)));
      }
    }
    return bad.result();
  });
}

inline void check_all_gather(Backend b, int c, const std::vector<std::size_t>& sizes) {
  run_checked(b, c, [&](Communicator& comm) {
    Complaints bad;
    const int r = comm.rank(), c = comm.size();
    std::uint64_t salt = 300;
    for (std::size_t n : sizes) {
      ++salt;
      const Bytes mine = payload(r, n, salt);
      Bytes all(n * c);
      comm.all_gather(mine.data(), all.data(), n);
      for (int p = 0; p < c; ++p)
        bad.add(expect_payload(all.data() + p * n, p, n, salt, tag_of("all_gather chunk", n)));
      if (n >= (1u << 20)) continue;  // the in-place path is the same for every size
      // In place: our chunk already sits at its place in the output.
      Bytes in_place(n * c);
      if (n > 0) std::memcpy(in_place.data() + r * n, mine.data(), n);
      comm.all_gather(in_place.data() + r * n, in_place.data(), n);
      bad.expect(in_place == all, tag_of("in-place all_gather differs, size", n));
    }
    return bad.result();
  });
}

// Small integers, so sums are exact in every dtype.
inline double element(int rank, std::size_t i) {
  return static_cast<double>((rank * 7 + i * 3) % 41) - 20;
}

template <class T>
std::vector<T> elements(int rank, std::size_t count) {
  std::vector<T> v(count);
  for (std::size_t i = 0; i < count; ++i) v[i] = static_cast<T>(element(rank, i));
  return v;
}

template <class T>
std::string reduce_scatter_one(Communicator& comm, std::size_t count, DType dtype) {
  const int r = comm.rank(), c = comm.size();
  const auto send = elements<T>(r, count * c);
  std::vector<T> recv(count, T(-999));
  comm.reduce_scatter(send.data(), recv.data(), count, dtype);
  for (std::size_t i = 0; i < count; ++i) {
    double want = 0;
    for (int p = 0; p < c; ++p) want += element(p, r * count + i);
    if (static_cast<double>(recv[i]) != want) {
      return "reduce_scatter " + std::string(dtype_name(dtype)) + " count " + std::to_string(count) + ": element " +
             std::to_string(i) + " is " + std::to_string(static_cast<double>(recv[i])) + ", expected " +
             std::to_string(want) + "; ";
    }
  }
  return {};
}

inline std::vector<std::size_t> edge_counts() {
  return {0, 1, 5, 4097, 70001};
}

inline void check_reduce_scatter(Backend b, int c) {
  run_checked(b, c, [](Communicator& comm) {
    Complaints bad;
    for (std::size_t count : edge_counts()) {
      bad.add(reduce_scatter_one<float>(comm, count, DType::f32));
      bad.add(reduce_scatter_one<double>(comm, count, DType::f64));
      bad.add(reduce_scatter_one<std::int64_t>(comm, count, DType::i64));
    }
    return bad.result();
  });
}

// A receive with a fold (sim/comm/fold.hpp) lands op(message, own), posted before its message arrives or after.
// Rank 0 sends, rank 1 folds; the expected values come from combine(), whose arithmetic collectives_test.cpp checks.
inline void check_receive_with_fold(Backend b) {
  struct Kind {
    DType dtype;
    ReduceOp op;
  };
  const Kind kinds[] = {{DType::f32, ReduceOp::sum},
                        {DType::f64, ReduceOp::max},
                        {DType::i64, ReduceOp::min},
                        {DType::bf16, ReduceOp::sum}};
  const std::size_t counts[] = {0, 7, 70001};
  run_checked(b, 2, [&](Communicator& comm) {
    auto& p2p = dynamic_cast<P2pCommunicator&>(comm);
    Complaints bad;
    int tag = 0;
    for (const Kind& k : kinds) {
      for (std::size_t count : counts) {
        for (bool receive_first : {true, false}) {
          const std::size_t bytes = count * dtype_size(k.dtype);
          const Envelope env{p2p.context(), Channel::p2p, CollectiveKind::none, ++tag, 0};
          const Bytes message = payload(0, bytes, tag), own = payload(1, bytes, tag);
          if (comm.rank() == 0) {
            if (!receive_first) {
              Pending s = p2p.post_send(env, message.data(), bytes, 1);
              comm.barrier();
              wait(s);
            } else {
              comm.barrier();
              Pending s = p2p.post_send(env, message.data(), bytes, 1);
              wait(s);
            }
            continue;
          }
          Bytes got(bytes), want(bytes);
          Pending r;
          if (receive_first) r = p2p.post_recv(env, got.data(), bytes, 0, Landing{Fold{own.data(), k.dtype, k.op}});
          comm.barrier();
          if (!receive_first) r = p2p.post_recv(env, got.data(), bytes, 0, Landing{Fold{own.data(), k.dtype, k.op}});
          wait(r);
          collectives::combine(want.data(), message.data(), own.data(), count, k.dtype, k.op);
          bad.expect(got == want, "fold " + std::string(dtype_name(k.dtype)) + " of " + std::to_string(count) +
                                      (receive_first ? ", receive first" : ", message first"));
        }
      }
    }
    return bad.result();
  });
}

inline void check_all_to_all(Backend b, int c, const std::vector<std::size_t>& sizes) {
  run_checked(b, c, [&](Communicator& comm) {
    Complaints bad;
    const int r = comm.rank(), c = comm.size();
    std::uint64_t salt = 400;
    for (std::size_t n : sizes) {
      salt += 100;
      // Chunk p of rank r's input is the message (r -> p): pattern of rank r, salt + p.
      Bytes send(n * c), recv(n * c);
      for (int p = 0; p < c; ++p) {
        const Bytes chunk = payload(r, n, salt + p);
        if (n > 0) std::memcpy(send.data() + p * n, chunk.data(), n);
      }
      comm.all_to_all(send.data(), recv.data(), n);
      for (int p = 0; p < c; ++p)
        bad.add(expect_payload(recv.data() + p * n, p, n, salt + r, tag_of("all_to_all chunk", n)));
    }
    return bad.result();
  });
}

template <class T>
std::string all_reduce_one(Communicator& comm, std::size_t count, DType dtype, ReduceOp op, bool in_place) {
  const int r = comm.rank(), c = comm.size();
  auto send = elements<T>(r, count);
  std::vector<T> out(count, T(-999));
  T* recv = in_place ? send.data() : out.data();
  comm.all_reduce(send.data(), recv, count, dtype, op);
  for (std::size_t i = 0; i < count; ++i) {
    double want = element(0, i);
    for (int p = 1; p < c; ++p) {
      const double v = element(p, i);
      want = op == ReduceOp::sum ? want + v : op == ReduceOp::max ? std::max(want, v) : std::min(want, v);
    }
    if (static_cast<double>(recv[i]) != want) {
      const char* name = op == ReduceOp::sum ? "sum" : op == ReduceOp::max ? "max" : "min";
      return std::string("all_reduce ") + name + " " + std::string(dtype_name(dtype)) + " count " +
             std::to_string(count) + (in_place ? " (in place)" : "") + ": element " + std::to_string(i) + " is " +
             std::to_string(static_cast<double>(recv[i])) + ", expected " + std::to_string(want) + "; ";
    }
  }
  return {};
}

inline void check_all_reduce(Backend b, int c) {
  run_checked(b, c, [](Communicator& comm) {
    Complaints bad;
    const std::size_t c = comm.size();
    for (std::size_t count : {std::size_t{0}, std::size_t{1}, c - 1, c + 1, std::size_t{1000}, std::size_t{65537}}) {
      for (ReduceOp op : {ReduceOp::sum, ReduceOp::max, ReduceOp::min}) {
        for (bool in_place : {false, true}) {
          bad.add(all_reduce_one<float>(comm, count, DType::f32, op, in_place));
          bad.add(all_reduce_one<double>(comm, count, DType::f64, op, in_place));
          bad.add(all_reduce_one<std::int64_t>(comm, count, DType::i64, op, in_place));
        }
      }
    }
    return bad.result();
  });
}

// Nobody leaves a barrier before everybody entered it. Each round one rank is late (it sleeps before
// arriving), so a barrier that does not wait is caught.
inline void check_barrier(Backend b, int c) {
  SharedCell<std::atomic<int>> arrived;
  run_checked(b, c, [&](Communicator& comm) {
    Complaints bad;
    const int rounds = 12;
    for (int k = 0; k < rounds; ++k) {
      if (k % comm.size() == comm.rank()) std::this_thread::sleep_for(std::chrono::milliseconds(3));
      arrived->fetch_add(1);
      comm.barrier();
      const int seen = arrived->load();
      bad.expect(seen >= comm.size() * (k + 1), "left barrier " + std::to_string(k) + " having seen " +
                                                    std::to_string(seen) + " arrivals, expected at least " +
                                                    std::to_string(comm.size() * (k + 1)));
    }
    return bad.result();
  });
}

inline std::string ranks_text(const std::vector<int>& v) {
  std::string s = "[";
  for (std::size_t i = 0; i < v.size(); ++i) s += (i ? "," : "") + std::to_string(v[i]);
  return s + "]";
}

// The 2-D mesh of hybrid attention, C = A x R with A = 2: all-to-all groups of 2 consecutive ranks, ring groups
// of C/2 ranks with stride 2 (C=8: [0,1],[2,3],[4,5],[6,7] and [0,2,4,6],[1,3,5,7]). Each group then runs
// collectives of its own while messages of the world and of the groups, with equal tags, are in flight to the
// same peer at once.
inline void check_split_mesh(Backend b, int c = 8) {
  run_checked(b, c, [](Communicator& comm) {
    Complaints bad;
    const int r = comm.rank(), a = 2;
    auto a2a = comm.split(r / a, r);
    auto ring = comm.split(r % a, r);
    const std::vector<int> want_a2a = {r / a * a, r / a * a + 1};
    std::vector<int> want_ring;
    for (int k = r % a; k < comm.size(); k += a) want_ring.push_back(k);
    bad.expect(a2a->world_ranks() == want_a2a,
               "a2a group " + ranks_text(a2a->world_ranks()) + ", expected " + ranks_text(want_a2a));
    bad.expect(ring->world_ranks() == want_ring,
               "ring group " + ranks_text(ring->world_ranks()) + ", expected " + ranks_text(want_ring));
    bad.expect(a2a->rank() == r % a && ring->rank() == r / a, "wrong rank inside a group");
    // Each group gathers its members' world ranks.
    std::vector<std::int32_t> got(ring->size());
    const std::int32_t me = r;
    ring->all_gather(&me, got.data(), sizeof me);
    bad.expect(std::vector<int>(got.begin(), got.end()) == want_ring,
               "ring all_gather " + ranks_text({got.begin(), got.end()}));
    std::int64_t sum = r;
    a2a->all_reduce(&sum, &sum, 1, DType::i64, ReduceOp::sum);
    bad.expect(sum == want_a2a[0] + want_a2a[1], "a2a all_reduce gave " + std::to_string(sum));
    // Same peer, same tag, two communicators: the group's message must not be taken by the world's receive.
    const int peer_in_a2a = 1 - a2a->rank(), peer_world = a2a->world_ranks()[peer_in_a2a];
    const std::int32_t world_msg = 1000 + r, group_msg = 2000 + r;
    std::int32_t world_in = 0, group_in = 0;
    Request s1 = comm.isend(&world_msg, 4, peer_world, 0);
    Request s2 = a2a->isend(&group_msg, 4, peer_in_a2a, 0);
    a2a->recv(&group_in, 4, peer_in_a2a, 0);
    comm.recv(&world_in, 4, peer_world, 0);
    s1.wait();
    s2.wait();
    bad.expect(world_in == 1000 + peer_world && group_in == 2000 + peer_world,
               "messages crossed communicators: world got " + std::to_string(world_in) + ", group got " +
                   std::to_string(group_in));
    return bad.result();
  });
}

// split orders a group by (key, old rank) and leaves ranks with a negative color out.
inline void check_split_orders(Backend b, int c) {
  run_checked(b, c, [](Communicator& comm) {
    Complaints bad;
    const int r = comm.rank(), c = comm.size();
    auto reversed = comm.split(0, c - r);
    std::vector<int> want(c);
    for (int i = 0; i < c; ++i) want[i] = c - 1 - i;
    bad.expect(reversed->world_ranks() == want, "reversed group " + ranks_text(reversed->world_ranks()));
    bad.expect(reversed->rank() == c - 1 - r, "reversed rank");
    auto same_key = comm.split(7, 0);  // equal keys: old rank order
    bad.expect(same_key->rank() == r, "equal keys must keep the old order");
    auto evens = comm.split(r % 2 == 0 ? 0 : -1, r);
    bad.expect((evens != nullptr) == (r % 2 == 0), "negative color must give no communicator");
    if (evens) {
      std::int32_t me = r;
      std::vector<std::int32_t> got(evens->size());
      evens->all_gather(&me, got.data(), 4);
      for (int i = 0; i < evens->size(); ++i) bad.expect(got[i] == 2 * i, "evens all_gather");
    }
    return bad.result();
  });
}

// Many rounds of messages with random sources, destinations, tags and sizes, posted and waited in random
// orders, between collectives. Every rank derives the same schedule from the seed; contents are checked.
inline void check_stress(Backend b, int c, std::uint64_t seed, int rounds) {
  run_checked(b, c, [=](Communicator& comm) {
    Complaints bad;
    const int r = comm.rank();
    std::mt19937_64 shared(seed);                // same on every rank: the schedule
    std::mt19937_64 local(seed * 7919 + r + 1);  // this rank's own choices: posting and waiting orders
    for (int round = 0; round < rounds; ++round) {
      struct Msg {
        int src, dst, tag;
        std::size_t bytes;
      };
      std::vector<Msg> msgs(std::uniform_int_distribution<int>(1, 3 * c)(shared));
      for (auto& m : msgs) {
        m.src = std::uniform_int_distribution<int>(0, c - 1)(shared);
        m.dst = std::uniform_int_distribution<int>(0, c - 1)(shared);
        m.tag = std::uniform_int_distribution<int>(0, 2)(shared);
        const int kind = std::uniform_int_distribution<int>(0, 9)(shared);
        m.bytes = kind < 5   ? std::uniform_int_distribution<std::size_t>(0, 300)(shared)
                  : kind < 9 ? std::uniform_int_distribution<std::size_t>(0, 200000)(shared)
                             : std::uniform_int_distribution<std::size_t>(0, 1 << 20)(shared);
      }
      // Our operations in a random order, except that messages of one stream (src, dst, tag) keep their order.
      std::vector<int> ops;
      for (int i = 0; i < static_cast<int>(msgs.size()); ++i)
        if (msgs[i].src == r || msgs[i].dst == r) ops.push_back(i);
      std::vector<int> slots = ops;
      std::shuffle(slots.begin(), slots.end(), local);
      // Assign, stream by stream, the stream's messages in order to the shuffled positions it got.
      std::vector<int> order(ops.size());
      {
        std::vector<std::size_t> pos(ops.size());
        for (std::size_t i = 0; i < ops.size(); ++i)
          pos[i] = std::find(slots.begin(), slots.end(), ops[i]) - slots.begin();
        std::vector<bool> done(ops.size(), false);
        for (std::size_t i = 0; i < ops.size(); ++i) {
          if (done[i]) continue;
          const Msg& m = msgs[ops[i]];
          const bool sending = m.src == r;
          std::vector<std::size_t> members, places;
          for (std::size_t j = i; j < ops.size(); ++j) {
            const Msg& o = msgs[ops[j]];
            if (!done[j] && o.src == m.src && o.dst == m.dst && o.tag == m.tag && (o.src == r) == sending) {
              members.push_back(j);
              places.push_back(pos[j]);
              done[j] = true;
            }
          }
          std::sort(places.begin(), places.end());
          for (std::size_t k = 0; k < members.size(); ++k) order[places[k]] = ops[members[k]];
        }
      }
      // A message to ourselves is both a send and a receive: post both, at the send's turn.
      std::vector<Bytes> out(msgs.size()), in(msgs.size());
      std::vector<Request> reqs;
      std::vector<int> recv_of;  // message index of each receive request (-1 for sends)
      for (int i : order) {
        const Msg& m = msgs[i];
        const std::uint64_t salt = seed * 1000000 + round * 1000 + i;
        if (m.src == r) {
          out[i] = payload(r, m.bytes, salt);
          reqs.push_back(comm.isend(out[i].data(), m.bytes, m.dst, m.tag));
          recv_of.push_back(-1);
        }
        if (m.dst == r && m.src != r) {
          in[i].resize(m.bytes);
          reqs.push_back(comm.irecv(in[i].data(), m.bytes, m.src, m.tag));
          recv_of.push_back(i);
        }
        if (m.dst == r && m.src == r) {
          in[i].resize(m.bytes);
          reqs.push_back(comm.irecv(in[i].data(), m.bytes, m.src, m.tag));
          recv_of.push_back(i);
        }
      }
      std::vector<std::size_t> waits(reqs.size());
      for (std::size_t i = 0; i < waits.size(); ++i) waits[i] = i;
      std::shuffle(waits.begin(), waits.end(), local);
      for (std::size_t w : waits) reqs[w].wait();
      for (std::size_t k = 0; k < reqs.size(); ++k) {
        const int i = recv_of[k];
        if (i < 0) continue;
        const std::uint64_t salt = seed * 1000000 + round * 1000 + i;
        bad.add(expect_payload(in[i].data(), msgs[i].src, msgs[i].bytes, salt,
                               "round " + std::to_string(round) + " message " + std::to_string(i)));
      }
      if (round % 4 == 3) {  // a collective between rounds: no stray message may disturb it
        std::int64_t x = round, sum = 0;
        comm.all_reduce(&x, &sum, 1, DType::i64, ReduceOp::sum);
        bad.expect(sum == std::int64_t{round} * comm.size(), "all_reduce between rounds");
      }
    }
    return bad.result();
  });
}

// The counting conventions of communicator.hpp, call by call, on a communicator of 3 ranks and a group of 2.
inline void check_counting(Backend b) {
  LaunchOptions opt = options(b, 3);
  opt.tracing = true;
  auto out = launch(opt, [](Communicator& comm) {
    const int r = comm.rank(), c = comm.size(), next = (r + 1) % c, prev = (r + c - 1) % c;
    std::vector<std::byte> a(64), z(64 * c);
    comm.sendrecv(a.data(), 10, next, z.data(), 10, prev);  // 10 out, 10 in
    Request s = comm.isend(a.data(), 11, next);             // 11 out
    Request q = comm.irecv(z.data(), 11, prev);             // 11 in
    q.wait();
    s.wait();
    if (r == 0) comm.send(a.data(), 12, 1);                             // 12 out (rank 0)
    if (r == 1) comm.recv(z.data(), 12, 0);                             // 12 in (rank 1)
    comm.all_gather(a.data(), z.data(), 5);                             // 2 x 5 each way
    comm.reduce_scatter(z.data(), a.data(), 3, DType::f64);             // 2 x 24 each way
    comm.all_to_all(z.data(), a.data(), 7);                             // 2 x 7 each way
    comm.all_reduce(z.data(), a.data(), 6, DType::f32, ReduceOp::max);  // 2 x 2/3 x 24 = 32 each way
    comm.barrier();                                                     // 0
    auto sub = comm.split(r == 2 ? 1 : 0, -r);                          // 2 x 8; groups {1, 0}, {2}
    if (r < 2) sub->all_gather(a.data(), z.data(), 4);                  // 1 x 4 each way
    return std::string();
  });
  REQUIRE(out.size() == 3);
  for (const auto& o : out) {
    CAPTURE(o.rank);
    const CommCounts& k = o.stats.comm_counts();
    for (const char* kind : {"sendrecv", "isend", "irecv", "all_gather", "reduce_scatter", "all_to_all", "all_reduce",
                             "barrier", "split"}) {
      CAPTURE(kind);
      CHECK(k.count(kind) == (std::string(kind) == "all_gather" && o.rank < 2 ? 2 : 1));
    }
    CHECK(k.count("send") == (o.rank == 0 ? 1 : 0));
    CHECK(k.count("recv") == (o.rank == 1 ? 1 : 0));
    const std::int64_t sub_gather = o.rank < 2 ? 4 : 0;
    const std::int64_t both_ways = 10 + 11 + 2 * 5 + 2 * 24 + 2 * 7 + 2 * 2 * 24 / 3 + 2 * 8 + sub_gather;
    CHECK(k.bytes_sent == both_ways + (o.rank == 0 ? 12 : 0));
    CHECK(k.bytes_received == both_ways + (o.rank == 1 ? 12 : 0));
    const std::int64_t msgs_both = 1 + 1 + 2 + 2 + 2 + 4 + 0 + 2 + (o.rank < 2 ? 1 : 0);
    CHECK(k.messages_sent == msgs_both + (o.rank == 0 ? 1 : 0));
    CHECK(k.messages_received == msgs_both + (o.rank == 1 ? 1 : 0));
    // Trace: peers and groups in world ranks (the sub-communicator {1, 0} is ordered by key -r).
    bool saw_sub_gather = false, saw_world_gather = false, saw_isend_wait = false;
    for (const auto& e : o.stats.events()) {
      if (e.type == TraceEvent::Type::comm && e.name == "all_gather") {
        if (e.group == std::vector<int>{1, 0}) saw_sub_gather = true;
        if (e.group == std::vector<int>{0, 1, 2}) saw_world_gather = true;
      }
      if (e.type == TraceEvent::Type::comm && e.name == "isend") CHECK(e.peer == (o.rank + 1) % 3);
      if (e.type == TraceEvent::Type::wait && e.name == "isend") saw_isend_wait = true;
    }
    CHECK(saw_world_gather);
    CHECK(saw_sub_gather == (o.rank < 2));
    CHECK(saw_isend_wait);
    CHECK(o.stats.idle_us() > 0);
  }
}

// --- Faults: every one ends the run in bounded time with an error naming the rank and what happened. ---

inline void check_a_rank_that_throws(Backend b) {
  const Failure f = expect_failure(options(b, 4), [](Communicator& comm) {
    std::vector<std::byte> a(1024), all(4096);
    comm.barrier();
    if (comm.rank() == 2) throw std::runtime_error("boom in the rank function");
    for (;;) comm.all_gather(a.data(), all.data(), 1024);  // the others wait for rank 2 forever
    return std::string();
  });
  CHECK(f.rank == 2);
  CHECK(f.what.find("boom in the rank function") != std::string::npos);
  CHECK(f.seconds < 5);
}

inline void check_a_deadlock_is_reported(Backend b) {
  const Failure f = expect_failure(options(b, 2, std::chrono::milliseconds(300)), [](Communicator& comm) {
    int x = 0;
    comm.recv(&x, sizeof x, 1 - comm.rank(), 4);  // both receive first: nobody ever sends
    return std::string();
  });
  CHECK(f.rank >= 0);
  CHECK_MESSAGE(f.what.find("waited 0.3 s in recv from rank " + std::to_string(1 - f.rank) +
                            " (tag 4): likely deadlock") != std::string::npos,
                f.what);
  CHECK(f.seconds < 5);
}

inline void check_mismatched_sizes(Backend b, std::size_t sent) {
  const Failure f = expect_failure(options(b, 2), [=](Communicator& comm) {
    std::vector<std::byte> a(sent);
    if (comm.rank() == 0) comm.send(a.data(), sent, 1, 3);
    if (comm.rank() == 1) comm.recv(a.data(), sent / 2, 0, 3);
    return std::string();
  });
  CHECK(f.rank == 1);
  CHECK_MESSAGE(f.what.find(std::to_string(sent / 2) + " bytes, but rank 0 sent " + std::to_string(sent) + " bytes") !=
                    std::string::npos,
                f.what);
  CHECK(f.seconds < 5);
}

inline void check_mismatched_collectives(Backend b) {
  const Failure f = expect_failure(options(b, 2), [](Communicator& comm) {
    std::vector<double> a(8), z(16);
    if (comm.rank() == 0) comm.all_gather(a.data(), z.data(), 64);
    if (comm.rank() == 1) comm.reduce_scatter(z.data(), a.data(), 8, DType::f64);
    return std::string();
  });
  CHECK_MESSAGE(f.what.find("all_gather #0") != std::string::npos, f.what);
  CHECK_MESSAGE(f.what.find("reduce_scatter #0") != std::string::npos, f.what);
  CHECK(f.what.find("same collectives in the same order") != std::string::npos);
  CHECK(f.seconds < 5);
}

inline void check_a_collective_called_by_some_ranks_only(Backend b) {
  const Failure f = expect_failure(options(b, 3), [](Communicator& comm) {
    if (comm.rank() != 1) comm.barrier();  // rank 1 returns without calling it
    return std::string();
  });
  CHECK_MESSAGE(f.what.find("barrier #0 (recv from rank 1), but rank 1 had already finished") != std::string::npos,
                f.what);
  CHECK(f.seconds < 5);
}

}  // namespace cpsim::test
