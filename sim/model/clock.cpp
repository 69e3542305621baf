#include "sim/model/clock.hpp"

#include <algorithm>
#include <boost/container/small_vector.hpp>
#include <cstdint>
#include <functional>
#include <map>
#include <queue>

#include "sim/core/error.hpp"
#include "sim/model/cost.hpp"

namespace cpsim::model {
namespace {

constexpr double kUnknown = -1;

// Makes rec.now_us() read `t` (modeled microseconds; the clock's Recorders are untimed), so that the Recorder's
// phase and step marks land on modeled time: the marks read the clock, everything else takes explicit times.
void at(Recorder& rec, double t) {
  rec.set_now_us(t);
}

// The logical bytes a collective moves per rank, as the Communicator base counts them (communicator.hpp).
std::int64_t moved_bytes(Collective c, int C, std::int64_t n) {
  switch (c) {
    case Collective::all_gather:
    case Collective::reduce_scatter:
    case Collective::all_to_all:
      return n * (C - 1);
    case Collective::all_reduce:
      return 2 * n * (C - 1) / C;
    case Collective::barrier:
      return 0;
  }
  return 0;
}

// One stored op as the clock replays it: what the replay reads, its costs on the machine computed once (an op that
// repeats C times is costed once), in a few cache lines per step of the strategy.
struct Step {
  OpKind kind = OpKind::attention;
  bool forward_end = false;  // the end of the forward phase
  int peer = -1, tag = 0, context = 0;
  int request = -1;  // relative to the repetition's first request (Segment)
  int step = -1;     // a step mark's step in the segment's first repetition
  std::int64_t bytes = 0;
  double us = 0;      // attention, memory: the op alone (cost.hpp)
  double add_us = 0;  // backward attention: its gradient sums outside the kernel (0: none)
  const Op* op = nullptr;  // the whole op: for traces and collectives
};

// One rank's program as a flat array of steps and its segments over it.
struct Replay {
  struct Run {
    std::uint32_t begin = 0, end = 0;  // steps[begin, end): the segment's ops
    std::int64_t repeats = 1;
    int posts = 0, step_stride = 0;
  };
  std::vector<Step> steps;
  std::vector<Run> runs;  // the non-empty segments, in order
  int requests = 0;       // the requests the program posts
};

Replay replay_of(const Program& p, const Machine& m) {
  Replay out;
  out.requests = p.requests();
  out.steps.reserve(p.stored());
  for (const Segment& seg : p.segments()) {
    if (seg.ops.empty()) continue;
    Replay::Run run;
    run.begin = static_cast<std::uint32_t>(out.steps.size());
    for (const Op& op : seg.ops) {
      Step s;
      s.kind = op.kind;
      s.forward_end = op.kind == OpKind::end_phase && op.name == "forward";
      s.peer = op.peer;
      s.tag = op.tag;
      s.context = op.context;
      s.request = op.request;
      s.step = op.step;
      s.bytes = op.bytes;
      if (op.kind == OpKind::attention) {
        s.us = attention_us(m, op);
        s.add_us = grad_add_us(m, op);
      } else if (op.kind == OpKind::memory) {
        s.us = memory_op_us(m, op);
      }
      s.op = &op;
      out.steps.push_back(s);
    }
    run.end = static_cast<std::uint32_t>(out.steps.size());
    run.repeats = seg.repeats;
    run.posts = seg.posts;
    run.step_stride = seg.step_stride;
    out.runs.push_back(run);
  }
  return out;
}

// Walks a Replay as ProgramCursor walks its Program: every repetition of every segment, in order.
class ReplayCursor {
 public:
  explicit ReplayCursor(const Replay& r) : r_(&r) {}
  bool done() const { return run_ >= r_->runs.size(); }
  const Step& op() const { return r_->steps[i_]; }
  int request() const { return base_ + op().request; }  // the op's request id (isend, irecv, wait)
  int step() const { return op().step + static_cast<int>(repetition_) * r_->runs[run_].step_stride; }
  void next() {
    if (++i_ < r_->runs[run_].end) return;
    const Replay::Run& run = r_->runs[run_];
    base_ += run.posts;
    if (++repetition_ < run.repeats) {
      i_ = run.begin;
      return;
    }
    repetition_ = 0;
    if (++run_ < r_->runs.size()) i_ = r_->runs[run_].begin;
  }

