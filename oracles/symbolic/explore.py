"""Symbolic differential check of real staging code with CrossHair: the exploration.

The staging functions run unchanged, on list models of the paired buffer
(``observe/listmodel.py``) instead of torch/numpy, which CrossHair cannot reason
about. The inputs of one call are built from CrossHair symbolic values
(``scenario.py``). Each path:

1. *symbolic phase* (traced): build the scenario, run both targets on fresh list
   models through ``observe``, and compare the two observations field by field. The
   comparisons fork the path, so CrossHair goes looking for inputs where the
   observations differ (the criterion ``crosshair diffbehavior`` uses);
2. *concrete phase*: realize the path's scenario and replay it on the real torch
   buffers with the fuzzer's own ``evaluate`` (the spec checks of each side plus
   ``compare``). Findings are taken from this replay only, so every finding is
   reproducible with ``stagecheck replay``;
3. *fidelity check*: the realized model observations must equal the torch ones
   (outcome, buffers, copies, writes, inputs afterwards). A path where they do not
   (the target used a numpy/torch operation the model does not offer, or CrossHair
   could not handle a value) is *lost*, not explored.

``run_symbolic`` raises ``SymbolicInconclusive`` when no path was explored or any
path was lost, instead of reporting "equivalent" (``crosshair diffbehavior`` prints
"No differences found" in that situation).
"""

from __future__ import annotations

import os
import struct
import tempfile
import threading
import time
from dataclasses import dataclass, field, replace
from typing import Callable

from stagecheck.oracles import interrupt
from stagecheck.oracles.campaign import same_schema
from stagecheck.oracles.collect import FindingsCollector
from stagecheck.oracles.compare import outcome
from stagecheck.oracles.evaluate import evaluate, judge
from stagecheck.oracles.observe import observe
from stagecheck.oracles.observe.listmodel import ListBackend, ModelUnsupported
from stagecheck.oracles.options import LIMITS, RunOptions, seconds, whole
from stagecheck.oracles.runner import runner_for, side_of
from stagecheck.oracles.symbolic import _crosshair as ch
from stagecheck.oracles.symbolic.result import LostPath, SymbolicResult, raise_if_inconclusive
from stagecheck.oracles.symbolic.scenario import symbolic_scenario
from stagecheck.oracles.symbolic.shrinking import (probe_kernel_impact,
                                                 shrink_symbolic_errors)
from stagecheck.oracles.targets import Target
from stagecheck.oracles.worker import WorkerEnded, target_arg
from stagecheck.spec.findings import ERROR
from stagecheck.spec.observation import Observation
from stagecheck.spec.scenario import StagingScenario

__all__ = ["Exploration", "PathCounter", "PathRecord", "explore", "model_backend",
           "observations_differ", "run_symbolic"]


def _machinery(exc: BaseException) -> bool:
    """CrossHair's own exceptions pass through; a value it cannot tolerate loses the path."""
    if ch.is_machinery(exc):
        return True
    if ch.suspected_intolerance(exc):
        raise ModelUnsupported(f"CrossHair value not tolerated: {type(exc).__name__}: "
                               f"{exc}") from exc
    return False


def model_backend(on_concretized: Callable[[str], None] | None = None) -> ListBackend:
    """The list-model backend the symbolic phase observes through."""
    return ListBackend(on_concretized, realize=ch.realize_values, machinery=_machinery)


def observations_differ(a: Observation, b: Observation) -> bool:
    """Field-by-field inequality; on symbolic values every comparison forks the path."""
    if a.exception_type != b.exception_type:
        return True
    if a.exception_message != b.exception_message:
        return True
    for buffer in sorted(set(a.cpu) & set(b.cpu)):
        if a.cpu[buffer] != b.cpu[buffer] or a.gpu[buffer] != b.gpu[buffer]:
            return True
        if ([(c.start, c.stop) for c in a.copies(buffer)]
                != [(c.start, c.stop) for c in b.copies(buffer)]):
            return True
    return a.inputs_after != b.inputs_after


def _short(value, limit: int = 120) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[:limit - 3] + "..."


