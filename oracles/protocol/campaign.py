"""The protocol campaign: step sequences through one or two targets, judged, shrunk.

``run_protocol_campaign(baseline, candidate, protocol, config)`` draws step sequences
(``generate.py``), runs each through both targets in isolated worker processes (every
sequence twice per target: every operation completing when issued, and under the
sequence's completion schedule: ``run.py``), judges the traces here (``judge.py``), stops
at the first error, shrinks its sequence to a shortest one that still shows it
(``shrink.py``), and returns a ``ProtocolResult`` whose findings carry their step sequence
(``Finding.scenario``) and the table of its run. ``baseline`` None: the candidate alone
against the protocol's invariants (spec mode). A target that hangs or ends its worker is a
finding (``step_outcome``), never an error of stagecheck; a target or protocol that cannot
be loaded is a ``StagecheckError`` (exit 2 in the command line).
"""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from typing import Any, Callable

from stagecheck.oracles import interrupt, messages
from stagecheck.oracles.errors import SchemaError, TargetLoadError
from stagecheck.oracles.options import ProtocolConfig
from stagecheck.oracles.protocol.generate import sample_sequence
from stagecheck.oracles.protocol.judge import judge_sequence
from stagecheck.oracles.protocol.load import load_protocol, protocol_spec
from stagecheck.oracles.protocol.ran import never_ran, note_forced, note_ran
from stagecheck.oracles.protocol.shrink import shrink_sequence
from stagecheck.oracles.schemas import load_schema
from stagecheck.oracles.targets import Target, target_ref
from stagecheck.oracles.worker import WorkerEnded, WorkerPool
from stagecheck.oracles.worker.deadlines import load_deadline
from stagecheck.oracles.worker.protocol import BUSY, RESTART
from stagecheck.spec.findings import ERROR, Finding, FindingsResult, sort_key
from stagecheck.spec.protocol import Protocol, Trace
from stagecheck.spec.protocol_invariants import END_OF_RUN, compare_runs
from stagecheck.spec.steps import StepSequence, unfold

__all__ = ["ProtocolConfig", "ProtocolResult", "check_sequence", "note_forced",
           "run_protocol_campaign", "stopped_step"]

RUN_MODULE = "stagecheck.oracles.protocol.run"
#: seconds each operation of a worker call gets on top of its limit (--timeout): stagecheck's
#: own work between two operations (the model's, the trace's) is counted in it
GRACE_SECONDS = 2.0


@dataclass
class ProtocolResult(FindingsResult):
    protocol: str
    baseline: str | None
    candidate: str
    config: ProtocolConfig
    findings: list[Finding] = field(default_factory=list)
    sequences_run: int = 0
    seconds: float = 0.0
    first_error_seconds: float | None = None
    shrink_evaluations: int = 0
    targets: list[dict] = field(default_factory=list)   # what each target was loaded as
    interrupted: str | None = None
    protocol_spec: str = ""     # how it loads again: a built-in name, or its file
    gates_forced: int = 0       # runs whose waits the CUDA model did not all see (the
    stalls: list[str] = field(default_factory=list)    # watchdog opened gates), and where
    steps_run: int = 0          # steps of the sequences drawn and run, and what they ran
    ran: set = field(default_factory=set)    # (operation | device work, name): ran.py
    never_ran: dict = field(default_factory=dict)   # ran.never_ran, once the search ended
    cut_short: int = 0          # sequences whose every run ended early (ran.note_ran)

    def pinned(self) -> tuple[str | None, str]:
        """``(baseline, candidate)`` as specs that load these very targets again from any
        folder and any later commit (``Target.pinned``: a revision at its commit, a file by
        its absolute path); as given before they were loaded."""
        given = {t["spec"]: t.get("resolved") or t["spec"] for t in self.targets}
        return (None if self.baseline is None else given.get(self.baseline, self.baseline),
                given.get(self.candidate, self.candidate))

    def loadable_protocol(self) -> str:
        """What ``--protocol`` and ``check_sequence`` take to run this protocol again."""
        return self.protocol_spec or self.protocol


