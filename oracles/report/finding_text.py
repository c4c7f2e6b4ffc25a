"""How findings read as text: one finding (its headline, why it is allowed, its slot
table, its replay command), error groups (one error per cause), info findings grouped by
reason, and the count line. Every report that prints a finding uses ``finding_lines``,
so a finding reads the same in ``diff``, ``spec``, ``replay``, ``symbolic``, JUnit XML,
Markdown and the pytest fixture's failure message.
"""

from __future__ import annotations

import re
from collections import defaultdict
from dataclasses import dataclass

from stagecheck.oracles import messages
from stagecheck.oracles.collect import error_groups
from stagecheck.oracles.report.escape import escape
from stagecheck.spec import ERROR, Finding, StagingScenario, statement
from stagecheck.spec.findings import context_label
from stagecheck.spec.invariants import expected_value
from stagecheck.spec.scenario import MISSING

__all__ = ["InfoGroup", "NOT_ALONE", "alike", "error_group_lines", "finding_lines",
           "findings_count", "findings_sections", "group_slot_table", "info_group_line",
           "info_groups", "slot_table", "verdict_said"]


#: the key of an error finding's ``extra`` that says its example, run again alone in a
#: fresh worker after the run, did not show it (``oracles/commands/alone.py``)
NOT_ALONE = "not_alone"


def _cell(v) -> str:
    return "-" if v is None else escape(v)


def _side_values(f: Finding) -> tuple[list | None, list | None]:
    """Per-slot values of each side the finding carries: a difference has both lists;
    a spec finding has its side's list (``values``), which goes in that side's column."""
    extra = f.extra or {}
    if "baseline_values" in extra or "candidate_values" in extra:
        return extra.get("baseline_values"), extra.get("candidate_values")
    values = extra.get("values")
    return (values, None) if f.side == "baseline" else (None, values)


def _flagged_value(f: Finding, column: str):
    """The value a finding reports for its own slot in ``column`` (baseline/candidate):
    a difference names both sides' values; a spec finding keeps the value it saw on its
    side in ``candidate`` (whichever side that was)."""
    if f.side == "both":
        return getattr(f, column)
    return f.candidate if f.side == column else None


def _tail_expected(field, s: StagingScenario, view: str, before, i: int, staged: bool):
    """What tail slot ``i`` must hold after a successful call, as the field's tail
    policy says: its previous value (untouched), the fill value (filled by design: the
    CPU view, and the mirror where the whole buffer is copied), or anything (free)."""
    if staged and field.tail.kind == "free":
        return "(any)"
    if staged and field.tail.kind == "fill" and (view == "cpu" or field.copy.kind == "whole"):
        return field.tail.value
    return before[i] if before else "-"


def _rows(capacity: int, num_reqs: int, flagged: list[int], max_rows: int) -> list[int]:
    """The slots a table shows: all of them up to ``max_rows``; else the first few, each
    flagged slot with its neighbours, and the last live slot and the first tail slot."""
    if capacity <= max_rows:
        return list(range(capacity))
    chosen = set(range(3))
    for k in flagged[:3]:
        chosen.update(range(k - 1, k + 2))
    chosen.update((num_reqs - 1, num_reqs))
    return sorted(i for i in chosen if 0 <= i < capacity)


def slot_table(f: Finding, schema=None, max_rows: int = 12, values=None) -> list[str]:
    """The finding's scenario as a small table of slots for its field (a large one: the
    first slots, the flagged ones with their neighbours, the live/tail boundary).
    ``values``: ``(baseline, candidate)`` per-slot lists to show (default: the finding's
    own, ``_side_values``)."""
    if not f.scenario or not f.field or schema is None:
        return []
    try:
        field = schema.field(f.field)
    except KeyError:
        return []
    s = StagingScenario.from_dict(f.scenario)
    view = f.view or "cpu"
    extra = f.extra or {}
    base, cand = values if values is not None else _side_values(f)
    before = (s.initial_cpu if view == "cpu" else s.initial_gpu).get(field.buffer)
    try:        # staged on this call (by a target that takes every keyword)?
        staged = bool(field.when(schema.profile(schema.keywords), s))
    except Exception:     # a condition the scenario cannot answer: as declared
        staged = True
    rows = [f"{'slot':>4}  {'request':<10} {'live':<4}  {'before':>11}  {'expected':>11}  "
            f"{'baseline':>11}  {'candidate':>11}  view"]
    flagged_list = list(extra.get("slots", [f.slot] if f.slot is not None else []))
    flagged = set(flagged_list)
    shown_rows = _rows(s.capacity, max(s.num_reqs, 0), flagged_list, max_rows)
    previous = -1
    for i in shown_rows:
        if i > previous + 1:
            rows.append(f"  ... {i - previous - 1} slot(s)")
        previous = i
        r = s.req_ids[i] if i < len(s.req_ids) else "-"
        live = i < s.num_reqs
        if live:
            expected = expected_value(s, field, i, r) if field.derive else None
            expected = "(missing)" if expected is MISSING else expected
        else:
            expected = _tail_expected(field, s, view, before, i, staged)
        shown = {"baseline": base[i] if base and i < len(base) else None,
                 "candidate": cand[i] if cand and i < len(cand) else None}
        if i == f.slot:     # the flagged slot shows what the finding saw there
            for column in shown:
                if shown[column] is None:
                    shown[column] = _flagged_value(f, column)
            if f.expected is not None and not isinstance(f.expected, (list, dict)):
                expected = f.expected
        cells = [_cell(before[i] if before else None), _cell(expected),
                 _cell(shown["baseline"]), _cell(shown["candidate"])]
        mark = " <" if i in flagged else ""
        rows.append(f"{i:>4}  {escape(r):<10} {'yes' if live else 'tail':<4}  {cells[0]:>11}  "
                    f"{cells[1]:>11}  {cells[2]:>11}  {cells[3]:>11}  {view}{mark}")
    if previous < s.capacity - 1:
        rows.append(f"  ... {s.capacity - 1 - previous} more slot(s)")
    return rows


