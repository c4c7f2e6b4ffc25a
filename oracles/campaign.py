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
scenario shrinker (``oracles/shrink.py``) reduces to a smallest failing scenario
(``oracles/campaign_shrinking.py``). A bounded hypothesis stream then looks for edge
cases, with hypothesis's own shrinking (``oracles/campaign_hypothesis.py``).
The ``hypothesis`` engine (the pytest plugin's) draws both streams with hypothesis,
under its profiles and example database.

When the kernel oracle is on, each finding's kept scenario is run through it; error
findings not yet seen to reach the kernel get a short probe of further examples
(shrunk examples tend to be values the kernel does nothing with;
``oracles/campaign_impact.py``). With ``--kernel
always`` it also judges every example of every stream (``examples_kernel`` counts
them, ``kernel_seconds`` is what they cost). Each finding says
which engine found it (``extra["engine"]``).

SIGINT/SIGTERM (``oracles/interrupt.py``) stop a campaign between examples: each loop
(the batched streams, the hypothesis streams, the shrinker, the kernel-impact probe)
looks at the flag after every example and stops, the workers are stopped, and the
result holds what was found so far with ``interrupted`` set (no verdict).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field, replace
from typing import Callable

from stagecheck.oracles import interrupt, messages
from stagecheck.oracles.campaign_hypothesis import HypothesisStream
from stagecheck.oracles.campaign_impact import KernelImpactProbe
from stagecheck.oracles.campaign_progress import ProgressTelling
from stagecheck.oracles.campaign_shrinking import Shrinking
from stagecheck.oracles.collect import FindingsCollector
from stagecheck.oracles.compare import STOPPED_WORDS, known_stop, stopped_kind
from stagecheck.oracles.errors import StagecheckError, TargetLoadError, UsageError
from stagecheck.oracles.evaluate import judge, with_kernel_impact
from stagecheck.oracles.gcpause import fewer_collections
from stagecheck.oracles.options import CampaignConfig, RunOptions
from stagecheck.oracles.results import TargetPair
from stagecheck.oracles.runner import close_after_campaign, runner_for, side_of
from stagecheck.oracles.sample import sample_breach, sample_scenario
from stagecheck.oracles.targets import Target, load_target, target_from_callable
from stagecheck.spec import ERROR, Finding, StagingScenario
from stagecheck.spec.findings import FindingsResult
from stagecheck.spec.schema import StagingSchema
from stagecheck.spec.space import draft_bound, repaired

__all__ = ["BATCH", "SAMPLE_EVERY", "CampaignResult", "resolved_bounds", "run_campaign",
           "same_schema"]

#: examples per batch sent to a worker (the first batches of a stream are smaller:
#: FIRST_BATCH, then twice as many each time), and at most about BATCH_SLOTS slots (the
#: sum of its scenarios' capacities: 8 full 1,024-slot scenarios; the worker starts on
#: the first one soon, and the checker's last judging, which nothing overlaps, is short)
BATCH = 128
BATCH_SLOTS = 8192
FIRST_BATCH = 16
#: one example in this many (that the fast run passed) is run again instrumented
SAMPLE_EVERY = 16
#: examples of the hypothesis edge-case stream per stream, at most (about 4 ms each:
#: hypothesis draws value by value), by default one per 20 of the random stream
EDGE_EXAMPLES = 100
#: out-of-contract examples with a difference, repaired into the contract and run again
#: (``_Search.repair``), at most
REPAIRS = 8
#: calls of one kind (hang, or ended its process) after which the out-of-contract stream
#: stops (each costs a deadline or a new worker); a kind the in-contract stream found
#: stops it at the first, as info: the same error again (``compare.known_stop``)
STOPPED_CALLS_PER_STREAM = 3
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
    examples_kernel: int = 0               # kernel oracle's (--kernel always: all)
    kernel_seconds: float = 0.0            # the time those kernel runs took
    first_error_seconds: float | None = None   # from the start of the campaign
    shrink_seconds: float = 0.0            # what shrinking the findings took, in all
    stream_notes: dict = field(default_factory=dict)   # stream ("in"/"out") -> why it
                                           # stopped before its budget (calls that hung)
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


#: how a stream's note names the streams
_STREAM_WORDS = {"in": "in-contract", "out": "out-of-contract"}


class _Search(ProgressTelling, Shrinking, HypothesisStream, KernelImpactProbe):
    """One campaign's state: the runner, the judge, the collector; what it tells the
    progress line (``campaign_progress.py``), the shrinking (``campaign_shrinking.py``),
    the hypothesis stream (``campaign_hypothesis.py``) and the kernel-impact probe
    (``campaign_impact.py``) are its mixins."""

    def __init__(self, baseline: Target | None, candidate: Target, config: CampaignConfig,
                 runner, result: CampaignResult, progress) -> None:
        self.baseline, self.candidate, self.config = baseline, candidate, config
        self.runner, self.result, self.progress = runner, result, progress
        self.told(progress)
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
        self.stream: str | None = None      # the stream being run (of ``phase``)
        self.started = time.perf_counter()
        self.fast = RunOptions(**{**config.run.__dict__, "kernel": "off"})
        # --kernel always: the kernel oracle judges every example, not only kept findings
        self.kernel_every = (config.run.kernel == "always"
                             and candidate.schema.consumer is not None)

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
        why = (f"the in-contract stream already found a call that {STOPPED_WORDS[kind]}, "
               "an error; each more costs a deadline or a new worker"
               if kind in self.error_stopped else "each costs a deadline or a new worker")
        self.result.stream_notes[stream] = messages.STREAM_STOPPED.format(
            stream=_STREAM_WORDS.get(stream, stream), done=done, total=total, count=seen[kind],
            what=STOPPED_WORDS[kind], why=why)
        return True

    def record(self, findings: list[Finding], s: StagingScenario, engine: str,
               final: bool = False) -> list[Finding]:
        errors = [f for f in findings if f.severity == ERROR]
        if errors and self.result.first_error_seconds is None:
            self.result.first_error_seconds = time.perf_counter() - self.started
        self.collector.add(findings, s, self.examples, extra={"engine": engine}, final=final)
        return errors

    def repair(self) -> None:
        """Out-of-contract examples that showed a difference, repaired into the contract
        (``spec.space.repaired``: an integer input out of its range set to the nearest
        value in it) and run again: a difference the repaired example still shows is an
        in-contract error (a bug the breach only seemed to excuse), kept and shrunk."""
        seen: set = set()
        for f in self.collector.findings():
            if len(seen) >= REPAIRS or interrupt.requested():
                return
            if f.severity == ERROR or f.in_contract or f.side != "both" or not f.scenario:
                continue
            s = StagingScenario.from_dict(f.scenario)
            fixed = repaired(self.schema, s)
            key = repr(fixed.to_dict()) if fixed is not None else None
            if key is None or key in seen:
                continue
            seen.add(key)
            findings = self.evaluate(fixed, kernel=self.kernel_every)
            if any(g.severity == ERROR for g in findings):
                self.record(findings, fixed, "repaired")
                self.shrink(fixed, findings, "repaired")
                return

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
                    if stream != "in" and self.last_stopped in self.error_stopped:
                        findings = known_stop(findings, self.last_stopped)
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
            try:
                answers.close()  # the workers finish what they hold, then are free again
            except interrupt.Interrupted:   # a signal while they finish: the error found
                if flagged is not None:     # stays
                    self.record(flagged[1], flagged[0], "random")
                raise
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
                try:
                    findings = self.evaluate(s, kernel=self.kernel_every) or findings
                except interrupt.Interrupted:   # a signal cut that run short: what the
                    self.record(findings, s, "random")   # fast run found is kept
                    raise
            self.record(findings, s, "random")
            self.tick(stream, done, total)
            self.shrink(s, findings)
        return done


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
        search.stream = stream
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
                search.stream = stream
                result.examples_edge += search.hypothesis_stream(
                    stream, edge, None, True, "hypothesis")
    if not any(f.severity == ERROR for f in search.collector.findings()):
        search.repair()
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
    except BaseException as exc:  # stagecheck's own error: what was found so far rides on
        if isinstance(exc, Exception):      # it, for the caller to save
            result.findings = search.collector.findings()
            result.seconds, exc.partial_result = time.perf_counter() - search.started, result
        if own:
            runner.close()
        raise
    result.findings = search.collector.findings()
    if own:
        close_after_campaign(runner, bool(result.errors))
    result.seconds = time.perf_counter() - search.started
    if interrupt.requested():   # the flag decides, whether or not an exception got through
        result.interrupted = interrupt.signal_name(interrupt.requested())
        _count_cut_stream(search, result)
    return result


def _count_cut_stream(search: _Search, result: CampaignResult) -> None:
    """The examples judged by the stream a signal cut short, which never returned its
    count: an interrupted run says how far it got (was: 'after 0 example(s), 1
    finding(s)')."""
    counted = (result.examples_in_contract + result.examples_out_of_contract
               + result.examples_edge)
    left = search.examples - counted
    if left <= 0 or search.stream is None:
        return
    if search.phase == "edge":
        result.examples_edge += left
    elif search.stream == "in":
        result.examples_in_contract += left
    else:
        result.examples_out_of_contract += left

