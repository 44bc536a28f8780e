"""An IPython kernel in its own jail, talking to the grader over Unix sockets."""

from __future__ import annotations

import os
import queue
import signal
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from .jail import Jail, python_argv
from .modes import Isolation, detect

GRACE_TIME = 3.0        # seconds a kernel gets to answer an interrupt before it is killed
STARTUP_TIME = 60.0     # seconds a kernel gets to start
MAX_OUTPUT = 4_000_000  # characters of output kept per cell
# A Unix socket's path holds at most 107 bytes (sockaddr_un); the kernel's sockets live at
# <base>/jail-<16 hex>/run/k-<port>, about 40 bytes below the base folder.
IPC_PATH_MAX = 107
_JAIL_SUFFIX = len("/jail-0123456789abcdef/run/k-65535")


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
            # beside ``cwd`` when its path is short enough for the sockets, else in the temp dir
            short = cwd is not None and len(os.path.abspath(cwd)) + 30 + _JAIL_SUFFIX < IPC_PATH_MAX
            self._own_base = tempfile.mkdtemp(prefix="grader-", dir=cwd if short else None)
            os.chmod(self._own_base, 0o711)
            base = self._own_base
        self.base, self.memory_bytes, self.env_path = base, memory_bytes, env_path
        self.ro = tuple(ro) + ((env_path,) if env_path else ())
        self.max_processes = max_processes
        self.jail: Jail | None = None
        self.proc = None
        self.client = None

    def start(self) -> None:
        if len(os.path.abspath(self.base)) + _JAIL_SUFFIX >= IPC_PATH_MAX:
            raise ValueError(f"base={self.base!r} is too long for the kernel's Unix sockets: its "
                             f"path must stay under {IPC_PATH_MAX - _JAIL_SUFFIX} characters; "
                             "choose a shorter folder")
        self.jail = Jail(self.iso, self.base, memory_bytes=self.memory_bytes, ro=self.ro,
                         max_processes=self.max_processes)
        try:
            self._connect()
        except BaseException:
            self.stop()  # a kernel that did not start leaves no process, jail or cgroup behind
            raise

    def _connect(self) -> None:
        from jupyter_client import BlockingKernelClient
        from jupyter_client.connect import write_connection_file

        conn = str(self.jail.run_dir / "kernel.json")
        write_connection_file(conn, transport="ipc", ip=str(self.jail.run_dir / "k"))
        if self.jail.uid:
            os.chown(conn, self.jail.uid, self.jail.uid)
        env = {"PYTHONPATH": self.env_path} if self.env_path else {}
        argv = python_argv(self.jail, ["ipykernel_launcher", "-f", conn,
                                       "--HistoryManager.enabled=False",
                                       "--IPKernelApp.parent_handle=0"])
        self.proc = self.jail.popen(argv, env=env)
        import zmq

        context = zmq.Context()
        # Sockets never wait at term() for messages to a kernel that is gone: a client dropped
        # without stop() must not block a later garbage collection (seen: hung test workers).
        context.setsockopt(zmq.LINGER, 0)
        self.client = BlockingKernelClient(context=context)
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
            client, self.client = self.client, None
            try:
                client.stop_channels()
            except Exception:
                pass
            try:
                # Messages still queued for a kernel that is gone must not make zmq's term() wait
                # for ever: the client's own __del__ would otherwise block, at some later garbage
                # collection, in whatever code happens to run then (seen: a hung test worker).
                client.context.destroy(linger=0)
            except Exception:
                pass
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
