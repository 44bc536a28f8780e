"""Print how long the request simulator takes for 10,000 requests (and the figures it gives).

Run: `python benchmarks/serving_sim.py` (one core is enough; numbers are measured, not asserted).
It prints wall time and CPU time: on a shared, loaded machine the CPU time is the fairer figure.
Llama 3 70B on 8 H100 (tp=8), 1024-token prompts, 256 generated tokens, Poisson arrivals at
4 requests/s, a 200,000-token KV budget; each KV policy and disaggregated prefill.
"""

from __future__ import annotations

import argparse
import time

from scaling_lib import serving
from scaling_lib.serving import sim


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--requests", type=int, default=10_000)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args(argv)
    t0, t1 = sim.linear_step_time("llama3-70b", "h100", 8, 1024 + 128)
    pre = serving.estimate("llama3-70b", "h100", 8, batch=1, prompt_len=1024, gen_len=256,
                           tp=8).ttft
    kw = dict(prompt_len=1024, gen_len=256, kv_budget_tokens=200_000, prefill_time=pre, t0=t0,
              t1=t1, rate=4.0, n_requests=args.requests, slo_ttft=1.0, slo_tpot=0.05)
    cases = {"reserve": {}, "paged": dict(kv_policy="paged"),
             "disaggregated": dict(disaggregated=True,
                                   kv_transfer_time=sim.kv_transfer_time("llama3-70b", 1024))}
    for name, extra in cases.items():
        best = cpu = float("inf")
        for _ in range(args.repeat):
            start, start_cpu = time.perf_counter(), time.process_time()
            r = sim.simulate(**kw, **extra)
            best = min(best, time.perf_counter() - start)
            cpu = min(cpu, time.process_time() - start_cpu)
        ttft, tpot = r.percentiles("ttft"), r.percentiles("tpot")
        print(f"{name:>14}: {args.requests:,} requests in {best:.2f} s ({cpu:.2f} s of CPU; best "
              f"of {args.repeat}); "
              f"TTFT p50/p99 {ttft['p50'] * 1e3:.0f}/{ttft['p99'] * 1e3:.0f} ms, "
              f"TPOT p50/p99 {tpot['p50'] * 1e3:.1f}/{tpot['p99'] * 1e3:.1f} ms, "
              f"goodput {r.goodput:.2f} req/s, preemptions {r.preemptions}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
