"""Reports for CI and review (issue 13), through the command line in subprocesses: one
JSON envelope for every command, JUnit valid against the junit-10 structure with info
findings present, grouped info findings and --verbose, the Markdown summary, colour
rules, bench ratios that agree with their medians, control characters escaped."""

from __future__ import annotations

import json
import os
import pty
import re
import subprocess
import sys
from pathlib import Path

import pytest

from stagecheck import __version__
from stagecheck.oracles import messages
from stagecheck.oracles.report.json import ENVELOPE
from tests.unit.junit_schema import Schema

ROOT = Path(__file__).resolve().parents[2]
FUNC = "stage_postprocess_inputs_to_gpu"
SCHEMA = Schema(ROOT / "tests" / "unit" / "junit-10.xsd")
ESC = "\x1b["


def stagecheck(*args, cwd=ROOT, env=None, timeout=600) -> subprocess.CompletedProcess:
    environ = {k: v for k, v in os.environ.items() if k not in ("NO_COLOR", "FORCE_COLOR")}
    environ.update(env or {})
    return subprocess.run([sys.executable, "-m", "stagecheck", *map(str, args)], cwd=cwd,
                          capture_output=True, text=True, timeout=timeout, env=environ)


CHEAP = {
    "diff": ["diff", "legacy", "single-loop", "--examples", "20"],
    "spec": ["spec", "single-loop", "--examples", "20"],
    "symbolic": ["symbolic", "legacy", "single-loop", "--max-paths", "5"],
    "kernel": ["kernel", "--examples", "2"],
    "bench": ["bench", "legacy", "single-loop"],
    "mutants": ["mutants", "single-loop", "--oracles", "spec", "--budget", "10",
                "--operators", "full_req_ids"],
}


@pytest.mark.parametrize("command", list(CHEAP))
def test_every_command_writes_the_json_envelope(command, tmp_path):
    out = tmp_path / "r.json"
    save = ["--save-dir", tmp_path / "found"] if command in ("diff", "spec") else []
    proc = stagecheck(*CHEAP[command], "--json", out, *save)
    assert proc.returncode in (0, 1), proc.stderr
    data = json.loads(out.read_text())
    assert set(ENVELOPE) <= set(data)
    assert data["schema_version"] == 1 and data["tool"] == "stagecheck"
    assert data["version"] == __version__ and data["command"] == command
    assert data["verdict"] and data["settings"]
    if command in ("diff", "symbolic", "bench"):
        assert data["targets"]["baseline"]["spec"] == "legacy"
        assert data["targets"]["candidate"]["resolved"] == "single-loop"
    if command == "mutants":
        assert data["targets"]["target"]["spec"] == "single-loop"
    if command in ("diff", "spec"):
        assert data["settings"]["examples"] == 20 and data["settings"]["kernel"] == "auto"
        assert data["settings"]["strict"] is False and data["settings"]["device"] == "cpu"


def test_diff_with_info_findings_junit_markdown_and_grouped_text(tmp_path):
    xml, md = tmp_path / "r.xml", tmp_path / "r.md"
    proc = stagecheck("diff", "legacy", "prefix-migration", "--examples", "100",
                      "--junit-xml", xml, "--markdown", md, "--save-dir", tmp_path / "found")
    assert proc.returncode == 0, proc.stderr
    # text: one line per reason, not one block per finding
    infos = int(re.search(r"(\d+) info finding", proc.stdout).group(1))
    assert infos > 5
    match = re.search(r"(\d+) finding\(s\) for (\d+) reason\(s\)", proc.stdout)
    assert match and int(match.group(1)) == infos and int(match.group(2)) < infos
    assert "--verbose lists each" in proc.stdout and "why allowed:" not in proc.stdout
    assert ESC not in proc.stdout      # piped: no colour
    # JUnit: valid, info findings kept
    text = xml.read_text()
    assert SCHEMA.errors(text) == []
    assert text.count("info finding(s) (differences the spec allows") >= 1
    assert 'classname="stagecheck.diff.legacy__prefix_migration"' in text
    assert 'time="0"' not in text
    # Markdown
    summary = md.read_text()
    assert "**Verdict: EQUIVALENT**" in summary and "### Targets" in summary
    assert "### Budget" in summary and "- seed: 0; capacity <= 1024; drafts <= 16" in summary
    assert f"### Info ({infos} finding(s)" in summary
    # --verbose: every info finding in full
    js = tmp_path / "v.json"
    verbose = stagecheck("diff", "legacy", "prefix-migration", "--examples", "100",
                         "--verbose", "--json", js, "--save-dir", tmp_path / "found2")
    ids = [f["id"] for f in json.loads(js.read_text())["findings"]]
    assert len(ids) == infos
    for finding_id in ids:
        assert f"[{finding_id}] (both" in verbose.stdout
    assert "reason(s)" not in verbose.stdout


def test_markdown_of_a_buggy_target_has_errors_slot_tables_and_the_test(tmp_path):
    buggy = ROOT / "tests" / "targets" / "buggy_swapped_views.py"
    md = tmp_path / "pr.md"
    proc = stagecheck("diff", "legacy", f"{buggy}::{FUNC}", "--examples", "50",
                      "--markdown", md, "--save-dir", tmp_path / "found")
    assert proc.returncode == 1, proc.stderr
    summary = md.read_text()
    assert "**Verdict: DIFFERENT**" in summary and "### Errors (" in summary
    assert "slot  request" in summary and "cpu <" in summary
    assert "### Reproduce" in summary and "def test_" in summary
    assert "replay: `stagecheck replay " in summary


