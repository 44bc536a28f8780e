"""Print the planner's search throughput (plans/s) and the full Llama 3 405B search time.

Run: `python benchmarks/planner.py` (one core is enough; numbers are measured, not asserted).
"""

from __future__ import annotations

import argparse
import time

from scaling_lib import hardware, planner
from scaling_lib.parallelism import rules

CASES = [  # (model, accelerator, devices, global batch, sequence length)
    ("llama3-8b", "h100", 64, 512, 8192),
    ("llama3-70b", "h100", 1024, 1024, 8192),
    ("gpt3-175b", "a100-80gb", 1024, 1536, 2048),
    ("llama3-405b", "h100", 8192, 2048, 8192),
    ("llama3-405b", "h100", 16384, 2048, 8192),  # Llama 3 405B pre-training (Dubey et al. 2024)
]


def bench(model, gpu, n, B, T, repeat=3, **kw):
    """(result, best wall seconds, best CPU seconds of this process): on a shared machine the
    CPU time is the search's own cost, the wall time adds the other processes' share."""
    cluster = hardware.cluster(gpu, n)
    planner.search(model, cluster, B, T, top=1, **kw)  # warm caches and imports
    best, cpu = float("inf"), float("inf")
    for _ in range(repeat):
        t0, c0 = time.perf_counter(), time.process_time()
        res = planner.search(model, cluster, B, T, top=1, **kw)
        best = min(best, time.perf_counter() - t0)
        cpu = min(cpu, time.process_time() - c0)
    return res, best, cpu


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args(argv)
    print(f"{'model':<12} {'GPUs':>6} {'objective':>9} {'plans':>9} {'feasible':>9} "
          f"{'seconds':>8} {'plans/s':>10}  best plan")
    for model, gpu, n, B, T in CASES:
        for objective in ("time", "cost"):
            res, s, _ = bench(model, gpu, n, B, T, repeat=args.repeat, objective=objective)
            p = res.plan(0)
            best = (f"n={int(res.table['n_devices'][0])} tp={p.tp} pp={p.pp} dp={p.dp} "
                    f"cp={p.cp} zero={p.zero} mb={p.micro_batch} v={p.virtual_stages} "
                    f"{p.recompute} MFU {float(res.table['mfu'][0]):.1%}")
            print(f"{model:<12} {n:>6} {objective:>9} {res.n_plans:>9,} "
                  f"{res.n_runnable:>9,} "
                  f"{s:>8.3f} {res.n_plans / s:>10,.0f}  {best}")
    res, s, cpu = bench("llama3-405b", "h100", 16384, 2048, 8192, repeat=args.repeat)
    p = res.plan(0)
    print(f"\nfull search, Llama 3 405B on 16,384 H100s (2,048 x 8,192 tokens): "
          f"{res.n_plans:,} plans in {s:.3f} s wall, {cpu:.3f} s CPU "
          f"({res.n_plans / s:,.0f} plans/s); best: {p}; rules it breaks: "
          f"{rules.broken('llama3-405b', p, 2048, 8192) or 'none'}")


if __name__ == "__main__":
    main()
