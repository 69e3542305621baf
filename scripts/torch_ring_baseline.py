#!/usr/bin/python3
"""A ring-attention baseline in PyTorch to compare `cpsim run --backend processes` with.

A causal ring attention forward in PyTorch with gloo, one process per rank, contiguous sharding, f32, as the chapter
"Context parallelism: Ring Attention and Ulysses" builds it: each rank keeps its query block, passes its K/V block to
the right P-1 times, computes the blocks at or before its own and merges them by log-sum-exp. Prints the slowest
rank's time in the ring loop (the same span as cpsim's forward time) and the whole program's time.

  /usr/bin/python3 scripts/torch_ring_baseline.py --ranks 4 --seq 4096 --heads 8 --head-dim 64
(PyTorch from Debian's python3-torch; `apt-get install python3-torch`.)
"""
import argparse
import os
import time

T0 = time.perf_counter()

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
import torch.multiprocessing as mp  # noqa: E402


def block(q, k, v, q_start, k_start):
    """Causal attention of q [s, H, D] against k, v [s, H, D]: out [s, H, D] and lse [H, s]."""
    scores = torch.einsum("qhd,khd->hqk", q, k) / q.shape[-1] ** 0.5
    later = (torch.arange(k.shape[0])[None, :] + k_start) > (torch.arange(q.shape[0])[:, None] + q_start)
    scores = scores.masked_fill(later, float("-inf"))
    lse = torch.logsumexp(scores, dim=-1)
    return torch.einsum("hqk,khd->qhd", torch.exp(scores - lse[..., None]), v), lse


def rank_main(rank, args, port, results):
    os.environ["MASTER_ADDR"], os.environ["MASTER_PORT"] = "127.0.0.1", str(port)
    dist.init_process_group("gloo", rank=rank, world_size=args.ranks)
    p, s = args.ranks, args.seq // args.ranks
    gen = torch.Generator().manual_seed(rank)
    q = torch.randn(s, args.heads, args.head_dim, generator=gen)
    kv = torch.randn(2, s, args.heads, args.head_dim, generator=gen)
    dist.barrier()
    t0 = time.perf_counter()
    out = lse = None
    owner = rank  # whose K/V block is in hand
    for step in range(p):
        if owner <= rank:
            o, l = block(q, kv[0], kv[1], rank * s, owner * s)
            if out is None:
                out, lse = o, l
            else:  # lse = log(e^lse1 + e^lse2); out = out1 e^(lse1 - lse) + out2 e^(lse2 - lse)
                new = torch.logaddexp(lse, l)
                out = out * torch.exp(lse - new).T[..., None] + o * torch.exp(l - new).T[..., None]
                lse = new
        if step < p - 1:
            nxt = torch.empty_like(kv)
            reqs = [dist.isend(kv, (rank + 1) % p), dist.irecv(nxt, (rank - 1) % p)]
            for r in reqs:
                r.wait()
            kv, owner = nxt, (owner - 1) % p
    results[rank] = time.perf_counter() - t0
    dist.destroy_process_group()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ranks", type=int, default=4)
    ap.add_argument("--seq", type=int, default=4096)
    ap.add_argument("--heads", type=int, default=8)
    ap.add_argument("--head-dim", type=int, default=64)
    ap.add_argument("--port", type=int, default=29517)
    args = ap.parse_args()
    results = mp.Manager().dict()
    mp.spawn(rank_main, args=(args, args.port, results), nprocs=args.ranks)
    loop = max(results.values())
    print(f"torch {torch.__version__} gloo, {args.ranks} ranks, S={args.seq} H={args.heads} D={args.head_dim} f32: "
          f"slowest rank's ring loop {loop:.3f} s, whole program {time.perf_counter() - T0:.3f} s")


if __name__ == "__main__":
    main()
