#!/usr/bin/env bash
# ctest's way into MPI: runs "$@" as a job of 4 processes on this machine. --oversubscribe lets 4 ranks share
# fewer cores; Open MPI refuses to run as root without --allow-run-as-root. CPSIM_MPIEXEC names the mpiexec that
# CMake found; CPSIM_TEST_DIR is a fresh folder every process of the job sees (removed afterwards). It is also the
# job's TMPDIR, where Open MPI makes its session directory: ctest runs two jobs at once, and two mpiruns sharing
# /tmp/ompi.<host>.<uid> race, one removing it as it finishes while the other creates it ("A call to mkdir was
# unable to create the desired directory ... File exists", orte_init failed).
set -u
mpiexec="${CPSIM_MPIEXEC:-mpiexec}"
flags=(-np "${CPSIM_MPI_NP:-4}" --oversubscribe)
[ "$(id -u)" -eq 0 ] && flags+=(--allow-run-as-root)
CPSIM_TEST_DIR="$(mktemp -d)"
export CPSIM_TEST_DIR
trap 'rm -rf "$CPSIM_TEST_DIR"' EXIT
TMPDIR="$CPSIM_TEST_DIR" "$mpiexec" "${flags[@]}" -x CPSIM_TEST_DIR "$@"
