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

from __future__ import annotations

import ctypes
import functools
import os
import queue
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

GRACE_TIME = 3.0        # seconds a kernel gets to answer an interrupt before it is killed
STARTUP_TIME = 60.0     # seconds a kernel gets to start
MAX_OUTPUT = 4_000_000  # characters of output kept per cell
MODES = ("bwrap", "unshare", "portable")
MARKER = "SCALING_LIB_JAIL"     # environment variable carried by every jailed process
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
            base = Path("/sys/fs/cgroup") if controller is None else Path("/sys/fs/cgroup") / controller
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


# ---- processes: children, subreaper, kill --------------------------------------------------------

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
        return f"{MARKER}={token}".encode() in Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
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


# ---- the jail ------------------------------------------------------------------------------------

def _system_paths() -> list[str]:
    """Read-only paths a Python process needs: the system, the interpreter, the environment."""
    paths = ["/usr", "/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/ld.so.conf.d", "/etc/localtime",
             "/etc/alternatives", "/etc/ssl", "/etc/fonts", "/etc/passwd", "/etc/group"]
    for p in {sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix,
              os.path.dirname(os.path.realpath(sys.executable))}:
        paths.append(os.path.realpath(p))
        paths.append(p)
    for p in sys.path:
        if p and os.path.isdir(p) and "site-packages" in p:
            paths.append(os.path.realpath(p))
    out = []
    for p in dict.fromkeys(paths):
        if os.path.exists(p) and not any(p == q or p.startswith(q.rstrip("/") + "/") for q in out):
            out.append(p)
    return out


