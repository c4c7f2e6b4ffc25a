"""The campaign stage: search for examples on which the two targets differ.

Two streams of scenarios (in contract, and out of contract) are drawn by hypothesis;
each example goes through ``evaluate``; the ``FindingsCollector`` keeps one finding
per distinct bug. Error findings stop a stream and are shrunk by hypothesis to a
minimal scenario; info findings are collected along the way (the smallest example
seen). When the kernel oracle is on, error findings not yet seen to reach the kernel
get a short probe of further examples (shrunk examples tend to be values the kernel
does nothing with).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from hypothesis import HealthCheck, Phase, given, seed as hyp_seed, settings

from stagecheck.oracles import interrupt
from stagecheck.oracles._preload import preload_project_modules
from stagecheck.oracles.collect import FindingsCollector
from stagecheck.oracles.evaluate import evaluate
from stagecheck.oracles.generate import out_of_contract_scenarios, staging_scenarios
from stagecheck.oracles.options import CampaignConfig
from stagecheck.oracles.targets import Target
from stagecheck.spec import ERROR, Finding, StagingScenario
from stagecheck.spec.findings import FindingsResult

__all__ = ["CampaignResult", "run_campaign"]

#: Examples the kernel-impact probe draws at most after the search.
IMPACT_PROBE_EXAMPLES = 60


@dataclass
class CampaignResult(FindingsResult):
    baseline: str | None      # None: the spec oracle alone on the candidate
    candidate: str
    config: CampaignConfig
    findings: list[Finding] = field(default_factory=list)
    examples_in_contract: int = 0
    examples_out_of_contract: int = 0
    seconds: float = 0.0
    interrupted: str | None = None   # the signal (e.g. "SIGINT") that stopped the run early:
                                     # then this is a partial result and has no verdict


class _ErrorFound(Exception):
    def __init__(self, findings: list[Finding], scenario: StagingScenario) -> None:
        super().__init__(findings[0].message)
        self.findings, self.scenario = findings, scenario


class _Settled(Exception):
    pass


def _probe_impact(baseline: Target | None, candidate: Target, config: CampaignConfig,
                  collector: FindingsCollector) -> None:
    """For error findings not yet seen to reach the kernel, look further (no shrinking)."""
    open_keys = collector.open_impact()
    if not open_keys:
        return

    @settings(max_examples=IMPACT_PROBE_EXAMPLES, deadline=None, database=None,
              suppress_health_check=list(HealthCheck), phases=(Phase.generate,))
    @hyp_seed(config.seed + 1)
    @given(staging_scenarios(config.max_capacity))
    def probe(s):
        findings = evaluate(baseline, candidate, s, config.run).findings
        collector.note_impact(f for f in findings if f.key in open_keys)
        interrupt.check()
        if not collector.open_impact() & open_keys:
            raise _Settled()

    try:
        probe()
    except (_Settled, interrupt.Interrupted):
        pass


def run_campaign(baseline: Target | None, candidate: Target,
                 config: CampaignConfig | None = None, progress=None) -> CampaignResult:
    """Fuzz both targets (``baseline`` None: the candidate against the spec alone).

    ``progress(stream, done, total)`` is called after each example.
    """
    config = config or CampaignConfig()
    preload_project_modules()
    result = CampaignResult(baseline.spec if baseline else None, candidate.spec, config)
    collector = FindingsCollector()
    total = [0]
    started = time.perf_counter()

    streams = [("in", staging_scenarios(config.max_capacity).map(lambda s: ("", s)))]
    if config.out_of_contract:
        streams.append(("out", out_of_contract_scenarios(config.max_capacity)))
    for stream, strategy in streams:
        counter = [0]

        @settings(max_examples=config.examples, deadline=None,
                  database=None if config.derandomize else config.database,
                  suppress_health_check=list(HealthCheck), report_multiple_bugs=False,
                  derandomize=config.derandomize,
                  phases=(Phase.explicit, Phase.reuse, Phase.generate, Phase.shrink))
        @hyp_seed(config.seed)
        @given(strategy)
        def probe(labeled):
            _, s = labeled
            counter[0] += 1
            total[0] += 1
            findings = evaluate(baseline, candidate, s, config.run).findings
            collector.add(findings, s, total[0])
            interrupt.check()   # after every example: a signal stops the run here
            errors = [f for f in findings if f.severity == ERROR]
            if errors:
                raise _ErrorFound(errors, s)
            if progress is not None:
                progress(stream, counter[0], config.examples)

        # one database key per (baseline, candidate, stream): campaigns never share examples
        probe.hypothesis.inner_test._hypothesis_internal_add_digest = repr(
            (result.baseline, result.candidate, stream, config.max_capacity)).encode()
        try:
            probe()
        except _ErrorFound as found:   # the shrunk example, replayed by hypothesis, wins
            collector.add(found.findings, found.scenario, total[0], final=True)
        except interrupt.Interrupted:
            pass
        if stream == "in":
            result.examples_in_contract = counter[0]
        else:
            result.examples_out_of_contract = counter[0]
        if interrupt.requested():
            break
    if config.run.kernel != "off" and not interrupt.requested():
        _probe_impact(baseline, candidate, config, collector)
    result.findings = collector.findings()
    result.seconds = time.perf_counter() - started
    if interrupt.requested():   # the flag decides, whether or not the exception got through
        result.interrupted = interrupt.signal_name(interrupt.requested())
    return result