def _fidelity_gaps(model: Observation, real: Observation) -> list[str]:
    """Where the realized list-model observation differs from the torch run.

    Exception messages are not compared: findings come from the torch run, and the
    model's messages only steer the search.
    """
    gaps = []
    if model.exception_type != real.exception_type:
        gaps.append(f"the list model {outcome(model)}, the torch run {outcome(real)}")
    for name, m, r in (("cpu", model.cpu, real.cpu), ("gpu", model.gpu, real.gpu)):
        for buffer in sorted(set(m) | set(r)):
            if m.get(buffer) != r.get(buffer):
                gaps.append(f"{name} {buffer}: list model {_short(m.get(buffer))}, torch run "
                            f"{_short(r.get(buffer))}")
    if model.events != real.events:
        gaps.append(f"events: list model {_short(model.events)}, torch run {_short(real.events)}")
    if model.inputs_after != real.inputs_after:
        gaps.append("the inputs after the call differ")
    if model.req_ids_reads != real.req_ids_reads:
        gaps.append("the reads of req_ids differ")
    return gaps


@dataclass
class PathRecord:
    """One explored path: its concrete scenario and the torch replay of both sides."""

    path: int
    seconds: float
    scenario: StagingScenario
    baseline: Observation
    candidate: Observation
    differ: bool
    concretized: bool


@dataclass
class Exploration:
    """What a symbolic exploration (in the worker that holds the targets) came back with."""

    records: list[PathRecord] = field(default_factory=list)
    lost: list[LostPath] = field(default_factory=list)
    timed_out: int = 0
    unsupported: int = 0
    ignored: int = 0
    exhausted: bool = False
    seconds: float = 0.0
    attempted: int = 0          # paths started (explored, lost, pruned, timed out)
    interrupted: bool = False   # a signal stopped the exploration (see ``interrupt``)


class PathCounter:
    """How many paths an exploration has attempted and explored so far, in a small file:
    the process that explores (a worker) writes it after each path, the checker reads it
    while the exploration runs, for its progress line."""

    FORMAT = "<qq"

    def __init__(self, path: str) -> None:
        self.path = path
        self._fd: int | None = None

    @classmethod
    def create(cls) -> "PathCounter":
        fd, path = tempfile.mkstemp(prefix="stagecheck-paths-")
        os.write(fd, struct.pack(cls.FORMAT, 0, 0))
        os.close(fd)
        return cls(path)

    def write(self, attempted: int, explored: int) -> None:
        try:
            if self._fd is None:
                self._fd = os.open(self.path, os.O_WRONLY)
            os.pwrite(self._fd, struct.pack(self.FORMAT, attempted, explored), 0)
        except OSError:         # progress is never worth a lost path
            pass

    def read(self) -> tuple[int, int]:
        """``(attempted, explored)`` so far (zeros when the file cannot be read)."""
        try:
            with open(self.path, "rb") as fh:
                return struct.unpack(self.FORMAT, fh.read(struct.calcsize(self.FORMAT)))
        except (OSError, struct.error):
            return 0, 0

    def close(self, remove: bool = False) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
        if remove:
            try:
                os.unlink(self.path)
            except OSError:
                pass


