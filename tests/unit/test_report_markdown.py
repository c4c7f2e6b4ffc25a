"""The Markdown summary for a pull request: verdict, targets and SHAs, budget, errors with
slot tables, grouped infos, the reproduction test."""

from __future__ import annotations

from dataclasses import replace

from stagecheck.oracles.report.markdown import render_markdown
from stagecheck.oracles.report.snippet import pytest_example, snippet_setting
from stagecheck.oracles.report.text import render_campaign
from tests.unit.test_report import result
from tests.unit.test_report_text import infos

SHA = "0123456789abcdef0123456789abcdef01234567"
TARGETS = {"baseline": {"spec": "legacy", "resolved": "legacy", "sha": None},
           "candidate": {"spec": "git:HEAD:impl/s.py::stage", "sha": SHA,
                         "resolved": f"git:{SHA}:impl/s.py::stage"}}


def test_summary_has_every_part():
    r = result()
    r = replace(r, findings=r.errors + infos())
    md = render_markdown(r, targets=TARGETS, saved={r.errors[0].id: "found/x.json"},
                         manifest="found/runs/m.json")
    assert md.startswith("## stagecheck diff: `legacy` vs `file.py::stage`")
    assert "**Verdict: DIFFERENT** — 1 error finding(s), 9 info finding(s)" in md
    assert f"| candidate | git:HEAD:impl/s.py::stage | git:{SHA}:impl/s.py::stage | {SHA} |" \
        in md
    assert "| baseline | legacy | legacy | - |" in md
    assert "- examples: 50 per stream; tried 4 in contract and 50 out of contract" in md
    assert "- seed: 3; capacity <= 1024; drafts <= 16" in md
    assert "### Errors (1)" in md and r.errors[0].id in md
    assert "replay: `stagecheck replay found/x.json`" in md
    # the slot table, flagged slot included, in a text block
    assert "slot  request" in md and "req-b" in md and "cpu <" in md
    assert "### Info (9 finding(s), 3 reason(s))" in md
    assert "| 5 | the two contracts differ" in md
    assert "same_buffers (3), same_copies (1), same_outcome (1)" in md
    assert "### Reproduce" in md and "```python" in md
    assert pytest_example(r.errors[0], **snippet_setting(r, TARGETS)).rstrip("\n") in md
    # the pasted test loads each side as it loads from any folder (a git target pinned)
    assert f"load_target('git:{SHA}:impl/s.py::stage')" in md
    assert "`found/runs/m.json`" in md


def test_clean_summary_and_table_cells_are_safe():
    r = replace(result(), findings=[replace(f, message="a | b `c`") for f in infos()[:1]])
    md = render_markdown(r, strict=True)
    assert "**Verdict: DIFFERENT**" in md and "(`--strict`: info counts)" in md
    assert "a \\| b \\`c\\`" in md
    clean = render_markdown(replace(result(), findings=[]))
    assert "**Verdict: EQUIVALENT**" in clean and "No error finding." in clean
    assert "### Errors" not in clean and "### Reproduce" not in clean


def test_a_spec_summary_says_the_verdict_in_the_text_reports_words():
    # was "Verdict: EQUIVALENT" / "DIFFERENT" where the text report says CONFORMS / VIOLATES
    clean = replace(result(), baseline=None, findings=[])
    assert "**Verdict: CONFORMS**" in render_markdown(clean)
    assert "verdict: CONFORMS" in render_campaign(clean)
    violates = replace(result(), baseline=None)
    assert "**Verdict: VIOLATES**" in render_markdown(violates)
    assert render_markdown(clean).startswith("## stagecheck spec: spec of `file.py::stage`")