def _stopped_trace(protocol: Protocol | None, seq: StepSequence, position: int,
                   what: str) -> Trace:
    """The trace of a run the checker ended (``what``: hung, or how its process ended):
    where the worker's position (``next_position``: the build, each operation, each
    observe, the end, of the run as scheduled and then of the run as meant) says it was,
    as the operation that did not return; else (no position) the run as a whole."""
    if protocol is None:
        return Trace(stopped=what)
    labels: list[tuple] = [(-1, "build")]
    try:
        for view in unfold(seq):
            for op in protocol.operations:
                try:
                    active = op.when(view) is True
                except Exception:
                    active = False
                if active:
                    labels.append((view.index, op.name))
            if protocol.observe is not None:
                labels.append((view.index, "observe"))
    except Exception:
        return Trace(stopped=what)
    last = labels[-1][0] if len(labels) > 1 else 0
    labels.append((last, END_OF_RUN))
    k = position - BUSY - 1
    if k < 0:
        return Trace(stopped=what)
    k %= len(labels)        # with the operations of its run before it, which returned
    return Trace(ops=[{"step": s, "op": n, "completion": "", "in_flight": "?", "hazards": [],
                       "result": None, "outcome": what if j == k else None}
                      for j, (s, n) in enumerate(labels[:k + 1])
                      if j == k or (s >= 0 and n not in ("observe", END_OF_RUN))])


class _Runner:
    """Worker pools holding no targets; sequences go to them by ``WorkerPool.call``."""

    def __init__(self, protocol_spec: str, refs: list, options: dict, jobs: int,
                 protocol: Protocol | None = None) -> None:
        self.spec, self.refs, self.options = protocol_spec, refs, options
        self.protocol = protocol        # where a run the checker ended was (``_stopped_trace``)
        self.pools = [WorkerPool() for _ in range(jobs)]
        for pool in self.pools:    # each worker's first use of a GPU: before its first call
            pool.device = "cuda" if options.get("device") == "cuda" else None
        self.executor = ThreadPoolExecutor(max_workers=jobs) if jobs > 1 else None

    def load(self) -> list:
        """Each target's code, loaded in every worker; a load error names its target
        (``target_index``: 0 the first given)."""
        answers = []
        for position, ref in enumerate(self.refs):
            try:
                if self.executor is None:
                    loaded = [self._load(pool, ref) for pool in self.pools]
                else:       # the workers start and import torch side by side
                    futures = [self.executor.submit(self._load, pool, ref)
                               for pool in self.pools]
                    loaded = [future.result() for future in futures]
            except Exception as exc:
                # the protocol file's own mistake (found as the worker loaded it) is said
                # of --protocol; anything else of the target being loaded
                if not str(getattr(exc, "problem", "")).startswith("protocol "):
                    exc.target_index = position
                raise
            answers.append(loaded[-1])
        return answers

    def _load(self, pool: WorkerPool, ref) -> Any:
        """``ref`` loaded in ``pool``'s worker, under the loading deadline (torch's import
        included); a load that ends the worker or hangs is the target's load error, as
        a staging run's is (``WorkerPool.load``)."""
        limit = load_deadline()
        try:
            (answer,) = pool.call(RUN_MODULE, "load_targets", self.spec, [ref],
                                  self.options, deadline=limit.cpu)
        except WorkerEnded as ended:
            if ended.hung:
                raise TargetLoadError.of(messages.TARGET_LOAD_HUNG, ref.spec, cpu=limit.cpu,
                                         wall=limit.wall) from None
            raise TargetLoadError.of(messages.TARGET_LOAD_ENDED, ref.spec,
                                     what=ended.what) from None
        return answer

    def _steps(self, count: int, refs: int) -> int:
        """Positions a batch of ``count`` sequences marks at most (``next_position``): per
        run of a target the build, each operation, each observe and the end."""
        return count * 2 * refs * (2 * self.options["ops"] + 2)

    def run(self, batch: list[tuple[int, StepSequence]], pool_index: int = 0,
            refs: list | None = None) -> list:
        """``[(index, [(meant, seen) per target])]``; a call that ends its worker or hangs
        is run again sequence by sequence, target by target, to find who did it."""
        refs = refs if refs is not None else self.refs
        pool = self.pools[pool_index]
        payload = [(i, s.to_dict()) for i, s in batch]
        try:
            # each operation under its own deadline (--timeout, and the grace): a stopped or
            # spinning one is ended after it, not after the whole batch's
            answer = pool.call(RUN_MODULE, "run_batch", self.spec, refs, payload,
                               self.options, deadline=self.options["timeout"] + GRACE_SECONDS,
                               steps=self._steps(len(batch), len(refs)))
            if answer and tuple(answer[-1]) == RESTART:
                # a sequence left threads running: the rest runs in a fresh worker
                pool.restart()
                answer = answer[:-1]
                rest = batch[len(answer):]
                if rest:
                    answer += self.run(rest, pool_index, refs)
            return answer
        except WorkerEnded as ended:
            if len(batch) == 1 and len(refs) == 1:
                what = "hung" if ended.hung else f"ended its process ({ended.what})"
                stopped = _stopped_trace(self.protocol, batch[0][1], ended.position,
                                         what).to_wire()
                return [(batch[0][0], [(stopped, stopped)])]
            if len(batch) == 1:              # which target did it
                sides = []
                for ref in refs:
                    ((_, (side,)),) = self.run(batch, pool_index, [ref])
                    sides.append(side)
                return [(batch[0][0], sides)]
            out = []                         # which sequence did it: the answer ends there
            for item in batch:
                (answer,) = self.run([item], pool_index, refs)
                out.append(answer)
                if any(Trace.from_wire(side[0]).stopped or Trace.from_wire(side[1]).stopped
                       for side in answer[1]):
                    break
            return out

    def stream(self, batches):
        """Answers to ``batches`` in order, ``jobs`` calls in flight."""
        if self.executor is None:
            for batch in batches:
                yield self.run(batch)
            return
        pending = []
        for k, batch in enumerate(batches):
            pending.append(self.executor.submit(self.run, batch, k % len(self.pools)))
            if len(pending) >= len(self.pools):
                yield pending.pop(0).result()
        for future in pending:
            yield future.result()

    def close(self) -> None:
        if self.executor is not None:
            self.executor.shutdown(wait=True)
        for pool in self.pools:
            pool.close()


