"""The campaign stage: search for examples on which the two targets differ.

Two streams of scenarios, in contract and out of contract, are drawn from the schema's
scenario space (``spec/space.py``). The targets run in a worker process (``Runner``);
the checker judges every observation here; the ``FindingsCollector`` keeps one finding
per distinct bug.

The batched engine (the default) draws each stream's scenarios from a seeded random
source, ``(seed, index)`` identifies every example, and sends them to the worker in
batches that run on fast numpy buffers. Every example whose fast run shows an error,
and one in ``SAMPLE_EVERY`` of the rest, is run again on the instrumented buffers
(write order, copy order, padded reads). A stream stops at its first error, which the
scenario shrinker (``oracles/shrink.py``) reduces to a smallest failing scenario.
A bounded hypothesis stream then looks for edge cases, with hypothesis's own shrinking.
The ``hypothesis`` engine (the pytest plugin's) draws both streams with hypothesis,
under its profiles and example database.

When the kernel oracle is on, each finding's kept scenario is run through it; error
findings not yet seen to reach the kernel get a short probe of further examples
(shrunk examples tend to be values the kernel does nothing with). With ``--kernel
always`` it also judges every example of every stream (``examples_kernel`` counts
them, ``kernel_seconds`` is what they cost). Each finding says
which engine found it (``extra["engine"]``).

SIGINT/SIGTERM (``oracles/interrupt.py``) stop a campaign between examples: each loop
(the batched streams, the hypothesis streams, the shrinker, the kernel-impact probe)
looks at the flag after every example and stops, the workers are stopped, and the
result holds what was found so far with ``interrupted`` set (no verdict).
"""

from __future__ import annotations

import inspect
import json
import time
from dataclasses import dataclass, field, replace
from typing import Callable

from stagecheck.oracles import interrupt, messages
from stagecheck.oracles._preload import preload_project_modules
from stagecheck.oracles.collect import FindingsCollector
from stagecheck.oracles.errors import StagecheckError, TargetLoadError, UsageError
from stagecheck.oracles.evaluate import judge, with_kernel_impact
from stagecheck.oracles.gcpause import fewer_collections
from stagecheck.oracles.observe.call import WALL_FACTOR
from stagecheck.oracles.options import CampaignConfig, RunOptions
from stagecheck.oracles.results import TargetPair
from stagecheck.oracles.runner import runner_for, side_of
from stagecheck.oracles.sample import sample_breach, sample_scenario
from stagecheck.oracles.shrink import BATCH as SHRINK_BATCH, MAX_EVALUATIONS, SIZE_PASSES, shrink
from stagecheck.oracles.targets import Target, load_target, target_from_callable
from stagecheck.oracles.worker.pool import GRACE_SECONDS
from stagecheck.spec import ERROR, Finding, StagingScenario
from stagecheck.spec.findings import FindingsResult
from stagecheck.spec.schema import StagingSchema
from stagecheck.spec.space import SMALL, draft_bound

__all__ = ["BATCH", "SAMPLE_EVERY", "CampaignResult", "resolved_bounds", "run_campaign",
           "same_schema"]

#: examples per batch sent to a worker (the first batches of a stream are smaller:
#: FIRST_BATCH, then twice as many each time)
BATCH = 128
#: ... and at most about this many slots (the sum of its scenarios' capacities): a batch
#: of full 1,024-slot scenarios is 8 examples, so the worker starts on the first one
#: soon and the checker's last judging, which nothing overlaps, is short
BATCH_SLOTS = 8192
FIRST_BATCH = 16
#: one example in this many (that the fast run passed) is run again instrumented
SAMPLE_EVERY = 16
#: examples of the hypothesis edge-case stream per stream, at most (about 4 ms each:
#: hypothesis draws value by value), by default one per 20 of the random stream
EDGE_EXAMPLES = 100
#: seconds the shrinking of a call that hangs or ends its process may take, its tries
#: together (each try that still hangs costs its deadline): at least this, and at least
#: ``STOPPED_SHRINK_TRIES`` deadlines of one try
STOPPED_SHRINK_SECONDS = 10.0
STOPPED_SHRINK_TRIES = 4
#: the time limit of one such try, as a fraction of ``--timeout`` (at least
#: ``STOPPED_TRY_FLOOR`` seconds, at most ``--timeout``): a candidate of the shrinker is
#: smaller than the example that hung at the full limit, and a correct call takes
#: milliseconds. The scenario the shrinker settles on is run once more at the full limit
#: (where its try had a shorter one): a try's hang is not taken for one at the limit
STOPPED_TRY_FRACTION = 0.1
STOPPED_TRY_FLOOR = 0.5
#: calls of one kind (hang, or ended its process) after which the out-of-contract stream
#: stops: each costs a deadline or a new worker, and the finding is the same. A kind the
#: in-contract stream already found (an error) stops it at the first
STOPPED_CALLS_PER_STREAM = 3
#: examples the kernel-impact probe draws at most after the search
IMPACT_PROBE_EXAMPLES = 60
STREAMS = ("in", "out")


