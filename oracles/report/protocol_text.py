"""The text report of a protocol campaign, and a finding's step sequence as a table.

``render_protocol(result)`` says what was tried, the verdict, every finding with the
shortest step sequence that shows it (``sequence_table``: each step's scheduler
decisions, then each operation run: its completion, the copies in flight after it, the
hazards it raised, how it ended), the replay command of its saved file, and a ready pytest
test (``oracles/report/protocol_snippet.py``). Every echoed text is escaped.
"""

from __future__ import annotations

import json

from stagecheck.oracles import messages
from stagecheck.oracles.collect import ErrorGroup, cause_rank
from stagecheck.oracles.device.gate import STALL_S
from stagecheck.oracles.protocol.ran import never_ran_lines
from stagecheck.oracles.report.escape import escape
from stagecheck.oracles.report.finding_text import alike, verdict_said
from stagecheck.oracles.report.protocol_snippet import protocol_pytest_example
from stagecheck.spec.findings import Finding, context_label, sort_key
from stagecheck.spec.protocol_invariants import END_OF_RUN, UNNAMED, protocol_statement
from stagecheck.spec.scenario import StagingScenario
from stagecheck.spec.steps import StepSequence, unfold

__all__ = ["protocol_error_groups", "protocol_finding_lines", "render_protocol", "sequence_table",
           "tried_sequences"]

#: most rows of a sequence table shown
MAX_ROWS = 40


def _decisions(view) -> str:
    if view.kind == "dummy":
        return f"dummy step of {view.dummy_tokens} token(s)"
    parts = []
    if view.finished:
        parts.append("finish " + ", ".join(view.finished))
    if view.preempted:
        parts.append("preempt " + ", ".join(view.preempted))
    for j in view.joins:
        parts.append(f"join {j['id']} (prompt {j['prompt']}"
                     + (f", prefix {j['computed']}" if j["computed"] else "")
                     + f", T {j['temperature']:g})")
    for j in view.resumed:
        parts.append(f"resume {j['id']}")
    if view.scheduled:
        parts.append("tokens " + ", ".join(f"{r} {n}" for r, n in view.scheduled.items()))
    if view.drafts:
        parts.append("drafts " + ", ".join(
            f"{r} {k} (accepted {view.accepted.get(r, 1)})" for r, k in view.drafts.items()))
    return "; ".join(parts) or "no request"


def sequence_table(f: Finding) -> list[str]:
    """The finding's step sequence and the run that showed it, as text rows."""
    if not f.scenario:
        return []
    seq = StepSequence.from_dict(f.scenario)
    if seq.data.get("scenario"):
        s = StagingScenario.from_dict(seq.data["scenario"])
        return [f"one staging call: capacity {s.capacity}, num_reqs {s.num_reqs}, "
                f"req_ids {s.req_ids}"]
    params = ", ".join(f"{k} {v}" for k, v in seq.params.items())
    order = ", ready work of several streams run newest first" if seq.order == "newest" \
        else ""
    rows = [f"{len(seq.steps)} step(s), capacity {seq.capacity}" + (f", {params}" if params
                                                                      else "") + order]
    for view in unfold(seq):
        rows.append(f"  step {view.index}: {escape(_decisions(view))}")
    table = f.extra.get("table") or []
    if table:
        rows.append(f"  {'step':>4}  {'operation':<22} {'completion':<10} {'in flight':>9}  "
                    "hazard / outcome")
        for row in table[:MAX_ROWS]:
            notes = list(row["hazards"])
            if row["outcome"] != "returned":
                notes.append(row["outcome"])
            step, operation = row["step"], row["operation"]
            if isinstance(step, int) and step < 0:      # the state's build, before step 0
                step, operation = "-", f"{operation} (before step 0)"
            elif operation == END_OF_RUN:   # what the run's last queued work did at its end
                step, operation = "end", f"(after step {step})"
            rows.append(f"  {step!s:>4}  {escape(operation):<22} "
                        f"{row['completion'] or '-':<10} {row['in_flight']:>9}  "
                        f"{escape('; '.join(notes)) or '-'}")
        if len(table) > MAX_ROWS:
            rows.append(f"  ... {len(table) - MAX_ROWS} more operation(s)")
    return rows


def tried_sequences(result) -> str:
    """Every step sequence a protocol campaign ran: those drawn, and those its shrinking
    tried (``5 step sequences (seed 0, budget 300) and 12 more while shrinking``)."""
    drawn, c = result.sequences_run, result.config
    text = f"{drawn} step sequence{'' if drawn == 1 else 's'} (seed {c.seed}, budget " \
        f"{c.sequences})"
    shrinking = getattr(result, "shrink_evaluations", 0)
    return text + (f" and {shrinking} more while shrinking" if shrinking else "")


def protocol_finding_lines(f: Finding, saved: dict | None = None,
                           table: bool = True) -> list[str]:
    """One finding: headline, why allowed (info), how soon, the invariant, its sequence
    (``table``), replay."""
    lines = [f"[{escape(f.id)}] ({f.side}) {escape(f.message)}"]
    if f.extra.get("context"):
        lines.append(f"  {context_label(f)}: {escape(f.extra['context'])}")
    if f.examples_to_find is not None:
        lines.append(f"  found after {f.examples_to_find} step sequence(s)")
    if f.severity == "error":
        text = f.extra.get("statement") or protocol_statement(f.invariant)
        if isinstance(text, str) and text.strip():    # a protocol's own check: its statement
            lines.append(f"  invariant: {escape(text)}")
        if table:
            lines += ["  " + row for row in sequence_table(f)]
    if saved and f.id in saved:
        lines.append(f"  replay: stagecheck replay {escape(saved[f.id])}")
    return lines


