"""The evaluate stage: one scenario through the whole pipeline for one example.

observe each side -> spec checks of each side -> compare the two -> kernel impact.
Every oracle that judges a single example (the campaign, replays, the symbolic
oracle's concrete replays, the mutants' runners, the pytest fixture) calls this.
"""

from __future__ import annotations

from typing import NamedTuple

from stagecheck.oracles.compare import compare
from stagecheck.oracles.observe import observe
from stagecheck.oracles.options import RunOptions
from stagecheck.oracles.targets import Target
from stagecheck.spec import Finding, Observation, StagingScenario, check
from stagecheck.spec.space import contract_breaches

__all__ = ["Evaluation", "evaluate"]


class Evaluation(NamedTuple):
    """What one example showed: the findings, and each side's observation."""

    findings: list[Finding]
    baseline: Observation | None
    candidate: Observation


def evaluate(baseline: Target | None, candidate: Target, s: StagingScenario,
             options: RunOptions = RunOptions()) -> Evaluation:
    """Spec findings for each side plus their differences, for one scenario.

    With ``baseline`` None only the candidate is run and checked against the spec (and
    the kernel oracle compares its mirrors with the values the spec derives).
    ``options.kernel``: "auto" runs the kernel oracle where live mirrors differ,
    "always" on every example, "off" never. ``options.steps`` stages the scenario that
    many times on the same buffers, waiting for each step's copies before the next.
    """
    in_contract = not contract_breaches(candidate.schema, s)
    b = observe(candidate, s, options)
    findings = check(s, b, candidate.profile, "candidate", in_contract)
    a = None
    if baseline is not None:
        a = observe(baseline, s, options)
        findings = check(s, a, baseline.profile, "baseline", in_contract) + findings
        findings += compare(s, a, b, baseline.profile, candidate.profile, in_contract)
    if options.kernel != "off":
        from stagecheck.oracles.kernel.impact import annotate
        findings = annotate(findings, s, a, b, candidate.profile, options.resolved_kernel_backend,
                            options.device, always=options.kernel == "always")
    return Evaluation(findings, a, b)
