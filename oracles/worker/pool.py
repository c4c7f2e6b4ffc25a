"""The parent's pool of one worker: load targets, run batches and calls, restart.

``WorkerPool`` sends the worker its commands and waits for the answers under the
parent's deadlines; a call that ends its worker or hangs is that call's observation
(``Observation.of_crash`` / ``of_hang``), or ``WorkerEnded`` for a ``call``. When and
how a worker is replaced is decided in one place, ``WorkerPool.restart``.
"""

from __future__ import annotations

import time

from stagecheck.oracles import errors, interrupt, messages
from stagecheck.oracles.errors import StagecheckError, TargetLoadError
from stagecheck.oracles.options import RunOptions
from stagecheck.oracles.schemas import load_schema
from stagecheck.oracles.stdio import note
from stagecheck.oracles.targets import Target, TargetRef
from stagecheck.oracles.text import printable
# Deadline, GRACE_SECONDS, LOAD_SECONDS and load_deadline: named in __all__ (their home is
# deadlines.py; protocol campaigns take load_deadline from here)
from stagecheck.oracles.worker.deadlines import (GRACE_SECONDS, LOAD_SECONDS, Deadline,
                                                 batch_deadline, load_deadline, trace_hang)
from stagecheck.oracles.worker.process import Ended, WorkerProcess, take_spare
from stagecheck.oracles.worker.protocol import (BUSY, DEFAULT_MEMORY_MIB, TIMED, UNTIMED,
                                                default_memory_mib, observed, observing)
from stagecheck.spec.observation import Observation
from stagecheck.spec.scenario import StagingScenario
from stagecheck.spec.schemas import BUILTIN_SCHEMAS

__all__ = ["DEFAULT_MEMORY_MIB", "Deadline", "GRACE_SECONDS", "INTERRUPT_GRACE", "LOAD_SECONDS",
           "WorkerEnded", "WorkerError", "WorkerPool", "default_memory_mib", "load_deadline"]

#: seconds a wait on a worker goes on after a signal asked the run to stop (SIGINT,
#: SIGTERM): then the worker is killed and the run ends as interrupted
INTERRUPT_GRACE = 4.5
_POLL = 0.02
#: how a worker killed from outside ends (a fault such as SIGSEGV is the process's own)
_OUTSIDE = frozenset(f"killed by {name}" for name in ("SIGKILL", "SIGTERM", "SIGHUP", "SIGQUIT"))
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

    def __init__(self, what: str, hung: bool = False, position: int = 0) -> None:
        super().__init__(what)
        #: ``position``: the last position the call marked (``protocol.next_position``)
        self.what, self.hung, self.position = what, hung, position


