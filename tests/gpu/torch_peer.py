#!/usr/bin/env python3
"""An independent check of cpsim's GPU backend, and a peer to time it against: PyTorch on the same GPU.

  torch_peer.py check [--json OUT] [--device cpu] DUMP...
      Each DUMP is a folder written by `cpsim run --backend cuda-threads ... --dump DUMP --json > DUMP/run.json`.
      Recomputes out, lse (and, for a backward run, dq, dk, dv) with torch in f64 on the GPU, the gradients by
      autograd, and compares element by element, |cpsim - torch| <= atol + rtol |torch|: bf16 with Transformer
      Engine's context-parallel tolerance (2.5e-2, 3.5e-2 with GQA), f32 with cpsim's (atol 1e-5, rtol 1e-4).
      --device cpu checks this checker where there is no GPU: on an f64 dump of a CPU backend, with 1e-9.
  torch_peer.py time --cpsim CPSIM [--seq S ...] [--heads 64] [--head-dim 128] [--reps 3] [--json OUT]
      Times torch.nn.functional.scaled_dot_product_attention (causal, bf16, B=1) forward and backward with each
      backend this torch offers (flash, cuDNN, efficient; a missing one is named and left out), then
      `CPSIM bench gpu_attention --json` on the same shapes, and prints TFLOP/s and cpsim's ratio to the fastest.

Exit code: 0 when the check passed (check) or everything was measured (time); 1 when a tensor is out of tolerance
or a measurement failed; 2 for bad arguments or a folder that is not a dump; 77 where there is no torch or no
CUDA GPU (so a caller can tell "could not run here" from "failed").
"""
import argparse
import ast
import json
import math
import os
import subprocess
import sys

CANNOT_RUN_HERE = 77
TENSORS = ("out", "lse", "dq", "dk", "dv")


class UsageError(Exception):
    pass


def say(*parts):
    print(*parts, flush=True)


def complain(line):
    print(f"torch_peer: {line}", file=sys.stderr, flush=True)


# --- dumps ------------------------------------------------------------------------------------------------------
def read_npy(path):
    """(shape, bytes) of a little-endian f64 .npy file, as `cpsim run --dump` writes them."""
    with open(path, "rb") as f:
        if f.read(6) != b"\x93NUMPY":
            raise UsageError(f"{path} is not a .npy file")
        major = f.read(2)[0]
        header_len = int.from_bytes(f.read(2 if major == 1 else 4), "little")
        header = ast.literal_eval(f.read(header_len).decode("latin1"))
        data = f.read()
    if header.get("descr") != "<f8" or header.get("fortran_order"):
        raise UsageError(f"{path}: expected little-endian f64 in C order, got {header}")
    return tuple(header["shape"]), data


def load_dump(folder):
    """The run's configuration and the paths of its tensors, checked before torch is needed."""
    run_json = os.path.join(folder, "run.json")
    if not os.path.isdir(folder):
        raise UsageError(f"{folder} is not a folder; name the folder of `cpsim run ... --dump {folder}`")
    if not os.path.isfile(run_json):
        raise UsageError(f"{folder} has no run.json; write the dump with "
                         f"`cpsim run ... --dump {folder} --json > {folder}/run.json`")
    with open(run_json) as f:
        config = json.load(f)["config"]
    names = ["q", "k", "v", "out", "lse"] + (["dout", "dq", "dk", "dv"] if config["backward"] else [])
    missing = [n for n in names if not os.path.isfile(os.path.join(folder, n + ".npy"))]
    if missing:
        raise UsageError(f"{folder} lacks {', '.join(n + '.npy' for n in missing)}")
    if config["dtype"] not in ("bf16", "f32", "f64"):
        raise UsageError(f"{folder}: a {config['dtype']} run; cpsim runs bf16, f32 or f64")
    return config, {n: os.path.join(folder, n + ".npy") for n in names}


def tolerance(dtype, gqa):
    if dtype == "bf16":
        t = 3.5e-2 if gqa else 2.5e-2
        return t, t, f"bf16: atol = rtol = {t} (Transformer Engine's CP tests{', GQA' if gqa else ''})"
    if dtype == "f32":
        return 1e-5, 1e-4, "f32: atol 1e-5, rtol 1e-4 (cpsim's f32 rule)"
    return 1e-9, 1e-9, "f64: atol = rtol = 1e-9 (both sides in f64)"


