"""The text renderer: every command's result as the readable report it prints.

One function per result type; a finding reads as ``report/finding_text.py`` writes it
(``finding_lines``), so it reads the same in ``diff``, ``spec``, ``replay``,
``symbolic`` and the pytest fixture's failure message.
"""

from __future__ import annotations

import json
import os
from dataclasses import replace

from stagecheck.oracles import messages
from stagecheck.oracles.mutants import ORACLES, STAGECHECK_ORACLES, SYMBOLIC_MAX_CAPACITY
from stagecheck.oracles.mutants.runners import EQUIVALENT_SYMBOLIC_PATHS as EQUIVALENT_PATHS
from stagecheck.oracles.collect import error_groups
from stagecheck.oracles.report.escape import escape
from stagecheck.oracles.report.finding_text import (NOT_ALONE, alike, finding_lines,
                                                    findings_count, findings_sections,
                                                    info_group_line, info_groups,
                                                    verdict_said)
from stagecheck.oracles.report.snippet import pytest_example, snippet_setting
from stagecheck.spec import Finding
from stagecheck.spec.space import draft_bound

__all__ = ["bounds_text", "campaign_bounds", "examples_tried", "render_bench", "render_campaign",
           "render_kernel", "render_mutants", "render_replay", "render_symbolic",
           "replay_verdict", "target_lines", "tried_examples"]


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
    if schema is not None and (drafts is None or draft_bound(schema) is None):
        drafts = draft_bound(schema)        # a schema without draft lists drew none
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
                    manifest: str | None = None, verbose: bool = False, shims=()) -> str:
    """``diff`` and ``spec``: what was tried, the verdict, findings, reproductions.

    ``targets``: each side's ``Target.record()`` (commits of git targets are shown);
    ``manifest``: the run's manifest file, named under the findings; ``verbose``: every
    info finding in full (else one line per reason); ``shims``: the run's, for the pasted
    tests.
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
        tried, ran = examples_tried(result), result.examples_kernel
        judged = (messages.KERNEL_ALWAYS_EVERY.format(tried=tried) + (
            messages.KERNEL_ALWAYS_MORE.format(extra=ran - tried) if ran > tried else "")
            if ran >= tried else f"{ran} of the {tried} tried")
        lines.append(messages.KERNEL_ALWAYS_RAN.format(
            examples=ran, seconds=result.kernel_seconds, judged=judged))
    errors, infos = result.errors, result.infos
    verdict = verdict_said(result, strict)
    lines.append(f"verdict: {verdict} — {findings_count(errors, infos)}"
                 + (" (--strict: info counts)" if strict else ""))
    if result.baseline and alike(errors):
        lines.append(messages.BOTH_VIOLATE_ALIKE)
    lines += findings_sections(errors, infos, saved, result.schema, verbose,
                               pair=bool(result.baseline))
    if manifest:
        lines += ["", messages.MANIFEST_LINE.format(count=len(saved or {}), path=manifest)]
    if errors and show_tests:
        distinct: dict = {}     # each scenario once, named after its first (the head) error
        for f in (m for g in error_groups(errors) for m in g.findings):
            distinct.setdefault(json.dumps(f.scenario, sort_keys=True), f)
        lines += ["", f"REPRODUCE: {len(distinct)} shrunk scenario(s) as pytest tests "
                  f"(they survive hypothesis upgrades; {messages.REPRODUCE_PASTE})"]
        for data, f in distinct.items():
            if len(data) > INLINE_SCENARIO_CHARS:
                where = (f"stagecheck replay {escape(saved[f.id])} runs it again"
                         if saved and f.id in saved
                         else "it was not saved (--no-save): run again without --no-save "
                         "to keep its replay file")
                lines += ["", messages.REPRODUCE_TOO_LARGE.format(
                    id=f.id, slots=f.scenario.get("capacity"), chars=len(data), where=where)]
                continue
            lines += ["", *pytest_example(f, **snippet_setting(
                result, targets, shims)).splitlines()]
    if not errors:
        lines += ["", messages.CLEAN_RUN_HINT.format(
            more=c.examples * 10, examples=c.examples, seed=c.seed,
            capacity=campaign_bounds(result)[0] or "the schema's")]
    return "\n".join(lines)


def render_symbolic(result, strict: bool = False, verbose: bool = False,
                    saved: dict | None = None, schema=None, manifest: str | None = None,
                    flags: str = "") -> str:
    """``symbolic``: paths explored and lost, the verdict, the findings (an error with its
    slot table where ``schema`` is given, else its input; its replay command where
    ``saved`` has it), the info findings one line per reason unless ``verbose``.
    ``flags``: what the suggested ``stagecheck diff`` needs to run as printed (the
    run's ``--schema`` and ``--shim`` options)."""
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
            candidate=result.candidate, flags=flags))
    else:
        lines.append(f"verdict: {verdict.upper()} — {findings_count(errors, infos)} on the "
                     "paths explored" + messages.SYMBOLIC_BOUND.format(
                         capacity=getattr(result, "max_capacity", 4)))
    for g in error_groups(errors):
        lines += ["  " + line for line in finding_lines(g.head, saved, schema, g.members)]
        if schema is None:
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
    if manifest:
        lines += ["", messages.MANIFEST_LINE.format(count=len(saved or {}), path=manifest)]
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
    saved_id = finding.get("id")
    # every finding of a replay comes from its one saved example: grouped as one example
    one_example = [replace(f, scenario={"replayed": path}) for f in findings]
    groups = sorted(error_groups(one_example),   # the saved finding's cause first
                    key=lambda g: not any(f.id == saved_id for f in g.findings))
    for group in groups:
        # the saved finding heads its group where it shows again; its like come after
        ordered = sorted(group.findings, key=lambda f: f.id != saved_id)
        head, members = ordered[0], ordered[1:]
        saved_mark = " (the saved finding)" if head.id == saved_id else ""
        lines.append(f"  error: {head.invariant} ({head.side}) {escape(head.message)}"
                     f"{saved_mark}")
        if members:
            lines.append(f"    {len(members)} more finding(s) of this error:")
            lines += [f"      {f.invariant} ({f.side}) {escape(f.message)}" for f in members]
    for f in findings:
        if f.severity != "error":
            lines.append(f"  {f.severity}: {f.invariant} ({f.side}) {escape(f.message)}")
    if not findings and baseline is not None:
        lines.append(f"  {messages.REPLAY_NOTHING}")
    errors = [f for f in findings if f.severity == "error"]
    if not errors and (finding.get("extra") or {}).get(NOT_ALONE):
        lines.append(f"  {messages.REPLAY_NOT_ALONE}")
    lines.append(replay_verdict(len(errors), baseline is None, "example"))
    if baseline is not None and alike(errors):
        lines.append(messages.BOTH_VIOLATE_ALIKE)
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
    streams = [o for o in report.oracles if o in ("spec", "differential")]
    budgets = ([f"{report.budget} examples per stream ({', '.join(streams)})"] if streams else []
               ) + ([f"symbolic {report.symbolic_paths} paths per mutant ({EQUIVALENT_PATHS} "
                     f"on one the catalog shows equivalent; at most "
                     f"{report.symbolic_timeout:g} s; capacity <= {SYMBOLIC_MAX_CAPACITY})"]
                    if "symbolic" in report.oracles else [])
    lines.append(f"budget {', '.join(budgets) or 'the upstream tests'}; "
                 f"{report.seconds:.0f} s in all")
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
