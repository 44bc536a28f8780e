"""Processes: finding every process below one (``/proc``), adopting orphans, collecting them."""

from __future__ import annotations

import ctypes
import os
from pathlib import Path

from .modes import MARKER


def become_subreaper() -> bool:
    """Make this process adopt its orphaned descendants (Linux ``PR_SET_CHILD_SUBREAPER``), so a
    process that detaches from its jail (double fork, ``setsid``) can still be found and killed."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(36, 1, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def _stat(pid: int) -> tuple[int, int] | None:
    """(parent pid, session id) of ``pid``."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = text[text.rfind(")") + 2:].split()
    return int(fields[1]), int(fields[3])


def _has_marker(pid: int, token: str) -> bool:
    try:
        env = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
        return f"{MARKER}={token}".encode() in env
    except OSError:
        return False


def _alive(pid: int) -> bool:
    """Running (not a zombie waiting to be collected)."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return text[text.rfind(")") + 2:].split()[0] != "Z"


def descendants(root: int) -> set[int]:
    """Every process below ``root`` in the process tree (read from /proc)."""
    parent = {}
    for d in os.listdir("/proc"):
        if d.isdigit():
            st = _stat(int(d))
            if st:
                parent[int(d)] = st[0]
    out, frontier = set(), {root}
    while frontier:
        frontier = {p for p, pp in parent.items() if pp in frontier and p not in out}
        out |= frontier
    return out


def reap(pids) -> None:
    """Collect those of ``pids`` that are exited children of this process (zombies, e.g. adopted
    orphans), so they stop counting as processes; other children are left to their owners."""
    for pid in pids:
        try:
            os.waitpid(pid, os.WNOHANG)
        except (ChildProcessError, OSError):
            pass


