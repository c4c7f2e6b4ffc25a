"""An off-by-one loop reads as one error in every report of a real run (issue 20, item 5)."""

from __future__ import annotations

import json
import pathlib
import subprocess
import sys
from xml.etree import ElementTree as ET

ROOT = pathlib.Path(__file__).resolve().parents[2]
OFF_BY_ONE = ROOT / "tests" / "targets" / "buggy_loop_one_slot_short.py"


def test_an_off_by_one_loop_is_one_error_in_text_json_junit_and_markdown(tmp_path):
    out = {k: tmp_path / f"report.{k}" for k in ("json", "xml", "md")}
    proc = subprocess.run(
        [sys.executable, "-m", "stagecheck", "diff", "legacy",
         f"{OFF_BY_ONE}::stage_postprocess_inputs_to_gpu", "--quiet", "--no-out-of-contract",
         "--json", str(out["json"]), "--junit-xml", str(out["xml"]),
         "--markdown", str(out["md"]), "--save-dir", str(tmp_path / "found")],
        capture_output=True, text=True, timeout=600, cwd=tmp_path)
    assert proc.returncode == 1, proc.stdout + proc.stderr       # the exit code holds
    report = json.loads(out["json"].read_text())
    errors = [f for f in report["findings"] if f["severity"] == "error"]
    assert len(errors) >= 8                                      # every finding is kept
    (group,) = report["error_groups"]
    assert sorted(group["members"]) == sorted(f["id"] for f in errors)
    assert group["kernel_impact"] is True
    # every finding's replay file exists, the members' included
    saved = {p.name.split("-")[0] + "-" + p.name.split("-")[1]
             for p in (tmp_path / "found").glob("*.json")}
    assert {f["id"] for f in errors} <= saved
    text = proc.stdout
    assert "1 error(s) from" in text
    section = text.split("ERRORS")[1].split("\nINFO")[0].split("this run saved")[0]
    assert section.count("slot  request") == 1 and len(section.splitlines()) < 25
    suite = ET.parse(out["xml"]).getroot().find("testsuite")
    assert suite.get("failures") == "1"
    (failure,) = suite.findall("testcase/failure")
    assert "slot  request" in failure.text and "stagecheck replay" in failure.text
    assert '"initial_cpu"' not in failure.text                  # no raw scenario JSON
    assert "### Errors (1, from" in out["md"].read_text()
    # the pasted pytest test is named after the group's head, as the text shows it
    head = group["id"]
    safe = "".join(ch if ch.isalnum() else "_" for ch in head)
    assert f"[{head}]" in section and f"def test_{safe}(scenario):" in text
    assert f"def test_{safe}(scenario):" in out["md"].read_text()