 private:
  const Replay* r_;
  std::size_t run_ = 0;
  std::uint32_t i_ = 0;
  std::int64_t repetition_ = 0;
  int base_ = 0;  // requests issued before this repetition
};

// A handful of items held in place (no allocation unless there are more): the per-rank lists the replay touches at
// every op stay in the rank's own cache lines.
template <class T, std::size_t N>
using Few = boost::container::small_vector<T, N>;

template <class T, class Pred>
void erase_where(T& v, Pred pred) {
  v.erase(std::remove_if(v.begin(), v.end(), pred), v.end());
}

struct Posted {
  int rank, request;
  double at;
  std::int64_t bytes;
};

// One collective call while its members arrive.
struct Gathering {
  std::vector<std::pair<int, double>> arrived;  // (rank, arrival time)
  std::int64_t bytes = 0;
  Collective kind = Collective::barrier;
};

// A transfer this rank takes part in, while it moves: [start, end) once matched; posted at `start` otherwise.
struct Flight {
  int request = -1;
  double start = 0, end = 0, busy = 0;  // busy: bytes / bw, the time its kernel runs
  double gbps = 0;
  bool matched = false;
};

// A request this rank posted and has not waited for yet: its completion time (kUnknown while in flight) and what a
// wait on it is named after ("isend" or "irecv").
struct Pending {
  int request = -1;
  double done = kUnknown;
  const char* kind = "wait";
};

struct State {
  explicit State(const Replay& p) : at(p) {}
  ReplayCursor at;  // the next op
  double t = 0;
  int waiting_on = -1;            // the request a wait is blocked on
  int posted = 0;                 // requests posted so far
  Few<Pending, 4> pending;        // posted, not yet waited for (a handful: the strategies wait as they go)
  Few<std::pair<int, std::int64_t>, 2> calls;  // per context: the collectives called on it so far
  double tx_free = 0, rx_free = 0;  // this rank's NVLink ports: when the outgoing / incoming one is free
  // The timeline's sums, kept here beside the rest of the rank's state (the replay touches them at every op) and
  // copied into its RankTimeline at the end.
  TimelineSums sums;
  Few<Flight, 4> flights;           // transfers in flight (contention)

  Pending* find(int request) {
    for (Pending& q : pending)
      if (q.request == request) return &q;
    return nullptr;
  }
  void forget(int request) {
    erase_where(pending, [request](const Pending& q) { return q.request == request; });
  }
  std::int64_t next_call(int context) {  // the sequence number of this rank's next collective on `context`
    for (auto& [c, n] : calls)
      if (c == context) return n++;
    calls.emplace_back(context, 1);
    return 0;
  }
};

// Posted messages in the order posted; the consumed front is dropped when the queue empties (or is half consumed).
class Fifo {
 public:
  bool empty() const { return head_ == items_.size(); }
  const Posted& front() const { return items_[head_]; }
  void push_back(const Posted& p) { items_.push_back(p); }
  void pop_front() {
    if (++head_ == items_.size()) {
      items_.clear();
      head_ = 0;
    } else if (head_ >= 8 && 2 * head_ >= items_.size()) {
      items_.erase(items_.begin(), items_.begin() + static_cast<std::ptrdiff_t>(head_));
      head_ = 0;
    }
  }

 private:
  Few<Posted, 2> items_;
  std::size_t head_ = 0;
};

// The messages from one (context, sender, tag) to one receiver, matched in the order posted.
struct Channel {
  int context, from, tag;
  Fifo sends, recvs;
};

class Engine {
 public:
  Engine(const Programs& p, const Machine& m, const ClockOptions& opt) : p_(p), m_(m), tracing_(opt.tracing) {
    const std::size_t C = p.ranks.size();
    state_.reserve(C);
    replays_.reserve(C);
    for (const Program& program : p.ranks) replays_.push_back(replay_of(program, m));
    channels_.resize(C);
    run_.ranks.reserve(C);
    for (std::size_t r = 0; r < C; ++r) {
      state_.emplace_back(replays_[r]);
      run_.ranks.push_back(RankTimeline{{}, Recorder(static_cast<int>(r), opt.tracing)});
      run_.ranks.back().trace.set_timed(false);
    }
  }

