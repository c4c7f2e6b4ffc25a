"""The parent's pool of one worker: load targets, run batches and calls, restart.

``WorkerPool`` sends the worker its commands and waits for the answers under the
parent's deadlines; a call that ends its worker or hangs is that call's observation
(``Observation.of_crash`` / ``of_hang``), or ``WorkerEnded`` for a ``call``. When and
how a worker is replaced is decided in one place, ``WorkerPool.restart``; what a worker's
end is blamed on, and the runs again that decide it, in ``blame.py`` (``Recovery``).
"""

from __future__ import annotations

import time

from stagecheck.oracles import errors, interrupt, messages
from stagecheck.oracles.errors import StagecheckError, TargetLoadError
from stagecheck.oracles.options import RunOptions
from stagecheck.oracles.schemas import load_schema
from stagecheck.oracles.targets import Target, TargetRef
from stagecheck.oracles.text import printable
# Deadline, GRACE_SECONDS, LOAD_SECONDS and load_deadline: named in __all__ (their home is
# deadlines.py; protocol campaigns take load_deadline from here)
from stagecheck.oracles.worker.blame import (WROTE_PIPE, Recovery, WorkerDied, decoded,
                                             last_position, top_of)
from stagecheck.oracles.worker.deadlines import (GRACE_SECONDS, LOAD_SECONDS, Deadline,
                                                 batch_deadline, load_deadline, trace_hang)
from stagecheck.oracles.worker.process import Ended, WorkerProcess, take_spare
from stagecheck.oracles.worker.protocol import (BUSY, DEFAULT_MEMORY_MIB, TIMED, UNTIMED,
                                                default_memory_mib)
from stagecheck.spec.observation import Observation
from stagecheck.spec.scenario import StagingScenario
from stagecheck.spec.schemas import BUILTIN_SCHEMAS

__all__ = ["DEFAULT_MEMORY_MIB", "Deadline", "GRACE_SECONDS", "INTERRUPT_GRACE", "LOAD_SECONDS",
           "WorkerDied", "WorkerEnded", "WorkerError", "WorkerPool", "default_memory_mib",
           "load_deadline"]

#: seconds a wait on a worker goes on after a signal asked the run to stop (SIGINT,
#: SIGTERM): then the worker is killed and the run ends as interrupted
INTERRUPT_GRACE = 4.5
_POLL = 0.02
#: seconds a worker whose pipe broke may take to end before it counts as alive (then what
#: broke the pipe was bytes a target wrote into it)
_ENDING = 0.5
#: seconds between two reminders of an interrupt to a worker busy with a ``call``
_FORWARD_EVERY = 0.25
#: seconds of CPU time a worker may take to answer ``stop`` (``WALL_FACTOR`` times that on
#: the wall clock): it lists its threads, in a millisecond
STOP_SECONDS = 2.0


class WorkerError(StagecheckError):
    """stagecheck's own machinery failed inside a worker (not the code under test)."""


class WorkerEnded(Exception):
    """A ``call`` in a worker ended its process or passed its deadline (the code under
    test did it: a finding of the command that asked, not an error of stagecheck)."""

    def __init__(self, what: str, hung: bool = False, position: int = 0) -> None:
        super().__init__(what)
        #: ``position``: the last position the call marked (``protocol.next_position``)
        self.what, self.hung, self.position = what, hung, position