def explore(baseline: Target, candidate: Target, timeout: float, max_capacity: int,
            stop_at_first_error: bool, per_path_timeout: float | None,
            replay_timeout: float, max_paths: int | None = None,
            counter: str | None = None) -> Exploration:
    """Explore both targets symbolically for ``timeout`` seconds (wall clock), or for
    ``max_paths`` paths, in the process that holds them (a worker): the symbolic phase,
    the concrete torch replay of each path and the fidelity check. The checker judges
    the records. The interrupt flag (in a worker: the checker forwards its signal, see
    ``WorkerPool.call``) stops it after the current path, with the paths so far.
    ``counter``: a ``PathCounter`` file to keep up to date, path by path."""
    schema = same_schema(baseline, candidate)
    out = Exploration()
    replay = RunOptions(timeout=replay_timeout, kernel="off")
    started = time.monotonic()
    deadline = started + timeout
    stop = [False]
    stopped_early = [False]
    path_no = [0]
    counted = PathCounter(counter) if counter else None

    def lose(kind: str, reason: str, scenario: dict | None = None) -> None:
        if kind == "timeout":
            out.timed_out += 1
        else:
            out.unsupported += 1
        out.lost.append(LostPath(kind, reason, scenario))

    def run_path(space):
        if time.monotonic() > deadline or stop[0] or interrupt.requested():
            stopped_early[0] = True
            return ch.outcome("none", breakout=True)
        path_no[0] += 1
        if counted is not None:
            counted.write(path_no[0], len(out.records))
        concretized: list[str] = []
        backend = model_backend(concretized.append)
        s = None
        try:
            with ch.ResumedTracing():
                s = symbolic_scenario(space, schema, max_capacity)
                obs_a = observe(baseline, s, backend=backend, time_limited=False)
                obs_b = observe(candidate, s, backend=backend, time_limited=False)
                differ = observations_differ(obs_a, obs_b)
                ch.detach(space)
        except ch.IgnoreAttempt:
            out.ignored += 1
            raise
        except ModelUnsupported as exc:
            with ch.ResumedTracing():
                ch.detach(space)
            lose("unsupported", str(exc), ch.realizer(space)(s).to_dict() if s is not None
                 else None)
            return ch.outcome("unknown")
        except ch.PathTimeout:
            lose("timeout", "CrossHair's per-path time limit ran out")
            raise
        except ch.CrosshairUnsupported as exc:
            lose("crosshair", f"CrossHair does not support an operation: {exc}")
            raise
        except ch.UnexploredPath as exc:
            lose("crosshair", f"CrossHair could not decide the path ({type(exc).__name__})")
            raise
        except ch.NotDeterministic:
            lose("crosshair", "the path did not replay deterministically")
            return ch.outcome("unknown")
        # concrete phase (not traced)
        realize = ch.realizer(space)
        concrete: StagingScenario = realize(s)
        model_a, model_b = realize(obs_a), realize(obs_b)
        real_a = observe(baseline, concrete, replay)
        real_b = observe(candidate, concrete, replay)
        gaps = ([f"baseline {g}" for g in _fidelity_gaps(model_a, real_a)]
                + [f"candidate {g}" for g in _fidelity_gaps(model_b, real_b)])
        if gaps:
            lose("model-mismatch", "; ".join(gaps[:3]), concrete.to_dict())
            return ch.outcome("unknown")
        out.records.append(PathRecord(path_no[0], time.monotonic() - started, concrete,
                                      real_a, real_b, bool(differ), bool(concretized)))
        if counted is not None:
            counted.write(path_no[0], len(out.records))
        if stop_at_first_error and any(
                f.severity == ERROR for f in judge(concrete, baseline, candidate, real_a,
                                                   real_b)):
            stop[0] = True
        return ch.outcome("confirmed", breakout=stop[0] or bool(interrupt.requested()))

    try:
        exhausted = ch.explore(run_path, timeout,
                               per_path_timeout or max(2.0, min(10.0, timeout ** 0.5)),
                               max_iterations=max_paths)
    finally:
        if counted is not None:
            counted.close()
    out.exhausted = exhausted and not stopped_early[0]
    out.attempted = path_no[0]
    out.interrupted = bool(interrupt.requested())
    out.seconds = time.monotonic() - started
    return out


