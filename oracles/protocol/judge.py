"""The checker's judgement of one step sequence: each side's runs, and their difference.

Each target ran the sequence twice (``meant``: every operation completing when issued;
``seen``: under the sequence's completion schedule). ``judge_sequence`` applies the
protocol invariants (``spec/protocol_invariants.py``) to each side and compares the two
sides' ``meant`` runs. For a one-step protocol of a staging schema the staging call of the
``seen`` run is judged as ``stagecheck diff`` judges a scenario (``oracles/evaluate.judge``:
the schema's invariants for each side, and their differences). Every finding carries the
protocol's name, the step and the operation, and a table of the run for reports.
"""

from __future__ import annotations

from dataclasses import replace

from stagecheck.oracles.evaluate import judge
from stagecheck.spec.findings import Finding
from stagecheck.spec.observation import Observation, slot_text
from stagecheck.spec.protocol import Protocol, Trace
from stagecheck.spec.protocol_invariants import UNNAMED, check_run, compare_runs
from stagecheck.spec.scenario import StagingScenario
from stagecheck.spec.steps import StepSequence

__all__ = ["judge_sequence", "run_table"]


def judge_sequence(protocol: Protocol, seq: StepSequence, sides: list, labels: list[str],
                   staging_targets: list | None = None) -> list[Finding]:
    """Findings of ``seq``; ``sides``: per target ``(meant, seen)`` traces (or their wire
    form), ``labels``: "baseline"/"candidate" for each."""
    runs = [(Trace.from_wire(m), Trace.from_wire(s)) for m, s in sides]
    if protocol.staging:
        findings = _judge_staging(runs, staging_targets or [])
    else:
        findings = []
        for label, (meant, seen) in zip(labels, runs):
            findings += check_run(protocol, seq, meant, seen, label)
        if len(runs) == 2:
            findings += compare_runs(protocol, seq, runs[0][0], runs[1][0])
    if not findings:
        return []
    # each finding with the run of the side it is about (a difference: the candidate's)
    tables = {label: run_table(seen) for label, (_, seen) in zip(labels, runs)}
    last = run_table(runs[-1][1])
    return [replace(f, extra={**f.extra, "protocol": protocol.name,
                              "table": tables.get(f.side, last)})
            for f in findings]


def _judge_staging(runs: list, targets: list) -> list[Finding]:
    seen = [run[1] for run in runs]
    stopped = [t.stopped or (t.failed() or {}).get("outcome") for t in seen]
    if any(stopped) or not all(t.staging for t in seen):
        what = next((s for s in stopped if s), "ended without staging")
        return [Finding("step_outcome", "error", f"the staging call {what}",
                        side="candidate", extra={"kind": "crash"})]
    s = StagingScenario.from_dict(seen[-1].staging[0]["scenario"])
    observations = [Observation.from_wire(t.staging[0]["observation"]) for t in seen]
    baseline = targets[0] if len(targets) == 2 else None
    a = observations[0] if len(observations) == 2 else None
    return judge(s, baseline, targets[-1], a, observations[-1])


def run_table(trace: Trace) -> list[dict]:
    """One row per operation run: step, operation, completion, copies in flight after it,
    the hazards it raised (kind and where), how it ended."""
    rows = []
    for op in trace.ops:
        rows.append({"step": op["step"], "operation": op["op"],
                     "completion": op["completion"], "in_flight": op["in_flight"],
                     # one note per kind and place (two pending copies can race alike)
                     "hazards": list(dict.fromkeys(
                         f"{h['kind']} {_region(h['region'])}"
                         f"{slot_text(h['slots'], h.get('row', 0), 4)}"
                         for h in op["hazards"])),
                     "outcome": op["outcome"] or "returned"})
    return rows


def _region(name: str) -> str:
    """A hazard's memory in a table row: memory the model has no name for said as such."""
    return "(memory the state does not hold)" if name == UNNAMED else name
