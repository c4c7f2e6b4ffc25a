"""``--protocol single-call:path/to/schema.py``: the one-step protocol of a schema *file*
(docs/protocols.md: ``single-call:SCHEMA``, SCHEMA as ``--schema`` takes it). It was refused:
"staging 'sample-positions' is not a staging schema: give one of mamba-postprocess, ...",
the protocol naming the file's schema by its name, which nothing can load."""

from __future__ import annotations

import json

from tests.helpers import ROOT, run_stagecheck

SCHEMA = f"{ROOT}/docs/examples/sample_positions_schema.py"
TARGET = f"{ROOT}/docs/examples/sample_positions.py::stage_sample_positions"


def test_a_schema_files_one_step_protocol_runs(tmp_path):
    proc = run_stagecheck("spec", TARGET, "--protocol", f"single-call:{SCHEMA}", "--examples",
                          "10", "--no-save", timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "HOLDS THE PROTOCOL" in proc.stdout, proc.stdout
    assert "single-call:sample-positions" in proc.stdout.splitlines()[0], proc.stdout


def test_a_schema_files_one_step_protocol_finds_and_replays_a_bug(tmp_path):
    buggy = tmp_path / "buggy.py"
    source = (ROOT if isinstance(ROOT, str) else str(ROOT))
    text = open(f"{source}/docs/examples/sample_positions.py").read()
    buggy.write_text(text.replace("ctx.num_drafts_buf.np[i] = len(drafts)",
                                  "ctx.num_drafts_buf.np[i] = len(drafts) + 1"))
    out = tmp_path / "report.json"
    proc = run_stagecheck("diff", TARGET, f"{buggy}::stage_sample_positions", "--protocol",
                          f"single-call:{SCHEMA}", "--examples", "20", "--save-dir",
                          tmp_path / "found", "--json", out, timeout=300)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    replay = next(f["replay"] for f in json.loads(out.read_text())["findings"]
                  if f["severity"] == "error")
    again = run_stagecheck("replay", replay, "--candidate", f"{buggy}::stage_sample_positions",
                           "--baseline", TARGET, timeout=300)
    assert again.returncode == 1, again.stdout + again.stderr
    assert "DIFFERENT" in again.stdout, again.stdout
