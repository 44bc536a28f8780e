"""Jails for student code: one per submission, the strongest isolation the machine offers.

:func:`detect` finds what the machine has and returns an :class:`Isolation`; a :class:`Jail` runs
processes inside it; :class:`Kernel` is an IPython kernel in a jail (used by ``gradebook``).

Modes, strongest first (the instructor guide has the table of guarantees):

- ``bwrap`` (bubblewrap): new user, PID, network, IPC and mount namespaces. The jail sees a
  read-only view of the system, the Python install and a snapshot of the course's ``scaling_lib``;
  its HOME and ``/tmp`` are small private tmpfs; it sees no other submission, none of the grader's
  files, no process outside itself and no network. When its first process dies the kernel kills
  every process of the jail (PID namespace), ``setsid`` or not.
- ``unshare`` (util-linux): PID, network, IPC and mount namespaces, the same kill guarantee, no
  network; files are protected only by permissions (each jail runs as its own user when the
  grader is root).
- ``portable``: ``setrlimit`` (heap memory, file size, core), its own session, its own user when the
  grader is root; every process of the jail is found by its ancestry (the grader is a child
  subreaper, so orphans come back to it) and by an environment marker, and killed. It does NOT
  hide files the grader's user can read, the network, or other processes; without root a kernel
  can signal the grader (SIGSTOP pauses it until the watchdog kills that worker).

Limits on memory and on the number of processes that hold for every process of a jail together
need cgroups: ``systemd`` (``systemd-run --scope``, cgroup v2), ``v2`` or ``v1`` (a writable
cgroup file system). Without them the memory limit is per process (``RLIMIT_DATA``: heap and
private maps, not shared maps; address space that JAX merely reserves is not counted) and the number
of processes is bounded only by the time limit.

Needs ``jupyter_client`` and ``ipykernel`` (imported lazily) for :class:`Kernel`.
"""

from .jail import LAUNCH, Jail, python_argv, remove_run_cgroups, remove_tree
from .kernel import GRACE_TIME, MAX_OUTPUT, STARTUP_TIME, CellRun, Kernel
from .modes import (CGROUP_GUARANTEE, GUARANTEES, MARKER, MODES, RUN_ENV, Isolation, detect,
                    guarantees)
from .processes import _alive, _has_marker, become_subreaper, descendants, reap

__all__ = ["Isolation", "detect", "MODES", "GUARANTEES", "guarantees", "Jail", "Kernel",
           "CellRun", "python_argv", "remove_tree", "become_subreaper", "descendants",
           "reap", "LAUNCH", "MARKER", "RUN_ENV", "remove_run_cgroups"]
