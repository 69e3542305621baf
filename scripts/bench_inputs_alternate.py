#!/usr/bin/python3
"""`cpsim bench inputs` of several binaries, taking turns (docs/architecture.md, "The inputs").

Runs `cpsim bench inputs --json` with each given binary in turn, ROUNDS times, each round starting with the next
binary (so that each runs first equally often), and prints, per binary and dtype, the ns per sample of the fast path
and of libm one sample at a time: the lowest and the median of its rounds (each round's figure is already the best
of a few in thread CPU time). Stops if any binary's samples differ from libm's. A binary may be given as NAME=PATH.

  python3 scripts/bench_inputs_alternate.py --rounds 6 before=old/cpsim after=build/release/cpsim
"""
import argparse
import json
import statistics
import subprocess


def load():
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


def one_run(binary, samples):
    cmd = [binary, "bench", "inputs", "--json"] + (["--samples", samples] if samples else [])
    out = json.loads(subprocess.run(cmd, capture_output=True, text=True, check=True).stdout)
    for d in out["dtypes"]:
        if d["differing"] != 0:
            raise SystemExit(f"{binary}: {d['differing']} {d['dtype']} samples differ from libm's")
    return out["vector_isa"], {d["dtype"]: (d["fast_ns_per_sample"], d["libm_ns_per_sample"]) for d in out["dtypes"]}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("binaries", nargs="+", help="PATH or NAME=PATH")
    ap.add_argument("--rounds", type=int, default=6)
    ap.add_argument("--samples", default="", help="--samples of each run (default: the bench's)")
    a = ap.parse_args()
    named = [b.split("=", 1) if "=" in b else (b, b) for b in a.binaries]
    before = load()
    runs = {name: [] for name, _ in named}
    isa = {}
    for r in range(a.rounds):
        for name, path in named[r % len(named):] + named[:r % len(named)]:
            isa[name], times = one_run(path, a.samples)
            runs[name].append(times)
    print(f"# {a.rounds} rounds alternating, each starting with the next binary; load average before: {before}, "
          f"after: {load()}")
    print("# ns per sample, lowest / median of the rounds: fast path, then libm one sample at a time")
    for name, rs in runs.items():
        cells = []
        for dtype in rs[0]:
            fast = [t[dtype][0] for t in rs]
            libm = [t[dtype][1] for t in rs]
            cells.append(f"{dtype} {min(fast):.2f} / {statistics.median(fast):.2f} "
                         f"(libm {min(libm):.1f} / {statistics.median(libm):.1f})")
        print(f"{name} [{isa[name]}]: " + "; ".join(cells))


if __name__ == "__main__":
    main()
