"""Control characters in text a report echoes (finding ids and messages, exception text,
target specs, replay file fields) are made visible, in every format."""

from __future__ import annotations

from dataclasses import replace

import pytest

from stagecheck.oracles.report import render_replay
from stagecheck.oracles.report.escape import escape, escape_lines
from stagecheck.oracles.report.markdown import render_markdown
from stagecheck.oracles.report.finding_text import finding_lines
from stagecheck.oracles.report.text import render_campaign, target_lines
from tests.unit.test_report import result

NASTY = "x\x1b[2Jy\x00z\x07\r\u2028\x9b"


@pytest.mark.parametrize("text, shown", [
    ("\x1b[31m", "\\x1b[31m"), ("a\x00b", "a\\x00b"), ("\x7f", "\\x7f"), ("\x9b", "\\x9b"),
    ("a\nb\tc", "a\\nb\\tc"), ("\u2028", "\\u2028"), ("\ud800", "\\ud800"),
    ("plain 'text' é ✓ µs", "plain 'text' é ✓ µs"), (None, "None"), (12, "12")])
def test_escape_makes_every_control_character_visible(text, shown):
    assert escape(text) == shown


def test_escape_lines_keeps_layout_only():
    assert escape_lines("a\nb\tc\x1bd\re") == "a\nb\tc\\x1bd\\re"


def _dangerous(text: str) -> bool:
    return any((ord(c) < 32 and c != "\n") or 0x7f <= ord(c) <= 0x9f or c == "\u2028"
               for c in text)


def test_text_reports_escape_ids_messages_contexts_and_targets():
    r = result()
    bad = [replace(f, message=NASTY, extra={**f.extra, "context": NASTY}) for f in r.findings]
    r = replace(r, findings=bad)
    for verbose in (False, True):
        text = render_campaign(r, verbose=verbose, targets={
            "candidate": {"spec": "t\x1b.py::f", "sha": "abc"}})
        assert not _dangerous(text), verbose
        assert "x\\x1b[2Jy\\x00z" in text
    assert not _dangerous("\n".join(finding_lines(bad[0])))
    assert target_lines({"candidate": {"spec": "a\x00", "sha": "1"}}) == \
        ["candidate: a\\x00 = commit 1"]


def test_replay_text_escapes_the_files_fields():
    saved = {"finding": {"id": "evil\x1b]0;title\x07", "invariant": "x\x00"}}
    text = render_replay("f.json", saved, "legacy\x1b", "cand\x00", "cpu", [])
    assert not _dangerous(text) and "evil\\x1b]0;title\\x07" in text


def test_markdown_escapes_too():
    r = result()
    r = replace(r, findings=[replace(f, message=NASTY) for f in r.findings])
    assert not _dangerous(render_markdown(r))
