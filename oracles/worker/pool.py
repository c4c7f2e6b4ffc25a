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
from stagecheck.oracles.targets import Target, TargetRef
from stagecheck.oracles.worker.process import Ended, WorkerProcess
from stagecheck.oracles.worker.protocol import observed
from stagecheck.spec.observation import Observation
from stagecheck.spec.scenario import StagingScenario
from stagecheck.spec.schemas import BUILTIN_SCHEMAS

__all__ = ["DEFAULT_MEMORY_MIB", "GRACE_SECONDS", "LOAD_SECONDS", "WorkerEnded", "WorkerError",
           "WorkerPool"]

#: address-space limit of a worker (a target that allocates past it is reported)
DEFAULT_MEMORY_MIB = 4096
#: seconds a stuck call gets on top of its time limit before its worker is killed
GRACE_SECONDS = 1.0
#: seconds loading the targets may take in a worker (imports included)
LOAD_SECONDS = 120.0
_POLL = 0.02
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


class WorkerPool:
    """Workers that run the code under test for the parent (the checker).

    ``load`` loads the targets in a worker and gives the parent ``Target``s without
    their functions; ``observe`` runs a batch of scenarios and gives back one
    observation per side, whatever the targets do to their process.
    """

    def __init__(self, memory_mib: int = DEFAULT_MEMORY_MIB) -> None:
        self.memory_mib = memory_mib
        self._process: WorkerProcess | None = None
        self._refs: list[TargetRef] = []
        self.restarts = 0

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
        self._process = WorkerProcess(self.memory_mib)
        if self._refs:
            self._request("load", self._refs, deadline=LOAD_SECONDS)
        return self._process

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

    def _request(self, command: str, payload, deadline: float | None = None,
                 forward: bool = False):
        """Send one command and wait for its answer; ``deadline`` seconds per position
        (``forward``: see ``_answer``)."""
        process = self._process
        try:
            process.send((command, payload))
        except OSError:
            raise Ended(process.ended(self.memory_mib), process.position) from None
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
                    raise Ended(process.ended(self.memory_mib), position) from None
                process.kill()         # alive: what was read was not its answer
                raise Ended("wrote into stagecheck's pipe", position) from None
            if not process.is_alive():
                raise Ended(process.ended(self.memory_mib), process.position)
            now = time.monotonic()
            if forward and interrupt.requested() and now - told > _FORWARD_EVERY:
                told = now
                process.tell_interrupt()
            position = process.position
            if position != last:
                last, since = position, now
            elif deadline is not None and position and now - since > deadline:
                process.kill()
                raise Ended("hung", position, hung=True)
        if status == "error":
            raise WorkerError(f"stagecheck failed inside its worker: {result}",
                              "this is a bug in stagecheck; please report it with the "
                              "command line")
        if status == "usage":
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
        self._refs = []
        if fresh or self._process is None or not self._process.is_alive():
            self.restart()
        try:
            answers = self._request("load", list(refs), deadline=LOAD_SECONDS)
        except Ended as ended:
            self.restart()
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
        self._live()
        payload = (sides, list(batch), options, backend, sample_every)
        try:
            return _decoded(self._request("observe", payload, _deadline(options)))
        except Ended as ended:
            return self._recover(ended, payload)

    def _recover(self, ended: "Ended", payload, stop: bool = False
                 ) -> list[tuple[int, list[Observation]]]:
        """The answer to batch ``payload`` whose worker ended at ``ended.position``.

        ``stop``: the answer ends with the example whose call hung or ended its process
        (a search that stops at its first error needs nothing after it, and a target
        that ends every call would otherwise cost a new worker per example)."""
        sides, todo, options, backend, sample_every = payload
        deadline = _deadline(options)
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
                self._live()
                out += self._request("observe", (sides, todo, options, backend, sample_every),
                                     deadline)
                return _decoded(out)
            except Ended as again:
                ended = again

    def _single(self, side: int, index: int, scenario: StagingScenario, options: RunOptions,
                backend: str, deadline: float) -> Observation:
        self._live()
        try:
            ((_, (observation,)),) = self._request(
                "observe", ([side], [(index, scenario)], options, backend, 0), deadline)
            return Observation.from_wire(observation)
        except Ended as ended:
            self.restart()
            return Observation.of_hang() if ended.hung else Observation.of_crash(ended.what)

    # ---------------------------------------------------------------- pipelined batches
    def post(self, payload) -> None:
        """Send batch ``payload`` without waiting (a dead worker shows when its answer is
        waited for; the batches it had in hand are then posted again)."""
        if self._process is None:
            self.restart()
        try:
            self._process.send(("observe", payload))
        except OSError:
            pass

    def collect(self, payload) -> list[tuple[int, list[Observation]]]:
        """The answer to the oldest batch posted, ``payload``; it ends with an example
        whose call hung or ended its process (``_recover``'s ``stop``)."""
        try:
            return _decoded(self._answer(_deadline(payload[2])))
        except Ended as ended:
            return self._recover(ended, payload, stop=True)

    def clone(self) -> "WorkerPool":
        """Another pool with the same targets loaded in a worker of its own."""
        other = WorkerPool(self.memory_mib)
        other._refs = list(self._refs)
        other.restart()
        return other

    def call(self, module: str, name: str, *args, deadline: float | None = None):
        """Run ``module.name(*args)`` in the worker (targets passed as ``target_arg(i)``).

        A worker that ends or passes ``deadline`` raises ``WorkerEnded`` (with what ended
        it), and the next request gets a fresh worker."""
        self._live()
        try:
            return self._request("call", (module, name, list(args)), deadline, forward=True)
        except Ended as ended:
            self.restart()
            raise WorkerEnded(ended.what, hung=ended.hung) from None


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
