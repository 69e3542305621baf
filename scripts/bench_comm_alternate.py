#!/usr/bin/python3
"""`cpsim bench comm` of several binaries (or settings), taking turns (docs/performance/comm.md).

Runs `cpsim bench comm --backend B --ranks 4 --minbytes LO --maxbytes HI --stepfactor F --json` with each given
binary in turn, ROUNDS times, so that the binaries compared are measured alternately under the same load (each
round starting with the next binary, so that each runs first equally often), and prints, per operation and size, each binary's time per call in us: the lowest and the median of its rounds (each
round's figure is already the slowest rank's mean, best of 3 runs). A binary may be given as NAME=PATH to label it,
as PATH@ring or PATH@direct to impose that form of the collectives on its runs (--collectives: on every run), and
with more of the bench's flags after a '+' each (PATH+--bind=none, PATH+--backend=processes) for its runs alone.

  python3 scripts/bench_comm_alternate.py --rounds 5 --backend threads before=old/cpsim after=build/release/cpsim
  python3 scripts/bench_comm_alternate.py --backend processes ring=build/release/cpsim@ring direct=build/release/cpsim@direct
  python3 scripts/bench_comm_alternate.py threads=build/release/cpsim processes=build/release/cpsim+--backend=processes
"""
import argparse
import json
import statistics
import subprocess


def load():
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


def one_run(spec, a):
    spec, *flags = spec.split("+")
    binary, _, form = spec.partition("@")
    opts = {"--backend": a.backend, "--ranks": str(a.ranks), "--minbytes": a.minbytes, "--maxbytes": a.maxbytes,
            "--stepfactor": str(a.stepfactor)}
    if form or a.collectives:
        opts["--collectives"] = form or a.collectives
    for flag in flags:  # the binary's own flags replace the common ones (the bench refuses a flag given twice)
        name, _, value = flag.partition("=")
        opts[name] = value
    cmd = [binary, "bench", "comm", "--json"] + [x for kv in opts.items() for x in kv]
    out = json.loads(subprocess.run(cmd, capture_output=True, text=True, check=True).stdout)
    times = {}
    for op in out["ops"]:
        for row in op["rows"]:
            if row["wrong"] != 0:
                raise SystemExit(f"{binary}: {op['op']} at {row['size']} bytes delivered {row['wrong']} wrong elements")
            times[(op["op"], row["size"])] = row["time_us"]
    return times


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("binaries", nargs="+", help="PATH or NAME=PATH")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--backend", default="threads")
    ap.add_argument("--ranks", type=int, default=4)
    ap.add_argument("--minbytes", default="256K")
    ap.add_argument("--maxbytes", default="64M")
    ap.add_argument("--stepfactor", type=int, default=4)
    ap.add_argument("--collectives", default="")
    ap.add_argument("--each", action="store_true", help="also print every round's figure, in round order")
    a = ap.parse_args()
    named = [b.split("=", 1) if "=" in b else (b, b) for b in a.binaries]
    before = load()
    runs = {name: [] for name, _ in named}
    # Round r starts with binary r mod N: whichever runs first in a round tends to read lower, so each takes that
    # place equally often.
    for r in range(a.rounds):
        for name, path in named[r % len(named):] + named[:r % len(named)]:
            runs[name].append(one_run(path, a))
    print(f"# {a.backend} (where a binary's flags name no other), {a.ranks} ranks, {a.rounds} rounds alternating, "
          "each round starting with the next binary"
          f"{', --collectives ' + a.collectives if a.collectives else ''}; load average before: {before}, after: {load()}")
    print("# time per call (us), lowest / median of the rounds")
    print(f"{'op':15s} {'size':>8s} " + " ".join(f"{name:>21s}" for name, _ in named))
    for key in sorted(runs[named[0][0]][0]):
        op, size = key
        cells = []
        for name, _ in named:
            ts = [r[key] for r in runs[name]]
            cells.append(f"{min(ts):10.1f} / {statistics.median(ts):8.1f}")
        print(f"{op:15s} {size // 1024:7d}K " + " ".join(cells))
        if a.each:
            for name, _ in named:
                print(f"    {name:>17s}: " + " ".join(f"{r[key]:.1f}" for r in runs[name]))


if __name__ == "__main__":
    main()
