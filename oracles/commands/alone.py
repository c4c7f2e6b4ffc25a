"""Whether an error finding shows when its example runs alone, in a fresh worker.

The search runs thousands of calls in one worker process, so a target that keeps state
across calls (a module-level cache, a counter, a first-call path) may show a difference
only after the calls before it: the shrinker, in the same worker, then settles on an
example that shows it there, while its replay and its pytest test, which run it alone,
pass. After a ``diff``/``spec`` run, the example of each error (the first
``ALONE_CHECKS`` distinct ones) runs again alone in fresh workers; a finding it does not
show there is marked ``extra["not_alone"]``, and the reports and its replay say so. A
call that hung or ended its process is not run again (its stop was already confirmed),
nor is the kernel oracle (``kernel_results`` is not a staging call's finding).
"""

from __future__ import annotations

import json

from stagecheck.oracles import interrupt
from stagecheck.oracles.collect import error_groups
from stagecheck.oracles.commands.base import open_targets
from stagecheck.oracles.errors import StagecheckError
from stagecheck.oracles.evaluate import evaluate
from stagecheck.oracles.report.finding_text import NOT_ALONE
from stagecheck.oracles.runner import close_after_campaign
from stagecheck.spec import ERROR, Finding, StagingScenario

__all__ = ["ALONE_CHECKS", "NOT_ALONE", "confirm_alone", "example_findings"]

#: distinct examples of error findings run again alone after a run, at most (each costs a
#: fresh worker: its start and the targets' loading)
ALONE_CHECKS = 3


def example_findings(runner, scenario: StagingScenario, options) -> list[Finding]:
    """The findings of ``scenario`` run once through the targets ``runner`` holds (the
    baseline first where it holds two); its workers then close as a campaign's do (a
    worker left to end later is ``WorkerDied``). ``replay`` runs its example so too."""
    baseline = runner.targets[0] if len(runner.targets) == 2 else None
    findings = evaluate(baseline, runner.targets[-1], scenario, options, runner).findings
    close_after_campaign(runner, any(f.severity == ERROR for f in findings))
    return findings


def confirm_alone(result, pairs: list[tuple[str, str]], schema, shims) -> None:
    """Run the examples of ``result``'s error findings again, each alone in fresh workers
    loading ``pairs``; mark the findings an example no longer shows (``NOT_ALONE``).
    A worker that cannot be started or loaded again leaves the findings as they are."""
    examples: dict[str, list] = {}
    for group in error_groups(result.errors):
        for f in group.findings:
            if f.extra.get("kind") in ("hang", "crash") or not f.scenario \
                    or f.invariant == "kernel_results":     # the kernel oracle's, not a call's
                continue
            examples.setdefault(json.dumps(f.scenario, sort_keys=True), []).append(f)
    for data, findings in list(examples.items())[:ALONE_CHECKS]:
        if interrupt.requested():
            return
        try:
            scenario = StagingScenario.from_dict(json.loads(data))
            with open_targets(pairs, schema, shims) as fresh:
                shown = {f.key for f in example_findings(fresh, scenario, result.config.run)
                         if f.severity == ERROR}
        except (StagecheckError, ValueError, KeyError, TypeError):
            continue                  # nothing learned: the findings stand as found
        for f in findings:
            if f.key not in shown:
                f.extra[NOT_ALONE] = True
