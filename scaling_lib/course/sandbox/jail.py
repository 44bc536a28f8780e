"""A jail: a private folder and a set of processes with limits, all killed when it closes."""

from __future__ import annotations

import os
import secrets
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

from .modes import _UID_BASE, MARKER, RUN_ENV, Isolation, _own_cgroup, _quiet
from .processes import _alive, _has_marker, descendants, reap


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
        self.name = f"grader-{os.environ.get(RUN_ENV, 'solo')}-{self.token}"
        self.unit = f"{self.name}.scope"
        self._make_cgroups()

    # -- cgroups --
    def _make_cgroups(self) -> None:
        kind = self.iso.cgroup
        mem = int(self.memory_bytes) if self.memory_bytes else None
        try:
            if kind == "v2":
                d = _own_cgroup(None) / self.name
                d.mkdir()
                self.cgroups = [d]
                if mem:
                    (d / "memory.max").write_text(str(mem))
                    if (d / "memory.swap.max").exists():
                        (d / "memory.swap.max").write_text("0")
                (d / "pids.max").write_text(str(self.max_processes))
            elif kind == "v1":
                m = _own_cgroup("memory") / self.name
                p = _own_cgroup("pids") / self.name
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
        tmp = "/tmp" if self.iso.mode == "bwrap" else str(self.home)
        env.update(HOME=str(self.home), TMPDIR=tmp,
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


def remove_run_cgroups(run: str) -> list[str]:
    """Kill what is left in the cgroups of run ``run`` (jails whose worker was killed before it
    could close them) and remove them; returns the cgroups that could not be removed."""
    import glob

    stuck = []
    bases = [_own_cgroup(c) for c in (None, "memory", "pids")]
    for base in [b for b in bases if b is not None]:
        for d in map(Path, glob.glob(str(base / f"grader-{run}-*"))):
            for _ in range(100):
                try:
                    pids = [int(x) for x in (d / "cgroup.procs").read_text().split()]
                except OSError:
                    pids = []
                for pid in pids:
                    try:
                        os.kill(pid, signal.SIGKILL)
                    except (ProcessLookupError, PermissionError):
                        pass
                try:
                    d.rmdir()
                    break
                except FileNotFoundError:
                    break
                except OSError:
                    time.sleep(0.05)
            else:
                stuck.append(str(d))
    return stuck


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


