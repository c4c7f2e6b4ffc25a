"""One worker process seen from the parent: start it, read where it is, end it.

``WorkerProcess`` is the handle: the pipes, the shared position (``protocol.py``), and
how the process ended, in words. ``kill_all`` ends every worker this process started.
"""

from __future__ import annotations

import json
import mmap
import os
import pickle
import signal
import subprocess
import sys
import tempfile
import weakref
from multiprocessing.connection import Connection

from stagecheck.oracles import interrupt
from stagecheck.oracles.worker.protocol import MEMORY_EXIT, SharedPosition

__all__ = ["Ended", "MAX_ANSWER_BYTES", "WorkerProcess", "kill_all"]

#: longest answer read from a worker; a length header past it is garbage a target wrote
#: into the pipe (any printable text reads as 512 MiB or more)
MAX_ANSWER_BYTES = 512 * 1024 * 1024


class WorkerProcess:
    """One worker process (``python -m stagecheck.oracles.worker``), seen from the parent.

    A plain subprocess, not ``multiprocessing``'s: it never re-imports the parent's
    ``__main__``, and shares nothing with it but two pipes and a counter. It runs in
    a session of its own, so killing it also kills whatever the target started.
    """

    def __init__(self, memory_mib: int) -> None:
        fd, self._counter_path = tempfile.mkstemp(prefix="stagecheck-worker-")
        os.write(fd, bytes(SharedPosition.BYTES))
        self._memory = mmap.mmap(fd, SharedPosition.BYTES)
        os.close(fd)
        self._view = SharedPosition(self._memory)
        to_child_r, to_child_w = os.pipe()
        to_parent_r, to_parent_w = os.pipe()
        self.process = subprocess.Popen(
            [sys.executable, "-m", "stagecheck.oracles.worker", str(to_child_r),
             str(to_parent_w), self._counter_path, str(memory_mib), json.dumps(sys.path)],
            pass_fds=(to_child_r, to_parent_w), stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=os.getcwd(),
            start_new_session=True)
        os.close(to_child_r)
        os.close(to_parent_w)
        self._send = Connection(to_child_w, readable=False)
        self._recv = Connection(to_parent_r, writable=False)
        self._last_position = 0
        _LIVE.add(self)

    @property
    def position(self) -> int:
        if self._view is not None:
            self._last_position = self._view.value
        return self._last_position

    def send(self, message) -> None:
        self._send.send(message)

    def poll(self, timeout: float) -> bool:
        return self._recv.poll(timeout)

    def recv(self):
        """The next answer; an ``OSError`` for a message longer than any answer (bytes a
        target wrote into the pipe: waiting for them would wait for ever)."""
        return pickle.loads(self._recv.recv_bytes(MAX_ANSWER_BYTES))

    def is_alive(self) -> bool:
        return self.process.poll() is None

    def ends_within(self, seconds: float) -> bool:
        """Whether the process has ended, or ends within ``seconds``."""
        try:
            self.process.wait(timeout=seconds)
        except subprocess.TimeoutExpired:
            return False
        return True

    def tell_interrupt(self) -> None:
        """Pass the checker's interrupt on (the worker ignores SIGINT itself)."""
        if interrupt.FORWARDED is not None and self.process.poll() is None:
            try:
                os.kill(self.process.pid, interrupt.FORWARDED)
            except OSError:
                pass

    def kill(self) -> None:
        _LIVE.discard(self)
        self.position      # noqa: B018  (keep the last position readable after the kill)
        if self.process.poll() is None:
            try:
                os.killpg(self.process.pid, signal.SIGKILL)
            except OSError:
                self.process.kill()
        try:
            self.process.wait(timeout=5)
        except Exception:
            pass
        for conn in (self._send, self._recv):
            try:
                conn.close()
            except OSError:
                pass
        if self._view is not None:
            self._view._view.release()
            self._view = None
            try:
                self._memory.close()
                os.unlink(self._counter_path)
            except (OSError, BufferError):
                pass

    def ended(self, memory_mib: int) -> str:
        """How the process ended, in words."""
        try:
            code = self.process.wait(timeout=2)
        except Exception:
            return "stopped answering"
        if code == MEMORY_EXIT:
            return f"exceeded {memory_mib} MiB"
        if code < 0:
            try:
                return f"killed by {signal.Signals(-code).name}"
            except ValueError:
                return f"killed by signal {-code}"
        return f"exited the interpreter with code {code}"


#: every worker process this process started and has not killed yet (weakly: a pool
#: dropped without ``close`` lets its worker go, which then sees its pipe close)
_LIVE: "weakref.WeakSet[WorkerProcess]" = weakref.WeakSet()


def kill_all() -> None:
    """Kill every worker this process started (and what their targets started): for a
    process that must stop at once (a ``--jobs`` pool process told to stop)."""
    for process in list(_LIVE):
        try:
            process.kill()
        except Exception:
            pass


class Ended(Exception):
    """The worker ended (or was killed) during a request."""

    def __init__(self, what: str, position: int, hung: bool = False) -> None:
        super().__init__(what)
        self.what, self.position, self.hung = what, position, hung