class WorkerPool(Recovery):
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
        #: the sides whose calls returned in the current worker (``blame.py``), and the
        #: specs of the targets loaded there before ``_refs`` whose calls returned there
        #: (``load(fresh=False)``: the sides' indices then name other targets)
        self._ran: set[int] = set()
        self._earlier: list[str] = []
        #: the device each fresh worker makes its first use of when it starts (``_warm``)
        self.device: str | None = None

    # ---------------------------------------------------------------- the restart policy
    def restart(self) -> WorkerProcess:
        """Kill the worker (if any) and start a fresh one with the same targets loaded.

        The restart policy, all of it: a worker whose call ended its process, hung
        (killed at its deadline) or wrote into the pipe is replaced here before the
        pool's next request, and so is one the parent ended (an interrupt); one found dead
        on its own when a request is due is ``WorkerDied``, never replaced in silence
        (``_live``: something a call left behind ended it).
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
        self._ran, self._earlier = set(), []
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
        """The worker, or a fresh one where there is none or the parent ended it; one that
        ended on its own while no call ran is ``WorkerDied`` (``blame.py``)."""
        if self._process is None or self._process.killed:
            return self.restart()
        if not self._process.is_alive():
            raise self._died(self._process.ended(self.memory_mib), self._ran)
        return self._process

    def discard(self) -> None:
        """Kill the worker, beyond use; the next request starts a fresh one."""
        if self._process is not None:
            self._process.kill()
            self._process = None

    def close(self) -> None:
        """End the worker. One that ended on its own after calls returned in it, and
        before the pool was done with it, is ``WorkerDied`` (raised once it is ended); so is
        one whose code under test left in it what could end it later (``_left_behind``)."""
        process = self._process
        if process is None:
            return
        try:
            if (self._ran or self._earlier) and not process.killed:
                self._left_behind()
        finally:
            self._process = None
            try:
                process.send(("stop", None))
            except OSError:
                pass
            process.kill()

    def _left_behind(self) -> None:
        """Raise ``WorkerDied`` where the worker, which ran calls, ended on its own or,
        asked at ``stop``, holds what the code under test left that could end it later
        (``later.py``: a thread still running, a ``threading.Timer``, a later dump of
        faulthandler that exits). Not asked while a signal stops the run or a request is
        in hand (the run did not finish: no verdict either way)."""
        process = self._process
        if not process.is_alive():
            raise self._died(process.ended(self.memory_mib), self._ran)
        if interrupt.requested() or process.requests != process.answers:
            return
        try:
            left = self._request("stop", True, Deadline.of(STOP_SECONDS))
        except Ended as ended:       # it ended now, or did not answer: no call was running
            raise self._died(messages.WORKER_STOP_UNANSWERED.format(seconds=STOP_SECONDS)
                             if ended.hung else ended.what, self._ran) from None
        except interrupt.Interrupted:
            return
        if left:
            raise self._died("", self._ran, left=[printable(str(item)) for item in left])

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
                    raise _ended(process, self.memory_mib, last_position(process, best, top),
                                 told) from None
                process.kill()         # alive: what was read was not its answer
                raise Ended(WROTE_PIPE,
                            last_position(process, best, top)) from None
            if not process.is_alive():
                raise _ended(process, self.memory_mib, last_position(process, best, top), told)
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
        if fresh or self._process is None or not self._process.is_alive():
            self._refs = []
            self.restart()
        else:       # the calls of the targets loaded before stay this worker's history
            self._earlier = [*self._earlier, *self._specs(self._ran)]
            self._ran, self._refs = set(), []
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
                answer = decoded(self._request("observe", payload, batch_deadline(options),
                                                top=top_of(payload)), todo)
            except Ended as ended:
                return out + self._recover(ended, payload)
            self._ran.update(sides)
            out += answer
            # the worker ends its answer after a call it stopped at the time limit
            # (``_Worker._observe_batch``): the rest of the batch runs in a request of
            # its own
            todo = todo[len(answer):] if answer else []
        return out

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
            answer = decoded(self._answer(batch_deadline(payload[2]), top=top_of(payload)),
                              payload[1])
        except Ended as ended:
            return self._recover(ended, payload, stop=True)
        self._ran.update(payload[0])
        return answer

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


def _ended(process: WorkerProcess, memory_mib: int, position: int, told: float) -> Exception:
    """How the worker's end is raised: ``Ended``, or ``interrupt.Interrupted`` where the
    checker had passed an interrupt on and that signal ended it (a worker still starting,
    before its handler: the interrupt's doing, never the code's)."""
    what = process.ended(memory_mib)
    signum = interrupt.requested()
    if told and signum is not None and process.killed_by(interrupt.FORWARDED):
        return interrupt.Interrupted(signum)
    return Ended(what, position)


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
