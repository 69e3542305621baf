#!/usr/bin/python3
"""A whole `cpsim run` against its slowest rank's forward time: what a run costs beyond its compute.

Runs the goal's shape (ring, contiguous, 4 ranks, seq 4096, 8 heads, head dim 64, f32) with each given binary in
turn, ROUNDS times, so that binaries compared are measured alternately under the same load. A run's wall time is
taken around the process, from its start to its exit (as /usr/bin/time's elapsed time, to the microsecond); its
forward time is the largest time_ms.forward of its --json report. Prints, per binary, wall / forward (min, median,
max), the median wall and forward in ms, and the load average before and after. A binary given as PATH@VAR=VALUE
runs with that variable set in its environment (to compare a setting with the default).

  python3 scripts/whole_run_ratio.py --rounds 10 --backend processes build/release/cpsim [other/cpsim ...]
"""
import argparse
import json
import os
import statistics
import subprocess
import time

SHAPE = ("run --strategy ring --sharding contiguous --ranks 4 --seq 4096 --heads 8 --kv-heads 8 --head-dim 64 "
         "--dtype f32 --json").split()


def load():
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


def one_run(spec, backend):
    binary, _, setting = spec.partition("@")
    env = dict(os.environ)
    if setting:
        name, _, value = setting.partition("=")
        env[name] = value
    t0 = time.perf_counter()
    out = subprocess.run([binary] + SHAPE + ["--backend", backend], capture_output=True, text=True, check=True,
                         env=env)
    wall_ms = (time.perf_counter() - t0) * 1000
    forward_ms = max(r["time_ms"]["forward"] for r in json.loads(out.stdout)["ranks"])
    return wall_ms, forward_ms


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("binaries", nargs="+")
    ap.add_argument("--rounds", type=int, default=10)
    ap.add_argument("--backend", default="processes")
    a = ap.parse_args()
    before = load()
    runs = {b: [] for b in a.binaries}
    # Round r starts with binary r mod N, so that each runs first equally often (the first of a round tends to
    # read lower).
    for r in range(a.rounds):
        k = r % len(a.binaries)
        for b in a.binaries[k:] + a.binaries[:k]:
            runs[b].append(one_run(b, a.backend))
    print(f"# {a.backend}, {a.rounds} rounds alternating; load average before: {before}, after: {load()}")
    for b, rs in runs.items():
        ratios = [w / f for w, f in rs]
        print(f"{b}: wall/forward min {min(ratios):.3f} median {statistics.median(ratios):.3f} max {max(ratios):.3f}"
              f" | median wall {statistics.median(w for w, _ in rs):.1f} ms, forward {statistics.median(f for _, f in rs):.1f} ms")


if __name__ == "__main__":
    main()
