"""One worker process seen from the parent: start it, read where it is, end it.

``WorkerProcess`` is the handle: the pipes, the shared position (``protocol.py``), the
worker's CPU time and resident memory as the kernel counts them (``usage``: read from
``/proc``, which nothing in the worker can write), and how the process ended, in words.
Between the checker and the worker sits a keeper (``keeper.py``), a child subreaper:
whatever the worker starts is ended with it, even in sessions of its own.
``kill_all`` ends every worker this process started; ``watch_parent`` ends this process
(and its workers) when its own parent is gone (a ``--jobs`` pool process). ``prestart``
starts a worker ahead of need (``diff`` and ``spec``: while the command's modules load),
which the next pool that starts one takes (``take_spare``) if it was started the same way.
"""

from __future__ import annotations

import fcntl
import json
import mmap
import os
import pickle
import select
import signal
import struct
import subprocess
import sys
import tempfile
import threading
import time
import weakref
from dataclasses import dataclass
from multiprocessing.connection import Connection
from multiprocessing.reduction import ForkingPickler

from stagecheck.oracles import interrupt, messages
from stagecheck.oracles.stdio import ensure_standard_fds
from stagecheck.oracles.worker import keeper
from stagecheck.oracles.worker.protocol import (BROKEN_EXIT, CLOSED_EXIT, MEMORY_EXIT,
                                                SharedPosition, default_memory_mib)

__all__ = ["Ended", "MAX_ANSWER_BYTES", "Usage", "WorkerProcess", "discard_spare", "kill_all",
           "prestart", "take_spare", "watch_parent"]

#: longest answer read from a worker; a length header past it is garbage a target wrote
#: into the pipe (any printable text reads as 512 MiB or more)
MAX_ANSWER_BYTES = 512 * 1024 * 1024
#: the keeper, run by path with ``python -I -S`` (standard library only)
KEEPER = keeper.__file__
_TICK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
_PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096
#: seconds between two looks at a wait for the rest of an answer
_READ_POLL = 0.02
#: seconds the keeper gets to end the worker and what it left before it is killed itself
_KEEPER_ENDS = keeper.SWEEP_SECONDS + 2.0


@dataclass(frozen=True)
class Usage:
    """What the kernel says of the worker: CPU seconds used (all threads), resident bytes,
    its state letter (``T``: stopped), and the seconds its main thread was ready to run
    but waited for a CPU (``/proc/PID/schedstat``; 0 where the kernel does not say):
    time the machine's load took, not the worker."""

    cpu: float
    rss: int
    state: str
    waited: float = 0.0


