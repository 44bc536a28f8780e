"""Isolation modes: what the machine offers (:func:`detect`) and what each mode guarantees."""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

MODES = ("bwrap", "unshare", "portable")
MARKER = "SCALING_LIB_JAIL"     # environment variable carried by every jailed process
RUN_ENV = "SCALING_LIB_GRADER_RUN"   # the grading run a worker belongs to (names its cgroups)
_UID_BASE = 61000               # jails of a root grader run as _UID_BASE + a random offset


GUARANTEES = [  # what each mode protects (the instructor guide and the README show this table)
    {"mode": "bwrap", "needs": "bubblewrap",
     "files": "system, Python, a read-only copy of the course; private HOME and /tmp",
     "processes": "only its own (PID namespace)", "network": "none",
     "left-overs": "none: the PID namespace dies with it"},
    {"mode": "unshare", "needs": "util-linux unshare and namespaces",
     "files": "what its user may read (its own uid when the grader is root)",
     "processes": "only its own (PID namespace)", "network": "none",
     "left-overs": "none: the PID namespace dies with it"},
    {"mode": "portable", "needs": "nothing",
     "files": "what its user may read (your files when the grader is not root)",
     "processes": "all; without root it can signal the grader (that notebook then fails)",
     "network": "yes", "left-overs": "found by ancestry and an environment marker, killed"},
]
CGROUP_GUARANTEE = ("with cgroups (systemd-run --scope, or a writable cgroup v2/v1 file system) "
                    "the memory limit and a limit of 64 processes hold for the whole jail, "
                    "shared memory and tmpfs included; without them memory is limited per "
                    "process (RLIMIT_DATA: heap and private maps, not shared ones)")


def guarantees() -> list[dict]:
    """The table of isolation modes and what each protects (a copy of :data:`GUARANTEES`)."""
    return [dict(row) for row in GUARANTEES]


@dataclass(frozen=True)
class Isolation:
    """What the machine offers: a namespace mode, a cgroup kind (or None), a separate user."""

    mode: str                    # one of MODES
    cgroup: str | None = None    # "systemd", "v2", "v1" or None
    separate_user: bool = False  # jails run as their own uid (the grader is root)

    def warning(self) -> str:
        """What this mode does not protect ('' for the full jail)."""
        gaps = []
        if self.mode == "unshare":
            gaps.append("files the jail's user can read are visible (no private file view)")
        if self.mode == "portable":
            gaps.append("the network, other processes and files the jail's user can read are "
                        "reachable")
            if not self.separate_user:
                gaps.append("student code runs as your user: it can read and write your files "
                            "and signal the grader (the watchdog then fails that notebook)")
        if self.cgroup is None:
            gaps.append("memory is limited per process (heap and private maps), not per jail "
                        "or for shared maps, and the number of processes only by the time limit")
        if not gaps:
            return ""
        return (f"isolation '{self.mode}'" + (f" with cgroup {self.cgroup}" if self.cgroup else "")
                + ": " + "; ".join(gaps) + ". Install bubblewrap (apt-get install bubblewrap) "
                "for the full jail, or grade inside a throw-away VM.")

    def describe(self) -> str:
        return (f"{self.mode}" + (f" + cgroup {self.cgroup}" if self.cgroup else " (no cgroup)")
                + (" + own uid" if self.separate_user else ""))


def _quiet(cmd: list[str], timeout: float = 10.0) -> bool:
    try:
        return subprocess.run(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL, timeout=timeout).returncode == 0
    except (OSError, subprocess.SubprocessError):
        return False


def _own_cgroup(controller: str | None) -> Path | None:
    """The cgroup directory of this process in ``controller``'s v1 hierarchy (None: v2)."""
    try:
        lines = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError:
        return None
    for ln in lines:
        _, ctrls, path = ln.split(":", 2)
        if (controller is None and ctrls == "") or (controller in ctrls.split(",")):
            base = Path("/sys/fs/cgroup") / (controller or "")
            if controller is None and not (base / "cgroup.controllers").exists():
                base = Path("/sys/fs/cgroup/unified")
            return base / path.lstrip("/")
    return None


def _cgroup_kind() -> str | None:
    if shutil.which("systemd-run") and _quiet(["systemctl", "is-system-running"]) and \
            _quiet(["systemd-run", "--scope", "--quiet", "-p", "TasksMax=8", "true"]):
        return "systemd"
    v2 = _own_cgroup(None)
    if v2 is not None:
        try:
            ctrls = (v2 / "cgroup.controllers").read_text().split()
            if {"memory", "pids"} <= set(ctrls) and os.access(v2, os.W_OK):
                probe = v2 / f"grader-probe-{os.getpid()}"
                probe.mkdir()
                probe.rmdir()
                return "v2"
        except OSError:
            pass
    mem, pids = _own_cgroup("memory"), _own_cgroup("pids")
    if mem is not None and pids is not None:
        try:
            for d in (mem, pids):
                probe = d / f"grader-probe-{os.getpid()}"
                probe.mkdir()
                probe.rmdir()
            return "v1"
        except OSError:
            pass
    return None


@functools.lru_cache(maxsize=None)
def detect(prefer: str | None = None) -> Isolation:
    """The strongest isolation available here (or ``prefer``, one of :data:`MODES`, if it works).

    >>> detect("portable").mode
    'portable'
    """
    if prefer is not None and prefer not in MODES:
        raise ValueError(f"isolation {prefer!r} is not a mode; choose one of {', '.join(MODES)}")
    root = os.geteuid() == 0 and _quiet(
        [sys.executable, "-c", "import os; os.setgroups([]); os.setgid(%d); os.setuid(%d); "
         "import json, numpy, ipykernel" % (_UID_BASE, _UID_BASE)], timeout=60)
    cg = _cgroup_kind()
    tries = MODES[MODES.index(prefer):] if prefer else MODES
    for mode in tries:
        if mode == "bwrap" and shutil.which("bwrap") and _quiet(
                ["bwrap", "--unshare-all", "--unshare-user", "--die-with-parent", "--ro-bind",
                 "/", "/", "--proc", "/proc", "--dev", "/dev", "true"]):
            return Isolation("bwrap", cg, True)  # its own user namespace
        if mode == "unshare" and shutil.which("unshare") and _quiet(
                ["unshare", *([] if root else ["--user", "--map-root-user"]), "--pid", "--fork",
                 "--kill-child", "--mount-proc", "--net", "--ipc", "true"]):
            return Isolation("unshare", cg, root)
        if mode == "portable":
            return Isolation("portable", cg, root)
    return Isolation("portable", cg, root)