def group_slot_table(head: Finding, members: list, schema) -> list[str]:
    """The slot table of an error group, as the text report shows it under its head (the
    values of both sides, taken from a member where the head lacks them)."""
    source, values = _table_source(head, members, schema)
    return slot_table(source, schema, values=values)


def _table_source(head: Finding, members: list, schema) -> tuple[Finding, tuple]:
    """Which finding of an error group its slot table shows, and the per-slot values of
    each side: the head's, unless it carries none (a copy finding: which rows were copied)
    and a member of the same example does (the mirror slot that differs); a side's column
    the shown finding lacks (a spec finding of one side) is filled from a member of the
    same example, field and view that has it."""
    same = [m for m in members if m.scenario == head.scenario]
    source = head
    if _side_values(head) == (None, None):
        for m in same:
            if _side_values(m) != (None, None) and slot_table(m, schema):
                source = m
                break
    base, cand = _side_values(source)
    for m in same:
        if m is source or m.field != source.field or \
                (m.view or "cpu") != (source.view or "cpu"):
            continue
        other_base, other_cand = _side_values(m)
        base = base if base is not None else other_base
        cand = cand if cand is not None else other_cand
    return source, (base, cand)


def finding_lines(f: Finding, saved: dict | None = None, schema=None,
                  members: list | None = None) -> list[str]:
    """One finding: its headline, why it is allowed, how soon it was found, its slot table
    (errors; of an error group's head, ``members`` may give it: ``_table_source``), and
    the replay command when it was saved."""
    where = "in contract" if f.in_contract else "out of contract"
    impact = "" if f.kernel_impact is None else \
        f", kernel impact: {'yes' if f.kernel_impact else 'no'}"
    lines = [f"[{escape(f.id)}] ({f.side}, {where}{impact}) {escape(f.message)}"]
    if f.extra.get("context"):
        lines.append(f"  {context_label(f)}: {escape(f.extra['context'])}")
    if f.examples_to_find is not None:
        lines.append(f"  found after {f.examples_to_find} example(s)")
    if f.extra.get(NOT_ALONE):
        lines.append(f"  {messages.NOT_SHOWN_ALONE}")
    if f.severity == ERROR and f.extra.get("kind") in ("hang", "crash"):
        lines.append(f"  {messages.SHRUNK_BY_SIZE}")
    if schema is not None and f.severity == ERROR:
        source, values = _table_source(f, members or [], schema)
        table = slot_table(source, schema, values=values)
        if table and source is not f:
            lines.append(f"  slots of {escape(source.field)} ({source.view or 'cpu'}), where "
                         f"[{escape(source.id)}] differs:")
        lines += ["  " + row for row in table]
    if saved and f.id in saved:
        lines.append(f"  replay: stagecheck replay {escape(saved[f.id])}")
    return lines


@dataclass
class InfoGroup:
    """Info findings that share one reason: why the spec allows them (their ``why
    allowed`` line with its particulars, request ids and numbers, left out; a finding
    without one: its invariant's statement), in or out of contract."""

    reason: str                # the first finding's "why allowed" (or the statement)
    in_contract: bool
    findings: list[Finding]

    @property
    def example(self) -> Finding:
        return self.findings[0]

    @property
    def invariants(self) -> dict[str, int]:
        """Each invariant among the findings, with its count (largest first)."""
        counts: dict[str, int] = {}
        for f in self.findings:
            counts[f.invariant] = counts.get(f.invariant, 0) + 1
        return dict(sorted(counts.items(), key=lambda kv: -kv[1]))


_PARTICULAR = re.compile(r"'[^']*'|\[[^\]]*\]|(?<![A-Za-z_])-?\d+")


def _reason_key(f: Finding) -> tuple:
    context = (f.extra or {}).get("context")
    return (f.in_contract, _PARTICULAR.sub("_", context) if context else "=" + f.invariant)