class Jail:
    """A private folder and a set of processes with limits, all killed by :meth:`close`.

    ``base`` is a grader-owned folder (mode 0711) under which the jail's folder is made; ``ro``
    lists extra paths the jail may read (the course snapshot). ``memory_bytes`` and
    ``max_processes`` bound the whole jail with cgroups, else each process (``RLIMIT_DATA``).
    """

    def __init__(self, isolation: Isolation, base: str | Path, *, memory_bytes: int | None,
                 max_processes: int = 64, ro: tuple = (), home_bytes: int = 256 * 2**20):
        self.iso, self.memory_bytes, self.max_processes = isolation, memory_bytes, max_processes
        self.home_bytes = home_bytes
        self.token = secrets.token_hex(8)
        self.dir = Path(base) / f"jail-{self.token}"
        self.dir.mkdir(mode=0o711)
        self.home = self.dir / "home"
        self.run_dir = self.dir / "run"
        self.home.mkdir(mode=0o700)
        self.run_dir.mkdir(mode=0o700)
        self.uid = None
        if isolation.separate_user and isolation.mode != "bwrap":
            self.uid = _UID_BASE + secrets.randbelow(3000)
            for d in (self.home, self.run_dir):
                os.chown(d, self.uid, self.uid)
        self.ro = tuple(str(p) for p in ro)
        self.procs: list[subprocess.Popen] = []
        self.cgroups: list[Path] = []
        self.unit = f"grader-{self.token}.scope"
        self._make_cgroups()

    # -- cgroups --
    def _make_cgroups(self) -> None:
        kind = self.iso.cgroup
        mem = int(self.memory_bytes) if self.memory_bytes else None
        try:
            if kind == "v2":
                d = _own_cgroup(None) / f"grader-{self.token}"
                d.mkdir()
                self.cgroups = [d]
                if mem:
                    (d / "memory.max").write_text(str(mem))
                    if (d / "memory.swap.max").exists():
                        (d / "memory.swap.max").write_text("0")
                (d / "pids.max").write_text(str(self.max_processes))
            elif kind == "v1":
                m = _own_cgroup("memory") / f"grader-{self.token}"
                p = _own_cgroup("pids") / f"grader-{self.token}"
                m.mkdir()
                self.cgroups.append(m)
                p.mkdir()
                self.cgroups.append(p)
                if mem:
                    (m / "memory.limit_in_bytes").write_text(str(mem))
                    if (m / "memory.memsw.limit_in_bytes").exists():
                        (m / "memory.memsw.limit_in_bytes").write_text(str(mem))
                (p / "pids.max").write_text(str(self.max_processes))
        except OSError:
            self._remove_cgroups()
            self.cgroups = []

    def _cgroup_pids(self) -> set[int]:
        pids = set()
        for d in self.cgroups:
            try:
                pids |= {int(x) for x in (d / "cgroup.procs").read_text().split()}
            except OSError:
                pass
        return pids

    def _remove_cgroups(self) -> None:
        for d in self.cgroups:
            for _ in range(50):
                try:
                    d.rmdir()
                    break
                except FileNotFoundError:
                    break
                except OSError:
                    time.sleep(0.02)

    # -- starting processes --
    def command(self, argv: list[str], cwd: str | None = None) -> list[str]:
        """``argv`` wrapped so that it runs inside this jail."""
        cwd = cwd or str(self.home)
        mode = self.iso.mode
        if mode == "bwrap":
            cmd = ["bwrap", "--unshare-all", "--unshare-user", "--uid", "1000", "--gid", "1000",
                   "--cap-drop", "ALL", "--die-with-parent", "--new-session",
                   "--proc", "/proc", "--dev", "/dev",
                   "--size", str(self.home_bytes), "--tmpfs", "/tmp"]
            for p in _system_paths() + list(self.ro):
                cmd += ["--ro-bind", p, p]
            for link, target in (("/bin", "usr/bin"), ("/lib", "usr/lib"), ("/lib64", "usr/lib64"),
                                 ("/sbin", "usr/sbin")):
                if os.path.islink(link):
                    cmd += ["--symlink", target, link]
                elif os.path.isdir(link):
                    cmd += ["--ro-bind", link, link]
            cmd += ["--size", str(self.home_bytes), "--tmpfs", str(self.home),
                    "--bind", str(self.run_dir), str(self.run_dir), "--chdir", cwd, "--"]
            argv = cmd + argv
        elif mode == "unshare":
            root = os.geteuid() == 0
            argv = ["unshare", *([] if root else ["--user", "--map-root-user"]), "--pid",
                    "--fork", "--kill-child", "--mount-proc", "--net", "--ipc", "--"] + argv
        if self.iso.cgroup == "systemd":
            props = ["-p", f"TasksMax={self.max_processes}"]
            if self.memory_bytes:
                props += ["-p", f"MemoryMax={int(self.memory_bytes)}", "-p", "MemorySwapMax=0"]
            argv = ["systemd-run", "--scope", "--quiet", "--collect", f"--unit={self.unit}",
                    *props, "--"] + argv
        elif self.cgroups:
            # join the cgroups first (`echo 0` moves the writing shell), then become the command
            joins = " && ".join(f'echo 0 > "{d}/cgroup.procs"' for d in self.cgroups)
            argv = ["/bin/sh", "-c", joins + ' && exec "$@"', "jail"] + argv
        return argv

    def env(self, extra: dict | None = None) -> dict:
        keep = ("PATH", "LANG", "LC_ALL", "TZ")
        env = {k: os.environ[k] for k in keep if k in os.environ}
        env.update(HOME=str(self.home), TMPDIR="/tmp" if self.iso.mode == "bwrap" else str(self.home),
                   MPLBACKEND="Agg", MPLCONFIGDIR=str(self.home), OMP_NUM_THREADS="1",
                   OPENBLAS_NUM_THREADS="1", MKL_NUM_THREADS="1",
                   PYDEVD_DISABLE_FILE_VALIDATION="1", JAX_PLATFORMS="cpu",
                   PYTHONDONTWRITEBYTECODE="1", PYTHONNOUSERSITE="1", IPYTHONDIR=str(self.home),
                   JUPYTER_CONFIG_DIR=str(self.home), JUPYTER_DATA_DIR=str(self.home),
                   **{MARKER: self.token})
        env.update(extra or {})
        return env

    def popen(self, argv: list[str], *, env: dict | None = None, **kw) -> subprocess.Popen:
        kw.setdefault("stdin", subprocess.DEVNULL)
        kw.setdefault("stdout", subprocess.DEVNULL)
        kw.setdefault("stderr", subprocess.DEVNULL)
        proc = subprocess.Popen(self.command(argv), env=self.env(env), cwd=str(self.home),
                                start_new_session=True, **kw)
        self.procs.append(proc)
        return proc

    def launcher_args(self) -> list[str]:
        """Arguments for :data:`LAUNCH`: memory (per process, when no cgroup limits the jail),
        file size, uid to become."""
        per_process = 0 if self.cgroups or self.iso.cgroup == "systemd" else int(
            self.memory_bytes or 0)
        return [str(per_process), str(self.home_bytes), str(self.uid or 0)]

    # -- ending --
    def _members(self) -> set[int]:
        """Every live process of this jail: cgroup members, descendants of its first processes,
        and (portable) any process carrying its environment marker."""
        me = os.getpid()
        pids = self._cgroup_pids()
        for p in self.procs:
            if p.poll() is None:
                pids.add(p.pid)
                pids |= descendants(p.pid)
        if self.iso.mode != "bwrap":
            kids = descendants(me)  # orphans adopted by this subreaper
            pids |= {k for k in kids if _has_marker(k, self.token)}
            for d in os.listdir("/proc"):
                if d.isdigit() and int(d) != me and _has_marker(int(d), self.token):
                    pids.add(int(d))
        pids.discard(me)
        return pids

    def kill(self) -> bool:
        """Kill every process of the jail; True once none is left (waits up to 10 s)."""
        if self.iso.cgroup == "systemd":
            _quiet(["systemctl", "kill", "--signal=SIGKILL", self.unit])
        for v2 in self.cgroups:
            if (v2 / "cgroup.kill").exists():
                try:
                    (v2 / "cgroup.kill").write_text("1")
                except OSError:
                    pass
        deadline = time.monotonic() + 10.0
        while True:
            for p in self.procs:
                if p.poll() is None:
                    try:
                        os.killpg(p.pid, signal.SIGKILL)
                    except (ProcessLookupError, PermissionError):
                        pass
            left = self._members()
            for pid in left:
                try:
                    os.kill(pid, signal.SIGKILL)
                except (ProcessLookupError, PermissionError):
                    pass
            for p in self.procs:
                try:
                    p.wait(timeout=0.05)
                except subprocess.TimeoutExpired:
                    pass
            reap(left)
            left = {p for p in left if _alive(p)}
            if not left and all(p.poll() is not None for p in self.procs):
                return True
            if time.monotonic() > deadline:
                return False
            time.sleep(0.02)

    def close(self) -> bool:
        """Kill everything, remove the cgroups and the folder; True if nothing was left."""
        gone = self.kill()
        self._remove_cgroups()
        remove_tree(self.dir)
        return gone

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def remove_tree(path: Path) -> None:
    """Remove ``path`` without following links a student may have planted (never raises)."""
    try:
        if os.path.islink(path) or not os.path.isdir(path):
            os.unlink(path)
            return
    except FileNotFoundError:
        return
    except OSError:
        pass
    for _ in range(3):
        shutil.rmtree(path, ignore_errors=True)  # fd-based on Linux: does not follow symlinks
        if not os.path.lexists(path):
            return
        try:  # a folder made unwritable by its owner: open it up and try again
            for d, dirs, _ in os.walk(path):
                os.chmod(d, 0o700)
        except OSError:
            pass


