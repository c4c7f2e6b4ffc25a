"""The text renderer: every command's result as the readable report it prints.

One function per result type, and one ``finding_lines`` that every report uses for a
finding, so a finding reads the same in ``diff``, ``spec``, ``replay``, ``symbolic``
and the pytest fixture's failure message.
"""

from __future__ import annotations

import json
import os
import re
from collections import defaultdict
from dataclasses import dataclass

from stagecheck.oracles import messages
from stagecheck.oracles.mutants import ORACLES, STAGECHECK_ORACLES, SYMBOLIC_MAX_CAPACITY
from stagecheck.oracles.mutants.runners import EQUIVALENT_SYMBOLIC_PATHS as EQUIVALENT_PATHS
from stagecheck.oracles.collect import error_groups
from stagecheck.oracles.report.escape import escape
from stagecheck.oracles.report.snippet import pytest_example
from stagecheck.spec import ERROR, Finding, StagingScenario, statement
from stagecheck.spec.invariants import expected_value
from stagecheck.spec.scenario import MISSING
from stagecheck.spec.space import draft_bound

__all__ = ["InfoGroup", "bounds_text", "campaign_bounds", "error_group_lines", "findings_count",
           "finding_lines", "info_group_line", "info_groups", "render_bench",
           "render_campaign", "render_kernel", "render_mutants", "render_replay",
           "render_symbolic", "replay_verdict", "slot_table", "target_lines", "tried_examples",
           "examples_tried"]


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


def slot_table(f: Finding, schema=None, max_rows: int = 12) -> list[str]:
    """The finding's scenario as a small table of slots for its field (a large one: the
    first slots, the flagged ones with their neighbours, the live/tail boundary)."""
    if not f.scenario or not f.field or schema is None:
        return []
    try:
        field = schema.field(f.field)
    except KeyError:
        return []
    s = StagingScenario.from_dict(f.scenario)
    view = f.view or "cpu"
    extra = f.extra or {}
    base, cand = _side_values(f)
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


def finding_lines(f: Finding, saved: dict | None = None, schema=None) -> list[str]:
    """One finding: its headline, why it is allowed, how soon it was found, its slot table
    (errors), and the replay command when it was saved."""
    where = "in contract" if f.in_contract else "out of contract"
    impact = "" if f.kernel_impact is None else \
        f", kernel impact: {'yes' if f.kernel_impact else 'no'}"
    lines = [f"[{escape(f.id)}] ({f.side}, {where}{impact}) {escape(f.message)}"]
    if f.extra.get("context"):
        lines.append(f"  why allowed: {escape(f.extra['context'])}")
    if f.examples_to_find is not None:
        lines.append(f"  found after {f.examples_to_find} example(s)")
    if schema is not None and f.severity == ERROR:
        lines += ["  " + row for row in slot_table(f, schema)]
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
        lines += ["    " + line for line in finding_lines(head, saved, schema)]
        if g.members:
            lines.append(f"    {messages.GROUP_MEMBERS.format(count=len(g.members), cause=g.cause)}")
            for f in g.members:   # each saved too: the replay file is named by its id
                lines.append(f"      [{escape(f.id)}] {escape(f.message)}")
    return lines


