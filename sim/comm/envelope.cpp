#include "sim/comm/envelope.hpp"

#include <cstdio>

namespace cpsim {

const char* collective_name(CollectiveKind k) {
  switch (k) {
    case CollectiveKind::none:
      return "p2p";
    case CollectiveKind::all_gather:
      return "all_gather";
    case CollectiveKind::reduce_scatter:
      return "reduce_scatter";
    case CollectiveKind::all_to_all:
      return "all_to_all";
    case CollectiveKind::all_reduce:
      return "all_reduce";
    case CollectiveKind::barrier:
      return "barrier";
    case CollectiveKind::split:
      return "split";
  }
  return "?";
}

namespace {

std::string rank_word(int r) {
  return "rank " + std::to_string(r);
}

std::string call_name(const Envelope& env) {
  return std::string(collective_name(env.kind)) + " #" + std::to_string(env.seq);
}

}  // namespace

std::string describe_wait(const Envelope& env, bool sending, int peer_world) {
  const std::string dir = sending ? "send to " : "recv from ";
  switch (env.channel) {
    case Channel::p2p:
      return dir + rank_word(peer_world) + " (tag " + std::to_string(env.tag) + ")";
    case Channel::collective:
      return call_name(env) + " (" + dir + rank_word(peer_world) + ")";
    case Channel::control:
      return "returning its result (" + dir + "the launcher)";
  }
  return dir + rank_word(peer_world);
}

std::string match_error(int me_world, const Envelope& want, std::uint64_t want_bytes, const MessageHeader& got) {
  const std::string me = rank_word(me_world), peer = rank_word(got.src);
  if (want.channel == Channel::collective && (got.env.kind != want.kind || got.env.seq != want.seq)) {
    return me + " called " + call_name(want) + " but " + peer + " called " + call_name(got.env) +
           ": every rank of a communicator must call the same collectives in the same order";
  }
  if (got.bytes != want_bytes) {
    return me + " posted " + describe_wait(want, false, got.src) + " of " + std::to_string(want_bytes) +
           " bytes, but " + peer + " sent " + std::to_string(got.bytes) + " bytes: sizes must match";
  }
  return {};
}

std::string timeout_error(int me_world, std::chrono::milliseconds waited, const Envelope& env, bool sending,
                          int peer_world) {
  char secs[32];
  std::snprintf(secs, sizeof secs, "%.1f", std::chrono::duration<double>(waited).count());
  const std::string hint = env.channel == Channel::collective ? " (does every rank call it, in the same order?)" : "";
  return rank_word(me_world) + " waited " + secs + " s in " + describe_wait(env, sending, peer_world) +
         ": likely deadlock" + hint;
}

std::string peer_gone_error(int me_world, const Envelope& env, bool sending, int peer_world, const std::string& how) {
  return rank_word(me_world) + " waited in " + describe_wait(env, sending, peer_world) + ", but " +
         rank_word(peer_world) + " " + how + (sending ? " without receiving it" : " without sending it");
}

std::uint64_t mix64(std::uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

}  // namespace cpsim