def info_groups(infos: list[Finding]) -> list[InfoGroup]:
    """``infos`` grouped by reason, largest group first (then in report order)."""
    groups: dict[tuple, InfoGroup] = {}
    for f in infos:
        key = _reason_key(f)
        if key not in groups:
            groups[key] = InfoGroup((f.extra or {}).get("context") or statement(f.invariant),
                                    f.in_contract, [])
        groups[key].findings.append(f)
    order = list(groups)
    return sorted(groups.values(), key=lambda g: (-len(g.findings),
                                                  order.index(_reason_key(g.example))))


def info_group_line(g: InfoGroup) -> str:
    """One line: count, the reason, the invariants concerned, and one example."""
    where = "" if g.reason.startswith("out of contract") else \
        ("in contract: " if g.in_contract else "out of contract: ")
    invariants = ", ".join(f"{inv} {n}" for inv, n in g.invariants.items())
    return (f"{len(g.findings)} × {where}{escape(g.reason)} [{invariants}] — e.g. "
            f"[{escape(g.example.id)}] {escape(g.example.message)}")


def _grouped(findings: list[Finding], saved: dict | None, schema=None) -> list[str]:
    by_inv: dict[str, list[Finding]] = defaultdict(list)
    for f in findings:
        by_inv[f.invariant].append(f)
    lines = []
    for inv, fs in by_inv.items():
        lines.append(f"  {inv}: {statement(inv)}")
        for f in fs:
            lines += ["    " + line for line in finding_lines(f, saved, schema)]
    return lines


def error_group_lines(groups: list, saved: dict | None, schema=None) -> list[str]:
    """Each error group as one error: its head in full (statement, slot table, replay
    command), then one line per member (id and message), with where it was saved."""
    lines = []
    for g in groups:
        head = g.head
        lines.append(f"  {head.invariant}: {statement(head.invariant)}")
        lines += ["    " + line for line in finding_lines(head, saved, schema, g.members)]
        if g.members:
            lines.append(f"    {messages.GROUP_MEMBERS.format(count=len(g.members), cause=g.cause)}")
            for f in g.members:   # each saved too: the replay file is named by its id
                lines.append(f"      [{escape(f.id)}] {escape(f.message)}")
    return lines


def findings_sections(errors: list[Finding], infos: list[Finding], saved: dict | None,
                       schema=None, verbose: bool = True, pair: bool = True) -> list[str]:
    """The ERRORS section (always in full) and the INFO section: in full with
    ``verbose``, else one line per reason (``info_groups``), followed by the replay
    command of its example when it was saved. ``pair``: a pair's run (its errors may be
    divergences; one target's are not)."""
    lines: list[str] = []
    if errors:
        groups = error_groups(errors)
        lines += ["", (messages.ERRORS_HEADING_PAIR if pair else messages.ERRORS_HEADING_ONE)
                  + (": " + messages.ERRORS_GROUPED.format(errors=len(groups),
                                                           findings=len(errors))
                     if len(groups) < len(errors) else ""),
                  *error_group_lines(groups, saved, schema)]
    if infos and verbose:
        lines += ["", "INFO (failure-path and out-of-contract differences the spec allows)",
                  *_grouped(infos, saved, schema)]
    elif infos:
        groups = info_groups(infos)
        lines += ["", "INFO (failure-path and out-of-contract differences the spec allows): "
                  + messages.INFO_GROUPED.format(findings=len(infos), reasons=len(groups))]
        for g in groups:
            lines.append("  " + info_group_line(g))
            if saved and g.example.id in saved:    # the example, ready to replay
                lines.append(f"    replay: stagecheck replay {escape(saved[g.example.id])}")
    return lines


def findings_count(errors: list[Finding], infos: list[Finding]) -> str:
    """``2 error(s) from 12 error finding(s), 3 info finding(s)`` (the errors as groups
    of one cause, where some share one)."""
    groups = len(error_groups(errors))
    if groups < len(errors):
        head = messages.ERRORS_COUNT.format(errors=groups, findings=len(errors))
    else:
        head = f"{len(errors)} error finding(s)"
    return f"{head}, {len(infos)} info finding(s)"


def verdict_said(result, strict: bool = False, protocol: bool = False) -> str:
    """``result``'s verdict in the words its report says it: a pair's (DIFFERENT,
    EQUIVALENT), or one target's against the spec (CONFORMS/VIOLATES; with ``protocol``,
    HOLDS/VIOLATES THE PROTOCOL): nothing is "equivalent" with one target."""
    verdict = result.verdict(strict).upper()
    if result.baseline:
        return verdict
    words = messages.PROTOCOL_SPEC_VERDICT if protocol else messages.SPEC_VERDICT
    return words.get(verdict, verdict)


def alike(errors: list, exact: bool = False) -> bool:
    """Whether a pair's error findings are violations both sides show alike (the same
    invariants on the same fields; ``exact``: with the same words too, as a protocol's
    findings name the step, the operation and the race), with no difference between the
    two."""
    keys = {side: {(f.invariant, f.field, f.message if exact else "") for f in errors
                   if f.side == side} for side in ("baseline", "candidate", "both")}
    return bool(keys["baseline"]) and keys["baseline"] == keys["candidate"] \
        and not keys["both"]
