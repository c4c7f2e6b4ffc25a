"""Worker processes: code under test runs here, the checker in the parent.

A worker loads the targets (module imports, a file's module-level names: everything
a target's loading executes), builds each scenario's inputs, calls the targets and
sends back what it observed as plain data (``Observation``). The parent checks and
compares. Anything a target does to its own process ends at most its worker: an
exit (``SystemExit`` is caught in the worker; ``os._exit`` ends it), a fatal signal,
a memory blow-up past the worker's limit, closing or writing into the pipe. The
parent sees the worker end, reports that example's call as ``Observation.of_crash``
("exited the interpreter with code 0", "killed by SIGSEGV", "exceeded 4096 MiB"),
starts a fresh worker and goes on. Hangs are enforced from the parent: a call that
has not returned within its time limit (plus a grace period) gets its worker killed,
whatever the target does to signals, threads or exceptions.

The protocol is request/response over a ``multiprocessing`` pipe: the parent sends
``(command, payload)``; the worker answers ``("ok", result)`` or ``("error", text)``
for a failure of stagecheck's own machinery. During a batch, the worker writes the
position it is at (example and side) into a shared counter, so the parent knows
which call crashed or hung. Workers start from a fork server that has preloaded
stagecheck and numpy (not torch: a fast path that never touches ``.cpu`` never
imports it), so a fresh worker is ready in milliseconds.
"""

from __future__ import annotations

import os
import signal
import time
import traceback
import weakref
from dataclasses import dataclass, replace
from typing import Any

from stagecheck.oracles import interrupt
from stagecheck.oracles.errors import StagecheckError, TargetLoadError
from stagecheck.oracles.options import RunOptions
from stagecheck.oracles.targets import TargetRef
from stagecheck.spec.observation import Observation
from stagecheck.spec.scenario import StagingScenario

__all__ = ["DEFAULT_MEMORY_MIB", "TargetRef", "WorkerEnded", "WorkerError", "WorkerPool",
           "kill_all", "target_arg"]

#: address-space limit of a worker (a target that allocates past it is reported)
DEFAULT_MEMORY_MIB = 4096
#: seconds a stuck call gets on top of its time limit before its worker is killed
GRACE_SECONDS = 1.0
#: seconds loading the targets may take in a worker (imports included)
LOAD_SECONDS = 120.0
_POLL = 0.02
#: longest answer read from a worker; a length header past it is garbage a target wrote
#: into the pipe (any printable text reads as 512 MiB or more)
MAX_ANSWER_BYTES = 512 * 1024 * 1024
#: seconds a worker whose pipe broke may take to end before it counts as alive (then what
#: broke the pipe was bytes a target wrote into it)
_ENDING = 0.5
#: seconds between two reminders of an interrupt to a worker busy with a ``call``
_FORWARD_EVERY = 0.25


class WorkerError(StagecheckError):
    """stagecheck's own machinery failed inside a worker (not the code under test)."""


class WorkerEnded(Exception):
    """A ``call`` in a worker ended its process or passed its deadline (the code under
    test did it: a finding of the command that asked, not an error of stagecheck)."""

    def __init__(self, what: str, hung: bool = False) -> None:
        super().__init__(what)
        self.what, self.hung = what, hung


# ============================================================================ the worker