@dataclass
class CampaignResult(TargetPair, FindingsResult):
    config: CampaignConfig
    findings: list[Finding] = field(default_factory=list)
    examples_in_contract: int = 0
    examples_out_of_contract: int = 0
    seconds: float = 0.0
    schema: StagingSchema | None = None    # what both targets were checked against
    schema_spec: str | None = None         # how to load it again (--schema), if not built in
    examples_instrumented: int = 0         # examples also run on instrumented buffers
    examples_edge: int = 0                 # examples of the hypothesis edge-case stream
    examples_kernel: int = 0               # examples the kernel oracle ran on (--kernel
                                           # always: every example; else kept findings)
    kernel_seconds: float = 0.0            # the time those kernel runs took
    first_error_seconds: float | None = None   # from the start of the campaign
    shrink_seconds: float = 0.0            # what shrinking the findings took, in all
    stream_notes: dict = field(default_factory=dict)   # stream ("in"/"out") -> why it
                                           # stopped before its budget (calls that hung
                                           # or ended their process); none: it did not
    interrupted: str | None = None   # the signal (e.g. "SIGINT") that stopped the run early:
                                     # then this is a partial result and has no verdict


def resolved_bounds(config: CampaignConfig, schema: StagingSchema) -> CampaignConfig:
    """``config`` with the bounds it leaves open (None) set to the schema's: the largest
    capacity and the longest draft list drawn."""
    changes = {}
    if config.max_capacity is None:
        changes["max_capacity"] = schema.max_capacity
    if config.max_drafts is None and draft_bound(schema) is not None:
        changes["max_drafts"] = draft_bound(schema)
    return replace(config, **changes) if changes else config


def same_schema(baseline: Target | None, candidate: Target):
    """The one schema both targets are checked against; a ``TargetLoadError`` if they
    were loaded against different ones."""
    if baseline is not None and baseline.schema.name != candidate.schema.name:
        raise TargetLoadError.of(messages.SCHEMAS_DIFFER, candidate.spec,
                                 baseline=baseline.spec, a=baseline.schema.name,
                                 b=candidate.schema.name)
    return candidate.schema


def _takes(progress, keyword: str) -> bool:
    """Whether a progress callback takes ``keyword`` (the CLI's takes ``findings``,
    ``phase`` and ``stalled``; a plain ``progress(stream, done, total)`` keeps working)."""
    if progress is None:
        return False
    try:
        return keyword in inspect.signature(progress).parameters
    except (TypeError, ValueError):
        return False


def stopped_kind(observations) -> str | None:
    """"hang" if a call of ``observations`` hung, "crash" if one ended its process,
    else None."""
    if any(o.timed_out for o in observations):
        return "hang"
    if any(o.crashed is not None for o in observations):
        return "crash"
    return None


#: how a stream's note names the calls of each kind, and the streams
_STOPPED_WORDS = {"hang": "hung", "crash": "ended its process"}
_STREAM_WORDS = {"in": "in-contract", "out": "out-of-contract"}


