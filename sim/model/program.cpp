#include "sim/model/program.hpp"

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

}  // namespace cpsim::model
