#!/usr/bin/env bash
# same_bits.sh CPSIM RUN-OPTIONS...: `cpsim run RUN-OPTIONS --dump` on the threads and processes backends and,
# through mpirun.sh, on the mpi backend; passes when every .npy file (inputs, out, lse, gradients) is byte for
# byte the same on all three.
set -eu
here="$(cd "$(dirname "$0")" && pwd)"
cpsim="$1"
shift
dir="$(mktemp -d)"
trap 'rm -rf "$dir"' EXIT
"$cpsim" run --backend threads "$@" --dump "$dir/threads" >/dev/null
"$cpsim" run --backend processes "$@" --dump "$dir/processes" >/dev/null
"$here/mpirun.sh" "$cpsim" run --backend mpi "$@" --dump "$dir/mpi" >/dev/null
n=0
for f in "$dir"/threads/*.npy; do
  for other in processes mpi; do
    cmp "$f" "$dir/$other/$(basename "$f")" || { echo "same_bits.sh: $(basename "$f") differs on $other"; exit 1; }
  done
  n=$((n + 1))
done
[ "$n" -ge 5 ] || { echo "same_bits.sh: only $n files were written"; exit 1; }
echo "same_bits.sh: $n files identical on threads, processes and mpi"