def _staging_targets(protocol: Protocol, answers: list, specs: list[str]) -> list:
    """``Target``s (without functions) for a one-step protocol's judge."""
    if not protocol.staging:
        return []
    schema = load_schema(protocol.staging)
    return [Target(spec, None, schema.profile(frozenset(keywords)), spec)
            for spec, (_, keywords, _) in zip(specs, answers)]


def run_protocol_campaign(baseline: str | None, candidate: str, protocol: Any,
                          config: ProtocolConfig | None = None,
                          progress: Callable[..., None] | None = None) -> ProtocolResult:
    """Check ``candidate`` (against ``baseline``) across step sequences of ``protocol`` (a
    ``Protocol`` or what ``load_protocol`` takes); see the module doc."""
    config = config or ProtocolConfig()
    protocol = load_protocol(protocol)
    spec = protocol_spec(protocol)
    specs = [t for t in (baseline, candidate) if t is not None]
    refs = _refs(specs, config)
    labels = ["baseline", "candidate"] if baseline is not None else ["candidate"]
    options = {"device": config.device, "timeout": config.timeout,
               "busy_cycles": config.busy_cycles,
               "ops": _ops_per_sequence(protocol, config.steps)}
    result = ProtocolResult(protocol.name, baseline, candidate, config, protocol_spec=spec)
    started = time.perf_counter()
    runner = _Runner(spec, refs, options, config.jobs, protocol)
    search = None
    try:
        answers = runner.load()
        result.targets = [{"spec": s, "loaded": a[0], "resolved": r.resolved or s,
                           "sha": r.sha, "shims": list(a[2])}
                          for s, a, r in zip(specs, answers, refs)]
        staging = _staging_targets(protocol, answers, specs)
        search = _Search(protocol, labels, staging, runner, config, result, started,
                         progress, judge_sequence)
        search.run()
    except interrupt.Interrupted:   # a wait on a worker cut short by a signal (a second
        pass                        # one: at once): what was found so far stays
    finally:
        runner.close()
    result.findings = _without_shadowed(list(search.kept.values())) if search else []
    result.never_ran = never_ran(protocol, result)
    result.seconds = time.perf_counter() - started
    if interrupt.requested():
        result.interrupted = interrupt.signal_name(interrupt.requested())
    return result


def _refs(specs: list[str], config: ProtocolConfig) -> list:
    """How the workers load each target; a target that cannot be read is named by its
    position (``target_index``: 0 the first given)."""
    refs = []
    for position, target in enumerate(specs):
        try:
            refs.append(target_ref(target, None, config.shims))
        except Exception as exc:
            exc.target_index = position
            raise
    return refs