# The first Python lines of a jailed process: limits, then the user, then the program.
# (Not a preexec_fn: running Python between fork and exec can deadlock a threaded grader.)
LAUNCH = """import os, resource, runpy, sys
mem, fsize, uid = (int(sys.argv.pop(1)) for _ in range(3))
if mem:
    resource.setrlimit(resource.RLIMIT_DATA, (mem, mem))
resource.setrlimit(resource.RLIMIT_FSIZE, (fsize, fsize))
resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
if uid:
    os.setgroups([])
    os.setgid(uid)
    os.setuid(uid)
os.umask(0o077)
target = sys.argv.pop(1)
if target == "-c":
    code = sys.argv.pop(1)
    sys.argv[0] = "-c"
    exec(compile(code, "<jail>", "exec"), {"__name__": "__main__"})
else:
    runpy.run_module(target, run_name="__main__", alter_sys=True)
"""


def python_argv(jail: Jail, target: list[str]) -> list[str]:
    """A Python command line that runs ``target`` (a module and its arguments, or ``-c CODE``)
    under the jail's per-process limits and user."""
    return [sys.executable, "-Xfrozen_modules=off", "-c", LAUNCH, *jail.launcher_args(), *target]


# ---- a kernel in a jail --------------------------------------------------------------------------

@dataclass
class CellRun:
    """What one cell did: its printed text, and how it ended."""

    text: str = ""
    error: str = ""            # "ename: evalue" of an uncaught exception (outside %%graded)
    timed_out: bool = False    # ran past its limit (interrupted, or killed if that failed)
    died: bool = False         # the kernel is gone (exit, crash, memory, or killed after a hang)
    seconds: float = 0.0
    notes: list = field(default_factory=list)


