"""Which call a worker's end is blamed on (the parent's side; ``pool.py`` asks).

The shared position (``protocol.py``) names the call of target code a worker runs. A
worker that ends while it names one ended in that call, with one exception: code an
earlier call left behind (a thread or a ``threading.Timer`` that calls ``os._exit``,
``faulthandler.dump_traceback_later(..., exit=True)``, a signal sent later) ends the
worker whenever its time comes: between calls, or in a later call of another target.
So:

- a worker that ends while no call runs (found dead before a request, or ended before
  the request's first call) is ``WorkerDied``: exit 2, naming the targets whose calls ran
  in it (the one that did it, where only one did), never a silent fresh worker and a
  pass, never the next call's crash;
- a call that ended its worker after another target's calls ran in the same worker is
  run again alone in a fresh one (``Recovery._confirmed``): where it returns there, the
  end was not its doing, and that is ``WorkerDied`` too;
- a worker that, when the pool stops it, still holds what could end it later (``later.py``:
  a thread, a ``threading.Timer``, faulthandler's later dump with ``exit=True``) is
  ``WorkerDied`` as well (``left_behind``): the run's end must not decide the verdict by
  coming before the timer (``WorkerPool.close``).

``Recovery`` is the part of ``WorkerPool`` that answers a batch whose worker ended: it
runs the examples again around the call that ended it, and decides what that call did.
"""

from __future__ import annotations

from stagecheck.oracles import messages
from stagecheck.oracles.errors import StagecheckError
from stagecheck.oracles.options import RunOptions
from stagecheck.oracles.stdio import note
from stagecheck.oracles.worker.deadlines import Deadline, batch_deadline
from stagecheck.oracles.worker.process import Ended, WorkerProcess
from stagecheck.oracles.worker.protocol import BUSY, observed, observing
from stagecheck.spec.observation import Observation
from stagecheck.spec.scenario import StagingScenario

__all__ = ["OUTSIDE", "Recovery", "WROTE_PIPE", "WorkerDied", "decoded", "died", "last_position",
           "left_behind", "top_of"]

#: how a worker killed from outside ends (a fault such as SIGSEGV is the process's own)
OUTSIDE = frozenset(f"killed by {name}" for name in ("SIGKILL", "SIGTERM", "SIGHUP", "SIGQUIT"))
#: what ended a worker the parent killed, alive, for bytes a call wrote into its pipe
#: (the call's doing whatever the position then reads: a target that writes into every
#: descriptor writes into the counter's too)
WROTE_PIPE = "wrote into stagecheck's pipe"


class WorkerDied(StagecheckError):
    """A worker ended while no call of the code under test ran in it, or in a call that
    returns when run alone: something an earlier call (or loading) left behind ended it.
    No verdict (exit 2): the run lost a worker and cannot tell which call did it."""


def _after(specs: list[str], ran: bool) -> tuple[list[str], str, str]:
    """``specs`` once each, and the words ``after`` and ``who`` of the messages below."""
    specs = list(dict.fromkeys(specs))
    names = " and ".join(repr(spec) for spec in specs) or "no target"
    if not ran:
        return specs, f"after {names} had been loaded, before any call", "their loading"
    return specs, f"after calls of {names} had returned", (
        f"a call of {names}" if len(specs) == 1 else "one of those calls")


def died(what: str, specs: list[str], ran: bool, during: str = "") -> WorkerDied:
    """The error of a worker that ended as ``what`` says after calls of (``ran``), or only
    the loading of (``ran`` False), the targets ``specs``; ``during``: the call it ended
    in, which returns when run alone (else it ended while no call ran)."""
    specs, after, who = _after(specs, ran)
    return WorkerDied.of(messages.WORKER_DIED_BETWEEN_CALLS, specs[0] if specs else None,
                         what=what, after=after, who=who, during=during or
                         "while no call of the code under test was running in it")


def left_behind(left: list[str], specs: list[str], ran: bool) -> WorkerDied:
    """The error of a worker that, asked at ``stop`` (``later.py``), still holds ``left``:
    what the calls (``ran``) or the loading of the targets ``specs`` left that could end
    it later. Treated as an end between calls: whether it would end, and when, decided the
    exit code before (a run that ended first passed)."""
    specs, after, who = _after(specs, ran)
    return WorkerDied.of(messages.WORKER_LEFT_BEHIND, specs[0] if specs else None,
                         left=", ".join(left), after=after, who=who)


def top_of(payload) -> int:
    """The last position batch ``payload`` has (its last example's last side)."""
    sides, batch = payload[0], payload[1]
    return observing(max(len(batch) - 1, 0), max(sides)) if sides else BUSY


def last_position(process: WorkerProcess, best: int, top: int) -> int:
    """The position of the call a worker ended in: the counter as it ended (the worker
    may have run several calls since the last poll read it), where it lies ahead of
    ``best`` and within the request (``top``); else ``best``."""
    position = process.position
    return position if best < position <= top else best