def test_markdown_and_junit_slot_tables_are_the_text_reports(tmp_path):
    # an off-by-one's group head is a spec finding of the candidate alone: the text report
    # fills the baseline column from the group's difference; markdown and JUnit showed "-"
    buggy = ROOT / "tests" / "targets" / "buggy_loop_one_slot_short.py"
    md, xml = tmp_path / "pr.md", tmp_path / "junit.xml"
    proc = stagecheck("diff", "legacy", f"{buggy}::{FUNC}", "--examples", "50",
                      "--markdown", md, "--junit-xml", xml, "--save-dir", tmp_path / "found")
    assert proc.returncode == 1, proc.stderr

    def rows(text):
        return [r.strip() for r in text.splitlines() if re.match(r"\s+\d+  req-", r)]
    shown = rows(proc.stdout)
    assert shown and any(r.split()[5] != "-" for r in shown), proc.stdout   # baseline values
    assert rows(md.read_text()) == shown
    import html
    assert rows(html.unescape(xml.read_text())) == shown


def test_markdown_path_is_probed_and_must_differ_from_the_others(tmp_path):
    same = stagecheck("diff", "legacy", "single-loop", "--json", tmp_path / "x",
                      "--markdown", tmp_path / "x")
    assert same.returncode == 2
    assert "--json and --markdown name the same path" in same.stderr
    gone = stagecheck("diff", "legacy", "single-loop", "--markdown",
                      tmp_path / "missing" / "r.md")
    assert gone.returncode == 2 and "option --markdown" in gone.stderr
    assert "verdict" not in gone.stdout       # refused before the run


def _on_a_terminal(*args, env=None) -> str:
    """Run stagecheck with stdout on a pseudo-terminal; what it printed."""
    environ = {k: v for k, v in os.environ.items() if k not in ("NO_COLOR", "FORCE_COLOR")}
    environ.update(env or {})
    environ.pop("TERM", None)
    master, slave = pty.openpty()
    proc = subprocess.Popen([sys.executable, "-m", "stagecheck", *args], cwd=ROOT,
                            stdout=slave, stderr=subprocess.DEVNULL, env=environ)
    os.close(slave)
    chunks = []
    while True:
        try:
            chunk = os.read(master, 65536)
        except OSError:
            break
        if not chunk:
            break
        chunks.append(chunk)
    proc.wait(timeout=300)
    os.close(master)
    return b"".join(chunks).decode(errors="replace")


def test_colour_rules_end_to_end(tmp_path):
    args = ["diff", "legacy", "single-loop", "--examples", "10", "--save-dir",
            str(tmp_path / "found")]
    assert ESC + "1;32mverdict: EQUIVALENT" in _on_a_terminal(*args)
    assert ESC not in _on_a_terminal(*args, env={"NO_COLOR": "1"})
    assert ESC not in _on_a_terminal(*args, "--color", "never")
    assert ESC not in stagecheck(*args).stdout                       # piped
    assert ESC + "1;32mverdict" in stagecheck(*args, "--color", "always").stdout
    assert ESC + "1;32mverdict" in stagecheck(*args, "--color", "always",
                                              env={"NO_COLOR": "1"}).stdout
    # FORCE_COLOR colours a pipe (CI logs that render colour), as pytest honours it;
    # NO_COLOR still wins over it, and --color never over both
    assert ESC + "1;32mverdict" in stagecheck(*args, env={"FORCE_COLOR": "1"}).stdout
    assert ESC not in stagecheck(*args, env={"FORCE_COLOR": ""}).stdout
    assert ESC not in stagecheck(*args, env={"FORCE_COLOR": "1", "NO_COLOR": "1"}).stdout
    assert ESC not in stagecheck(*args, "--color", "never", env={"FORCE_COLOR": "1"}).stdout
    bad = stagecheck(*args, "--color", "sometimes")
    assert bad.returncode == 2 and "--color" in bad.stderr


def test_bench_ratio_column_agrees_with_its_medians():
    proc = stagecheck("bench", "legacy", "single-loop")
    assert proc.returncode == 0, proc.stderr
    rows = [[c.strip() for c in line.split("|")] for line in proc.stdout.splitlines()
            if re.match(r"\s*\d+ \|", line)]
    assert len(rows) == 5
    for _, base, cand, ratio, _ in rows:
        assert abs(float(ratio) - float(cand) / float(base)) <= 0.002
    assert messages.BENCH_RATIOS in proc.stdout


def test_control_characters_in_exception_text_are_escaped_everywhere(tmp_path):
    evil = tmp_path / "evil.py"
    evil.write_text(f"def {FUNC}(ctx, scheduler_output, req_ids, num_reqs, requests,\n"
                    "        mamba_state_idx):\n"
                    "    raise RuntimeError('\\x1b]0;pwned\\x07\\x1b[2J\\x00 boom')\n")
    xml, md, js = tmp_path / "r.xml", tmp_path / "r.md", tmp_path / "r.json"
    proc = stagecheck("diff", "single-loop", f"{evil}::{FUNC}", "--examples", "20",
                      "--junit-xml", xml, "--markdown", md, "--json", js,
                      "--save-dir", tmp_path / "found")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "\\x1b]0;pwned\\x07\\x1b[2J\\x00 boom" in proc.stdout     # shown, made visible
    for text in (proc.stdout, xml.read_text(), md.read_text()):
        assert "pwned" in text
        assert not re.search("[\x00-\x08\x0b-\x1f\x7f]", text.replace("\n", ""))
    assert SCHEMA.errors(xml.read_text()) == []
    messages_ = [f["message"] for f in json.loads(js.read_text())["findings"]]
    # the worker makes a target's exception text visible when it captures it (issue 11):
    # the JSON holds the visible form, never a raw control character
    assert any("\\x1b]0;pwned" in m for m in messages_)
    assert not any("\x1b" in m for m in messages_)