def run_symbolic(baseline: Target, candidate: Target, timeout: float | None = 30.0,
                 max_capacity: int = 4, *, max_paths: int | None = None,
                 stop_at_first_error: bool = False,
                 per_path_timeout: float | None = None, replay_timeout: float = 5.0,
                 strict: bool = True, runner=None, progress=None,
                 shrink: bool = True) -> SymbolicResult:
    """Explore both targets symbolically for ``timeout`` seconds (wall clock), or for
    ``max_paths`` paths (a path budget: two runs with the same budget explore the same
    paths; ``timeout`` None then means no wall-clock limit but the longest a run may take).

    The exploration runs in the worker that holds the targets (``runner``; by default
    a fresh one); the checker judges every explored path's torch replay here. Returns
    the distinct findings (the fuzzer's findings; the smallest scenario kept for each)
    and path counts. With ``strict`` (the default) raises ``SymbolicInconclusive`` when
    no path was explored or any path was lost to unsupported operations; the result
    rides on the exception. A SIGINT/SIGTERM stops the exploration after the current
    path: the result holds the paths so far, ``interrupted`` set (never inconclusive).
    ``progress(done, total, phase=..., ends_at=..., judged=...)`` (``Progress.update``)
    hears of the whole run as one count of paths: the paths explored so far while the
    worker explores (read from a ``PathCounter`` every quarter second; the total is the
    path budget, else the time budget's end is ``ends_at``), then of the paths judged
    here, one by one. ``shrink`` (the default): each error finding's example shrunk,
    and the kernel impact of an error looked for on every example that showed it
    (``shrinking.py``); off, each finding keeps its path's example (mutants: a kill
    needs no smaller one).
    """
    max_capacity = whole("max_capacity", max_capacity, 1, "4")
    if max_paths is not None:
        max_paths = whole("max_paths", max_paths, 1, "500")
    if timeout is None:
        timeout = LIMITS["timeout"] if max_paths is not None else 30.0
    timeout = seconds("timeout", timeout, "30")
    same_schema(baseline, candidate)
    result = SymbolicResult(baseline.spec, candidate.spec, max_capacity=max_capacity,
                            timeout=timeout, max_paths=max_paths)
    own = runner is None
    if own:
        runner = runner_for([baseline, candidate])
    try:
        sides = [side_of(runner, t) for t in (baseline, candidate)]
        counter = PathCounter.create() if progress is not None else None
        watching = _watch(counter, progress, max_paths, time.monotonic() + timeout) \
            if counter is not None else None
        try:
            found: Exploration = runner.call(
                "stagecheck.oracles.symbolic.explore", "explore", target_arg(sides[0]),
                target_arg(sides[1]), timeout, max_capacity, stop_at_first_error,
                per_path_timeout, replay_timeout, max_paths,
                counter.path if counter is not None else None, deadline=timeout * 2 + 60)
        except WorkerEnded as ended:
            found = Exploration(seconds=timeout)
            found.lost.append(LostPath("crash", f"a target ended the exploration's worker "
                                                f"({ended.what})"))
            found.unsupported += 1
        finally:
            if watching is not None:
                watching[0].set()
                watching[1].join(timeout=2.0)
            if counter is not None:
                counter.close(remove=True)
        collector = FindingsCollector()
        explored = len(found.records)
        for record in found.records:
            result.paths_explored += 1
            if progress is not None:
                progress(explored, explored, phase="judging", judged=result.paths_explored)
            result.paths_concretized += record.concretized
            result.paths_with_difference += record.differ
            findings = judge(record.scenario, baseline, candidate, record.baseline,
                             record.candidate)
            # every finding comes from the torch replay of the path's concrete input
            collector.add(findings, record.scenario, record.path,
                          extra={"oracle": "symbolic", "engine": "symbolic",
                                 "symbolic_path": record.path,
                                 "found_after_s": round(record.seconds, 3),
                                 "replayed_on": "torch (cpu)"})
            if result.first_counterexample_seconds is None and any(
                    f.severity == ERROR for f in findings):
                result.first_counterexample_seconds = record.seconds
        result.lost = found.lost
        result.paths_timed_out, result.paths_unsupported = found.timed_out, found.unsupported
        result.paths_ignored, result.exhausted = found.ignored, found.exhausted
        result.paths_attempted = found.attempted
        result.seconds = found.seconds
        if interrupt.requested():
            result.interrupted = interrupt.signal_name(interrupt.requested())
        if shrink and not result.interrupted:   # each counterexample at its smallest
            if progress is not None and any(f.severity == ERROR for f in collector.findings()):
                progress(explored, explored, phase="shrinking", judged=result.paths_explored)
            shrink_symbolic_errors(baseline, candidate, collector, replay_timeout, runner)
            probe_kernel_impact(baseline, candidate, collector, replay_timeout, runner)
            if interrupt.requested():   # a signal while shrinking: what it reached stays
                result.interrupted = interrupt.signal_name(interrupt.requested())
        if progress is not None:
            progress(explored, explored, phase="", judged=result.paths_explored)
        result.findings = collector.findings() if result.interrupted else _with_kernel_impact(
            baseline, candidate, collector.findings(), replay_timeout, runner)
    finally:
        if own:
            runner.close()
    if strict and not result.interrupted:
        raise_if_inconclusive(result)
    return result


def _watch(counter: PathCounter, progress, max_paths: int | None,
           ends_at: float) -> tuple[threading.Event, threading.Thread]:
    """Tell ``progress`` of the paths explored so far every quarter second, until the
    returned event is set (then join the returned thread)."""
    done = threading.Event()
    budget = {} if max_paths is not None else {"ends_at": ends_at}

    def tell() -> None:
        while True:
            _, explored = counter.read()
            progress(explored, max_paths, phase="exploring", **budget)
            if done.wait(0.25):
                return

    thread = threading.Thread(target=tell, name="stagecheck-symbolic-progress", daemon=True)
    thread.start()
    return done, thread


def _with_kernel_impact(baseline: Target, candidate: Target, findings: list,
                        timeout: float, runner) -> list:
    """Replay each kept finding's scenario once with the kernel oracle on (as the fuzzer
    does), to fill ``kernel_impact``. Exploration replays run with it off: per path it
    would cost more than the path itself."""
    options = RunOptions(timeout=timeout, kernel="auto")
    out = []
    for finding in findings:
        if finding.kernel_impact is None:
            try:
                again = evaluate(baseline, candidate,
                                 StagingScenario.from_dict(finding.scenario), options,
                                 runner).findings
            except Exception:   # the annotation is optional; the finding stands without it
                again = []
            impact = next((f.kernel_impact for f in again
                           if f.key == finding.key and f.kernel_impact is not None), None)
            if impact is not None:
                finding = replace(finding, kernel_impact=impact)
        out.append(finding)
    return out
