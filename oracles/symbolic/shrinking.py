"""A symbolic counterexample shrunk as the fuzzer's are, then given its kernel impact.

The solver picks a path's input: any size and values that take the path (15 requests of
65,536 tokens, a state index of 16,386). Each error finding is brought to the smallest
scenario that still shows it by the scenario shrinker (``oracles/shrink.py``), every
candidate judged by the torch replay of both targets in the run's worker, as the fuzzer's
findings are; the scenario it settles on is replayed once more with the kernel oracle on.
A difference reaches the kernel if it did on any example that showed it (as ``diff``
says it): an error not seen to on its smallest example is tried on the other paths'
examples that showed it (``probe_kernel_impact``).
"""

from __future__ import annotations

import json
import time

from stagecheck.oracles import interrupt
from stagecheck.oracles.collect import FindingsCollector
from stagecheck.oracles.evaluate import evaluate, judge
from stagecheck.oracles.options import RunOptions
from stagecheck.oracles.runner import side_of
from stagecheck.oracles.shrink import shrink
from stagecheck.oracles.targets import Target
from stagecheck.spec import ERROR, StagingScenario

__all__ = ["SHRINK_EVALUATIONS", "SHRINK_SECONDS", "SHRINK_TOTAL_SECONDS",
           "probe_kernel_impact",
           "shrink_symbolic_errors"]

#: seconds the shrinking of one counterexample may take (its error findings together)
SHRINK_SECONDS = 20.0
#: seconds the shrinking of all of a run's counterexamples may take
SHRINK_TOTAL_SECONDS = 40.0
#: most candidates tried for one counterexample
SHRINK_EVALUATIONS = 600


def shrink_symbolic_errors(baseline: Target, candidate: Target,
                           collector: FindingsCollector, timeout: float, runner) -> int:
    """Shrink the scenario of each error finding ``collector`` keeps (grouped by the
    scenario they share) and record the smallest, replayed with the kernel oracle on, as
    final; the number of scenarios made smaller."""
    groups: dict[str, set] = {}
    for f in collector.findings():
        if f.severity == ERROR and f.scenario:
            groups.setdefault(json.dumps(f.scenario, sort_keys=True, default=repr),
                              set()).add(f.key)
    sides = [side_of(runner, t) for t in (baseline, candidate)]
    quick = RunOptions(timeout=timeout, kernel="off")
    final = RunOptions(timeout=timeout, kernel="auto")
    smaller = 0
    ends = time.monotonic() + SHRINK_TOTAL_SECONDS
    for data, keys in groups.items():
        if interrupt.requested() or time.monotonic() > ends:
            break
        s = StagingScenario.from_dict(json.loads(data))
        until = min(ends, time.monotonic() + SHRINK_SECONDS)

        def still_fails(candidates: list, keys=frozenset(keys)) -> int | None:
            answers = runner.observe(sides, list(enumerate(candidates)), quick,
                                     "instrumented")
            for position, (a, b) in sorted(answers, key=lambda r: r[0]):
                if any(f.key in keys for f in judge(candidates[position], baseline,
                                                    candidate, a, b)):
                    return position
            return None

        def stop() -> bool:
            return bool(interrupt.requested()) or time.monotonic() > until

        try:
            smallest, _ = shrink(candidate.schema, s, still_fails,
                                 max_evaluations=SHRINK_EVALUATIONS, stop=stop)
            shown = [f for f in evaluate(baseline, candidate, smallest, final,
                                         runner).findings if f.key in keys]
        except Exception:    # a replay that fails here: the counterexample stands as found
            continue
        if shown and smallest is not s:
            collector.add(shown, smallest, 1, final=True)
            smaller += 1
    return smaller


def probe_kernel_impact(baseline: Target, candidate: Target, collector: FindingsCollector,
                        timeout: float, runner) -> None:
    """For each error finding not yet seen to reach the kernel, the other examples that
    showed it (``collector.witnesses``) through the kernel oracle, until one does."""
    options = RunOptions(timeout=timeout, kernel="auto")
    for key in sorted(collector.open_impact(), key=repr):
        for s in collector.witnesses(key):
            if key not in collector.open_impact() or interrupt.requested():
                break
            try:
                found = evaluate(baseline, candidate, s, options, runner).findings
            except Exception:       # the annotation is optional
                break
            collector.note_impact(f for f in found if f.key == key)