  ModeledRun run() {
    for (std::size_t r = 0; r < state_.size(); ++r) ready(static_cast<int>(r));
    while (!queue_.empty()) {
      const int r = queue_.top().second;
      queue_.pop();
      // A rank whose clock is still the earliest would be the next one taken: it goes on without the queue.
      while (advance(r))
        if (!queue_.empty() && !(Entry{st(r).t, r} < queue_.top())) {
          ready(r);
          break;
        }
    }
    std::string stuck;
    for (std::size_t r = 0; r < state_.size(); ++r)
      if (!state_[r].at.done())
        stuck += (stuck.empty() ? "" : ", ") + std::to_string(r) + " (at " + op_kind_name(state_[r].at.op().kind) + ")";
    if (!stuck.empty()) throw Error("the modeled run deadlocks: ranks " + stuck + " wait for what never comes");
    for (std::size_t r = 0; r < state_.size(); ++r) {
      const State& s = state_[r];
      RankTimeline& t = run_.ranks[r];
      static_cast<TimelineSums&>(t) = s.sums;
      t.end_us = s.t;
      run_.forward_us = std::max(run_.forward_us, t.forward_end_us);
      run_.total_us = std::max(run_.total_us, s.t);
    }
    return std::move(run_);
  }

 private:
  using Entry = std::pair<double, int>;  // (time, rank): the earliest clock moves next

  void ready(int r) { queue_.push({state_[static_cast<std::size_t>(r)].t, r}); }
  State& st(int r) { return state_[static_cast<std::size_t>(r)]; }
  RankTimeline& tl(int r) { return run_.ranks[static_cast<std::size_t>(r)]; }

  // Runs rank r's next op. False when r has finished or blocks (it is made ready again when unblocked). The
  // rank's Recorder is written only when tracing: the times are the timeline's own fields.
  bool advance(int r) {
    State& s = st(r);
    if (s.at.done()) return false;
    const Step& op = s.at.op();
    Recorder& rec = tl(r).trace;
    switch (op.kind) {
      case OpKind::attention: {
        const double d = contended(r, op.us, true);
        if (tracing_) {
          const Op& a = *op.op;
          WorkCounts w;
          w.calls = 1;
          w.pairs = a.pairs;
          w.flops = a.flops;
          rec.work(w, a.block, a.q_spans, a.k_spans, s.t, d, a.backward ? "attention_backward" : "attention_forward");
        }
        st(r).sums.compute_us += d;
        s.t += d;
        if (const double add = op.add_us; add > 0) {  // the stack sums this block's gradients itself
          const double a = contended(r, add, false);
          if (tracing_) rec.work(WorkCounts{}, BlockKind::full, {}, {}, s.t, a, "add");
          st(r).sums.memory_us += a;
          s.t += a;
        }
        break;
      }
      case OpKind::memory: {
        const double d = contended(r, op.us, false);
        if (tracing_) rec.work(WorkCounts{}, BlockKind::full, {}, {}, s.t, d, op.op->name.c_str());
        st(r).sums.memory_us += d;
        s.t += d;
        break;
      }
      case OpKind::begin_phase:
        if (tracing_) {
          at(rec, s.t);
          rec.begin_phase(op.op->name);
        }
        break;
      case OpKind::end_phase:
        if (tracing_) {
          at(rec, s.t);
          rec.end_phase();
        }
        if (op.forward_end) st(r).sums.forward_end_us = s.t;
        break;
      case OpKind::step:
        if (tracing_) {
          at(rec, s.t);
          rec.step(s.at.step());
        }
        if (const double d = step_cost_us(m_, p_.ranks[static_cast<std::size_t>(r)].out_elements); d > 0) {
          if (tracing_) rec.work(WorkCounts{}, BlockKind::full, {}, {}, s.t, d, "step");
          st(r).sums.overhead_us += d;
          s.t += d;
        }
        break;
      case OpKind::isend:
      case OpKind::irecv:
        post(r, op, s.at.request());
        break;
      case OpKind::wait: {
        const int request = s.at.request();
        check_request(r, request);
        const Pending* q = s.find(request);
        if (q == nullptr && request < s.posted)
          throw Error("the modeled run: rank " + std::to_string(r) + " waits twice for request " +
                      std::to_string(request));
        if (q == nullptr || q->done == kUnknown) {  // in flight, or not posted yet (a deadlock, reported at the end)
          s.waiting_on = request;
          return false;
        }
        const Pending done = *q;
        s.forget(request);
        block_until(r, done.done, done.kind, op.peer);
        break;
      }
      case OpKind::collective:
        return arrive(r, op);
    }
    s.at.next();
    return true;
  }