class WorkerProcess:
    """One worker process (``python -m stagecheck.oracles.worker``), seen from the parent.

    A plain subprocess, not ``multiprocessing``'s: it never re-imports the parent's
    ``__main__``, and shares nothing with it but two pipes and a counter. It runs in
    a session of its own under a keeper (``keeper.py``) that ends whatever it started.
    """

    def __init__(self, memory_mib: int) -> None:
        ensure_standard_fds()          # no pipe may take the number of a closed fd 0-2
        # the counter's file is unlinked at once: the worker inherits its descriptor, so
        # nothing is left in the temporary folder even when the checker is killed
        counter_fd, counter_path = tempfile.mkstemp(prefix="stagecheck-worker-")
        os.unlink(counter_path)
        os.write(counter_fd, bytes(SharedPosition.BYTES))
        self._memory = mmap.mmap(counter_fd, SharedPosition.BYTES)
        self._view = SharedPosition(self._memory)
        to_child_r, to_child_w = os.pipe()
        _widen(to_child_w)
        to_parent_r, to_parent_w = os.pipe()
        _widen(to_parent_w)
        control_r, self._control = os.pipe()
        self._status, status_w = os.pipe()
        os.set_blocking(self._status, False)
        worker = [sys.executable, "-m", "stagecheck.oracles.worker", str(to_child_r),
                  str(to_parent_w), str(counter_fd), str(memory_mib), json.dumps(sys.path)]
        self.process = subprocess.Popen(
            [sys.executable, "-I", "-S", KEEPER, str(control_r), str(status_w), "--", *worker],
            pass_fds=(to_child_r, to_parent_w, control_r, status_w, counter_fd),
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            cwd=os.getcwd(), start_new_session=True)
        for end in (to_child_r, to_parent_w, control_r, status_w, counter_fd):
            os.close(end)
        os.set_blocking(to_child_w, False)     # a stopped worker must not hold a send
        self._send = Connection(to_child_w, readable=False)
        self._recv = Connection(to_parent_r, writable=False)
        self._outbox = bytearray()   # requests sent, not yet taken by the worker's pipe
        self._inbox = bytearray()    # answer bytes read ahead (``pump``), not yet parsed
        self._last_position = 0
        #: the parent saw the worker's one-time work end (``pause``): it is excused once
        self.paused_once = False
        self._said = ""              # what the keeper wrote so far
        self._pid: int | None = None
        self._exit: int | None = None
        #: the hard RLIMIT_CPU (s) the kernel killed the worker at (the keeper's note)
        self._cpu_limit: int | None = None
        #: the parent ended it (``kill``): an end found later is not the code's doing
        self.killed = False
        #: requests sent and answers read: equal while the worker has nothing in hand
        self.requests = self.answers = 0
        _LIVE.add(self)

    # ---------------------------------------------------------------- the keeper's lines
    def _read_status(self, wait: float = 0.0, until=lambda: True) -> None:
        """Read what the keeper wrote; wait up to ``wait`` seconds for more, until
        ``until()`` holds."""
        deadline = time.monotonic() + wait
        while self._status is not None:
            try:
                chunk = os.read(self._status, 4096)
            except BlockingIOError:
                chunk = None
            except OSError:
                chunk = b""
            if chunk:
                self._said += chunk.decode("ascii", "replace")
                self._parse()
                continue
            if chunk == b"":      # the keeper is gone
                os.close(self._status)
                self._status = None
                return
            left = deadline - time.monotonic()
            if left <= 0 or until():
                return
            waiting = select.poll()      # not select(): a descriptor past 1,023 is valid
            waiting.register(self._status, select.POLLIN)
            waiting.poll(left * 1000)

    def _parse(self) -> None:
        for line in self._said.splitlines():
            kind, _, value = line.partition(" ")
            if kind == "pid" and value.isdigit():
                self._pid = int(value)
            elif kind == "exit" and value.lstrip("-").isdigit():
                self._exit = int(value)
            elif kind == "cpulimit" and value.isdigit():
                self._cpu_limit = int(value)

    @property
    def pid(self) -> int | None:
        """The worker's process id (the keeper says it as soon as it forked)."""
        if self._pid is None:
            self._read_status(wait=5.0 if self.process.poll() is None else 0.5,
                              until=lambda: self._pid is not None)
        return self._pid

    # ---------------------------------------------------------------- what it does
    @property
    def position(self) -> int:
        if self._view is not None:
            self._last_position = self._view.value
        return self._last_position

    @property
    def pause(self) -> int:
        """``protocol.UNTIMED`` while the worker's own one-time work runs inside a call,
        ``TIMED`` once it ended (0: never started; or the worker is gone)."""
        return self._view.pause if self._view is not None else 0

    def usage(self) -> Usage | None:
        """The worker's CPU time, resident memory and state, from ``/proc``; None when it
        is gone (or on a system without ``/proc``)."""
        pid = self.pid
        if pid is None:
            return None
        try:
            with open(f"/proc/{pid}/stat", "rb") as fh:
                text = fh.read().decode("ascii", "replace")
        except OSError:
            return None
        fields = text[text.rfind(")") + 2:].split()
        try:
            usage = Usage((int(fields[11]) + int(fields[12])) / _TICK,
                          int(fields[21]) * _PAGE, fields[0])
        except (IndexError, ValueError):
            return None
        try:
            with open(f"/proc/{pid}/schedstat", "rb") as fh:
                waited = int(fh.read().split()[1]) / 1e9
        except (OSError, IndexError, ValueError):
            return usage
        return Usage(usage.cpu, usage.rss, usage.state, waited)

    def send(self, message) -> None:
        """Queue ``message`` for the worker and write what its pipe takes now, never
        waiting: a worker that stops (``SIGSTOP``) with its pipe full must not hold the
        checker in a write. The rest goes out by ``flush``, which the waits for an answer
        call (and they have deadlines). An ``OSError`` when the worker's end is closed."""
        body = bytes(ForkingPickler.dumps(message))    # as ``Connection.send`` pickles
        header = struct.pack("!i", len(body)) if len(body) <= 0x7fffffff \
            else struct.pack("!i", -1) + struct.pack("!Q", len(body))
        self._outbox += header + body
        self.requests += 1
        self.flush(raising=True)

    def flush(self, raising: bool = False) -> bool:
        """Write what the worker's pipe takes of the requests queued; whether all went.
        A closed pipe raises ``OSError`` with ``raising``, else shows as a worker that
        never answers (its deadline, or its end, says what it did)."""
        fd = self._send.fileno() if not self._send.closed else None
        while self._outbox and fd is not None:
            try:
                written = os.write(fd, memoryview(self._outbox)[:1 << 20])
            except BlockingIOError:
                return False
            except OSError:
                if raising:
                    raise
                return False
            del self._outbox[:written]
        return not self._outbox

    def pump(self) -> None:
        """Move bytes both ways without waiting: what the worker's pipe takes of the
        requests queued, and what the worker wrote of its answers (kept, ``recv`` reads
        them first). Called between the examples the checker judges, so that a worker
        with large batches neither waits for the rest of its next request nor blocks
        writing an answer the checker will read later (``stream_batches``). Reads ahead
        at most ``READ_AHEAD_BYTES``: past that, the answer waits in the pipe."""
        self.flush()
        recv = self._recv
        if recv.closed:
            return
        fd = recv.fileno()
        while len(self._inbox) < READ_AHEAD_BYTES and recv.poll(0):
            try:
                chunk = os.read(fd, 1 << 20)
            except OSError:
                return
            if not chunk:         # the worker's end closed: ``recv`` says so when it gets here
                return
            self._inbox += chunk

    def poll(self, timeout: float) -> bool:
        """Whether an answer is there to read, waiting up to ``timeout`` seconds; the
        requests queued (``send``) go out meanwhile, as fast as the worker takes them (a
        batch of large scenarios is many pipefuls: written only between waits, the worker
        would wait for its request)."""
        if self._inbox:
            return True
        if not self._outbox or self._send.closed:
            return self._recv.poll(timeout)
        waiter = select.poll()
        waiter.register(self._recv.fileno(), select.POLLIN)
        waiter.register(self._send.fileno(), select.POLLOUT)
        deadline = time.monotonic() + timeout
        while self._outbox:
            left = deadline - time.monotonic()
            ready = dict(waiter.poll(max(left, 0.0) * 1000))
            if ready.get(self._recv.fileno()):
                return True
            if ready.get(self._send.fileno()):
                if ready[self._send.fileno()] & (select.POLLERR | select.POLLHUP):
                    break            # the worker's end is closed: its end shows it
                self.flush()
            elif left <= 0:
                return False
        return self._recv.poll(max(deadline - time.monotonic(), 0.0))

    def recv(self, waiting=None):
        """The next answer; an ``OSError`` for a message longer than any answer (bytes a
        target wrote into the pipe: waiting for them would wait for ever), an ``EOFError``
        when the worker's end closed halfway. Once an answer began, its bytes are read as
        they come; while none come, ``waiting(seconds without a byte)`` is called every
        few milliseconds and raises to stop the wait (a worker stopped halfway through
        writing its answer must not hold the checker in a read)."""
        header = self._read(4, waiting)
        (size,) = struct.unpack("!i", header)
        if size == -1:
            (size,) = struct.unpack("!Q", self._read(8, waiting))
        if size < 0 or size > MAX_ANSWER_BYTES:
            raise OSError("bad message length")
        answer = pickle.loads(self._read(size, waiting))
        self.answers += 1
        return answer

    def _read(self, size: int, waiting) -> bytes:
        fd = self._recv.fileno()
        data = self._inbox[:size]
        del self._inbox[:size]
        last = time.monotonic()
        while len(data) < size:
            if self._recv.poll(_READ_POLL):
                chunk = os.read(fd, min(size - len(data), 1 << 20))
                if not chunk:
                    raise EOFError("the worker's pipe closed halfway through an answer")
                data += chunk
                last = time.monotonic()
            else:
                self.flush()
                if waiting is not None:
                    waiting(time.monotonic() - last)
        return bytes(data)

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
        """Pass the checker's interrupt on (no SIGINT reaches the worker: its session is
        its own)."""
        pid = self._pid
        if interrupt.FORWARDED is not None and pid is not None and self.process.poll() is None:
            try:
                os.kill(pid, interrupt.FORWARDED)
            except OSError:
                pass

    def kill(self) -> None:
        """End the worker and everything it started (its keeper sweeps), now."""
        _LIVE.discard(self)
        self.killed = True
        self.position      # noqa: B018  (keep the last position readable after the kill)
        if self.process.poll() is None:
            pid = self._pid
            if pid is not None and self._exit is None:
                try:
                    os.killpg(pid, signal.SIGKILL)     # at once; the keeper does the rest
                except OSError:
                    pass
        if self._control is not None:
            os.close(self._control)          # the keeper's signal: end it all
            self._control = None
        if not self.ends_within(_KEEPER_ENDS):     # a keeper that does not answer
            keeper.end_tree([self.process.pid])
            self.ends_within(5)
        self._read_status()
        self._outbox.clear()
        self._inbox.clear()
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
            except (OSError, BufferError):
                pass

    def ended(self, memory_mib: int) -> str:
        """How the worker ended, in words (its keeper reports its wait status)."""
        if self._exit is None:
            if not self.ends_within(_KEEPER_ENDS):
                return "stopped answering"
            self._read_status(wait=0.5, until=lambda: self._exit is not None)
        raw = self._exit
        if raw is None:
            return "ended with its keeper process, which was killed"
        if os.WIFSIGNALED(raw):
            signum = os.WTERMSIG(raw)
            if signum == signal.SIGKILL and self._cpu_limit is not None:
                return messages.KILLED_AT_CPU_LIMIT.format(limit=self._cpu_limit)
            try:
                return f"killed by {signal.Signals(signum).name}"
            except ValueError:
                return f"killed by signal {signum}"
        code = os.WEXITSTATUS(raw) if os.WIFEXITED(raw) else raw
        if code == MEMORY_EXIT:
            return f"exceeded {memory_mib} MiB"
        if code == BROKEN_EXIT:
            return messages.BROKE_WORKER_MODULES
        if code == CLOSED_EXIT:
            return messages.CLOSED_WORKER_PIPE
        return f"exited the interpreter with code {code}"

    def killed_by(self, signum: int | None) -> bool:
        """The worker ended killed by signal ``signum`` (read once ``ended`` has run)."""
        raw = self._exit
        return signum is not None and raw is not None and os.WIFSIGNALED(raw) \
            and os.WTERMSIG(raw) == signum

    def __del__(self) -> None:
        if getattr(self, "_control", None) is not None:
            try:
                os.close(self._control)
            except OSError:
                pass