class _Worker:
    """The worker side: loaded targets, and what each command does."""

    def __init__(self, counter, memory_mib: int) -> None:
        self.counter = counter
        self.memory_mib = memory_mib
        self.targets: list = []
        self._cuda_fast = None
        self.pid = os.getpid()

    # ---------------------------------------------------------------- commands
    def load(self, refs: list[TargetRef]) -> list[tuple]:
        """Load every target; per target ``("target", schema, keywords, origin, shimmed)``
        or ``("error", kind, problem, fix, value)``.

        A ref with source text (a file or revision target the checker read, a mutant) is
        compiled here with its shims: every global name it uses resolves now, or the
        answer is a ``TargetLoadError`` naming the names (never a ``NameError`` in a run).
        """
        self.counter.value = 1      # loading runs target code: under the parent's deadline
        from stagecheck.oracles.schemas import load_schema
        from stagecheck.oracles.targets import (load_function_from_source, load_shims,
                                                load_target, target_from_callable)
        out = []
        self.targets = []
        for ref in refs:
            try:
                schema = load_schema(ref.schema) if ref.schema else None
                if ref.source is not None:
                    func = load_function_from_source(ref.source, ref.filename, ref.function,
                                                     ref.spec, shims=load_shims(ref.shims))
                    target = target_from_callable(func, ref.spec, schema)
                    target.origin = ref.origin or target.origin
                    target.shimmed = getattr(func, "__stagecheck_shimmed__", ())
                else:
                    target = load_target(ref.spec, schema, ref.shims)
            except StagecheckError as exc:
                self.targets.append(None)
                out.append(("error", type(exc).__name__, exc.problem, exc.fix, repr(exc.value)))
                continue
            except MemoryError:
                raise
            except BaseException as exc:     # the file's own code, run at load, failed
                from stagecheck.oracles import messages
                from stagecheck.oracles.observe import exception_text
                problem, fix = messages.TARGET_LOAD_RAISED
                self.targets.append(None)
                out.append(("error", "TargetLoadError", problem.format(
                    value=ref.spec, error=exception_text(exc, type(exc))), fix, repr(ref.spec)))
                continue
            self.targets.append(target)
            out.append(("target", target.schema.name, sorted(target.profile.keywords),
                        target.origin, tuple(target.shimmed)))
        self.counter.value = 0
        return out

    def observe(self, payload) -> list[tuple[int, list[tuple]]]:
        """Run targets ``sides`` on every ``(index, scenario)`` of the batch: on the
        ``backend`` buffers, except that with the fast backend every example whose
        index is a multiple of ``sample_every`` (0: none) runs instrumented."""
        from stagecheck.oracles.observe import observe
        sides, batch, options, kind, sample_every = payload
        fast = self._backend(kind, options)
        instrumented = self._backend("instrumented", options) if kind == "fast" else fast
        # the fast buffers queue no device work ahead of their copies (hazards are the
        # instrumented runs' to see)
        quick = replace(options, gpu_busy_cycles=0) if kind == "fast" else options
        out = []
        for position, (index, scenario) in enumerate(batch):
            sampled = sample_every and index % sample_every == 0
            backend = instrumented if sampled else fast
            observations: list = []
            for side in sides:
                self.counter.value = position * 8 + side + 1
                seen = observe(self.targets[side], scenario, options if sampled else quick,
                               backend, exits_are_observations=True)
                if os.getpid() != self.pid:     # a child the target forked: never answer
                    os._exit(0)
                if not sampled and kind == "fast" and seen.last_step_start == 0:
                    # the fast buffers log copies only: their order across buffers means
                    # nothing to any invariant, nor does how often an entry of req_ids was
                    # read (padded_read asks which were), so two sides that did the same
                    # compare equal whatever order they did it in
                    seen.events.sort(key=_buffer_of)
                    seen.req_ids_reads = sorted(set(seen.req_ids_reads))
                wire = seen.to_wire()
                # a side that saw exactly what the first saw is sent as None (the common
                # case: half the data to pickle, and the checker judges it once)
                observations.append(None if observations and wire == observations[0] else wire)
            out.append((index, observations))
        self.counter.value = 0
        return out

    def _backend(self, kind: str, options: RunOptions):
        from stagecheck.oracles.runner import make_backend
        if kind == "fast" and options.device == "cuda":      # its pinned buffers are kept
            if self._cuda_fast is None:
                self._cuda_fast = make_backend("fast", options)
            return self._cuda_fast
        return make_backend(kind, options)

    def call(self, payload) -> Any:
        """Run a named function of stagecheck in this worker (bench, upstream tests, the
        symbolic exploration), under the parent's deadline."""
        import importlib
        module, name, args = payload
        args = [self.targets[a.index] if isinstance(a, _TargetArg) else a for a in args]
        interrupt.reset()           # the checker forwards its interrupt while it waits
        self.counter.value = 1
        try:
            return getattr(importlib.import_module(module), name)(*args)
        except SystemExit as exc:   # only code under test exits: it ends this worker
            os._exit(exc.code if isinstance(exc.code, int) and 0 <= exc.code < 256 else
                     0 if exc.code is None else 1)
        except KeyboardInterrupt:   # SIGINT is ignored here: the code under test raised it
            os._exit(128 + signal.SIGINT)
        finally:
            if os.getpid() != self.pid:     # a child the target forked: never answer
                os._exit(0)
            self.counter.value = 0