class Recovery:
    """``WorkerPool``'s answer to a batch whose worker ended (``_recover``), and the
    decision of what the call at its position did (``_failed``, ``_single``,
    ``_confirmed``). It uses the pool's ``restart``, ``_live``, ``_request``, ``_refs``,
    ``_process``, ``memory_mib``, ``_ran`` (the sides whose calls returned in the
    current worker) and ``_earlier`` (the specs of targets loaded before ``_refs`` in the
    same worker whose calls returned there: ``load(fresh=False)``)."""

    _earlier: list[str]

    def _specs(self, sides) -> list[str]:
        """The specs of the loaded targets ``sides``."""
        return [self._refs[s].spec for s in sorted(sides)]

    def _died(self, what: str, sides, left: list[str] | None = None) -> WorkerDied:
        """``WorkerDied`` of the current worker, whose ``sides`` had calls that returned
        (``left``: it did not end, but holds what could end it later); it is ended (the
        next request starts a fresh one)."""
        if self._process is not None:
            self._process.kill()
        specs = [*self._earlier, *self._specs(sides)]
        ran = bool(specs)
        specs = specs or [ref.spec for ref in self._refs]
        return left_behind(left, specs, ran) if left else died(what, specs, ran=ran)

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
            if at is None and not ended.hung and ended.what not in OUTSIDE | {WROTE_PIPE}:
                # before the request's first call: no call of it ran (a position no batch
                # has, written by a target, is blamed on the first example below)
                raise self._died(ended.what, self._ran) from None
            if at is None or at[0] >= len(todo) or at[1] not in sides:
                # a position no batch has: a target wrote into the counter (its file
                # stays open in the worker): blame the first example
                at = (0, sides[0])
            k, side_at = at
            # the targets whose calls returned in the worker before this one
            ran = self._ran | set(sides[:sides.index(side_at)] if not k else sides)
            earlier = self._earlier         # the restart forgets them
            self.restart()
            try:
                if k:   # the examples before the failing one ran fine: again, in one batch
                    again = (sides, todo[:k], options, backend, sample_every)
                    out += self._request("observe", again, deadline, top=top_of(again))
                    self._ran.update(sides)
                index, scenario = todo[k]
                kind = ("instrumented" if backend == "fast" and sample_every
                        and index % sample_every == 0 else backend)
                failed = self._failed(ended, side_at, index, scenario, options, kind, deadline,
                                      ran, earlier)
                out.append((index, [failed if side == side_at else
                                    self._single(side, index, scenario, options, kind, deadline)
                                    for side in sides]))
                todo = todo[k + 1:]
                while todo and not stop:
                    self._live()
                    rest = (sides, todo, options, backend, sample_every)
                    answer = self._request("observe", rest, deadline, top=top_of(rest))
                    self._ran.update(sides)
                    out += answer
                    # an answer the worker ended at a call it stopped (see ``observe``)
                    todo = todo[len(answer):] if answer else []
                return decoded(out, payload[1])
            except Ended as again:
                ended = again

    def _failed(self, ended: Ended, side: int, index: int, scenario: StagingScenario,
                options: RunOptions, backend: str, deadline: Deadline,
                ran: set[int], earlier: list[str]) -> Observation:
        """What the call that ended its worker did. A worker killed by a signal that comes
        from outside a process (``OUTSIDE``: ``kill -9``, the out-of-memory killer,
        ``timeout``) may not have been the code's doing: the call runs again, alone, in a
        fresh worker, and what it does there is its observation; when it returns there,
        the first end is said to have come from outside (no finding against the code).
        Any other end after calls of other targets returned in that worker (``ran``: the
        sides whose calls did; ``earlier``: the specs of targets loaded there before these
        whose calls did) is run again alone too (``_confirmed``)."""
        if ended.hung:
            return Observation.of_hang()
        if ended.what not in OUTSIDE:
            if ran - {side} or earlier:
                return self._confirmed(ended.what, [*earlier, *self._specs(ran)], side, index,
                                       scenario, options, backend, deadline)
            return Observation.of_crash(ended.what)
        again = self._single(side, index, scenario, options, backend, deadline)
        if again.crashed is None and not again.timed_out:
            note(messages.KILLED_FROM_OUTSIDE.format(what=ended.what, index=index))
        return again

    def _single(self, side: int, index: int, scenario: StagingScenario, options: RunOptions,
                backend: str, deadline: Deadline) -> Observation:
        self._live()
        ran, earlier = set(self._ran), self._earlier
        try:
            ((_, (observation,)),) = self._request(
                "observe", ([side], [(index, scenario)], options, backend, 0), deadline,
                top=observing(0, side))
            self._ran.add(side)
            return Observation.from_wire(observation, scenario)
        except Ended as ended:
            if ended.hung or not (ran - {side} or earlier) or ended.what in OUTSIDE:
                self.restart()
                return Observation.of_hang() if ended.hung else Observation.of_crash(ended.what)
            return self._confirmed(ended.what, [*earlier, *self._specs(ran)], side, index,
                                   scenario, options, backend, deadline)

    def _confirmed(self, what: str, specs: list[str], side: int, index: int,
                   scenario: StagingScenario, options: RunOptions, backend: str,
                   deadline: Deadline) -> Observation:
        """A call of ``side`` ended its worker (``what``) after calls of the targets
        ``specs`` (another among them) had returned there: it runs again alone in a fresh
        worker. Its end there is its own observation; where it returns, something those
        calls left behind ended the first worker (``WorkerDied``, naming their targets)."""
        self.restart()
        again = self._single(side, index, scenario, options, backend, deadline)
        if again.crashed is None and not again.timed_out:
            raise died(what, specs, ran=True,
                       during=f"in a call of {self._refs[side].spec!r} that returns when "
                       "run alone in a fresh worker")
        return again


def decoded(answer: list, batch: list[tuple[int, StagingScenario]]
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
