"""Async collectives in a trace: how much of each one ran under compute, how much was waited for.

On a GPU or TPU, XLA splits a collective it can overlap into two HLO operations: ``X-start``
issues it (the transfer then runs on the network, or on a separate stream), and ``X-done`` blocks
until it has finished. In a trace the pair brackets the collective's flight; what the device
computes between them is overlap, and the ``-done`` event's own duration is the time the device
sat waiting for the network: the exposed communication. (XLA:CPU runs collectives synchronously,
so the simulated devices' traces have none of these pairs.)

See: Chapter "Profiling JAX programs", "Reading async collectives in a trace".
"""

from __future__ import annotations

import re

from .trace import OpEvent

_ASYNC = re.compile(r"^(?P<kind>[a-z-]+?)-(?P<phase>start|done)(?P<id>[.\d]*)$")


def async_collectives(events) -> list[dict]:
    """Pair each ``kind-start[.N]`` with its ``kind-done[.N]`` on the same device, in time order.

    For each pair: ``issued`` (start of the -start event), ``done`` (end of the -done event),
    ``in_flight`` = done - issued, ``overlapped`` (seconds of other, non-collective ops on that
    device between the end of -start and the start of -done) and ``waited`` (the -done event's
    duration: exposed time). Events are :class:`~scaling_lib.profile.OpEvent` s (seconds).

    >>> ev = [OpEvent("all-gather-start.1", "m", "0", 0.0, 1e-6),
    ...       OpEvent("fusion.3", "m", "0", 1e-6, 5e-6),
    ...       OpEvent("all-gather-done.1", "m", "0", 6e-6, 2e-6)]
    >>> r = async_collectives(ev)[0]
    >>> r["kind"], round(r["overlapped"] * 1e6, 1), round(r["waited"] * 1e6, 1)
    ('all-gather', 5.0, 2.0)
    """
    events = list(events)
    if not all(isinstance(e, OpEvent) for e in events):
        raise ValueError("events must be profile.OpEvent records (profile.read_trace or "
                         "profile.parse_trace_events gives them)")
    open_, out = {}, []
    by_device = {}
    for e in sorted(events, key=lambda e: (e.device, e.start)):
        by_device.setdefault(e.device, []).append(e)
    for device, evs in by_device.items():
        for e in evs:
            m = _ASYNC.match(e.op)
            if not m:
                continue
            key = (device, m["kind"], m["id"])
            if m["phase"] == "start":
                open_[key] = e
                continue
            s = open_.pop(key, None)
            if s is None:
                continue
            lo, hi = s.start + s.duration, e.start
            busy = sum(max(0.0, min(o.start + o.duration, hi) - max(o.start, lo))
                       for o in evs if not _ASYNC.match(o.op))
            out.append({"name": f"{m['kind']}{m['id']}", "kind": m["kind"], "device": device,
                        "issued": s.start, "done": e.start + e.duration,
                        "in_flight": e.start + e.duration - s.start, "overlapped": busy,
                        "waited": e.duration})
    return sorted(out, key=lambda r: (r["device"], r["issued"]))


__all__ = ["async_collectives"]