  void check_request(int r, int request) {
    const int posts = replays_[static_cast<std::size_t>(r)].requests;
    if (request < 0 || request >= posts)
      throw Error("the modeled run: rank " + std::to_string(r) + " names request " + std::to_string(request) +
                  ", outside the " + std::to_string(posts) + " requests its program posts");
  }

  void block_until(int r, double t, const char* what, int peer) {
    State& s = st(r);
    const double until = std::max(s.t, t);
    if (tracing_) tl(r).trace.wait(what, peer, s.t, until - s.t);
    st(r).sums.blocked_us += until - s.t;
    s.t = until;
  }

  // A request of rank r completes at t; a wait blocked on it returns.
  void complete(int r, int request, double t) {
    State& s = st(r);
    Pending* q = s.find(request);
    q->done = t;
    if (s.waiting_on != request) return;
    const char* kind = q->kind;
    s.forget(request);
    s.waiting_on = -1;
    block_until(r, t, kind, -1);
    s.at.next();
    ready(r);
  }

  // The op of duration d (alone) that rank r starts now, slowed by its transfers in flight (clock.hpp).
  double contended(int r, double d, bool attention) {
    if (m_.comm_sms <= 0 || d <= 0) return d;
    State& s = st(r);
    const double t = s.t;
    erase_where(s.flights, [t](const Flight& f) { return f.matched && f.end <= t; });
    double horizon = t, rate = 0;
    for (const Flight& f : s.flights) {
      const double start = f.matched ? f.start : std::max(t, f.start);
      const double end = f.matched ? f.end : start + f.busy;
      if (end <= t) continue;
      horizon = std::max(horizon, end);
      if (start <= t) rate += f.gbps;
    }
    const double window = horizon - t;
    const double share =
        std::min(0.9, attention ? m_.comm_sms / m_.sm_count : rate / m_.hbm_gbps);  // of the SMs / of HBM
    if (window <= 0 || share <= 0) return d;
    return d + share * std::min(window, d / (1 - share));
  }

  void post(int r, const Step& op, int request) {
    check_request(r, request);
    State& s = st(r);
    const bool send = op.kind == OpKind::isend;
    s.pending.push_back(Pending{request, kUnknown, send ? "isend" : "irecv"});
    s.posted = request + 1;
    if (m_.comm_sms > 0) {
      const Link& l = link_between(m_, r, op.peer);
      s.flights.push_back(
          Flight{request, s.t, 0, static_cast<double>(op.bytes) / (l.p2p_gbps * 1e3), l.p2p_gbps, false});
    }
    const int from = send ? r : op.peer, to = send ? op.peer : r;
    Channel& ch = channel(op.context, from, to, op.tag);
    const Posted me{r, request, s.t, op.bytes};
    auto& others = send ? ch.recvs : ch.sends;
    if (others.empty()) {
      (send ? ch.sends : ch.recvs).push_back(me);
      return;
    }
    const Posted other = others.front();
    others.pop_front();
    transfer(send ? me : other, send ? other : me);
  }

  Channel& channel(int context, int from, int to, int tag) {  // a receiver has a few: linear search
    auto& mine = channels_[static_cast<std::size_t>(to)];
    for (Channel& c : mine)
      if (c.context == context && c.from == from && c.tag == tag) return c;
    return mine.emplace_back(Channel{context, from, tag, {}, {}});
  }

