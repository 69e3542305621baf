#!/usr/bin/env bash
# tests/gpu/torch_peer_test.sh PYTHON CPSIM OUT: tests/gpu/torch_peer.py's paths that run without a GPU.
#   1. A dump of a CPU run (f64, GQA, backward) is accepted, and the check then needs torch and a GPU: exit 77
#      and one line saying which is missing (0 where both are there and the dump passes).
#   2. Where torch is installed: the checker itself, on the CPU (--device cpu): the f64 dump passes, and the same
#      dump with another run's out.npy fails (exit 1).
set -u
python="$1" cpsim="$2" out="$3"
peer="$(dirname "$0")/torch_peer.py"
fail() { echo "torch_peer_test: $*" >&2; exit 1; }
rm -rf "$out"
mkdir -p "$out/good" "$out/other"
for d in good other; do
  seed=1
  [[ $d == other ]] && seed=2
  "$cpsim" run --ranks 2 --strategy ring --seq 96 --heads 4 --kv-heads 2 --head-dim 16 --dtype f64 --backward \
    --seed $seed --dump "$out/$d" --json >"$out/$d/run.json" || fail "cpsim run --dump failed"
done
msg="$("$python" "$peer" check "$out/good" 2>&1)"
rc=$?
printf '%s\n' "$msg"
case $rc in
  77) grep -qE "PyTorch is not installed here|sees no CUDA GPU here" <<<"$msg" || fail "exit 77 without saying why" ;;
  0) ;;
  *) fail "check on a machine without torch or GPU: exit $rc, expected 77" ;;
esac
if "$python" -c 'import torch' 2>/dev/null; then
  "$python" "$peer" check --device cpu "$out/good" || fail "the checker rejects a correct f64 dump"
  cp "$out/other/out.npy" "$out/good/out.npy"
  "$python" "$peer" check --device cpu "$out/good"
  rc=$?
  [[ $rc -eq 1 ]] || fail "the checker accepts another run's out (exit $rc, expected 1)"
  echo "torch_peer_test: the checker passes a correct dump and fails a wrong one"
else
  echo "torch_peer_test: no torch here; the checker itself was not run"
fi