@dataclass(frozen=True)
class _TargetArg:
    """An argument of ``call`` that stands for the worker's loaded target ``index``."""

    index: int


def _limit_memory(mib: int) -> None:
    try:
        import resource
        limit = mib * 1024 * 1024
        resource.setrlimit(resource.RLIMIT_DATA, (limit, limit))
    except (ImportError, ValueError, OSError):
        pass


def _quiet_stdio() -> None:
    """What a target prints goes nowhere: never into the user's report or terminal."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    for fd in (1, 2):
        try:
            os.dup2(devnull, fd)
        except OSError:
            pass
    os.close(devnull)


def worker_main(recv_fd: int, send_fd: int, counter_path: str, memory_mib: int,
                path: list[str]) -> None:
    """The worker process: answer the parent's commands until told to stop."""
    import mmap
    import sys
    from multiprocessing.connection import Connection
    signal.signal(signal.SIGINT, signal.SIG_IGN)       # interrupts are the parent's
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    if interrupt.FORWARDED is not None:   # ... which it passes on during a ``call``
        signal.signal(interrupt.FORWARDED, lambda signum, frame: interrupt.request())
    sys.path[:] = path
    receive = Connection(recv_fd, writable=False)
    send = Connection(send_fd, readable=False)
    with open(counter_path, "r+b") as fh:
        counter = _Counter(mmap.mmap(fh.fileno(), 8))
    _quiet_stdio()
    _limit_memory(memory_mib)
    from stagecheck.oracles.observe import call as _observe
    _observe.keep_alarm_handler()
    worker = _Worker(counter, memory_mib)
    requests = _Requests(receive)
    while True:
        try:
            command, payload = requests.get()
        except (EOFError, OSError):
            return
        if command == "stop":
            return
        try:
            result = getattr(worker, command)(payload)
        except MemoryError:
            os._exit(_MEMORY_EXIT)
        except StagecheckError as exc:    # a usage problem found here: the parent says it
            send.send(("usage", (type(exc).__name__, exc.problem, exc.fix, repr(exc.value))))
            continue
        except BaseException:      # stagecheck's machinery failed: tell the parent
            send.send(("error", traceback.format_exc(limit=8)))
            continue
        try:
            send.send(("ok", result))
        except MemoryError:
            os._exit(_MEMORY_EXIT)


#: the exit code a worker uses when it ran out of memory (so the parent can say so)
_MEMORY_EXIT = 86


class _Requests:
    """The parent's requests, read as they arrive by a thread of their own.

    The parent sends the next batch while this worker answers the previous one: were
    requests read only between answers, a large request and a large answer could
    each fill their pipe, and both processes would wait on the other for ever.
    """

    def __init__(self, receive) -> None:
        import queue
        import threading
        self._queue: "queue.SimpleQueue" = queue.SimpleQueue()
        self._receive = receive
        threading.Thread(target=self._read, name="stagecheck-requests", daemon=True).start()

    def _read(self) -> None:
        while True:
            try:
                message = self._receive.recv()
            except (EOFError, OSError) as exc:
                self._queue.put(exc)
                _orphaned()
                return
            except BaseException as exc:      # a request that cannot be read: the parent's
                self._queue.put(EOFError(repr(exc)))
                return
            self._queue.put(message)

    def get(self):
        message = self._queue.get()
        if isinstance(message, BaseException):
            raise message
        return message