class WorkerPool:
    """Workers that run the code under test for the parent (the checker).

    ``load`` loads the targets in a worker and gives the parent ``Target``s without
    their functions; ``observe`` runs a batch of scenarios and gives back one
    observation per side, whatever the targets do to their process.
    """

    def __init__(self, memory_mib: int | None = None) -> None:
        self.memory_mib = memory_mib or default_memory_mib()
        self._process: WorkerProcess | None = None
        self._refs: list[TargetRef] = []
        self.restarts = 0
        #: the device each fresh worker makes its first use of when it starts (``_warm``)
        self.device: str | None = None

    # ---------------------------------------------------------------- the restart policy
    def restart(self) -> WorkerProcess:
        """Kill the worker (if any) and start a fresh one with the same targets loaded.

        The restart policy, all of it: a worker whose call ended its process, hung
        (killed at its deadline) or wrote into the pipe is replaced here before the
        pool's next request, and so is one found dead when a request is due (``_live``).
        The call that ended it is answered as what it did (``Observation.of_crash`` or
        ``of_hang`` in a batch, ``WorkerEnded`` for a ``call``, ``TargetLoadError`` for a
        ``load``); the rest of a batch runs on in the fresh worker (``_recover``).
        ``restarts`` counts the replacements: the batch stream posts again what the old
        process had in hand. ``discard`` ends a worker without starting another.
        """
        if self._process is not None:
            self._process.kill()
            self.restarts += 1
        # a worker started ahead (``process.prestart``) is this one, if it fits
        self._process = take_spare(self.memory_mib) or WorkerProcess(self.memory_mib)
        if self._refs:
            self._request("load", self._refs, deadline=load_deadline())
        if self.device is not None:
            self._warm_now()
        return self._process

    def _warm(self, options: RunOptions) -> None:
        """Batches on the cuda device are coming: this worker, and each fresh one after
        it, makes its first use of the device now, under the deadline of loading. The
        driver's initialisation takes seconds where many workers start at once; timed as
        part of a first call, it made a correct call a hang."""
        if options.device == "cuda" and self.device is None:
            self.device = options.device
            self._warm_now()

    def _warm_now(self) -> None:
        try:
            self._request("warm", self.device, deadline=load_deadline())
        except Ended as ended:
            self.discard()
            seconds = load_deadline()
            raise WorkerError.of(messages.DEVICE_FIRST_USE_FAILED, self.device, what=ended.what,
                                 cpu=seconds.cpu, wall=seconds.wall) from None

    def _live(self) -> WorkerProcess:
        if self._process is None or not self._process.is_alive():
            return self.restart()
        return self._process

    def discard(self) -> None:
        """Kill the worker, beyond use; the next request starts a fresh one."""
        if self._process is not None:
            self._process.kill()
            self._process = None

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

    def _request(self, command: str, payload, deadline: Deadline | None = None,
                 forward: bool = False, top: int = BUSY):
        """Send one command and wait for its answer (``_answer``)."""
        process = self._process
        try:
            process.send((command, payload))
        except OSError:
            raise Ended(process.ended(self.memory_mib), process.position) from None
        return self._answer(deadline, forward, top)

    def _answer(self, deadline: Deadline | None = None, forward: bool = False,
                top: int = BUSY):
        """The answer to the oldest request sent and not yet answered.

        ``deadline`` holds for each position the worker reaches (each call of a batch):
        the clock starts again only when the shared position moves forward to a position
        the request has (up to ``top``), so a target that writes the counter (zeroes it,
        spins it) cannot hold the deadline off: at most ``top`` deadlines pass. The worker's
        CPU time and resident memory are read from ``/proc`` on every poll; past
        ``memory_mib`` the worker is killed ("exceeded"). ``forward``: while a signal asked
        this process to stop (``interrupt``), tell the worker too, now and then, so that a
        loop running there (the symbolic exploration) ends early. Whatever the request, a
        signal ends the wait within ``INTERRUPT_GRACE`` seconds (a second signal: at once)
        by killing the worker and raising ``interrupt.Interrupted``."""
        process = self._process
        limit = self.memory_mib * 1024 * 1024
        best, since = 0, time.monotonic()
        used = process.usage()
        since_cpu = used.cpu if used is not None else 0.0
        since_waited = used.waited if used is not None else None
        told = 0.0
        stopped_since = None     # when the worker was first seen stopped (SIGSTOP)
        pause = process.pause    # the worker's own one-time work (``protocol.UNTIMED``)

        def stalled(seconds: float) -> None:
            """Part of the answer came and the rest does not: the worker stopped (SIGSTOP)
            halfway through writing it; the call's wall-clock deadline holds for the wait."""
            _stop_if_interrupted(process)
            if deadline is not None and deadline.wall is not None and seconds > deadline.wall:
                process.kill()
                raise Ended("hung", best, hung=True)
        while True:
            _stop_if_interrupted(process)
            process.flush()            # what the worker's pipe did not take of the request
            try:
                if process.poll(_POLL):
                    status, result = process.recv(stalled)
                    break
            except Ended:
                raise
            except Exception:      # the worker ended, or a target wrote into the pipe
                if process.ends_within(_ENDING):
                    raise Ended(process.ended(self.memory_mib), _last_position(process, best, top)) \
                        from None
                process.kill()         # alive: what was read was not its answer
                raise Ended("wrote into stagecheck's pipe",
                            _last_position(process, best, top)) from None
            if not process.is_alive():
                raise Ended(process.ended(self.memory_mib), _last_position(process, best, top))
            now = time.monotonic()
            used = process.usage()
            if since_waited is None and used is not None:
                since_waited = used.waited
            if used is not None and used.rss > limit:
                process.kill()
                raise Ended(f"exceeded {self.memory_mib} MiB", best)
            if forward and interrupt.requested() and now - told > _FORWARD_EVERY:
                told = now
                process.tell_interrupt()
            # a stopped worker (SIGSTOP, state T) makes no progress until something
            # continues it: its stop counts as CPU time, so the CPU deadline ends it
            stopped = used is not None and used.state in ("T", "t")
            stopped_since = (stopped_since or now) if stopped else None
            position = process.position
            limit_now = deadline
            if not process.paused_once and process.pause != pause:
                # the worker's import of torch started or ended inside the call: the
                # clock starts again, under the deadline of loading while it runs; once
                # per worker process (code under test that writes the flag gains at
                # most one deadline of loading)
                pause = process.pause
                process.paused_once = pause == TIMED
                since = now
                since_cpu = used.cpu if used is not None else since_cpu
                since_waited = used.waited if used is not None else since_waited
            if pause == UNTIMED and not process.paused_once and deadline is not None:
                limit_now = load_deadline()
            if best < position <= top:
                best, since = position, now
                since_cpu = used.cpu if used is not None else since_cpu
                since_waited = used.waited if used is not None else since_waited
            elif limit_now is not None and (
                    # the wall clock, less the time the worker waited for a CPU: busy
                    # CPUs slow a call down, they do not make it a hang
                    (limit_now.wall is not None and now - since - (
                        used.waited - since_waited if used is not None
                        and since_waited is not None else 0.0) > limit_now.wall) or
                    (limit_now.cpu is not None and used is not None
                     and used.cpu - since_cpu + (now - stopped_since if stopped_since
                                                 else 0.0) > limit_now.cpu)):
                trace_hang(now - since, used, since_cpu, since_waited, position, best,
                            limit_now)
                process.kill()
                raise Ended("hung", best, hung=True)
        if status == "error":
            raise WorkerError(f"stagecheck failed inside its worker: {printable(str(result))}",
                              "this is a bug in stagecheck; please report it with the "
                              "command line")
        if status == "usage":
            kind, problem, fix, _value = result
            raise getattr(errors, kind, StagecheckError)(printable(problem), printable(fix))
        return result

    # ---------------------------------------------------------------- commands
    def load(self, refs: list[TargetRef], schemas: dict | None = None,
             fresh: bool = True) -> list:
        """Load ``refs`` in a worker; ``Target``s (without ``func``) for the parent.

        ``schemas`` maps a schema spec to the parent's schema object (loaded once). A
        ``TargetLoadError`` (or ``SchemaError``) names the target (``target_index``).
        ``fresh=False`` reuses a live worker (mutants of one target, one after another).
        """
        self._refs = []
        if fresh or self._process is None or not self._process.is_alive():
            self.restart()
        try:
            answers = self._request("load", list(refs), deadline=load_deadline())
        except Ended as ended:
            self.restart()
            specs = ", ".join(r.spec for r in refs)
            if ended.hung:
                seconds = load_deadline()
                raise TargetLoadError.of(messages.TARGET_LOAD_HUNG, specs, cpu=seconds.cpu,
                                         wall=seconds.wall) from None
            raise TargetLoadError.of(messages.TARGET_LOAD_ENDED, specs,
                                     what=ended.what) from None
        self._refs = list(refs)
        out = []
        for position, (ref, answer) in enumerate(zip(refs, answers)):
            if answer[0] == "error":
                _, kind, problem, fix, _value = answer
                cls = getattr(errors, kind, TargetLoadError)
                # text the target's own code chose (an exception it raised) is escaped
                error = cls(printable(problem), printable(fix), value=ref.spec)
                error.target_index = position
                raise error
            _, schema_name, keywords, origin, shimmed, parameters = answer
            schema = (schemas or {}).get(ref.schema) or BUILTIN_SCHEMAS.get(schema_name) \
                or load_schema(ref.schema, guarded=True)     # the worker loaded it first
            # what reports say about the target: the commit and pinned spec the checker
            # resolved when it read the file, the names the worker took from shims
            out.append(Target(ref.spec, None, schema.profile(frozenset(keywords), parameters),
                              origin, ref,
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
        self._warm(options)
        out: list = []
        todo = list(batch)
        while todo:
            self._live()
            payload = (sides, todo, options, backend, sample_every)
            try:
                answer = _decoded(self._request("observe", payload, batch_deadline(options),
                                                top=_top(payload)), todo)
            except Ended as ended:
                return out + self._recover(ended, payload)
            out += answer
            # the worker ends its answer after a call it stopped at the time limit
            # (``_Worker._observe_batch``): the rest of the batch runs in a request of
            # its own
            todo = todo[len(answer):] if answer else []
        return out

    def _recover(self, ended: "Ended", payload, stop: bool = False
                 ) -> list[tuple[int, list[Observation]]]:
        """The answer to batch ``payload`` whose worker ended at ``ended.position``.

        ``stop``: the answer ends with the example whose call hung or ended its process
        (a search that stops at its first error needs nothing after it, and a target
        that ends every call would otherwise cost a new worker per example)."""
        sides, todo, options, backend, sample_every = payload
        deadline = batch_deadline(options)
        out: list = []
        while True:
            at = observed(ended.position)
            if at is None or at[0] >= len(todo) or at[1] not in sides:
                # before the first call, or a position no batch has: a target wrote into
                # the counter (its file stays open in the worker): blame the first example
                at = (0, sides[0])
            k, side_at = at
            self.restart()
            try:
                if k:   # the examples before the failing one ran fine: again, in one batch
                    again = (sides, todo[:k], options, backend, sample_every)
                    out += self._request("observe", again, deadline, top=_top(again))
                index, scenario = todo[k]
                kind = ("instrumented" if backend == "fast" and sample_every
                        and index % sample_every == 0 else backend)
                failed = self._failed(ended, side_at, index, scenario, options, kind, deadline)
                out.append((index, [failed if side == side_at else
                                    self._single(side, index, scenario, options, kind, deadline)
                                    for side in sides]))
                todo = todo[k + 1:]
                while todo and not stop:
                    self._live()
                    rest = (sides, todo, options, backend, sample_every)
                    answer = self._request("observe", rest, deadline, top=_top(rest))
                    out += answer
                    # an answer the worker ended at a call it stopped (see ``observe``)
                    todo = todo[len(answer):] if answer else []
                return _decoded(out, payload[1])
            except Ended as again:
                ended = again

    def _failed(self, ended: Ended, side: int, index: int, scenario: StagingScenario,
                options: RunOptions, backend: str, deadline: Deadline) -> Observation:
        """What the call that ended its worker did. A worker killed by a signal that comes
        from outside a process (``_OUTSIDE``: ``kill -9``, the out-of-memory killer,
        ``timeout``) may not have been the code's doing: the call runs again, alone, in a
        fresh worker, and what it does there is its observation; when it returns there,
        the first end is said to have come from outside (no finding against the code)."""
        if ended.hung:
            return Observation.of_hang()
        if ended.what not in _OUTSIDE:
            return Observation.of_crash(ended.what)
        again = self._single(side, index, scenario, options, backend, deadline)
        if again.crashed is None and not again.timed_out:
            note(messages.KILLED_FROM_OUTSIDE.format(what=ended.what, index=index))
        return again

    def _single(self, side: int, index: int, scenario: StagingScenario, options: RunOptions,
                backend: str, deadline: Deadline) -> Observation:
        self._live()
        try:
            ((_, (observation,)),) = self._request(
                "observe", ([side], [(index, scenario)], options, backend, 0), deadline,
                top=observing(0, side))
            return Observation.from_wire(observation, scenario)
        except Ended as ended:
            self.restart()
            return Observation.of_hang() if ended.hung else Observation.of_crash(ended.what)

    # ---------------------------------------------------------------- pipelined batches
    def post(self, payload) -> None:
        """Send batch ``payload`` without waiting (a dead worker shows when its answer is
        waited for; the batches it had in hand are then posted again)."""
        if self._process is None:
            self.restart()
        self._warm(payload[2])
        try:
            self._process.send(("observe", payload))
        except OSError:
            pass

    def pump(self) -> None:
        """Move the bytes of the batches in hand without waiting (``WorkerProcess.pump``)."""
        if self._process is not None:
            self._process.pump()

    def collect(self, payload) -> list[tuple[int, list[Observation]]]:
        """The answer to the oldest batch posted, ``payload``; it ends with an example
        whose call hung or ended its process (``_recover``'s ``stop``)."""
        try:
            return _decoded(self._answer(batch_deadline(payload[2]), top=_top(payload)),
                            payload[1])
        except Ended as ended:
            return self._recover(ended, payload, stop=True)

    def clone(self) -> "WorkerPool":
        """Another pool with the same targets loaded in a worker of its own."""
        other = WorkerPool(self.memory_mib)
        other._refs = list(self._refs)
        other.device = self.device
        other.restart()
        return other

    def call(self, module: str, name: str, *args, deadline: float | None = None,
             steps: int | None = None):
        """Run ``module.name(*args)`` in the worker (targets passed as ``target_arg(i)``).

        ``deadline``: seconds of the worker's CPU time (``WALL_FACTOR`` times that on the
        wall clock). With ``steps``, the deadline holds for each of up to ``steps`` units
        the call marks (``protocol.next_position``: a protocol run's operations), so a
        stopped or spinning operation is ended after its own deadline, not the whole
        call's. A worker that ends or passes ``deadline`` raises ``WorkerEnded`` (with
        what ended it), and the next request gets a fresh worker."""
        self._live()
        try:
            return self._request("call", (module, name, list(args)),
                                 Deadline.of(deadline), forward=True,
                                 top=BUSY + steps if steps else BUSY)
        except Ended as ended:
            self.restart()
            raise WorkerEnded(ended.what, hung=ended.hung, position=ended.position) from None


def _top(payload) -> int:
    """The last position batch ``payload`` has (its last example's last side)."""
    sides, batch = payload[0], payload[1]
    return observing(max(len(batch) - 1, 0), max(sides)) if sides else BUSY


def _last_position(process: WorkerProcess, best: int, top: int) -> int:
    """The position of the call a worker ended in: the counter as it ended (the worker
    may have run several calls since the last poll read it), where it lies ahead of
    ``best`` and within the request (``top``); else ``best``."""
    position = process.position
    return position if best < position <= top else best


def _stop_if_interrupted(process: WorkerProcess) -> None:
    """A signal asked the run to stop and its grace is over (or a second signal came):
    kill the worker and raise ``Interrupted``; the next request gets a fresh worker."""
    signum = interrupt.requested()
    if signum is None:
        return
    at = interrupt.since()
    if interrupt.urgent() or (at is not None and time.monotonic() - at > INTERRUPT_GRACE):
        process.kill()
        raise interrupt.Interrupted(signum)


def _decoded(answer: list, batch: list[tuple[int, StagingScenario]]
             ) -> list[tuple[int, list[Observation]]]:
    """Observations from the worker's answer to ``batch``; a side sent as None saw
    exactly what the first side saw, and gets the same ``Observation`` object; the inputs
    a call left as given come back from the batch's scenario (``Observation.to_wire``)."""
    scenarios = dict(batch)
    out = []
    for index, wires in answer:
        observations: list[Observation] = []
        for wire in wires:
            if wire is None:
                observations.append(observations[0])
            else:
                observations.append(wire if isinstance(wire, Observation)
                                    else Observation.from_wire(wire, scenarios.get(index)))
        out.append((index, observations))
    return out
