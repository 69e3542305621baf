#!/usr/bin/env bash
# tests/gpu/gpu_check_refusal.sh BUILD OUT: on a machine without a usable GPU, scripts/gpu-check OUT (on BUILD)
# finds the binaries loadable, stops after its first step with the probe's reason, reports every later step as not
# run, writes OUT/summary.json with "passed": false, and exits 1. Where a GPU is usable: exit 77 (ctest: skipped).
set -u
build="$1" out="$2"
cd "$(dirname "$0")/../.."
if "$build/tests/test_gpu" --no-run >/dev/null 2>&1; then
  echo "a GPU is usable here: scripts/gpu-check would run for real, not refuse"
  exit 77
fi
rm -rf "$out"
log="$(BUILD_DIR="$build" scripts/gpu-check "$out" 2>&1)"
rc=$?
printf '%s\n' "$log"
fail() { echo "gpu_check_refusal: $*" >&2; exit 1; }
[[ $rc -eq 1 ]] || fail "exit code $rc, expected 1"
grep -q '^gpu-check: stopping: .' <<<"$log" || fail "no 'stopping:' line with the reason"
grep -qE '^probe +SKIP' <<<"$log" || fail "the probe is not reported skipped"
[[ "$(grep -cE '^[a-z_]+ +NOT RUN' <<<"$log")" -eq 8 ]] || fail "the 8 steps after the probe are not all 'NOT RUN'"
grep -q '"passed": false' "$out/summary.json" || fail "summary.json does not say passed: false"
[[ -s "$out/logs/probe.log" ]] || fail "no probe log"
echo "gpu_check_refusal: refused as expected"