def check_sequence(baseline: str | None, candidate: str, protocol: Any,
                   sequence: StepSequence | dict,
                   config: ProtocolConfig | None = None) -> list[Finding]:
    """The findings one step ``sequence`` shows (a replay, a pasted pytest test)."""
    config = config or ProtocolConfig(sequences=1)
    protocol = load_protocol(protocol)
    seq = sequence if isinstance(sequence, StepSequence) else StepSequence.from_dict(sequence)
    specs = [t for t in (baseline, candidate) if t is not None]
    refs = _refs(specs, config)
    labels = ["baseline", "candidate"] if baseline is not None else ["candidate"]
    options = {"device": config.device, "timeout": config.timeout,
               "busy_cycles": config.busy_cycles, "ops": _ops_per_sequence(protocol)}
    runner = _Runner(protocol_spec(protocol), refs, options, 1, protocol)
    try:
        answers = runner.load()
        ((_, sides),) = runner.run([(0, seq)])
    finally:
        runner.close()
    return judge_sequence(protocol, seq, sides, labels,
                          _staging_targets(protocol, answers, specs))


def _without_shadowed(findings: list[Finding]) -> list[Finding]:
    """The findings in report order, less an info finding of a race that another
    sequence showed with an effect (the same invariant, side, memory and kind as an
    error)."""
    errors = {(f.invariant, f.side, f.field, f.extra.get("kind"))
              for f in findings if f.severity == ERROR}
    kept = [f for f in findings if f.severity == ERROR
            or (f.invariant, f.side, f.field, f.extra.get("kind")) not in errors]
    return sorted(kept, key=sort_key)


#: seconds one shrink of a sequence may take (each round of ``SHRINK_ROUNDS``): the
#: smallest sequence that still fails by then is kept
SHRINK_SECONDS = 60.0


def stopped_step(findings: list[Finding]) -> int | None:
    """The last step at which a run of ``findings``' sequence stopped (hung, or ended its
    process), where each stopped finding names it; None otherwise (nothing to cut)."""
    steps = [f.extra.get("step") for f in findings if f.extra.get("kind") in ("hang", "crash")]
    return max(steps) if steps and all(isinstance(k, int) for k in steps) else None
#: shrinks of one error's findings: a finding the first smallest sequence no longer shows
#: is shrunk on its own, then one more time
SHRINK_ROUNDS = 3


#: runs of a flagged sequence again, each compared with its first run (``_refuse_unsteady``)
UNSTEADY_RUNS = 3
#: the invariants that compare two runs (two targets', or a target's meant and scheduled
#: runs): a difference they find means nothing when one target's runs differ by themselves
_BETWEEN_RUNS = frozenset({"same_trace", "readback_as_written", "device_read_as_meant"})
#: ``compare_runs``' words for the two sides, said of one target's two runs
_RUNS = (("(candidate)", "(second run)"), ("(baseline)", "(first run)"),
         ("the baseline ", "the first run "), ("the candidate ", "the second run "),
         ("baseline ", "first run "), ("candidate ", "second run "))


def _ops_per_sequence(protocol: Protocol, steps: int | None = None) -> int:
    return ((steps or protocol.space.steps[1]) + 1) * len(protocol.operations)


