"""Reading a profiler trace: one :class:`OpEvent` per executed HLO operation.

:func:`read_trace` finds the newest ``*.trace.json.gz`` the installed JAX writes next to its
``xplane.pb`` (plain gzip + JSON: no TensorBoard or XProf needed) and
:func:`parse_trace_events` picks the HLO operations out of its Chrome-trace events.

See: Chapter "Profiling JAX programs".
"""

from __future__ import annotations

import glob
import gzip
import json
import os
from dataclasses import dataclass

@dataclass(frozen=True)
class OpEvent:
    """One execution of one HLO operation on one device, from a profiler trace (seconds)."""

    op: str
    module: str
    device: str
    start: float
    duration: float


def _trace_file(logdir: str) -> str:
    files = glob.glob(os.path.join(logdir, "**", "*.trace.json.gz"), recursive=True)
    files = files or glob.glob(os.path.join(logdir, "**", "perfetto_trace.json.gz"),
                               recursive=True)
    if not files:
        raise ValueError(f"no *.trace.json.gz under logdir={logdir!r}; run jax.profiler.trace("
                         f"{logdir!r}) around the code first")
    return max(files, key=os.path.getmtime)


def parse_trace_events(events) -> list[OpEvent]:
    """:class:`OpEvent` s from Chrome-trace-format events (the ``traceEvents`` list).

    An event is an HLO operation when its args carry ``hlo_op`` (and ``hlo_module``): XLA:CPU
    records one per executed thunk with ``device_ordinal``; on a GPU or TPU they sit under a
    ``/device:...`` process. Where a device process has an "XLA Ops" line, only that line is read
    (the kernels under it would count the same time twice). A device trace with no ``hlo_op``
    annotations falls back to its kernel events, named as recorded (they then may not match the
    HLO names). Times in seconds, starting at 0.

    >>> ev = [{"ph": "X", "pid": 1, "tid": 2, "ts": 10.0, "dur": 5.0, "name": "dot.1",
    ...        "args": {"hlo_op": "dot.1", "hlo_module": "jit_f", "device_ordinal": "0"}}]
    >>> parse_trace_events(ev)
    [OpEvent(op='dot.1', module='jit_f', device='0', start=0.0, duration=5e-06)]
    """
    procs, threads = {}, {}
    for e in events:
        if e.get("ph") == "M" and e.get("name") == "process_name":
            procs[e.get("pid")] = e.get("args", {}).get("name", "")
        if e.get("ph") == "M" and e.get("name") == "thread_name":
            threads[(e.get("pid"), e.get("tid"))] = e.get("args", {}).get("name", "")
    xla_ops_lines = {k for k, v in threads.items() if v == "XLA Ops"}
    with_lines = {pid for pid, _ in xla_ops_lines}
    picked = []
    for e in events:
        if e.get("ph") != "X":
            continue
        args = e.get("args") or {}
        key = (e.get("pid"), e.get("tid"))
        if e.get("pid") in with_lines:
            if key not in xla_ops_lines:
                continue
        elif "hlo_op" not in args or threads.get(key) == "XLA Modules":
            continue
        picked.append(e)
    on_device = [e for e in picked if procs.get(e.get("pid"), "").startswith("/device")]
    picked = on_device or picked
    if not picked:  # a device trace without hlo_op annotations: its kernels, named as recorded
        picked = [e for e in events if e.get("ph") == "X"
                  and procs.get(e.get("pid"), "").startswith("/device")
                  and threads.get((e.get("pid"), e.get("tid"))) not in ("XLA Modules", "Steps")]
    if not picked:
        return []
    t0 = min(float(e["ts"]) for e in picked)
    out = []
    for e in picked:
        args = e.get("args") or {}
        device = str(args.get("device_ordinal", procs.get(e.get("pid"), str(e.get("pid")))))
        out.append(OpEvent(op=str(args.get("hlo_op", e.get("name", ""))),
                           module=str(args.get("hlo_module", "")), device=device,
                           start=(float(e["ts"]) - t0) / 1e6,
                           duration=float(e.get("dur", 0.0)) / 1e6))
    return sorted(out, key=lambda ev: (ev.start, ev.device))


def read_trace(logdir: str) -> list[OpEvent]:
    """The HLO operations recorded in the newest trace under ``logdir`` (see
    :func:`parse_trace_events`)."""
    with gzip.open(_trace_file(logdir), "rt") as f:
        data = json.load(f)
    events = data["traceEvents"] if isinstance(data, dict) else data
    return parse_trace_events(events)