#: every worker process this process started and has not killed yet (weakly: a pool
#: dropped without ``close`` lets its worker go: its keeper sees the pipe close)
_LIVE: "weakref.WeakSet[WorkerProcess]" = weakref.WeakSet()


def kill_all() -> None:
    """Kill every worker this process started (and what their targets started): for a
    process that must stop at once (a ``--jobs`` pool process told to stop)."""
    for process in list(_LIVE):
        try:
            process.kill()
        except Exception:
            pass


#: bytes a pipe to a worker holds where the system allows (Linux: ``F_SETPIPE_SZ``, up to
#: ``/proc/sys/fs/pipe-max-size``): a batch's request and its answer go in fewer writes
PIPE_BYTES = 1 << 20


def _widen(fd: int) -> None:
    """Let the pipe of ``fd`` hold ``PIPE_BYTES`` where the system allows (else as is)."""
    try:
        fcntl.fcntl(fd, fcntl.F_SETPIPE_SZ, PIPE_BYTES)
    except (AttributeError, OSError):      # not Linux, or more than the system allows
        pass


#: answer bytes ``pump`` reads ahead of ``recv`` at most (a few batches' answers at the
#: largest sizes; bytes past it wait in the pipe, as they would without the pump)
READ_AHEAD_BYTES = 64 << 20