class _Search:
    """One campaign's loop: draw, run, judge, keep the smallest example of each finding."""

    def __init__(self, protocol, labels, staging, runner, config, result, started, progress,
                 judge) -> None:
        self.protocol, self.labels, self.staging = protocol, labels, staging
        self.runner, self.config, self.result = runner, config, result
        self.started, self.progress, self.judge = started, progress, judge
        self.kept: dict[tuple, Finding] = {}
        self._sizes: dict[tuple, tuple] = {}

    def judged(self, seq: StepSequence, sides) -> list[Finding]:
        return self.judge(self.protocol, seq, sides, self.labels, self.staging)

    def keep(self, findings: list[Finding], seq: StepSequence, final: bool = False) -> None:
        if not findings:
            return                    # nothing to keep (a sequence's size takes a while)
        size = (-1,) if final else seq.size
        for f in findings:
            if f.key in self._sizes and not final and self._sizes[f.key] <= size:
                continue
            first = self.kept[f.key].examples_to_find if f.key in self.kept else \
                self.result.sequences_run
            self._sizes[f.key] = size
            self.kept[f.key] = replace(f, scenario=seq.to_dict(), examples_to_find=first)

    def run(self) -> None:
        config, total = self.config, self.config.sequences
        drawn: dict[int, StepSequence] = {}

        def batches():
            start, size = 0, 1
            while start < total:      # small batches first: an early bug shows at once
                batch = [(i, sample_sequence(self.protocol, config.seed, i, config.max_capacity,
                                             config.max_steps, config.steps))
                         for i in range(start, min(total, start + size))]
                drawn.update(batch)
                yield batch
                start, size = start + size, min(2 * size, config.batch)

        flagged = None
        answers = self.runner.stream(batches())
        try:
            for answer in answers:
                for index, sides in answer:
                    seq = drawn.pop(index)
                    self.result.sequences_run += 1
                    note_ran(self.result, len(seq.steps), sides)    # and note_forced's
                    findings = self.judged(seq, sides)
                    self.keep(findings, seq)
                    if any(f.severity == ERROR for f in findings):
                        flagged, flagged_sides = (seq, findings), sides
                        if self.result.first_error_seconds is None:
                            self.result.first_error_seconds = time.perf_counter() - self.started
                        break
                    self._tick()
                if flagged is not None or interrupt.requested():
                    break
        finally:
            answers.close()
        if flagged is not None and any(f.invariant in _BETWEEN_RUNS and f.severity == ERROR
                                       for f in flagged[1]):
            self._refuse_unsteady(flagged[0], flagged_sides)
        if flagged is not None and config.shrink and not interrupt.requested():
            self.shrink(*flagged)

    def _refuse_unsteady(self, seq: StepSequence, sides) -> None:
        """A difference between two runs on ``seq`` (the targets', or a target's meant and
        scheduled runs): run it again, and refuse it (``SchemaError``, exit 2) when a
        target's two meant runs differ (the protocol's code or the target's reads a clock,
        random numbers, addresses): never a finding then. ``UNSTEADY_RUNS`` runs again, so
        that code that changes now and then is caught more often than one run would."""
        again = [s for _, s in self.runner.run([(k, seq) for k in range(UNSTEADY_RUNS)])]
        for label, before, *after in zip(self.labels, sides, *again):
            moved = next((m for a in after if (m := compare_runs(
                self.protocol, seq, Trace.from_wire(before[0]), Trace.from_wire(a[0])))), [])
            if moved:
                said = moved[0].message
                for old, new in _RUNS:
                    said = said.replace(old, new)
                one = self.result.baseline == self.result.candidate     # a self-run
                raise SchemaError.of(messages.PROTOCOL_UNSTEADY, self.protocol.name,
                                     whose="" if one else f"the {label}'s ", difference=said)

    def _tick(self) -> None:
        if self.progress is not None:
            self.progress(self.result.sequences_run, self.config.sequences,
                          findings=len(self.kept))

    def shrink(self, seq: StepSequence, findings: list[Finding]) -> None:
        """Shrink ``seq`` while any of its error findings still shows; an error finding
        the smallest sequence no longer shows (a race whose divergence shows in fewer
        steps) is shrunk again on its own, up to ``SHRINK_ROUNDS`` rounds."""
        remaining = {f.key for f in findings if f.severity == ERROR}
        stopped = any(f.extra.get("kind") in ("hang", "crash") for f in findings)
        if self.progress is not None:      # the line says so: no sequence runs meanwhile
            self.progress(self.result.sequences_run, self.config.sequences,
                          findings=len(self.kept), phase=messages.PROGRESS_SHRINKING,
                          estimate=False)
        for _ in range(1 if stopped else SHRINK_ROUNDS):
            if not remaining or interrupt.requested():
                break
            shown = self._shrink_for(seq, remaining, stopped, stopped_step(findings))
            if not shown:
                break
            remaining -= shown
        if remaining:         # unshrunk: each keeps the sequence that found it
            self.keep([f for f in findings if f.key in remaining], seq, final=True)
        if self.progress is not None:
            self.progress(self.result.sequences_run, self.config.sequences,
                          findings=len(self.kept), phase="", estimate=True)

    def _shrink_for(self, seq: StepSequence, keys: set, stopped: bool,
                    reached: int | None = None) -> set:
        """Shrink ``seq`` while a finding of ``keys`` shows; keep those the smallest
        sequence shows; their keys."""
        def still_fails(candidates: list[StepSequence]) -> int | None:
            answer = self.runner.run(list(enumerate(candidates)))
            for position, sides in sorted(answer, key=lambda a: a[0]):
                note_forced(self.result, sides)        # the note counts every run
                if any(f.key in keys for f in self.judged(candidates[position], sides)):
                    return position
            return None

        until = time.perf_counter() + SHRINK_SECONDS

        def stop() -> bool:
            return bool(interrupt.requested()) or time.perf_counter() > until

        smallest, spent = shrink_sequence(self.protocol, seq, still_fails,
                                          max_evaluations=4 if stopped else 400, stop=stop,
                                          batch_size=1 if stopped else 8, reached=reached)
        self.result.shrink_evaluations += spent
        ((_, sides),) = self.runner.run([(0, smallest)])
        note_forced(self.result, sides)
        final = [f for f in self.judged(smallest, sides) if f.key in keys]
        self.keep(final, smallest, final=True)
        return {f.key for f in final}
