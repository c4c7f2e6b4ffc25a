"""The Markdown summary (``--markdown PATH``) of ``diff`` and ``spec``: to paste into a
pull request.

In order: the verdict, the targets (specs, resolved specs, commit SHAs), the budget
(examples, seed, capacity and the other settings that shape the run), the errors
(error findings grouped by cause) each with its slot table and members, the info findings one row per reason, and the
reproduction test of each distinct shrunk scenario (``snippet.pytest_example``).
Text that comes from targets or findings is escaped (``report.escape``) and kept out
of Markdown's way (table cells escape ``|``; code goes in fenced blocks).
"""

from __future__ import annotations

import json

from stagecheck import __version__
from stagecheck.oracles import messages
from stagecheck.oracles.collect import error_groups
from stagecheck.oracles.report.escape import escape
from stagecheck.oracles.report.finding_text import (findings_count, group_slot_table,
                                                     info_groups, verdict_said)
from stagecheck.oracles.report.json import campaign_settings
from stagecheck.oracles.report.snippet import pytest_example, snippet_setting
from stagecheck.oracles.report.text import tried_examples
from stagecheck.spec import statement

__all__ = ["render_markdown"]


def _cell(text) -> str:
    """One table cell: escaped, one line, ``|`` and backticks kept literal."""
    return escape(text).replace("\\", "\\\\").replace("|", "\\|").replace("`", "\\`")


def _code(text) -> str:
    """Inline code that cannot be closed early by a backtick in ``text``."""
    text = escape(text)
    fence = "``" if "`" in text else "`"
    pad = " " if "`" in text else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def render_markdown(result, strict: bool = False, targets: dict | None = None,
                    saved: dict | None = None, manifest: str | None = None,
                    command: str | None = None, shims=()) -> str:
    """A campaign result (``diff``/``spec``) as a pull-request comment (``shims``: the
    run's, for the pasted tests)."""
    command = command or ("diff" if result.baseline else "spec")
    interrupted = getattr(result, "interrupted", None)
    verdict = "interrupted" if interrupted else verdict_said(result, strict)   # as text says
    errors, infos = result.errors, result.infos
    what = (f"{_code(result.baseline)} vs {_code(result.candidate)}" if result.baseline
            else f"spec of {_code(result.candidate)}")
    lines = [f"## stagecheck {command}: {what}", "",
             f"**Verdict: {verdict.upper()}** — {findings_count(errors, infos)}"
             + (" (`--strict`: info counts)" if strict else "")
             + (f"; interrupted by {escape(interrupted)}, findings so far" if interrupted
                else ""), ""]

    lines += ["### Targets", "", "| side | spec | resolved | commit |", "| --- | --- | --- | --- |"]
    records = targets or {"baseline": {"spec": result.baseline} if result.baseline else None,
                          "candidate": {"spec": result.candidate}}
    for side, record in records.items():
        if not record:
            continue
        lines.append(f"| {side} | {_cell(record.get('spec') or '')} | "
                     f"{_cell(record.get('resolved') or '')} | "
                     f"{_cell(record.get('sha') or '-')} |")
    lines.append("")

    s = campaign_settings(result, strict)
    lines += ["### Budget", "",
              f"- examples: {s['examples']} per stream; tried "
              f"{tried_examples(result, ('in contract', 'out of contract'))} in "
              f"{result.seconds:.1f} s",
              f"- seed: {s['seed']}; capacity <= {s['max_capacity']}"
              + (f"; drafts <= {s['max_drafts']}" if s.get('max_drafts') is not None else ""),
              f"- device: {s['device']}; kernel oracle: {s['kernel']}; engine: {s['engine']}; "
              f"jobs: {s['jobs']}; strict: {'yes' if strict else 'no'}",
              f"- stagecheck {__version__}", ""]

    if errors:
        groups = error_groups(errors)
        shared = (f", from {len(errors)} error finding(s) grouped by cause"
                  if len(groups) < len(errors) else "")
        lines += [f"### Errors ({len(groups)}{shared})", ""]
        for g in groups:
            f = g.head
            impact = "" if g.kernel_impact is None else \
                f", kernel impact: {'yes' if g.kernel_impact else 'no'}"
            where = "in contract" if f.in_contract else "out of contract"
            lines.append(f"- **{_cell(f.invariant)}** {_code(f.id)} ({f.side}, {where}"
                         f"{impact}): {_cell(f.message)}")
            lines.append(f"  - {_cell(statement(f.invariant))}")
            if saved and f.id in saved:
                lines.append(f"  - replay: {_code('stagecheck replay ' + saved[f.id])}")
            table = group_slot_table(f, g.members, result.schema)
            if table:
                lines += ["", "  ```text", *("  " + row for row in table), "  ```"]
            if g.members:
                lines.append("  - " + _cell(messages.GROUP_MEMBERS.format(
                    count=len(g.members), cause=g.cause)))
                lines += [f"    - {_code(m.id)} {_cell(m.message)}" for m in g.members]
            lines.append("")

    if infos:
        groups = info_groups(infos)
        lines += [f"### Info ({len(infos)} finding(s), {len(groups)} reason(s))", "",
                  "| count | why the spec allows it | where | invariants | example |",
                  "| ---: | --- | --- | --- | --- |"]
        for g in groups:
            invariants = ", ".join(f"{inv} ({n})" for inv, n in g.invariants.items())
            lines.append(f"| {len(g.findings)} | {_cell(g.reason)} | "
                         f"{'in contract' if g.in_contract else 'out of contract'} | "
                         f"{_cell(invariants)} | {_code(g.example.id)} "
                         f"{_cell(g.example.message)} |")
        lines.append("")

    if manifest:
        lines += [f"Replay files: {len(saved or {})}, listed in {_code(manifest)}.", ""]

    if errors:
        distinct: dict = {}     # each scenario once, named after its first (the head) error
        for f in (m for g in error_groups(errors) for m in g.findings):
            if f.scenario:
                distinct.setdefault(json.dumps(f.scenario, sort_keys=True), f)
        lines += ["### Reproduce", "",
                  f"{len(distinct)} shrunk scenario(s) as pytest tests (they survive "
                  "hypothesis upgrades):", ""]
        for f in distinct.values():
            code = pytest_example(f, **snippet_setting(result, targets, shims))
            fence = "```" + "`" * max(0, _longest_run(code, "`") - 2)
            lines += [f"{fence}python", code.rstrip("\n"), fence, ""]
    elif not interrupted:
        lines += ["No error finding.", ""]
    return "\n".join(lines)


def _longest_run(text: str, ch: str) -> int:
    best = run = 0
    for c in text:
        run = run + 1 if c == ch else 0
        best = max(best, run)
    return best