def protocol_error_groups(errors: list[Finding]) -> list[ErrorGroup]:
    """The error findings in groups of one cause, as a staging report groups the findings
    of one example (``oracles.collect.error_groups``): the findings first seen on the same
    drawn step sequence are one error (the search stops at the first sequence with an
    error, so one bug is one error whatever its effects), headed by the race that caused
    them (``collect.CAUSE_ORDER``: ``no_copy_hazard`` before what it made the device work
    read or the host read back), of those one about memory the state holds, shown by the
    shortest sequence (the shrunk one); the others are listed under it."""
    by_first: dict = {}
    for f in errors:
        first = f.examples_to_find if f.examples_to_find is not None else f.id
        by_first.setdefault(first, []).append(f)
    groups = []
    for fs in by_first.values():
        fs = sorted(fs, key=lambda f: (cause_rank(f)[0], f.field == UNNAMED, _steps(f),
                                      cause_rank(f)))
        same = all(f.scenario == fs[0].scenario for f in fs)
        cause = messages.PROTOCOL_GROUP_CAUSE[same].format(
            race=messages.PROTOCOL_GROUP_RACE_FIRST if fs[0].invariant == "no_copy_hazard"
            else "")
        groups.append(ErrorGroup(fs, "one finding" if len(fs) == 1 else cause))
    return sorted(groups, key=lambda g: sort_key(g.head))


def _steps(f: Finding) -> int:
    """How many steps the finding's sequence has (the shrunk one has fewest)."""
    return len((f.scenario or {}).get("steps") or ())


def render_protocol(result, saved: dict | None = None, show_tests: bool = True,
                    strict: bool = False) -> str:
    """A protocol campaign's report (see the module doc); ``saved``: finding id -> the
    replay file's arguments; ``strict``: info findings count for the verdict."""
    c = result.config
    what = (f"{result.baseline} vs {result.candidate}" if result.baseline
            else f"{result.candidate} against the protocol")
    device = "the CPU model of the device" if c.device == "cpu" else "CUDA"
    lines = [f"stagecheck protocol {escape(result.protocol)}: {escape(what)} on {device}",
             *(f"  {label}: {escape(t['spec'])}"
               + (f" = commit {t['sha']}" if t.get("sha") else "")
               + (f" (shims: {escape(', '.join(t['shims']))})" if t.get("shims") else "")
               for label, t in zip(("baseline", "candidate") if result.baseline
                                   else ("target",), result.targets)
               if t.get("sha") or t.get("shims")),
             f"tried {tried_sequences(result)}, each run per target under its completion "
             "schedule and, unless that run raced with nothing, again with every operation "
             f"completing when issued, in {result.seconds:.1f} s"
             + ("; the search stops at its first error, then shrinks it" if result.errors
                else "")]
    if getattr(result, "gates_forced", 0):
        lines.append(escape(messages.PROTOCOL_GATES_FORCED.format(
            runs=result.gates_forced, where="; ".join(result.stalls) or "unknown",
            seconds=STALL_S)))
    lines += [escape(w) for w in never_ran_lines(getattr(result, "never_ran", None))]
    if result.interrupted:
        lines.append(f"no verdict: interrupted ({result.interrupted})")
    errors, infos = result.errors, result.infos
    verdict = verdict_said(result, strict, protocol=True)
    groups = protocol_error_groups(errors)
    if len(groups) < len(errors):
        counted = messages.ERRORS_COUNT.format(errors=len(groups), findings=len(errors))
    else:
        counted = f"{len(errors)} error finding(s)"
    lines.append(f"verdict: {verdict} — {counted}, {len(infos)} info finding(s)")
    if result.baseline and alike(errors, exact=True):
        lines.append(messages.BOTH_VIOLATE_PROTOCOL_ALIKE)
    if errors:
        lines += ["", f"ERRORS ({len(groups)})" + (
            ": " + messages.ERRORS_GROUPED.format(errors=len(groups), findings=len(errors))
            if len(groups) < len(errors) else "")]
        for g in groups:        # the head in full, its sequence under it, then the members
            lines += protocol_finding_lines(g.head, saved, table=False)
            lines += ["  shown by:", *("    " + row for row in sequence_table(g.head))]
            if g.members:
                lines.append("  " + messages.GROUP_MEMBERS.format(count=len(g.members),
                                                                   cause=g.cause))
            for f in g.members:
                lines.append(f"    [{escape(f.id)}] ({f.side}) {escape(f.message)}")
                if f.extra.get("context"):      # its likely cause (a read before a download
                    lines.append(f"      {context_label(f)}: "     # landed), not the head's
                                 f"{escape(f.extra['context'])}")
                if f.scenario != g.head.scenario:
                    lines += ["      shown by:",
                              *("        " + row for row in sequence_table(f))]
                if saved and f.id in saved:
                    lines.append(f"      replay: stagecheck replay {escape(saved[f.id])}")
    if infos:
        lines += ["", f"INFO ({len(infos)})"]
        for f in infos:
            lines += protocol_finding_lines(f, saved)
    if not errors and not result.interrupted:
        lines += ["", messages.PROTOCOL_CLEAN_HINT.format(
            more=c.sequences * 10, examples=c.sequences, seed=c.seed,
            device="; on a GPU, --device cuda runs it on the device" if c.device == "cpu"
            else "")]
    if errors and show_tests:
        distinct = {json.dumps(g.head.scenario, sort_keys=True): g.head for g in groups}
        lines += ["", f"REPRODUCE: {len(distinct)} shrunk step sequence(s) as pytest tests "
                  f"(one per error; {messages.REPRODUCE_PASTE})"]
        for f in distinct.values():
            lines += ["", *protocol_pytest_example(
                f, *result.pinned(), result.loadable_protocol(),
                result.config).splitlines()]
    return "\n".join(lines)