def _orphaned() -> None:
    """The checker closed its end of the pipe: it stopped this worker, or it is gone
    (killed, or stopped by a signal before it could stop its workers). Nothing this
    worker does can matter any more: end it now, with whatever the target started in
    its session, even if a call is still running (a hang would outlive the checker)."""
    try:
        if os.getsid(0) == os.getpid():
            os.killpg(os.getpid(), signal.SIGKILL)
    except OSError:
        pass
    os._exit(0)


class _Counter:
    """An int64 in shared memory: where the worker is (0: between requests)."""

    __slots__ = ("_view",)

    def __init__(self, buf) -> None:
        self._view = memoryview(buf).cast("q")

    @property
    def value(self) -> int:
        return self._view[0]

    @value.setter
    def value(self, v: int) -> None:
        self._view[0] = v


# ============================================================================ the parent

class _Process:
    """One worker process (``python -m stagecheck.oracles.worker``), seen from the parent.

    A plain subprocess, not ``multiprocessing``'s: it never re-imports the parent's
    ``__main__``, and shares nothing with it but two pipes and a counter. It runs in
    a session of its own, so killing it also kills whatever the target started.
    """

    def __init__(self, memory_mib: int) -> None:
        import json
        import mmap
        import subprocess
        import sys
        import tempfile
        from multiprocessing.connection import Connection
        fd, self._counter_path = tempfile.mkstemp(prefix="stagecheck-worker-")
        os.write(fd, bytes(8))
        self._memory = mmap.mmap(fd, 8)
        os.close(fd)
        self._view = _Counter(self._memory)
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
        import pickle
        return pickle.loads(self._recv.recv_bytes(MAX_ANSWER_BYTES))

    def is_alive(self) -> bool:
        return self.process.poll() is None

    def ends_within(self, seconds: float) -> bool:
        """Whether the process has ended, or ends within ``seconds``."""
        import subprocess
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
        if code == _MEMORY_EXIT:
            return f"exceeded {memory_mib} MiB"
        if code < 0:
            try:
                return f"killed by {signal.Signals(-code).name}"
            except ValueError:
                return f"killed by signal {-code}"
        return f"exited the interpreter with code {code}"


#: every worker process this process started and has not killed yet (weakly: a pool
#: dropped without ``close`` lets its worker go, which then sees its pipe close)
_LIVE: "weakref.WeakSet[_Process]" = weakref.WeakSet()


def kill_all() -> None:
    """Kill every worker this process started (and what their targets started): for a
    process that must stop at once (a ``--jobs`` pool process told to stop)."""
    for process in list(_LIVE):
        try:
            process.kill()
        except Exception:
            pass


class _Ended(Exception):
    """The worker ended (or was killed) during a request."""

    def __init__(self, what: str, position: int, hung: bool = False) -> None:
        super().__init__(what)
        self.what, self.position, self.hung = what, position, hung


