#include "sim/core/recorder.hpp"

#include <algorithm>

#include "sim/core/bytes.hpp"

namespace cpsim {

const char* block_kind_name(BlockKind k) {
  switch (k) {
    case BlockKind::diagonal: return "diagonal";
    case BlockKind::half_kv:
      return "half-kv";
    case BlockKind::half_q:
      return "half-q";
    case BlockKind::full: return "full";
    case BlockKind::skipped: return "skipped";
    case BlockKind::partial: return "partial";
  }
  return "?";
}

WorkCounts& WorkCounts::operator+=(const WorkCounts& o) {
  calls += o.calls;
  skipped_calls += o.skipped_calls;
  tiles_computed += o.tiles_computed;
  tiles_skipped += o.tiles_skipped;
  pairs += o.pairs;
  flops += o.flops;
  return *this;
}

CommCounts& CommCounts::operator+=(const CommCounts& o) {
  for (const auto& [k, v] : o.calls) calls[k] += v;
  messages_sent += o.messages_sent;
  messages_received += o.messages_received;
  bytes_sent += o.bytes_sent;
  bytes_received += o.bytes_received;
  return *this;
}

namespace {
void raise_to(std::atomic<std::int64_t>& peak, std::int64_t now) {
  std::int64_t p = peak.load();
  while (now > p && !peak.compare_exchange_weak(p, now)) {
  }
}
}  // namespace

void MemoryMeter::add(std::int64_t bytes, bool message) {
  raise_to(peak, current.fetch_add(bytes) + bytes);
  if (message) raise_to(message_peak, message_current.fetch_add(bytes) + bytes);
}

void MemoryMeter::sub(std::int64_t bytes, bool message) {
  current.fetch_sub(bytes);
  if (message) message_current.fetch_sub(bytes);
}

Recorder::Recorder(int rank, bool tracing) : rank_(rank), tracing_(tracing) {}

double Recorder::now_us() const {
  if (!timed_) return untimed_now_us_;
  return std::chrono::duration<double, std::micro>(Clock::now() - epoch_).count();
}

void Recorder::begin_phase(const std::string& phase) {
  phase_ = phase;
  step_ = -1;
  current_ = kNoStep;
  phase_start_us_ = now_us();
}

void Recorder::end_phase() {
  const double end = now_us();
  phase_us_[phase_] += end - phase_start_us_;
  if (tracing_) {
    TraceEvent e;
    e.type = TraceEvent::Type::phase;
    e.name = phase_;
    e.phase = phase_;
    e.start_us = phase_start_us_;
    e.dur_us = end - phase_start_us_;
    events_.push_back(std::move(e));
  }
  step_ = -1;
  current_ = kNoStep;
}

void Recorder::step(int i) {
  step_ = i;
  current_ = kNoStep;
  if (tracing_) {
    TraceEvent e;
    e.type = TraceEvent::Type::step;
    e.name = "step " + std::to_string(i);
    e.phase = phase_;
    e.step = i;
    e.start_us = now_us();
    events_.push_back(std::move(e));
  }
  if (hook_) hook_(phase_, i);
}

StepWork& Recorder::current_step_work() {
  // Looked up once per step mark. Steps arrive in order, so a step above the phase's highest one is new (O(1));
  // any other is searched for from the back. A scan at every new step made a rank of C steps cost O(C^2).
  if (current_ != kNoStep) return steps_[current_];
  const auto last = last_step_.find(phase_);
  if (last != last_step_.end() && step_ <= last->second)
    for (std::size_t i = steps_.size(); i-- > 0;)
      if (steps_[i].step == step_ && steps_[i].phase == phase_) return steps_[current_ = i];
  if (last == last_step_.end() || step_ > last->second) last_step_[phase_] = step_;
  current_ = steps_.size();
  steps_.push_back(StepWork{phase_, step_, {}});
  return steps_.back();
}

void Recorder::work(const WorkCounts& w, BlockKind kind, std::vector<Span> q, std::vector<Span> k, double start_us,
                    double dur_us, const char* name) {
  total_ += w;
  if (step_work_) current_step_work().work += w;
  if (!tracing_) return;
  TraceEvent e;
  e.type = TraceEvent::Type::compute;
  e.name = name;
  e.start_us = start_us;
  e.dur_us = dur_us;
  e.phase = phase_;
  e.step = step_;
  e.kind = kind;
  e.q_spans = std::move(q);
  e.k_spans = std::move(k);
  e.pairs = w.pairs;
  events_.push_back(std::move(e));
}

void Recorder::comm(const std::string& kind, std::int64_t bytes_sent, std::int64_t bytes_received, int messages_sent,
                    int messages_received, int peer, const std::vector<int>& group, double start_us, double dur_us) {
  comm_.calls[kind] += 1;
  comm_.bytes_sent += bytes_sent;
  comm_.bytes_received += bytes_received;
  comm_.messages_sent += messages_sent;
  comm_.messages_received += messages_received;
  if (!tracing_) return;
  TraceEvent e;
  e.type = TraceEvent::Type::comm;
  e.name = kind;
  e.start_us = start_us;
  e.dur_us = dur_us;
  e.phase = phase_;
  e.step = step_;
  e.peer = peer;
  e.group = group;
  e.bytes_sent = bytes_sent;
  e.bytes_received = bytes_received;
  events_.push_back(std::move(e));
}

void Recorder::wait(const std::string& what, int peer, double start_us, double dur_us) {
  idle_us_ += dur_us;
  if (!tracing_) return;
  TraceEvent e;
  e.type = TraceEvent::Type::wait;
  e.name = what;
  e.start_us = start_us;
  e.dur_us = dur_us;
  e.phase = phase_;
  e.step = step_;
  e.peer = peer;
  events_.push_back(std::move(e));
}

namespace {
void put_work(ByteWriter& w, const WorkCounts& c) {
  w.put(c.calls);
  w.put(c.skipped_calls);
  w.put(c.tiles_computed);
  w.put(c.tiles_skipped);
  w.put(c.pairs);
  w.put(c.flops);
}
void get_work(ByteReader& r, WorkCounts& c) {
  r.get(c.calls);
  r.get(c.skipped_calls);
  r.get(c.tiles_computed);
  r.get(c.tiles_skipped);
  r.get(c.pairs);
  r.get(c.flops);
}
}  // namespace

void Recorder::serialize(ByteWriter& w) const {
  w.put(rank_);
  w.put(tracing_);
  put_work(w, total_);
  w.put<std::uint64_t>(steps_.size());
  for (const auto& s : steps_) {
    w.put(s.phase);
    w.put(s.step);
    put_work(w, s.work);
  }
  w.put(comm_.calls);
  w.put(comm_.messages_sent);
  w.put(comm_.messages_received);
  w.put(comm_.bytes_sent);
  w.put(comm_.bytes_received);
  w.put(idle_us_);
  w.put(phase_us_);
  w.put(memory_->peak.load());
  w.put(memory_->message_peak.load());
  w.put<std::uint64_t>(events_.size());
  for (const auto& e : events_) {
    w.put(e.type);
    w.put(e.name);
    w.put(e.start_us);
    w.put(e.dur_us);
    w.put(e.phase);
    w.put(e.step);
    w.put(e.kind);
    w.put(e.q_spans);
    w.put(e.k_spans);
    w.put(e.pairs);
    w.put(e.peer);
    w.put(e.group);
    w.put(e.bytes_sent);
    w.put(e.bytes_received);
  }
}

Recorder Recorder::deserialize(ByteReader& r) {
  Recorder rec;
  r.get(rec.rank_);
  r.get(rec.tracing_);
  get_work(r, rec.total_);
  rec.steps_.resize(r.get<std::uint64_t>());
  for (auto& s : rec.steps_) {
    r.get(s.phase);
    r.get(s.step);
    get_work(r, s.work);
    auto [last, fresh] = rec.last_step_.try_emplace(s.phase, s.step);
    if (!fresh) last->second = std::max(last->second, s.step);
  }
  r.get(rec.comm_.calls);
  r.get(rec.comm_.messages_sent);
  r.get(rec.comm_.messages_received);
  r.get(rec.comm_.bytes_sent);
  r.get(rec.comm_.bytes_received);
  r.get(rec.idle_us_);
  r.get(rec.phase_us_);
  rec.memory_->peak.store(r.get<std::int64_t>());
  rec.memory_->message_peak.store(r.get<std::int64_t>());
  rec.events_.resize(r.get<std::uint64_t>());
  for (auto& e : rec.events_) {
    r.get(e.type);
    r.get(e.name);
    r.get(e.start_us);
    r.get(e.dur_us);
    r.get(e.phase);
    r.get(e.step);
    r.get(e.kind);
    r.get(e.q_spans);
    r.get(e.k_spans);
    r.get(e.pairs);
    r.get(e.peer);
    r.get(e.group);
    r.get(e.bytes_sent);
    r.get(e.bytes_received);
  }
  return rec;
}

}  // namespace cpsim
