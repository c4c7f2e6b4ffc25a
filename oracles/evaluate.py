"""The evaluate stage: one scenario through the whole pipeline for one example.

observe each side (in a worker, through a ``Runner``) -> spec checks of each side ->
compare the two -> kernel impact. ``judge`` is the checker's part (checks and
comparison of observations it was given); ``evaluate`` runs a scenario and judges it,
for the replays, the symbolic oracle's concrete replays, the shrinker's final word and
the pasted reproduction tests.
"""

from __future__ import annotations

from dataclasses import replace
from typing import NamedTuple

from stagecheck.oracles.compare import compare
from stagecheck.oracles.options import RunOptions
from stagecheck.oracles.runner import runner_for, side_of
from stagecheck.oracles.targets import Target
from stagecheck.spec import Finding, Observation, StagingScenario, check
from stagecheck.spec.schema import one_scenario

__all__ = ["Evaluation", "evaluate", "judge", "stopped", "with_kernel_impact"]


class Evaluation(NamedTuple):
    """What one example showed: the findings, and each side's observation."""

    findings: list[Finding]
    baseline: Observation | None
    candidate: Observation


def judge(s: StagingScenario, baseline: Target | None, candidate: Target,
          a: Observation | None, b: Observation, in_contract: bool | None = None
          ) -> list[Finding]:
    """Spec findings for each side plus their differences (no kernel oracle).

    A side whose call hung or ended its process is judged by its outcome alone
    (``stopped``): what its buffers held when it was stopped is not what it staged."""
    a, b = _stopped_pair(a, b)
    with one_scenario(s):
        return _judge(s, baseline, candidate, a, b, in_contract)


def _judge(s, baseline, candidate, a, b, in_contract) -> list[Finding]:
    if in_contract is None:
        in_contract = not candidate.profile.breaches(s)
    findings = check(s, b, candidate.profile, "candidate", in_contract)
    if baseline is not None and a is not None:
        if a is b and _same_profile(baseline.profile, candidate.profile):
            # one observation for both sides (the worker saw the same twice): the same
            # spec findings for each, and nothing to compare
            return [replace(f, side="baseline") for f in findings] + findings
        findings = check(s, a, baseline.profile, "baseline", in_contract) + findings
        findings += compare(s, a, b, baseline.profile, candidate.profile, in_contract)
    return findings


def stopped(o: Observation) -> Observation:
    """``o``, or where its call hung or ended its process, ``o`` without the buffers,
    copies, reads and inputs read back after it was stopped: a call the worker's own
    timer stopped (``CallTimedOut``) still has its buffers as the target left them
    halfway, often untouched, and those compared with the other side's were
    differences of a run that never finished. The checker's own stops
    (``Observation.of_hang``, ``of_crash``) have none to begin with."""
    if not (o.timed_out or o.crashed is not None):
        return o
    if not (o.cpu or o.gpu or o.events or o.req_ids_reads or o.inputs_after):
        return o
    return replace(o, cpu={}, gpu={}, events=[], req_ids_reads=[], inputs_after={},
                   last_step_start=0)


def _stopped_pair(a: Observation | None, b: Observation
                  ) -> tuple[Observation | None, Observation]:
    """``stopped`` of each side; one observation for both sides stays one."""
    same = a is b
    b = stopped(b)
    return (b if same else None if a is None else stopped(a)), b


def _same_profile(pa, pb) -> bool:
    return pa.schema is pb.schema and pa.keywords == pb.keywords


def with_kernel_impact(findings: list[Finding], s: StagingScenario, candidate: Target,
                       a: Observation | None, b: Observation,
                       options: RunOptions) -> list[Finding]:
    """``findings`` with the kernel oracle's verdict (``options.kernel``: "auto" runs it
    where live mirrors differ, "always" on every example, "off" never)."""
    if options.kernel == "off":
        return findings
    a, b = _stopped_pair(a, b)       # a stopped call staged nothing the kernel could read
    from stagecheck.oracles.kernel.impact import annotate  # the kernel (torch) loads when asked
    return annotate(findings, s, a, b, candidate.profile, options.resolved_kernel_backend,
                    options.device, always=options.kernel == "always")


def evaluate(baseline: Target | None, candidate: Target, s: StagingScenario,
             options: RunOptions = RunOptions(), runner=None,
             backend: str = "instrumented") -> Evaluation:
    """Spec findings for each side plus their differences, for one scenario.

    With ``baseline`` None only the candidate is run and checked against the spec (and
    the kernel oracle compares its mirrors with the values the spec derives). The
    targets run in a worker process (``runner``: one already holding them; by default
    a fresh one, or this process for a target no worker can load). ``options.steps``
    stages the scenario that many times on the same buffers, waiting for each step's
    copies before the next.
    """
    targets = [baseline, candidate] if baseline is not None else [candidate]
    own = runner is None
    if own:
        runner = runner_for(targets)
    try:
        sides = [side_of(runner, t) for t in targets]
        ((_, observations),) = runner.observe(sides, [(0, s)], options, backend)
    finally:
        if own:
            runner.close()
    b = observations[-1]
    a = observations[0] if baseline is not None else None
    findings = judge(s, baseline, candidate, a, b)
    return Evaluation(with_kernel_impact(findings, s, candidate, a, b, options), a, b)