class WorkerPool:
    """Workers that run the code under test for the parent (the checker).

    ``load`` loads the targets in a worker and gives the parent ``Target``s without
    their functions; ``observe`` runs a batch of scenarios and gives back one
    observation per side, whatever the targets do to their process.
    """

    def __init__(self, memory_mib: int = DEFAULT_MEMORY_MIB) -> None:
        self.memory_mib = memory_mib
        self._process: _Process | None = None
        self._refs: list[TargetRef] = []
        self.restarts = 0

    # ---------------------------------------------------------------- process
    def _fresh(self) -> _Process:
        if self._process is not None:
            self._process.kill()
            self.restarts += 1
        self._process = _Process(self.memory_mib)
        if self._refs:
            self._request("load", self._refs, deadline=LOAD_SECONDS)
        return self._process

    def _worker(self) -> _Process:
        if self._process is None or not self._process.is_alive():
            return self._fresh()
        return self._process

    def close(self) -> None:
        if self._process is not None:
            try:
                self._process.send(("stop", None))
            except OSError:
                pass
            self._process.kill()
            self._process = None

    def __enter__(self) -> "WorkerPool":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _request(self, command: str, payload, deadline: float | None = None,
                 forward: bool = False):
        """Send one command and wait for its answer; ``deadline`` seconds per position
        (``forward``: see ``_answer``)."""
        process = self._process
        try:
            process.send((command, payload))
        except OSError:
            raise _Ended(process.ended(self.memory_mib), process.position) from None
        return self._answer(deadline, forward)

    def _answer(self, deadline: float | None = None, forward: bool = False):
        """The answer to the oldest request sent and not yet answered. ``forward``: while
        a signal asked this process to stop (``interrupt``), tell the worker too, now and
        then, so that a loop running there (the symbolic exploration) ends early."""
        process = self._process
        last, since = process.position, time.monotonic()
        told = 0.0
        while True:
            try:
                if process.poll(_POLL):
                    status, result = process.recv()
                    break
            except Exception:      # the worker ended, or a target wrote into the pipe
                position = process.position
                if process.ends_within(_ENDING):
                    raise _Ended(process.ended(self.memory_mib), position) from None
                process.kill()         # alive: what was read was not its answer
                raise _Ended("wrote into stagecheck's pipe", position) from None
            if not process.is_alive():
                raise _Ended(process.ended(self.memory_mib), process.position)
            now = time.monotonic()
            if forward and interrupt.requested() and now - told > _FORWARD_EVERY:
                told = now
                process.tell_interrupt()
            position = process.position
            if position != last:
                last, since = position, now
            elif deadline is not None and position and now - since > deadline:
                process.kill()
                raise _Ended("hung", position, hung=True)
        if status == "error":
            raise WorkerError(f"stagecheck failed inside its worker: {result}",
                              "this is a bug in stagecheck; please report it with the "
                              "command line")
        if status == "usage":
            from stagecheck.oracles import errors
            kind, problem, fix, _value = result
            raise getattr(errors, kind, StagecheckError)(problem, fix)
        return result

    # ---------------------------------------------------------------- commands
    def load(self, refs: list[TargetRef], schemas: dict | None = None,
             fresh: bool = True) -> list:
        """Load ``refs`` in a worker; ``Target``s (without ``func``) for the parent.

        ``schemas`` maps a schema spec to the parent's schema object (loaded once). A
        ``TargetLoadError`` (or ``SchemaError``) names the target (``target_index``).
        ``fresh=False`` reuses a live worker (mutants of one target, one after another).
        """
        from stagecheck.oracles import errors
        from stagecheck.oracles.schemas import load_schema
        from stagecheck.oracles.targets import Target
        from stagecheck.spec.schemas import BUILTIN_SCHEMAS
        self._refs = []
        if fresh or self._process is None or not self._process.is_alive():
            self._fresh()
        try:
            answers = self._request("load", list(refs), deadline=LOAD_SECONDS)
        except _Ended as ended:
            self._fresh()
            from stagecheck.oracles import messages
            raise TargetLoadError.of(messages.TARGET_LOAD_ENDED, ", ".join(r.spec for r in refs),
                                     what=ended.what) from None
        self._refs = list(refs)
        out = []
        for position, (ref, answer) in enumerate(zip(refs, answers)):
            if answer[0] == "error":
                _, kind, problem, fix, _value = answer
                cls = getattr(errors, kind, TargetLoadError)
                error = cls(problem, fix, value=ref.spec)
                error.target_index = position
                raise error
            _, schema_name, keywords, origin, shimmed = answer
            schema = (schemas or {}).get(ref.schema) or BUILTIN_SCHEMAS.get(schema_name) \
                or load_schema(ref.schema)
            # what reports say about the target: the commit and pinned spec the checker
            # resolved when it read the file, the names the worker took from shims
            out.append(Target(ref.spec, None, schema.profile(frozenset(keywords)), origin, ref,
                              resolved=ref.resolved, sha=ref.sha, shimmed=tuple(shimmed)))
        return out

    def observe(self, sides: list[int], batch: list[tuple[int, StagingScenario]],
                options: RunOptions, backend: str = "fast", sample_every: int = 0
                ) -> list[tuple[int, list[Observation]]]:
        """Observations of the loaded targets ``sides`` on each scenario of ``batch``
        (``sample_every``: see ``_Worker.observe``).

        A call that ends its worker or hangs gets ``Observation.of_crash``/``of_hang``;
        the rest of the batch runs on in a fresh worker.
        """
        self._worker()
        payload = (sides, list(batch), options, backend, sample_every)
        try:
            return _decoded(self._request("observe", payload, _deadline(options)))
        except _Ended as ended:
            return self._recover(ended, payload)

    def _recover(self, ended: "_Ended", payload, stop: bool = False
                 ) -> list[tuple[int, list[Observation]]]:
        """The answer to batch ``payload`` whose worker ended at ``ended.position``.

        ``stop``: the answer ends with the example whose call hung or ended its process
        (a search that stops at its first error needs nothing after it, and a target
        that ends every call would otherwise cost a new worker per example)."""
        sides, todo, options, backend, sample_every = payload
        deadline = _deadline(options)
        out: list = []
        while True:
            position = ended.position - 1
            k, side_at = divmod(max(position, 0), 8)
            if position < 0 or k >= len(todo) or side_at not in sides:
                # before the first call, or a position no batch has: a target wrote into
                # the counter (its file stays open in the worker): blame the first example
                k, side_at = 0, sides[0]
            self._fresh()
            try:
                if k:   # the examples before the failing one ran fine: again, in one batch
                    out += self._request("observe", (sides, todo[:k], options, backend,
                                                     sample_every), deadline)
                index, scenario = todo[k]
                failed = Observation.of_hang() if ended.hung else Observation.of_crash(ended.what)
                kind = ("instrumented" if backend == "fast" and sample_every
                        and index % sample_every == 0 else backend)
                out.append((index, [failed if side == side_at else
                                    self._single(side, index, scenario, options, kind, deadline)
                                    for side in sides]))
                todo = todo[k + 1:]
                if not todo or stop:
                    return _decoded(out)
                self._worker()
                out += self._request("observe", (sides, todo, options, backend, sample_every),
                                     deadline)
                return _decoded(out)
            except _Ended as again:
                ended = again

    def _single(self, side: int, index: int, scenario: StagingScenario, options: RunOptions,
                backend: str, deadline: float) -> Observation:
        self._worker()
        try:
            ((_, (observation,)),) = self._request(
                "observe", ([side], [(index, scenario)], options, backend, 0), deadline)
            return Observation.from_wire(observation)
        except _Ended as ended:
            self._fresh()
            return Observation.of_hang() if ended.hung else Observation.of_crash(ended.what)

    # ---------------------------------------------------------------- pipelined batches
    def _post(self, payload) -> None:
        """Send batch ``payload`` without waiting (a dead worker shows when its answer is
        waited for; the batches it had in hand are then posted again)."""
        if self._process is None:
            self._fresh()
        try:
            self._process.send(("observe", payload))
        except OSError:
            pass

    def _collect(self, payload) -> list[tuple[int, list[Observation]]]:
        """The answer to the oldest batch posted, ``payload``; it ends with an example
        whose call hung or ended its process (``_recover``'s ``stop``)."""
        try:
            return _decoded(self._answer(_deadline(payload[2])))
        except _Ended as ended:
            return self._recover(ended, payload, stop=True)

    def clone(self) -> "WorkerPool":
        """Another pool with the same targets loaded in a worker of its own."""
        other = WorkerPool(self.memory_mib)
        other._refs = list(self._refs)
        other._fresh()
        return other

    def call(self, module: str, name: str, *args, deadline: float | None = None):
        """Run ``module.name(*args)`` in the worker (targets passed as ``target_arg(i)``).

        A worker that ends or passes ``deadline`` raises ``WorkerEnded`` (with what ended
        it), and the next request gets a fresh worker."""
        self._worker()
        try:
            return self._request("call", (module, name, list(args)), deadline, forward=True)
        except _Ended as ended:
            self._fresh()
            raise WorkerEnded(ended.what, hung=ended.hung) from None


