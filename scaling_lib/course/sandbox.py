"""Run a student's notebook cells in a separate, limited Jupyter kernel (used by ``gradebook``).

The kernel is a child process of its own session (so it and anything it starts can be killed
together), started in a scratch folder holding a copy of the notebook, with a memory limit set by
``resource.setrlimit`` in the kernel process before IPython starts (``RLIMIT_DATA``: heap and private memory maps, so a
huge allocation raises MemoryError in the kernel instead of exhausting the machine; address space
that JAX merely reserves is not counted). Every cell runs under a time limit: past it the kernel is
interrupted (SIGINT, which the ``%%graded`` magic turns into a FAIL line), and if it does not come
back within a grace period it is killed. A kernel that dies (``os._exit``, a segfault, the memory
limit) is reported, and the caller may start a fresh one.

Nothing the kernel sends back is trusted by the grader beyond "these are the student's values": the
verdicts are computed in the grading process (see ``gradebook``).

Needs ``jupyter_client`` and ``ipykernel`` (imported lazily).
"""

from __future__ import annotations

import os
import queue
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field

GRACE_TIME = 3.0        # seconds a kernel gets to answer an interrupt before it is killed
STARTUP_TIME = 60.0     # seconds a kernel gets to start
MAX_OUTPUT = 4_000_000  # characters of output kept per cell


@dataclass
class CellRun:
    """What one cell did: its printed text, and how it ended."""

    text: str = ""
    error: str = ""            # "ename: evalue" of an uncaught exception (outside %%graded)
    timed_out: bool = False    # ran past its limit (interrupted, or killed if that failed)
    died: bool = False         # the kernel is gone (exit, crash, memory, or killed after a hang)
    seconds: float = 0.0
    notes: list = field(default_factory=list)


# The kernel's first Python lines: the memory limit, then IPython's kernel. (Not a preexec_fn:
# running Python between fork and exec can deadlock a grader whose threads hold locks, e.g. JAX.)
_LAUNCH = """import resource, runpy, sys
limit = int(sys.argv.pop(1))
if limit:
    resource.setrlimit(resource.RLIMIT_DATA, (limit, limit))
resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
runpy.run_module("ipykernel_launcher", run_name="__main__", alter_sys=True)
"""


class Kernel:
    """One IPython kernel in a scratch folder, with a memory limit; a context manager.

    ``env_path`` is put first on the kernel's PYTHONPATH (the course's own ``scaling_lib``).
    """

    def __init__(self, cwd: str, *, memory_bytes: int | None = 4 * 2**30,
                 env_path: str | None = None):
        self.cwd, self.memory_bytes, self.env_path = cwd, memory_bytes, env_path
        self.proc = None
        self.client = None
        self._conn = None

    # -- life cycle --
    def start(self) -> None:
        from jupyter_client import BlockingKernelClient
        from jupyter_client.connect import write_connection_file

        fd, self._conn = tempfile.mkstemp(suffix=".json", prefix="grader-kernel-")
        os.close(fd)
        write_connection_file(self._conn)
        env = dict(os.environ)
        if self.env_path:
            env["PYTHONPATH"] = os.pathsep.join(
                [self.env_path] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p])
        env.update(MPLBACKEND="Agg", OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1",
                   MKL_NUM_THREADS="1", PYDEVD_DISABLE_FILE_VALIDATION="1",
                   JAX_PLATFORMS=env.get("JAX_PLATFORMS", "cpu"))
        cmd = [sys.executable, "-Xfrozen_modules=off", "-c", _LAUNCH,
               str(int(self.memory_bytes or 0)), "-f", self._conn,
               "--HistoryManager.enabled=False"]
        self.proc = subprocess.Popen(cmd, cwd=self.cwd, env=env, stdin=subprocess.DEVNULL,
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                     start_new_session=True)  # killpg reaches its children
        self.client = BlockingKernelClient()
        self.client.load_connection_file(self._conn)
        self.client.start_channels()
        # Ask for kernel_info until it answers (jupyter_client's wait_for_ready reads a heartbeat
        # that is not beating yet on a busy machine as a dead kernel).
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

    def stop(self) -> None:
        if self.client is not None:
            self.client.stop_channels()
            self.client = None
        if self.proc is not None:
            if self.proc.poll() is None:
                try:
                    os.killpg(self.proc.pid, signal.SIGKILL)  # the kernel and anything it started
                except ProcessLookupError:
                    pass
            self.proc.wait()
            self.proc = None
        if self._conn and os.path.exists(self._conn):
            os.remove(self._conn)
        self._conn = None

    def restart(self) -> None:
        self.stop()
        self.start()

    def __enter__(self):
        self.start()
        return self

    def __exit__(self, *exc):
        self.stop()

    # -- running code --
    def run(self, code: str, timeout: float) -> CellRun:
        """Run ``code``; collect its printed text; interrupt, then kill, past ``timeout`` s."""
        out = CellRun()
        start = time.monotonic()
        if not self.alive():
            out.died = True
            return out
        msg_id = self.client.execute(code, allow_stdin=False, stop_on_error=False)
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
            except Exception:  # a garbled message from a dying kernel
                msg = None
            if msg is not None and msg.get("parent_header", {}).get("msg_id") == msg_id:
                kind, content = msg["msg_type"], msg["content"]
                if kind == "stream" and size < MAX_OUTPUT:
                    text = str(content.get("text", ""))[: MAX_OUTPUT - size]
                    parts.append(text)
                    size += len(text)
                elif kind == "error":
                    out.error = f"{content.get('ename')}: {content.get('evalue')}"
                elif kind == "status" and content.get("execution_state") == "idle":
                    break
            now = time.monotonic()
            if now > deadline:
                if not interrupted:
                    out.timed_out, interrupted = True, True
                    try:
                        os.kill(self.proc.pid, signal.SIGINT)
                    except ProcessLookupError:
                        pass
                    deadline = now + GRACE_TIME
                else:  # it ignored the interrupt: kill it
                    out.notes.append("killed after ignoring the interrupt")
                    self.stop()
                    out.died = True
                    break
        out.text = "".join(parts)
        out.seconds = time.monotonic() - start
        return out