  // A matched message: starts when both sides posted and both ports are free, arrives latency + bytes / bw later.
  void transfer(const Posted& s, const Posted& r) {
    if (s.bytes != r.bytes)
      throw Error("the modeled run: rank " + std::to_string(s.rank) + " sends " + std::to_string(s.bytes) +
                  " bytes but rank " + std::to_string(r.rank) + " receives " + std::to_string(r.bytes));
    // The ports: each rank's own port when the two meet at the lowest level (NVLink); above it, at every level
    // up to where they meet, the link its group of the level below shares (a node's NIC between nodes, then the
    // uplinks of the groups above; cost.hpp port_of).
    const int level = meet_level(m_, s.rank, r.rank);
    boost::container::small_vector<double*, 8> ports;
    if (level == 0) {
      ports = {&st(s.rank).tx_free, &st(r.rank).rx_free};
    } else {
      for (int l = 1; l <= level; ++l) {
        ports.push_back(&link_tx_free_[port_of(m_, s.rank, l)]);
        ports.push_back(&link_rx_free_[port_of(m_, r.rank, l)]);
      }
    }
    double start = std::max(s.at, r.at);
    for (const double* port : ports) start = std::max(start, *port);
    const double total = p2p_us(m_, s.bytes, s.rank, r.rank);
    const double busy = total - link_between(m_, s.rank, r.rank).latency_us;  // the port is busy for bytes / bw
    for (double* port : ports) *port = start + busy;
    const double end = start + total;
    for (const Posted* side : {&s, &r})
      for (Flight& f : st(side->rank).flights)
        if (f.request == side->request && !f.matched) {
          f.start = start;
          f.end = start + busy;
          f.matched = true;
        }
    if (tracing_) {
      tl(s.rank).trace.comm("isend", s.bytes, 0, 1, 0, r.rank, {}, start, end - start);
      tl(r.rank).trace.comm("irecv", 0, r.bytes, 0, 1, s.rank, {}, start, end - start);
    }
    complete(s.rank, s.request, end);
    complete(r.rank, r.request, end);
  }

  // Rank r reaches a collective. The last member to arrive starts it; every member leaves when it ends.
  bool arrive(int r, const Step& op) {
    const std::vector<int>& group = p_.groups[static_cast<std::size_t>(op.context)];
    const std::int64_t sequence = st(r).next_call(op.context);
    Gathering& g = gatherings_[{op.context, sequence}];
    g.arrived.emplace_back(r, st(r).t);
    g.bytes = std::max(g.bytes, op.bytes);
    g.kind = op.op->collective;
    if (g.arrived.size() < group.size()) return false;
    double last = 0;
    for (const auto& [m, t] : g.arrived) last = std::max(last, t);
    const double end = last + collective_us(m_, g.kind, group, g.bytes);
    const int C = static_cast<int>(group.size());
    const std::int64_t moved = moved_bytes(g.kind, C, g.bytes);
    const int msgs = g.kind == Collective::all_reduce ? 2 * (C - 1) : g.kind == Collective::barrier ? 0 : C - 1;
    for (const auto& [m, t] : g.arrived) {
      if (tracing_) tl(m).trace.comm(collective_name(g.kind), moved, moved, msgs, msgs, -1, group, t, end - t);
      block_until(m, end, collective_name(g.kind), -1);
      st(m).at.next();
      if (m != r) ready(m);
    }
    gatherings_.erase({op.context, sequence});
    return true;
  }

  const Programs& p_;
  const Machine& m_;
  bool tracing_;
  std::vector<Replay> replays_;  // per rank: its program as replayed
  std::vector<State> state_;
  ModeledRun run_;
  std::priority_queue<Entry, std::vector<Entry>, std::greater<>> queue_;
  std::map<std::int64_t, double> link_tx_free_, link_rx_free_;  // per shared link: when its out / in side is free
  std::vector<std::vector<Channel>> channels_;     // per receiver
  std::map<std::pair<int, std::int64_t>, Gathering> gatherings_;
};

}  // namespace

ModeledRun simulate(const Programs& programs, const Machine& machine, const ClockOptions& options) {
  return Engine(programs, machine, options).run();
}

}  // namespace cpsim::model