#: the worker ``prestart`` started and no pool took yet, with what it was started with
_SPARE: list[tuple[WorkerProcess, tuple]] = []


def _started_with(memory_mib: int) -> tuple:
    """What a worker process inherits when it starts: its memory limit, the module search
    path, the working folder and the environment."""
    return memory_mib, tuple(sys.path), os.getcwd(), tuple(sorted(os.environ.items()))


def prestart(memory_mib: int | None = None) -> None:
    """Start a worker now, for the next pool that starts one: the interpreter's start and
    the worker's imports overlap with what this process does meanwhile (on a second CPU).
    ``memory_mib``: the default limit (``protocol.default_memory_mib``) where None."""
    discard_spare()
    memory_mib = memory_mib or default_memory_mib()
    _SPARE.append((WorkerProcess(memory_mib), _started_with(memory_mib)))


def take_spare(memory_mib: int) -> WorkerProcess | None:
    """The worker ``prestart`` started, if it is alive and was started as a worker
    started now would be (else it is ended); None where there is none."""
    if not _SPARE:
        return None
    process, started = _SPARE.pop()
    if process.is_alive() and started == _started_with(memory_mib):
        return process
    process.kill()
    return None


def discard_spare() -> None:
    """End the worker ``prestart`` started if no pool took it."""
    while _SPARE:
        _SPARE.pop()[0].kill()


def watch_parent(every: float = 0.25) -> None:
    """End this process, and every worker it started, when its parent is gone (the
    parent was killed: a ``--jobs`` pool process must not run on for nobody)."""
    parent = os.getppid()

    def watch() -> None:
        while True:
            time.sleep(every)
            if os.getppid() != parent:
                kill_all()
                os._exit(128 + signal.SIGKILL)

    threading.Thread(target=watch, name="stagecheck-parent-watch", daemon=True).start()


class Ended(Exception):
    """The worker ended (or was killed) during a request."""

    def __init__(self, what: str, position: int, hung: bool = False) -> None:
        super().__init__(what)
        self.what, self.position, self.hung = what, position, hung
