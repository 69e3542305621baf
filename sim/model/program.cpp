#include "sim/model/program.hpp"

#include <utility>

namespace cpsim::model {

const char* op_kind_name(OpKind k) {
  switch (k) {
    case OpKind::attention:
      return "attention";
    case OpKind::memory:
      return "memory";
    case OpKind::isend:
      return "isend";
    case OpKind::irecv:
      return "irecv";
    case OpKind::wait:
      return "wait";
    case OpKind::collective:
      return "collective";
    case OpKind::begin_phase:
      return "begin_phase";
    case OpKind::end_phase:
      return "end_phase";
    case OpKind::step:
      return "step";
  }
  return "?";
}

const char* collective_name(Collective c) {
  switch (c) {
    case Collective::all_gather:
      return "all_gather";
    case Collective::reduce_scatter:
      return "reduce_scatter";
    case Collective::all_to_all:
      return "all_to_all";
    case Collective::all_reduce:
      return "all_reduce";
    case Collective::barrier:
      return "barrier";
  }
  return "?";
}

namespace {

bool is_mark(OpKind k) {
  return k == OpKind::step || k == OpKind::begin_phase || k == OpKind::end_phase;
}

bool same_spans(const std::vector<Span>& a, const std::vector<Span>& b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i)
    if (a[i].lo != b[i].lo || a[i].hi != b[i].hi) return false;
  return true;
}

// Every field but a step mark's step.
bool same_but_step(const Op& a, const Op& b) {
  return a.kind == b.kind && a.backward == b.backward && a.block == b.block && a.flops == b.flops &&
         a.pairs == b.pairs && a.q_rows == b.q_rows && a.k_rows == b.k_rows && a.batch_heads == b.batch_heads &&
         a.kv_group == b.kv_group && a.head_dim == b.head_dim && a.name == b.name && a.bytes == b.bytes &&
         a.elements == b.elements &&
         a.peer == b.peer && a.tag == b.tag && a.request == b.request && a.collective == b.collective &&
         a.context == b.context && same_spans(a.q_spans, b.q_spans) && same_spans(a.k_spans, b.k_spans);
}

}  // namespace

bool same_op(const Op& a, const Op& b) {
  return same_but_step(a, b) && a.step == b.step;
}

void Program::mark(OpKind kind, const std::string& phase, int step) {
  Op op;
  op.kind = kind;
  op.name = phase;
  op.step = step;
  push(std::move(op));
}

int Program::push(Op op) {
  // 1. A mark begins a segment (and completes the one before it).
  if (segments_.empty() || is_mark(op.kind)) {
    if (!segments_.empty()) close();
    segments_.emplace_back().ops = std::exchange(spare_, {});
    base_ = requests_;
  }
  // 2. Requests relative to the segment's first, so that repetitions compare equal.
  Segment& s = segments_.back();
  int id = -1;
  if (op.kind == OpKind::isend || op.kind == OpKind::irecv) {
    id = requests_++;
    op.request = id - base_;
    ++s.posts;
  } else if (op.kind == OpKind::wait) {
    op.request -= base_;
  }
  s.ops.push_back(std::move(op));
  return id;
}

// The last segment x repeats the one before it, p (n repetitions so far, step stride d), when every op is the
// same and x's step marks are p's first ones + n d (n = 1: d is set by x).
void Program::close() {
  if (segments_.size() < 2) return;
  Segment &p = segments_[segments_.size() - 2], &x = segments_.back();
  if (p.ops.size() != x.ops.size() || p.posts != x.posts) return;
  bool stride_known = p.repeats > 1;
  int stride = p.step_stride;
  for (std::size_t i = 0; i < p.ops.size(); ++i) {
    const Op &a = p.ops[i], &b = x.ops[i];
    if (!same_but_step(a, b)) return;
    if (a.kind != OpKind::step) continue;
    if (!stride_known) {
      stride = b.step - a.step;
      stride_known = true;
    }
    if (static_cast<std::int64_t>(b.step) != a.step + p.repeats * stride) return;
  }
  p.repeats += 1;
  p.step_stride = stride;
  spare_ = std::move(x.ops);  // its storage holds the next segment: a repeating step allocates nothing
  spare_.clear();
  segments_.pop_back();
}

std::int64_t Program::size() const {
  std::int64_t n = 0;
  for (const Segment& s : segments_) n += static_cast<std::int64_t>(s.ops.size()) * s.repeats;
  return n;
}

std::size_t Program::stored() const {
  std::size_t n = 0;
  for (const Segment& s : segments_) n += s.ops.size();
  return n;
}

std::vector<Op> Program::expand() const {
  std::vector<Op> out;
  for (ProgramCursor c(*this); !c.done(); c.next()) {
    Op op = c.op();
    if (op.kind == OpKind::isend || op.kind == OpKind::irecv || op.kind == OpKind::wait) op.request = c.request();
    if (op.kind == OpKind::step) op.step = c.step();
    out.push_back(std::move(op));
  }
  return out;
}

ProgramCursor::ProgramCursor(const Program& p) : segments_(&p.segments()) {
  skip_empty();
}

int ProgramCursor::step() const {
  return op().step + static_cast<int>(repetition_) * (*segments_)[segment_].step_stride;
}

void ProgramCursor::next() {
  const Segment& s = (*segments_)[segment_];
  if (++index_ < s.ops.size()) return;
  index_ = 0;
  base_ += s.posts;
  if (++repetition_ < s.repeats) return;
  repetition_ = 0;
  ++segment_;
  skip_empty();
}

void ProgramCursor::skip_empty() {
  while (segment_ < segments_->size() && (*segments_)[segment_].ops.empty()) ++segment_;
}

}  // namespace cpsim::model
