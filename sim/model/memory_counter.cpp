// The device peaks of sim/runtime/memory_need.hpp: a counting run (count_run.hpp) of the problem, which walks every
// rank's path with the counting device, and each rank's Recorder peaks from it (all buffers, message buffers).
// Registered, as backends and devices are, so that the runtime (a room below the model) can ask for it.
#include "sim/model/count_run.hpp"
#include "sim/runtime/memory_need.hpp"

namespace cpsim::model {
namespace {

DevicePeaks device_peaks(const Problem& p, StrategyKind kind, bool backward) {
  CountOptions opt;
  opt.backward = backward;
  opt.step_work = false;  // the peaks only
  const CountResult r = count_run(p, kind, opt);
  DevicePeaks peaks;
  for (const Recorder& rec : r.ranks) {
    peaks.all.push_back(rec.peak_bytes());
    peaks.message.push_back(rec.message_peak_bytes());
  }
  return peaks;
}

[[maybe_unused]] const bool registered = register_device_peak_counter(device_peaks);

}  // namespace
}  // namespace cpsim::model