class _Search:
    """One campaign's state: the runner, the judge, the collector."""

    def __init__(self, baseline: Target | None, candidate: Target, config: CampaignConfig,
                 runner, result: CampaignResult, progress) -> None:
        self.baseline, self.candidate, self.config = baseline, candidate, config
        self.runner, self.result, self.progress = runner, result, progress
        self.progress_findings = _takes(progress, "findings")
        self.progress_stalled = _takes(progress, "stalled")
        #: seconds spent on calls that hung or ended their process, and on shrinking
        #: them: what the rest of the run will not take (for the progress estimate)
        self.stalled = 0.0
        #: whether the last example judged had a call that hung ("hang") or ended its
        #: process ("crash"); the kinds the in-contract search found as errors; the
        #: stopped calls each stream saw, by kind; keys of findings of such examples
        self.last_stopped: str | None = None
        self.error_stopped: set[str] = set()
        self.stopped_calls: dict[str, dict[str, int]] = {}
        self.stopped_keys: set[tuple] = set()
        self.phase = "random"      # then "edge": the hypothesis stream of the batched engine
        self.schema = candidate.schema
        self.sides = [side_of(runner, t) for t in (baseline, candidate) if t is not None]
        self.collector = FindingsCollector()
        self.examples = 0
        self.started = time.perf_counter()
        self.fast = RunOptions(**{**config.run.__dict__, "kernel": "off"})
        # --kernel always: the kernel oracle judges every example, not only kept findings
        self.kernel_every = (config.run.kernel == "always"
                             and candidate.schema.consumer is not None)

    def tick(self, stream: str, done: int, total: int) -> None:
        """Tell ``progress`` (with the findings so far, where it takes ``findings``)."""
        if self.progress is None:
            return
        if self.progress_findings:
            extra = {"stalled": self.stalled} if self.progress_stalled else {}
            self.progress(stream, done, total, findings=len(self.collector), phase=self.phase,
                          **extra)
        else:
            self.progress(stream, done, total)

    # ------------------------------------------------------------------ judging
    def observe(self, batch: list[tuple[int, StagingScenario]], backend: str):
        return self.runner.observe(self.sides, batch, self.fast, backend)

    def judge(self, s: StagingScenario, observations, kernel: bool = False
              ) -> list[Finding]:
        """The findings of one example; with ``kernel`` the kernel oracle's verdict too."""
        b = observations[-1]
        a = observations[0] if self.baseline is not None else None
        findings = judge(s, self.baseline, self.candidate, a, b)
        self.last_stopped = stopped_kind(observations)
        if self.last_stopped:
            # nothing a stopped call staged reaches the kernel: no kernel-impact probe
            self.stopped_keys.update(f.key for f in findings)
        if kernel:
            started = time.perf_counter()
            findings = with_kernel_impact(findings, s, self.candidate, a, b, self.config.run)
            self.result.examples_kernel += 1
            self.result.kernel_seconds += time.perf_counter() - started
        return findings

    def evaluate(self, s: StagingScenario, backend: str = "instrumented",
                 kernel: bool = False, options: RunOptions | None = None) -> list[Finding]:
        ((_, observations),) = self.runner.observe(self.sides, [(0, s)],
                                                   options or self.fast, backend)
        return self.judge(s, observations, kernel)

    def stop_after_stopped(self, stream: str, kind: str | None, done: int,
                           total: int) -> bool:
        """Count a call of ``kind`` that hung or ended its process in ``stream`` (out of
        contract: in contract it is an error, and the stream stops there anyway); True
        when the stream stops here (``STOPPED_CALLS_PER_STREAM`` of that kind, or the
        first of a kind the in-contract stream found), with a note in the result."""
        if kind is None or stream == "in":
            return False
        seen = self.stopped_calls.setdefault(stream, {})
        seen[kind] = seen.get(kind, 0) + 1
        limit = 1 if kind in self.error_stopped else STOPPED_CALLS_PER_STREAM
        if seen[kind] < limit or done >= total:
            return False
        why = (f"the in-contract stream already found a call that {_STOPPED_WORDS[kind]}, "
               "an error; each more costs a deadline or a new worker"
               if kind in self.error_stopped else "each costs a deadline or a new worker")
        self.result.stream_notes[stream] = messages.STREAM_STOPPED.format(
            stream=_STREAM_WORDS.get(stream, stream), done=done, total=total, count=seen[kind],
            what=_STOPPED_WORDS[kind], why=why)
        return True

    def record(self, findings: list[Finding], s: StagingScenario, engine: str,
               final: bool = False) -> list[Finding]:
        errors = [f for f in findings if f.severity == ERROR]
        if errors and self.result.first_error_seconds is None:
            self.result.first_error_seconds = time.perf_counter() - self.started
        self.collector.add(findings, s, self.examples, extra={"engine": engine}, final=final)
        return errors

    # ------------------------------------------------------------------ batched engine
    def scenario(self, stream: str, index: int) -> StagingScenario:
        c = self.config
        if stream == "in":
            return sample_scenario(self.schema, c.seed, index, c.max_capacity, c.max_drafts)
        return sample_breach(self.schema, c.seed, index, c.max_capacity, c.max_drafts)[1]

    def backend(self) -> str:
        """Fast buffers where they see what matters; instrumented ones where only the
        instrumentation can (the CPU model of asynchronous copies)."""
        return "instrumented" if self.config.run.deferred_copies else "fast"

    def batched_stream(self, stream: str) -> int:
        """Run one stream; the number of examples it ran.

        The worker(s) run the next batches while the checker judges this one; answers
        are judged in index order and the stream stops at its first error, so the
        examples run and the findings are the same for any ``jobs``.
        """
        total, backend = self.config.examples, self.backend()
        sample = SAMPLE_EVERY if backend == "fast" else 0
        drawn: dict[int, StagingScenario] = {}

        def batches():
            # small batches first (a bug that shows at once is judged at once), then BATCH
            start, size = 0, FIRST_BATCH
            while start < total:
                batch, slots = [], 0
                for i in range(start, min(total, start + size)):
                    s = self.scenario(stream, i)
                    batch.append((i, s))
                    slots += s.capacity
                    if slots >= BATCH_SLOTS:     # large scenarios: fewer per batch
                        break
                drawn.update(batch)
                yield batch
                start, size = start + len(batch), min(BATCH, 2 * size)

        done = 0
        flagged: tuple[StagingScenario, list[Finding], bool] | None = None
        stop = False
        # a call that hangs or ends its process ends its batch's answer (stream_batches):
        # in contract it is an error, where the stream stops anyway; out of contract the
        # stream goes on with the next batch, up to STOPPED_CALLS_PER_STREAM such calls
        # (stop_after_stopped). The examples counted are those judged.
        answers = self.runner.stream(self.sides, batches(), self.fast, backend, sample,
                                     self.config.jobs)
        waited = time.perf_counter()
        try:
            for answer in answers:
                wait = time.perf_counter() - waited
                for index, observations in answer:
                    s = drawn.pop(index)
                    self.examples += 1
                    done += 1
                    if sample and index % sample == 0:
                        self.result.examples_instrumented += 1
                    findings = self.judge(s, observations, self.kernel_every)
                    if self.last_stopped:
                        # the wait for this answer was that call's deadline (or a new
                        # worker): not the pace of the rest
                        self.stalled, wait = self.stalled + wait, 0.0
                    if any(f.severity == ERROR for f in findings):
                        flagged = (s, findings, bool(sample and index % sample == 0))
                        break
                    self.record(findings, s, "random")
                    self.tick(stream, done, total)
                    stop = self.stop_after_stopped(stream, self.last_stopped, done, total)
                    if stop:
                        break
                # a signal stops the stream once the batch in hand is judged: its examples
                # already ran in the worker, and judging them takes milliseconds (so a
                # signal that came while the first batch ran still leaves its findings)
                if flagged is not None or stop or interrupt.requested():
                    break
                waited = time.perf_counter()
        finally:
            answers.close()      # the workers finish what they hold, then are free again
        if flagged is not None:
            s, findings, instrumented = flagged
            kind = self.last_stopped
            if kind is not None:
                # a call that hung or ended its process: the instrumented run would cost
                # the same again and see the same; nothing the call staged is left to read
                self.error_stopped.add(kind)
            elif backend == "fast" and not instrumented:
                # the instrumented run sees the order of writes: it has the final word
                self.result.examples_instrumented += 1
                findings = self.evaluate(s, kernel=self.kernel_every) or findings
            self.record(findings, s, "random")
            self.tick(stream, done, total)
            self.shrink(s, findings)
        return done

    def shrink(self, s: StagingScenario, findings: list[Finding],
               engine: str = "random") -> None:
        """Shrink ``s`` for the error findings it showed: each kept at the smallest
        scenario that still shows it (a key the first shrunk scenario no longer shows
        is shrunk again from ``s``, on its own)."""
        started = time.perf_counter()
        try:
            keys = {f.key for f in findings if f.severity == ERROR}
            if any(f.extra.get("kind") in ("hang", "crash") for f in findings if f.key in keys):
                stalled = self.stalled
                self.shrink_stopped(s, findings, keys, engine)
                self.stalled = stalled + time.perf_counter() - started
            else:
                self.shrink_values(s, keys, engine)
        finally:
            self.result.shrink_seconds += time.perf_counter() - started

    def shrink_stopped(self, s: StagingScenario, findings: list[Finding], keys: set,
                       engine: str) -> None:
        """Shrink an example on which a call hung or ended its process, by size only
        (``SIZE_PASSES``: fewer requests and slots, its values as they were).

        Every try that still fails costs a deadline (or a new worker), so: each candidate
        runs once (no scenario twice, and the one settled on is not run again to judge
        it), one at a time, under a shorter time limit (``STOPPED_TRY_FRACTION``), within
        ``STOPPED_SHRINK_SECONDS`` in all; the scenario settled on is then run once at the
        full limit, where its try had a shorter one, and kept only if it still shows the
        findings there (else ``s`` is, which showed them at the full limit)."""
        full = self.config.run
        seconds = min(full.timeout, max(STOPPED_TRY_FLOOR, full.timeout * STOPPED_TRY_FRACTION))
        options = replace(self.fast, timeout=seconds)
        try_wall = seconds * full.steps * WALL_FACTOR + GRACE_SECONDS
        until = time.perf_counter() + max(STOPPED_SHRINK_SECONDS, STOPPED_SHRINK_TRIES * try_wall)
        tried: dict[str, list[Finding]] = {}
        shown: dict[str, list[Finding]] = {}     # candidates that still failed: findings

        def text(c: StagingScenario) -> str:
            return json.dumps(c.to_dict(), sort_keys=True, default=repr)

        def still_fails(candidates: list[StagingScenario]) -> int | None:
            for position, c in enumerate(candidates):
                key = text(c)
                if key not in tried:
                    tried[key] = self.evaluate(c, options=options)
                if any(f.key in keys for f in tried[key]):
                    shown[key] = tried[key]
                    return position
            return None

        def stop() -> bool:
            return bool(interrupt.requested()) or time.perf_counter() > until

        smallest, _ = shrink(self.schema, s, still_fails, max_evaluations=MAX_EVALUATIONS,
                             stop=stop, batch_size=1, passes=SIZE_PASSES)
        final = [f for f in findings if f.key in keys]
        if smallest is not s:
            found = shown[text(smallest)]
            if seconds < full.timeout and not interrupt.requested():
                found = self.evaluate(smallest)        # once, at the full limit
            if any(f.key in keys for f in found):
                final = [f for f in found if f.key in keys]
            else:            # not at the full limit: the example that hung there stays
                smallest = s
        self.record(final, smallest, engine, final=True)

    def shrink_values(self, s: StagingScenario, keys: set, engine: str) -> None:
        """``shrink`` of findings of calls that returned (or raised)."""
        budget, batch = MAX_EVALUATIONS, SHRINK_BATCH
        while keys and not interrupt.requested():
            backend = self.shrink_backend(s, keys)

            def still_fails(candidates: list[StagingScenario], keys=frozenset(keys),
                            backend=backend) -> int | None:
                results = self.observe(list(enumerate(candidates)), backend)
                for position, observations in sorted(results, key=lambda r: r[0]):
                    found = self.judge(candidates[position], observations)
                    if any(f.key in keys for f in found):
                        return position
                return None

            # a signal stops the shrinking; the smallest failing scenario so far is kept
            smallest, _ = shrink(self.schema, s, still_fails, max_evaluations=budget,
                                 stop=interrupt.requested, batch_size=batch)
            final = [f for f in self.evaluate(smallest) if f.key in keys]
            self.record(final, smallest, engine, final=True)
            shown = {f.key for f in final}
            if not shown:         # the example no longer fails (a flaky target): done
                return
            keys -= shown

    def shrink_backend(self, s: StagingScenario, keys: set) -> str:
        """The buffers the shrinker's candidates run on: the fast ones where they show
        every finding being shrunk on ``s`` itself (the findings of the values; their
        large candidates cost a fraction), else the instrumented ones (the order of
        writes). The scenario it settles on is run instrumented either way."""
        if self.backend() != "fast":
            return "instrumented"
        ((_, observations),) = self.observe([(0, s)], "fast")
        shown = {f.key for f in self.judge(s, observations)}
        return "fast" if keys <= shown else "instrumented"

    # ------------------------------------------------------------------ hypothesis engine
    def hypothesis_stream(self, stream: str, examples: int, database, derandomize: bool,
                          engine: str) -> int:
        # hypothesis only for this stream: a worker that imports this module (the symbolic
        # exploration) runs without it
        from hypothesis import HealthCheck, Phase, given, seed as hyp_seed, settings
        from hypothesis.errors import Flaky    # heavy: loaded with hypothesis itself
        preload_project_modules()     # hypothesis's constant pool: the same however run

        from stagecheck.oracles.generate import (out_of_contract_scenarios,  # hypothesis too
                                                 staging_scenarios)
        c = self.config
        strategy = (staging_scenarios(c.max_capacity, self.schema, c.max_drafts)
                    .map(lambda s: ("", s)) if stream == "in" else
                    out_of_contract_scenarios(c.max_capacity, self.schema, c.max_drafts))
        counter = [0]

        class _StreamStopped(BaseException):
            """``stop_after_stopped``: the stream ends here."""

        class _ErrorFound(Exception):
            def __init__(self, found: list[Finding], scenario: StagingScenario) -> None:
                super().__init__()
                self.found, self.scenario = found, scenario

        class _LargeErrorFound(BaseException):
            """An error on a scenario larger than the small band: hypothesis's shrinker
            would redraw hundreds of requests per step, so it is not asked (a
            BaseException passes through it); the scenario shrinker takes it. So is an
            error of a call that hung or ended its process: hypothesis would replay it,
            a deadline each time."""

            def __init__(self, found: list[Finding], scenario: StagingScenario) -> None:
                super().__init__()
                self.found, self.scenario = found, scenario

        @settings(max_examples=examples, deadline=None, database=database,
                  suppress_health_check=list(HealthCheck), report_multiple_bugs=False,
                  derandomize=derandomize,
                  phases=(Phase.explicit, Phase.reuse, Phase.generate, Phase.shrink))
        @hyp_seed(self.config.seed)
        @given(strategy)
        def probe(labeled):
            _, s = labeled
            counter[0] += 1
            self.examples += 1
            # a large example runs on the fast buffers (the instrumented ones cost ten
            # times as much per slot), and instrumented where it shows an error
            large = s.capacity > SMALL and self.backend() == "fast"
            findings = self.evaluate(s, backend="fast" if large else "instrumented",
                                     kernel=self.kernel_every)
            if large and any(f.severity == ERROR for f in findings) and not self.last_stopped:
                findings = self.evaluate(s, kernel=self.kernel_every) or findings
            stopped = self.last_stopped
            errors = self.record(findings, s, engine)
            interrupt.check()   # after every example (recorded): a signal stops the stream
            if errors:
                if stopped:
                    self.error_stopped.add(stopped)
                raise (_ErrorFound if s.capacity <= SMALL and not stopped
                       else _LargeErrorFound)(errors, s)
            self.tick(stream, counter[0], examples)
            if self.stop_after_stopped(stream, stopped, counter[0], examples):
                raise _StreamStopped()

        # one database key per (baseline, candidate, stream): campaigns never share examples
        probe.hypothesis.inner_test._hypothesis_internal_add_digest = repr(
            (self.result.baseline, self.result.candidate, stream, self.config.max_capacity,
             self.schema.name)).encode()
        try:
            probe()
        except _ErrorFound as found:   # the shrunk example, replayed by hypothesis, wins
            self.record(found.found, found.scenario, engine, final=True)
            self.shrink(found.scenario, found.found, engine)  # the smallest batch, too
        except _LargeErrorFound as found:
            self.shrink(found.scenario, found.found, engine)
        except _StreamStopped:         # what the stream recorded so far stays
            pass
        except interrupt.Interrupted:  # what the stream recorded so far stays
            pass
        except Flaky:       # a call that hung or was killed, then passed when replayed: the
            pass            # finding the stream recorded stays
        return counter[0]

    # ------------------------------------------------------------------ kernel impact
    def kernel_impact(self) -> None:
        """Run each kept finding's scenario through the kernel oracle; for an error finding
        not seen to reach the kernel, the other examples that showed it, then new ones."""
        if self.config.run.kernel == "off" or self.schema.consumer is None:
            return
        for f in self.collector.findings():
            if interrupt.requested():
                return
            if f.key in self.stopped_keys:
                continue       # a call that hung or ended its process staged nothing
            if f.kernel_impact is None and f.scenario is not None:
                s = StagingScenario.from_dict(f.scenario)
                self.collector.note_impact(g for g in self.evaluate(s, kernel=True)
                                           if g.key == f.key)
        pending = self.collector.open_impact() - self.stopped_keys
        for key in [f.key for f in self.collector.findings() if f.key in pending]:
            for s in self.collector.witnesses(key):       # other examples that showed it
                if key not in self.collector.open_impact() or interrupt.requested():
                    break
                self.collector.note_impact(g for g in self.evaluate(s, kernel=True)
                                           if g.key == key)
        open_keys = self.collector.open_impact() - self.stopped_keys
        for index in range(IMPACT_PROBE_EXAMPLES):
            if not open_keys & self.collector.open_impact() or interrupt.requested():
                break
            s = self.scenario("in", self.config.examples + index)
            found = self.evaluate(s, backend=self.backend(), kernel=True)
            if self.last_stopped:     # a target that hangs: each more costs a deadline
                break
            self.collector.note_impact(f for f in found if f.key in open_keys)
            # a difference the search did not keep (it stops at its first error) that
            # reaches the kernel is a finding too: the stream's first error may not
            reaching = [f for f in found if f.severity == ERROR and f.kernel_impact
                        and f.key not in self.collector]
            if reaching:      # kept, then shrunk as a stream's first error is
                self.record(reaching, s, "impact probe")
                self.shrink(s, reaching)