class Kernel:
    """One IPython kernel in its own :class:`Jail` (made and closed with it); a context manager.

    ``isolation`` (default :func:`detect`), ``base`` the grader's folder for jails, ``ro`` extra
    read-only paths, ``python_path`` the course snapshot put first on PYTHONPATH. The kernel talks
    to the grader over Unix sockets in the jail's ``run`` folder (no network needed).
    """

    def __init__(self, cwd: str | None = None, *, memory_bytes: int | None = 4 * 2**30,
                 env_path: str | None = None, isolation: Isolation | None = None,
                 base: str | None = None, ro: tuple = (), max_processes: int = 64):
        self.iso = isolation or detect()
        self._own_base = None
        if base is None:
            self._own_base = tempfile.mkdtemp(prefix="grader-", dir=cwd)
            os.chmod(self._own_base, 0o711)
            base = self._own_base
        self.base, self.memory_bytes, self.env_path = base, memory_bytes, env_path
        self.ro = tuple(ro) + ((env_path,) if env_path else ())
        self.max_processes = max_processes
        self.jail: Jail | None = None
        self.proc = None
        self.client = None

    def start(self) -> None:
        from jupyter_client import BlockingKernelClient
        from jupyter_client.connect import write_connection_file

        self.jail = Jail(self.iso, self.base, memory_bytes=self.memory_bytes, ro=self.ro,
                         max_processes=self.max_processes)
        conn = str(self.jail.run_dir / "kernel.json")
        write_connection_file(conn, transport="ipc", ip=str(self.jail.run_dir / "k"))
        if self.jail.uid:
            os.chown(conn, self.jail.uid, self.jail.uid)
        env = {"PYTHONPATH": self.env_path} if self.env_path else {}
        argv = python_argv(self.jail, ["ipykernel_launcher", "-f", conn,
                                       "--HistoryManager.enabled=False",
                                       "--IPKernelApp.parent_handle=0"])
        self.proc = self.jail.popen(argv, env=env)
        self.client = BlockingKernelClient()
        self.client.load_connection_file(conn)
        self.client.start_channels()
        deadline = time.monotonic() + STARTUP_TIME
        while True:
            if not self.alive() or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError("the grading kernel did not start (is ipykernel installed?)")
            msg_id = self.client.kernel_info()
            try:
                while True:
                    reply = self.client.get_shell_msg(timeout=1.0)
                    if reply.get("parent_header", {}).get("msg_id") == msg_id:
                        break
                break
            except queue.Empty:
                continue
        while True:  # drop the start-up chatter on iopub
            try:
                self.client.get_iopub_msg(timeout=0.2)
            except queue.Empty:
                break

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def stop(self) -> bool:
        """Stop the kernel and every process of its jail; True if nothing was left behind."""
        gone = True
        if self.client is not None:
            try:
                self.client.stop_channels()
            except Exception:
                pass
            self.client = None
        if self.jail is not None:
            gone = self.jail.close()
            self.jail = None
        self.proc = None
        if self._own_base and os.path.isdir(self._own_base) and not os.listdir(self._own_base):
            os.rmdir(self._own_base)
        return gone

    def restart(self) -> None:
        self.stop()
        if self._own_base and not os.path.isdir(self._own_base):
            os.mkdir(self._own_base, 0o711)
        self.start()

    def __enter__(self):
        self.start()
        return self

    def __exit__(self, *exc):
        self.stop()

    def run(self, code: str, timeout: float) -> CellRun:
        """Run ``code``; collect its printed text; interrupt, then kill, past ``timeout`` s."""
        out = CellRun()
        start = time.monotonic()
        if not self.alive():
            out.died = True
            return out
        try:
            msg_id = self.client.execute(code, allow_stdin=False, stop_on_error=False)
        except Exception as exc:
            out.died, out.error = True, f"{type(exc).__name__}: {exc}"
            return out
        deadline, interrupted, size = start + max(timeout, 0.01), False, 0
        parts = []
        while True:
            if not self.alive():
                out.died = True
                break
            try:
                msg = self.client.get_iopub_msg(timeout=0.05)
            except queue.Empty:
                msg = None
            except Exception:  # a garbled message from a dying or hostile kernel
                msg = None
            if isinstance(msg, dict) and msg.get("parent_header", {}).get("msg_id") == msg_id:
                kind, content = msg.get("msg_type"), msg.get("content") or {}
                if kind == "stream" and size < MAX_OUTPUT:
                    text = str(content.get("text", ""))[: MAX_OUTPUT - size]
                    parts.append(text)
                    size += len(text)
                elif kind == "error":
                    out.error = f"{content.get('ename')}: {str(content.get('evalue'))[:500]}"
                elif kind == "status" and content.get("execution_state") == "idle":
                    break
            now = time.monotonic()
            if now > deadline:
                if not interrupted:
                    out.timed_out, interrupted = True, True
                    self._interrupt()
                    deadline = now + GRACE_TIME
                else:  # it ignored the interrupt: kill it
                    out.notes.append("killed after ignoring the interrupt")
                    self.stop()
                    out.died = True
                    break
        out.text = "".join(parts)
        out.seconds = time.monotonic() - start
        return out

    def _interrupt(self) -> None:
        """SIGINT to the kernel process itself inside the jail's namespaces (its pid there is
        not the launcher's): every member of the jail that runs ipykernel gets it."""
        for pid in self.jail._members():
            try:
                argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            if argv[0] == sys.executable.encode() and b"ipykernel_launcher" in argv:
                try:
                    os.kill(pid, signal.SIGINT)
                except (ProcessLookupError, PermissionError):
                    pass