# --- check ------------------------------------------------------------------------------------------------------
def reference(torch, t, causal, backward):
    """Attention in f64 as the textbook writes it. t: q, dout [B, S, Nq, D]; k, v [B, S, Nkv, D] (global order)."""
    q, k, v = (t[n].clone().requires_grad_(backward) for n in ("q", "k", "v"))
    seq, heads, dim = q.shape[1], q.shape[2], q.shape[3]
    group = heads // k.shape[2]  # query head h reads KV head h // group
    qh = q.transpose(1, 2)                                      # [B, Nq, S, D]
    kh = k.transpose(1, 2).repeat_interleave(group, dim=1)      # [B, Nq, S, D]
    vh = v.transpose(1, 2).repeat_interleave(group, dim=1)
    s = qh @ kh.transpose(-1, -2) / math.sqrt(dim)              # [B, Nq, S, S]
    if causal:  # positions are 0 .. S-1: query i sees keys j <= i
        later = torch.ones(seq, seq, dtype=torch.bool, device=s.device).triu(1)
        s = s.masked_fill(later, float("-inf"))
    want = {"lse": torch.logsumexp(s, dim=-1)}                  # [B, Nq, S]
    out = (torch.softmax(s, dim=-1) @ vh).transpose(1, 2)       # [B, S, Nq, D]
    want["out"] = out
    if backward:
        out.backward(t["dout"])
        want.update(dq=q.grad, dk=k.grad, dv=v.grad)
    return {n: x.detach() for n, x in want.items()}


def check(torch, args):
    dumps = [(folder, *load_dump(folder)) for folder in args.dumps]
    device = torch.device(args.device)
    report, passed = [], True
    for folder, config, paths in dumps:
        t = {}
        for name, path in paths.items():
            shape, data = read_npy(path)
            t[name] = torch.frombuffer(bytearray(data), dtype=torch.float64).reshape(shape).to(device)
        gqa = config["heads"] != config["kv_heads"]
        atol, rtol, rule = tolerance(config["dtype"], gqa)
        want = reference(torch, t, config["causal"], config["backward"])
        say(f"{folder}: {config['strategy']} {config['sharding']} C={config['ranks']} {config['dtype']} "
            f"S={config['seq']} Nq/Nkv={config['heads']}/{config['kv_heads']} D={config['head_dim']} ({rule})")
        for name in (n for n in TENSORS if n in want):
            err = (t[name] - want[name]).abs().masked_fill(t[name] == want[name], 0.0)  # equal infinities: 0
            ratio = (err / (atol + rtol * want[name].abs())).max().item()
            ok = ratio <= 1.0 and math.isfinite(ratio)
            passed &= ok
            say(f"  {name:4s} max |err| {err.max().item():.3e}  worst err/allowed {ratio:.3f}  {'ok' if ok else 'FAILED'}")
            report.append({"dump": folder, "tensor": name, "max_abs_error": err.max().item(),
                           "worst_ratio": ratio, "passed": ok, "rule": rule})
    write_json(args.json, {"check": report, "passed": passed})
    say("torch_peer: every tensor within tolerance" if passed else "torch_peer: a tensor is OUT of tolerance")
    return 0 if passed else 1


# --- time -------------------------------------------------------------------------------------------------------
def sdpa_backends(torch):
    """(name, backend or None, why not) for each SDPA backend this torch may offer."""
    try:
        from torch.nn.attention import SDPBackend
    except ImportError as e:
        return [("flash", None, str(e)), ("cudnn", None, str(e)), ("efficient", None, str(e))]
    wanted = [("flash", "FLASH_ATTENTION"), ("cudnn", "CUDNN_ATTENTION"), ("efficient", "EFFICIENT_ATTENTION")]
    return [(name, getattr(SDPBackend, attr, None), "" if hasattr(SDPBackend, attr) else f"torch has no {attr}")
            for name, attr in wanted]


def best_ms(torch, fn, reps):
    """The fastest of `reps` timed calls (CUDA events) after one untimed call."""
    fn()
    best = float("inf")
    for _ in range(reps):
        start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        stop.record()
        torch.cuda.synchronize()
        best = min(best, start.elapsed_time(stop))
    return best


def time_torch(torch, seq, heads, dim, reps):
    from torch.nn.attention import sdpa_kernel
    import torch.nn.functional as F
    shape = (1, heads, seq, dim)
    q, k, v = (torch.randn(shape, device="cuda", dtype=torch.bfloat16, requires_grad=True) for _ in range(3))
    dout = torch.randn(shape, device="cuda", dtype=torch.bfloat16)
    pairs = seq * (seq + 1) // 2 * heads  # causal: the useful flops, as cpsim counts them
    rows = []
    for name, backend, why in sdpa_backends(torch):
        row = {"seq": seq, "backend": name}
        if backend is None:
            rows.append({**row, "unavailable": why})
            continue
        try:
            with sdpa_kernel([backend]):
                fwd = best_ms(torch, lambda: F.scaled_dot_product_attention(q, k, v, is_causal=True), reps)
                out = F.scaled_dot_product_attention(q, k, v, is_causal=True)
                bwd = best_ms(torch, lambda: torch.autograd.grad(out, (q, k, v), dout, retain_graph=True), reps)
            rows.append({**row, "fwd_ms": fwd, "bwd_ms": bwd, "fwd_tflops": 4 * dim * pairs / fwd / 1e9,
                         "bwd_tflops": 10 * dim * pairs / bwd / 1e9})
        except RuntimeError as e:  # "No available kernel", or this backend refuses these inputs
            rows.append({**row, "unavailable": str(e).strip().splitlines()[0]})
    del q, k, v, dout
    torch.cuda.empty_cache()
    return rows