def _findings_sections(errors: list[Finding], infos: list[Finding], saved: dict | None,
                       schema=None, verbose: bool = True) -> list[str]:
    """The ERRORS section (always in full) and the INFO section: in full with
    ``verbose``, else one line per reason (``info_groups``), followed by the replay
    command of its example when it was saved."""
    lines: list[str] = []
    if errors:
        groups = error_groups(errors)
        lines += ["", "ERRORS (spec violations or in-contract divergence)"
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


def target_lines(targets: dict | None) -> list[str]:
    """What each side was: a git target's commit, the shims that gave it names."""
    lines = []
    for side, record in (targets or {}).items():
        if not record or not (record.get("sha") or record.get("shims")):
            continue
        text = f"{side}: {escape(record['spec'])}"
        if record.get("sha"):
            text += f" = commit {record['sha']}"
        if record.get("shims"):
            text += f" (shims: {', '.join(record['shims'])})"
        lines.append(text)
    return lines


def campaign_bounds(result) -> tuple[int | None, int | None]:
    """The largest capacity and the longest draft list a campaign drew: its settings, or
    where they were left open, its schema's."""
    c, schema = result.config, getattr(result, "schema", None)
    capacity = c.max_capacity if c.max_capacity is not None else \
        (schema.max_capacity if schema is not None else None)
    drafts = getattr(c, "max_drafts", None)
    if drafts is None and schema is not None:
        drafts = draft_bound(schema)
    return capacity, drafts


def examples_tried(result) -> int:
    """Every example a campaign ran: both streams and the edge cases."""
    return (result.examples_in_contract + result.examples_out_of_contract
            + getattr(result, "examples_edge", 0))


def tried_examples(result, in_words: tuple[str, str] = ("in-contract", "out-of-contract")
                   ) -> str:
    """What a campaign tried, every part counted: ``300 in-contract, 300 out-of-contract
    and 30 edge-case examples`` (without edge cases: ``N in-contract and M
    out-of-contract examples``)."""
    inside, outside = in_words
    edge = getattr(result, "examples_edge", 0)
    if not edge:
        return (f"{result.examples_in_contract} {inside} and "
                f"{result.examples_out_of_contract} {outside} examples")
    return (f"{result.examples_in_contract} {inside}, {result.examples_out_of_contract} "
            f"{outside} and {edge} edge-case examples")


def bounds_text(result) -> str:
    """``capacity <= 1024, drafts <= 16`` (what the run drew)."""
    capacity, drafts = campaign_bounds(result)
    text = f"capacity <= {capacity if capacity is not None else 'the schema bound'}"
    return text + (f", drafts <= {drafts}" if drafts is not None else "")


#: a shrunk scenario whose JSON is longer than this is not printed as a test in the text
#: report (a full batch of 1,024 slots is about 100,000 characters): its replay file and
#: the Markdown report (``--markdown``) carry it
INLINE_SCENARIO_CHARS = 4000


def render_campaign(result, strict: bool = False, saved: dict | None = None,
                    show_tests: bool = True, targets: dict | None = None,
                    manifest: str | None = None, verbose: bool = False) -> str:
    """``diff`` and ``spec``: what was tried, the verdict, findings, reproductions.

    ``targets``: each side's ``Target.record()`` (commits of git targets are shown);
    ``manifest``: the run's manifest file, named under the findings; ``verbose``: every
    info finding in full (else one line per reason).
    """
    c = result.config
    what = (f"{escape(result.baseline)} vs {escape(result.candidate)}" if result.baseline
            else f"spec of {escape(result.candidate)}")
    lines = [f"stagecheck: {what} on {c.run.device}", *target_lines(targets),
             f"tried {tried_examples(result)} (seed {c.seed}, "
             f"{bounds_text(result)}, budget {c.examples} per stream) in "
             f"{result.seconds:.1f} s" + ("; a stream stops at its first error finding, "
                                          "then shrinks it" if result.errors else "")
             + (f" (shrinking took {result.shrink_seconds:.1f} s)"
                if result.errors and getattr(result, "shrink_seconds", 0.0) else "")]
    for stream in ("in", "out"):
        note = getattr(result, "stream_notes", {}).get(stream)
        if note:
            lines.append(f"note: {note}")
    if c.run.kernel == "always" and getattr(result, "examples_kernel", 0):
        lines.append(messages.KERNEL_ALWAYS_RAN.format(
            examples=result.examples_kernel, seconds=result.kernel_seconds))
    errors, infos = result.errors, result.infos
    verdict = result.verdict(strict).upper()
    if not result.baseline:        # one target against the spec: nothing is "equivalent"
        verdict = messages.SPEC_VERDICT.get(verdict, verdict)
    lines.append(f"verdict: {verdict} — {findings_count(errors, infos)}"
                 + (" (--strict: info counts)" if strict else ""))
    lines += _findings_sections(errors, infos, saved, result.schema, verbose)
    if manifest:
        lines += ["", messages.MANIFEST_LINE.format(count=len(saved or {}), path=manifest)]
    if errors and show_tests:
        distinct: dict = {}     # each scenario once, named after its first (the head) error
        for f in (m for g in error_groups(errors) for m in g.findings):
            distinct.setdefault(json.dumps(f.scenario, sort_keys=True), f)
        lines += ["", f"REPRODUCE: {len(distinct)} shrunk scenario(s) as pytest tests "
                  "(they survive hypothesis upgrades)"]
        for data, f in distinct.items():
            if len(data) > INLINE_SCENARIO_CHARS:
                where = (f"stagecheck replay {escape(saved[f.id])} runs it again"
                         if saved and f.id in saved
                         else "its replay file holds it (saved unless --no-save)")
                lines += ["", messages.REPRODUCE_TOO_LARGE.format(
                    id=f.id, slots=f.scenario.get("capacity"), chars=len(data), where=where)]
                continue
            lines += ["", *("    " + row for row in
                            pytest_example(f, result.baseline, result.candidate).splitlines())]
    if not errors:
        lines += ["", messages.CLEAN_RUN_HINT.format(
            more=c.examples * 10, examples=c.examples, seed=c.seed,
            capacity=campaign_bounds(result)[0] or "the schema's")]
    return "\n".join(lines)


def render_symbolic(result, strict: bool = False, verbose: bool = False) -> str:
    """``symbolic``: paths explored and lost, the verdict, the findings with their inputs
    (the info findings one line per reason unless ``verbose``)."""
    budget = (f" (path budget {result.max_paths}: {result.paths_attempted} attempted)"
              if getattr(result, "max_paths", None) else "")
    lines = [f"symbolic diff {escape(result.baseline)} -> {escape(result.candidate)}: "
             f"{result.paths_explored} path(s) explored{budget}, {result.paths_unsupported} lost to "
             f"unsupported operations, {result.paths_timed_out} timed out, "
             f"{result.paths_ignored} pruned; {result.seconds:.1f} s"
             + (" (path tree exhausted)" if result.exhausted else "")]
    if result.paths_concretized:
        lines.append(f"{result.paths_concretized} explored path(s) passed symbolic values "
                     "through numpy, which made them concrete: on those paths value-level "
                     "differences were sampled, not searched")
    if result.first_counterexample_seconds is not None:
        lines.append(f"first counterexample after {result.first_counterexample_seconds:.1f} s")
    errors, infos = result.errors, result.infos
    verdict = result.verdict(strict)
    if verdict == "undecided":
        lines.append(messages.SYMBOLIC_UNDECIDED.format(
            paths=result.paths_concretized, infos=len(infos), baseline=result.baseline,
            candidate=result.candidate))
    else:
        lines.append(f"verdict: {verdict.upper()} — {findings_count(errors, infos)} on the "
                     "paths explored")
    for g in error_groups(errors):
        lines += ["  " + line for line in finding_lines(g.head)]
        lines.append(f"    input: {json.dumps(g.head.scenario, sort_keys=True)}")
        if g.members:
            lines.append(f"    {messages.GROUP_MEMBERS.format(count=len(g.members), cause=g.cause)}")
            lines += [f"      [{escape(f.id)}] {escape(f.message)}" for f in g.members]
    for f in infos if verbose else []:
        lines += ["  " + line for line in finding_lines(f)]
        lines.append(f"    input: {json.dumps(f.scenario, sort_keys=True)}")
    if infos and not verbose:
        groups = info_groups(infos)
        lines.append("  " + messages.INFO_GROUPED.format(findings=len(infos),
                                                         reasons=len(groups)))
        lines += ["    " + info_group_line(g) for g in groups]
    return "\n".join(lines)


def render_kernel(result) -> str:
    """``kernel``: the Triton kernel against its reference."""
    lines = [f"stagecheck kernel: Triton kernel vs reference on {result.device}"
             f"{' (interpreter)' if result.device == 'cpu' else ''}",
             f"tried {result.examples} kernel scenarios (seed {result.seed}) in "
             f"{result.seconds:.1f} s"]
    if result.clean:
        lines.append("verdict: EQUIVALENT — bit-identical states (every block) and accepted "
                     "counts")
        lines.append(messages.KERNEL_CLEAN_HINT.format(more=result.examples * 10,
                                                       examples=result.examples,
                                                       seed=result.seed))
    else:
        lines.append("verdict: DIFFERENT — shrunk scenario:")
        lines += [f"  {escape(line)}" for line in result.differences]
        lines.append("  scenario: " + result.failure.to_json())
    return "\n".join(lines)


def render_replay(path: str, saved: dict, baseline: str | None, candidate: str, device: str,
                  findings: list[Finding]) -> str:
    """``replay``: the saved finding re-run, and what it shows now."""
    finding = saved.get("finding", {})
    what = (f"{escape(baseline)} vs {escape(candidate)}" if baseline is not None
            else f"spec of {escape(candidate)}")
    lines = [f"replay of {escape(finding.get('id'))} ({escape(finding.get('invariant'))}): "
             f"{what} on {escape(device)}"]
    for f in findings:
        lines.append(f"  {f.severity}: {f.invariant} ({f.side}) {escape(f.message)}")
    if not findings and baseline is not None:
        lines.append(f"  {messages.REPLAY_NOTHING}")
    errors = sum(1 for f in findings if f.severity == "error")
    lines.append(replay_verdict(errors, baseline is None, "example"))
    return "\n".join(lines)


def replay_verdict(errors: int, one_target: bool, what: str, protocol: bool = False) -> str:
    """``replay``'s verdict line: whether the saved ``what`` (example, step sequence) still
    shows ``errors`` error findings; a pair's words (DIFFERENT/EQUIVALENT), or for a finding
    of one target (``one_target``: ``spec``) the words ``spec`` says its verdict in
    (CONFORMS/VIOLATES; with ``protocol``, HOLDS/VIOLATES THE PROTOCOL)."""
    pair = "DIFFERENT" if errors else "EQUIVALENT"
    if not one_target:
        template = messages.REPLAY_PAIR_STILL if errors else messages.REPLAY_PAIR_NOW
        return template.format(verdict=pair, what=what, count=errors)
    words = messages.PROTOCOL_SPEC_VERDICT if protocol else messages.SPEC_VERDICT
    template = messages.REPLAY_SPEC_STILL if errors else messages.REPLAY_SPEC_NOW
    return template.format(verdict=words[pair], what=what, count=errors,
                           against="the protocol" if protocol else "the spec")


def _us(seconds: float) -> str:
    us = seconds * 1e6
    return f"{us:.2f}" if us < 100 else f"{us:.1f}" if us < 10000 else f"{us:.0f}"


def render_bench(result) -> str:
    """``bench``: per-call microseconds of both sides, the ratio and its spread."""
    header = ("num_reqs", "baseline µs/call", "candidate µs/call",
              "ratio (candidate/baseline)", "per-round ratio: median (IQR)")
    rows = []
    for r in result.rows:
        rows.append((str(r.num_reqs), _us(r.baseline_s), _us(r.candidate_s),
                     f"{r.ratio_of_medians:.3f}",
                     f"{r.ratio:.3f} ({r.ratio_q1:.3f}..{r.ratio_q3:.3f})"))
    widths = [max(len(h), *(len(row[i]) for row in rows)) if rows else len(h)
              for i, h in enumerate(header)]

    def line(cells) -> str:
        return " | ".join(c.rjust(w) for c, w in zip(cells, widths))

    rounds = sorted({r.rounds for r in result.rows}) or [0]
    rounds_text = (str(rounds[0]) if len(rounds) == 1 else f"{rounds[0]}-{rounds[-1]}")
    out = [f"stagecheck bench: {result.baseline} (baseline) vs {result.candidate} (candidate) "
           f"on {result.device}",
           line(header), "-+-".join("-" * w for w in widths)]
    out += [line(row) for row in rows]
    out.append(f"{rounds_text} interleaved rounds per size; per-call medians; "
               + messages.BENCH_RATIOS + f"; {result.seconds:.1f} s in all")
    return "\n".join(out)


def _pct(pair: tuple[int, int]) -> str:
    k, n = pair
    return f"{k}/{n} = {100.0 * k / n:.0f}%" if n else "0/0"


def render_mutants(report, diffs: bool = True) -> str:
    """``mutants``: the kill matrix, the scores (stagecheck next to the upstream baseline),
    and every survivor with its diff."""
    lines: list[str] = []
    n = len(report.results)
    lines.append(f"stagecheck mutants {report.target}: {n} mutant(s) of {report.function} "
                 f"and its helpers ({os.path.basename(report.filename)}), "
                 f"{len({r.mutant.operator for r in report.results})} operator(s)")
    lines.append(f"budget {report.budget} examples per stream (spec, differential), "
                 f"symbolic {report.symbolic_paths} paths per mutant ({EQUIVALENT_PATHS} on one "
                 f"the catalog shows equivalent; at most {report.symbolic_timeout:g} s; "
                 f"capacity <= "
                 f"{SYMBOLIC_MAX_CAPACITY}); {report.seconds:.0f} s in all")
    for o, why in report.unavailable.items():
        lines.append(f"{o}: n/a ({why})")
    if report.control:
        lines.append("control (the unmutated source, reloaded as mutants are): " + ", ".join(
            f"{k} {v}" for k, v in report.control.items()))
    lines.append("cells: ✓ Nex = killed after N generated examples; ✓ N.Ns = seconds to the "
                 "first counterexample; ✓ test = the failing upstream test; - = survived; "
                 "? = inconclusive; n/a = oracle not available")
    lines.append("")
    cols = report.oracles
    header = ["id", "operator", "location"] + cols + ["equiv."]
    rows = []
    for r in report.results:
        m = r.mutant
        rows.append([m.id, m.operator, str(m.location)]
                    + [r.outcomes[o].cell() if o in r.outcomes else "" for o in cols]
                    + ["yes" if r.equivalent else ("withdrawn" if r.reason_withdrawn else "")])
    widths = [max(len(str(x)) for x in col) for col in zip(header, *rows)] if rows else \
        [len(h) for h in header]

    def fmt(row):
        return " | ".join(str(x).ljust(w) for x, w in zip(row, widths)).rstrip()
    lines.append(fmt(header))
    lines.append("-+-".join("-" * w for w in widths))
    lines.extend(fmt(row) for row in rows)
    lines.append("")
    equivalent = [r for r in report.results if r.equivalent]
    lines.append(f"mutation score (killed / non-equivalent; {len(equivalent)} equivalent "
                 "mutant(s) excluded, each with its reason below):")
    sc = [o for o in STAGECHECK_ORACLES if o in report.ran]
    scored = [(o, report.score([o])) for o in sc]
    scored.append(("STAGECHECK (any of " + ", ".join(sc) + ")", report.stagecheck_score))
    if "upstream" in report.ran:
        scored.append(("UPSTREAM BASELINE (the two example tests)", report.upstream_score))
    width = max(len(label) for label, _ in scored)
    for label, pair in scored:
        lines.append(f"  {label:<{width}}  {_pct(pair)}")
    if "upstream" in report.ran:
        only = [r.mutant.id for r in report.non_equivalent
                if r.killed_by_stagecheck and not r.killed_by(["upstream"])]
        rev = [r.mutant.id for r in report.non_equivalent
               if r.killed_by(["upstream"]) and not r.killed_by_stagecheck]
        lines.append(f"  killed by stagecheck, missed by the upstream tests: "
                     f"{', '.join(only) or 'none'}")
        lines.append(f"  killed by the upstream tests, missed by stagecheck: "
                     f"{', '.join(rev) or 'none'}")
    withdrawn = [r for r in report.results if r.reason_withdrawn]
    if withdrawn:
        lines.append("")
        lines.append("equivalence reasons withdrawn (the mutant was killed, so it is not "
                     "equivalent):")
        for r in withdrawn:
            lines.append(f"  {r.mutant.id} killed by {', '.join(r.killed_by(ORACLES))}; "
                         f"claimed: {r.mutant.equivalent_reason}")
    survivors = report.survivors
    lines.append("")
    lines.append(f"survivors of every stagecheck oracle: {len(survivors)}"
                 + (" (all labeled equivalent)" if survivors and all(
                     r.equivalent for r in survivors) else ""))
    for r in survivors:
        m = r.mutant
        lines.append("")
        lines.append(f"{m.id} {m.operator} at {m.location} (col {m.location.col}): "
                     f"{m.description}")
        if r.equivalent:
            lines.append(f"  EQUIVALENT: {m.equivalent_reason}")
        elif r.killed_by(["upstream"]):
            lines.append("  NOT EQUIVALENT: killed by the upstream tests only ("
                         f"{r.outcomes['upstream'].finding})")
        else:
            lines.append("  NOT EQUIVALENT (no reason): a gap in stagecheck's oracles")
        if r.load_error:
            lines.append(f"  load error: {r.load_error}")
        for o, out in r.outcomes.items():
            if out.infos:
                lines.append(f"  {o}: differences seen, info only: " + "; ".join(out.infos))
        for o, out in r.outcomes.items():
            if out.status in ("inconclusive", "error"):
                lines.append(f"  {o}: {out.status}: {out.note}")
        if diffs:
            lines.extend("    " + line for line in m.diff.rstrip("\n").splitlines())
    return "\n".join(lines)