def edge_examples(config: CampaignConfig) -> int:
    """Examples per stream of the edge-case stream (the batched engine's, after both
    streams found no error)."""
    if config.engine != "batched":
        return 0
    return (config.edge_examples if config.edge_examples is not None
            else min(EDGE_EXAMPLES, config.examples // 20))


def progress_plan(config: CampaignConfig) -> list[tuple[str, int]]:
    """The parts of a campaign in the order it runs them, each with its planned number of
    examples, named as its progress calls name them (``"<phase> <stream>"``): the
    in-contract and out-of-contract streams, then the edge cases of each (for
    ``progress.PartsCount``: one count over the whole run)."""
    streams = STREAMS if config.out_of_contract else STREAMS[:1]
    edge = edge_examples(config)
    return ([(f"random {s}", config.examples) for s in streams]
            + [(f"edge {s}", edge) for s in streams if edge])


def _search(search: _Search, config: CampaignConfig, result: CampaignResult) -> None:
    """Both streams, the edge-case stream, the kernel-impact probe."""
    streams = STREAMS if config.out_of_contract else STREAMS[:1]
    for stream in streams:
        if config.engine == "hypothesis":
            done = search.hypothesis_stream(stream, config.examples, config.database,
                                            config.derandomize, "hypothesis")
        else:
            done = search.batched_stream(stream)
        if stream == "in":
            result.examples_in_contract = done
        else:
            result.examples_out_of_contract = done
        if interrupt.requested():
            return
    if config.engine == "batched" and not result.errors:
        edge = edge_examples(config)
        search.phase = "edge"
        for stream in streams:
            if interrupt.requested():
                return
            # a stream stopped for calls that hung or ended their process: its edge
            # cases would cost the same
            if edge and not any(f.severity == ERROR for f in search.collector.findings()) \
                    and stream not in result.stream_notes:
                result.examples_edge += search.hypothesis_stream(
                    stream, edge, None, True, "hypothesis")
    search.kernel_impact()


def _as_target(value, where: str) -> Target:
    """A ``Target`` from what ``run_campaign`` takes: a ``Target``, a target spec (a
    builtin name, ``module:function``, ``file.py::function``, ``git:REV:...``) or a
    staging function; bad input is one ``StagecheckError`` naming ``where``."""
    if isinstance(value, Target):
        return value
    try:
        if isinstance(value, str):
            return load_target(value)
        if callable(value):
            return target_from_callable(value)
    except StagecheckError as exc:
        raise exc.located(where) from None
    raise UsageError.of(messages.NOT_A_TARGET, value, kind=type(value).__name__).located(where)


def run_campaign(baseline: Target | str | Callable | None, candidate: Target | str | Callable,
                 config: CampaignConfig | None = None,
                 progress: Callable[[str, int, int], None] | None = None,
                 runner=None) -> CampaignResult:
    """Fuzz both targets (``baseline`` None: the candidate against the spec alone).

    Each target is a ``Target``, a target spec as the command line takes it
    (``run_campaign("legacy", "single-loop")``) or a staging function; ``config`` a
    ``CampaignConfig`` (None: the defaults). Bad input raises one ``StagecheckError``
    that names the argument.

    ``progress(stream, done, total)`` is called after each example (with
    ``findings=`` the distinct findings so far and ``phase=`` "random" or "edge", where
    it takes those keywords). ``runner`` runs
    the targets (default: a worker process of this campaign's own, or this process
    where ``config.isolated`` is False). A SIGINT/SIGTERM recorded by
    ``interrupt.install`` stops the search: the result is partial, ``interrupted`` set.
    """
    if runner is None:       # a runner holds loaded targets; without one, load what is given
        baseline = None if baseline is None else _as_target(baseline, "baseline")
        candidate = _as_target(candidate, "candidate")
    config = CampaignConfig() if config is None else config
    if not isinstance(config, CampaignConfig):
        raise UsageError.of(messages.NOT_A_CAMPAIGN_CONFIG, config,
                            kind=type(config).__name__).located("config")
    schema = same_schema(baseline, candidate)
    config = resolved_bounds(config or CampaignConfig(), schema)
    result = CampaignResult(baseline.spec if baseline else None, candidate.spec, config,
                            schema=schema)
    targets = [baseline, candidate] if baseline is not None else [candidate]
    own = runner is None
    if own:
        runner = runner_for(targets, config.isolated)
    search = _Search(baseline, candidate, config, runner, result, progress)
    try:
        with fewer_collections():
            _search(search, config, result)
    except interrupt.Interrupted:     # a wait on a worker cut short by a signal: what was
        pass                          # found so far stays (``interrupted`` is set below)
    except Exception as exc:      # stagecheck's own error: what was found so far rides on
        result.findings = search.collector.findings()    # it, for the caller to save
        result.seconds = time.perf_counter() - search.started
        exc.partial_result = result
        raise
    finally:
        if own:
            runner.close()
    result.findings = search.collector.findings()
    result.seconds = time.perf_counter() - search.started
    if interrupt.requested():   # the flag decides, whether or not an exception got through
        result.interrupted = interrupt.signal_name(interrupt.requested())
    return result