def target_arg(index: int) -> _TargetArg:
    return _TargetArg(index)


def _buffer_of(event) -> str:
    return event.buffer


def _deadline(options: RunOptions) -> float:
    return options.timeout * options.steps + GRACE_SECONDS


def _decoded(answer: list) -> list[tuple[int, list[Observation]]]:
    """Observations from the worker's answer; a side sent as None saw exactly what the
    first side saw, and gets the same ``Observation`` object."""
    out = []
    for index, wires in answer:
        observations: list[Observation] = []
        for wire in wires:
            if wire is None:
                observations.append(observations[0])
            else:
                observations.append(wire if isinstance(wire, Observation)
                                    else Observation.from_wire(wire))
        out.append((index, observations))
    return out


def stream_batches(pools: list[WorkerPool], sides: list[int], batches, options: RunOptions,
                   backend: str = "fast", sample_every: int = 0, depth: int = 2):
    """Answers to ``batches`` (an iterable of ``[(index, scenario), ...]``), in order,
    one list per batch, while the workers already run the next ones.

    Batch ``j`` goes to ``pools[j % len(pools)]``; each worker has up to ``depth``
    batches in hand, so it never waits for the checker, and the checker reads the
    answers in the order the batches were drawn. Every answer depends only on its
    batch: the results are those of one worker, whatever the number of pools. Closing
    the generator early waits for the batches still in hand (and drops their answers),
    so each worker is idle and in step again afterwards. An answer ends with an example
    whose call hung or ended its process: a search stops there in contract (it is an
    error), and a target that ends every call would otherwise cost a new worker per
    example of the batch.
    """
    from collections import deque
    batches = iter(batches)
    pending: deque = deque()       # (pool, payload), in the order posted
    posted = 0

    def fill() -> None:
        nonlocal posted
        while len(pending) < depth * len(pools):
            batch = next(batches, None)
            if batch is None:
                return
            pool = pools[posted % len(pools)]
            payload = (sides, list(batch), options, backend, sample_every)
            pool._post(payload)
            pending.append((pool, payload))
            posted += 1

    try:
        fill()
        while pending:
            answer = _next_answer(pending)
            fill()
            yield answer
    finally:
        while pending:
            pool = pending[0][0]
            try:
                _next_answer(pending)     # dropped answers
            except Exception:           # its worker is beyond use: the next request starts one
                if pool._process is not None:
                    pool._process.kill()
                    pool._process = None
                for k in range(len(pending) - 1, -1, -1):
                    if pending[k][0] is pool:
                        del pending[k]


def _next_answer(pending) -> list[tuple[int, list[Observation]]]:
    """The answer to the oldest pending batch; a worker restarted on the way gets the
    batches its old process had in hand again."""
    pool, payload = pending.popleft()
    restarts = pool.restarts
    answer = pool._collect(payload)
    if pool.restarts != restarts:
        for other, again in pending:
            if other is pool:
                pool._post(again)
    return answer



if __name__ == "__main__":
    # run the module's own copy (not this ``__main__`` one), so the classes that travel
    # in pickles are the ones the parent pickled
    import json
    import sys

    from stagecheck.oracles import worker as _module
    _module.worker_main(int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], int(sys.argv[4]),
                        json.loads(sys.argv[5]))