def time_all(torch, args):
    rows = []
    for seq in args.seq:
        rows += time_torch(torch, seq, args.heads, args.head_dim, args.reps)
    torch.cuda.empty_cache()  # the GPU's memory to cpsim, which runs next in its own process
    cmd = [args.cpsim, "bench", "gpu_attention", "--json", "--seq", *map(str, args.seq), "--heads", str(args.heads),
           "--head-dim", str(args.head_dim), "--reps", str(args.reps), "--gemm-n", "0"]
    say("running:", " ".join(cmd))
    done = subprocess.run(cmd, capture_output=True, text=True)
    if done.returncode != 0:
        complain(f"cpsim bench failed (exit {done.returncode}): {done.stderr.strip()}")
        return 1
    cpsim = {p["seq"]: p for p in json.loads(done.stdout)["points"]}
    say(f"causal attention, bf16, B=1, {args.heads} heads, D={args.head_dim}: TFLOP/s (useful flops)")
    say(f"{'S':>6} {'who':>12} {'fwd':>8} {'bwd':>8}")
    summary, measured = [], bool(cpsim)
    for seq in args.seq:
        ran = [r for r in rows if r["seq"] == seq and "fwd_tflops" in r]
        for r in (r for r in rows if r["seq"] == seq):
            if "fwd_tflops" in r:
                say(f"{seq:>6} {'torch ' + r['backend']:>12} {r['fwd_tflops']:8.1f} {r['bwd_tflops']:8.1f}")
            else:
                say(f"{seq:>6} {'torch ' + r['backend']:>12}  unavailable: {r['unavailable']}")
        c = cpsim[seq]
        say(f"{seq:>6} {'cpsim ' + c['fwd_kernel']:>12} {c['fwd_tflops']:8.1f} {c['bwd_tflops']:8.1f}")
        if not ran:
            measured = False
            continue
        fwd_best = max(ran, key=lambda r: r["fwd_tflops"])
        bwd_best = max(ran, key=lambda r: r["bwd_tflops"])
        fr, br = c["fwd_tflops"] / fwd_best["fwd_tflops"], c["bwd_tflops"] / bwd_best["bwd_tflops"]
        say(f"{seq:>6} cpsim / fastest torch: forward {fr:.2f} ({fwd_best['backend']}), backward {br:.2f} "
            f"({bwd_best['backend']}); goal >= 0.80 and >= 0.70: {'met' if fr >= 0.8 and br >= 0.7 else 'NOT met'}")
        summary.append({"seq": seq, "fwd_ratio": fr, "fwd_vs": fwd_best["backend"], "bwd_ratio": br,
                        "bwd_vs": bwd_best["backend"]})
    write_json(args.json, {"torch": rows, "cpsim": list(cpsim.values()), "ratios": summary,
                           "torch_version": torch.__version__})
    return 0 if measured else 1


# --- main -------------------------------------------------------------------------------------------------------
def write_json(path, doc):
    if path:
        with open(path, "w") as f:
            json.dump(doc, f, indent=1)


def parse(argv):
    p = argparse.ArgumentParser(prog="torch_peer.py", description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="mode", required=True)
    c = sub.add_parser("check", help="cuda-threads dumps against torch in f64")
    c.add_argument("dumps", nargs="+", metavar="DUMP")
    c.add_argument("--json", metavar="OUT")
    c.add_argument("--device", choices=("cuda", "cpu"), default="cuda", help="cpu: to check this checker")
    t = sub.add_parser("time", help="torch SDPA's backends beside cpsim bench gpu_attention")
    t.add_argument("--cpsim", required=True, help="the cpsim executable")
    t.add_argument("--seq", type=int, nargs="+", default=[4096, 8192, 16384, 32768])
    t.add_argument("--heads", type=int, default=64)
    t.add_argument("--head-dim", type=int, default=128)
    t.add_argument("--reps", type=int, default=3)
    t.add_argument("--json", metavar="OUT")
    args = p.parse_args(argv)
    if args.mode == "time":
        if not (os.path.isfile(args.cpsim) and os.access(args.cpsim, os.X_OK)):
            p.error(f"--cpsim {args.cpsim} is not an executable; name the cpsim of a CUDA build")
        if min(args.seq) < 1 or args.heads < 1 or args.head_dim < 1 or args.reps < 1:
            p.error("--seq, --heads, --head-dim and --reps must be at least 1")
    return args


def main(argv):
    args = parse(argv)
    try:
        if args.mode == "check":
            for folder in args.dumps:  # every dump is read and checked before torch is needed
                load_dump(folder)
        try:
            import torch
        except ImportError as e:
            complain(f"PyTorch is not installed here ({e}); run it where torch with CUDA is")
            return CANNOT_RUN_HERE
        on_cpu = args.mode == "check" and args.device == "cpu"
        if not on_cpu and not torch.cuda.is_available():
            complain(f"torch {torch.__version__} sees no CUDA GPU here; run it on a GPU machine")
            return CANNOT_RUN_HERE
        say(f"torch {torch.__version__} on {'the CPU' if on_cpu else torch.cuda.get_device_name(0)}")
        return check(torch, args) if args.mode == "check" else time_all(torch, args)
    except UsageError as e:
        complain(str(e))
        return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
