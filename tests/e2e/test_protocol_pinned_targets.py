"""A protocol finding's replay file, JSON and pasted test name the very targets that
showed it: a ``git:REV`` target at its commit, a file target by its absolute path, so a
replay from another folder, or after the branch moved, runs the same code (as a one-call
finding's does)."""

from __future__ import annotations

import glob
import json
import os
import subprocess
import sys

from tests.helpers import ROOT, assert_outcome, run_stagecheck

FOLDER = "tests/targets/protocols/input-prep-event"
BASELINE = f"git:HEAD:{FOLDER}/fixed_synchronize_input_prep.py::GPUModelRunner"
CANDIDATE = f"{FOLDER}/buggy_narrow_event_window.py::GPUModelRunner"


def test_a_protocol_finding_pins_its_targets_and_replays_from_another_folder(tmp_path):
    head = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True,
                          cwd=ROOT, check=True).stdout.strip()
    proc = run_stagecheck("diff", BASELINE, CANDIDATE, "--protocol", "input-prep-event",
                          "--examples", "30", "--save-dir", tmp_path / "saved",
                          "--json", tmp_path / "run.json")
    assert_outcome(proc, 1, [f"  baseline: {BASELINE} = commit {head}"])
    document = json.loads((tmp_path / "run.json").read_text())
    pinned_baseline = f"git:{head}:{ROOT}/{FOLDER}/fixed_synchronize_input_prep.py" \
                      "::GPUModelRunner"
    pinned_candidate = os.path.join(ROOT, CANDIDATE)
    assert [(t["spec"], t["resolved"], t["sha"]) for t in document["targets"]] == [
        (BASELINE, pinned_baseline, head), (CANDIDATE, pinned_candidate, None)]
    assert f"check_sequence({pinned_baseline!r}, {pinned_candidate!r}" in proc.stdout
    replays = glob.glob(str(tmp_path / "saved" / "*.json"))
    assert replays
    for path in replays:
        saved = json.loads(open(path).read())
        assert (saved["baseline"], saved["candidate"]) == (pinned_baseline, pinned_candidate)
    again = subprocess.run([sys.executable, "-m", "stagecheck", "replay", replays[0], "-q"],
                           capture_output=True, text=True, timeout=300,
                           cwd=os.path.join(ROOT, "tests"),
                           env={**os.environ, "PYTHONPATH": ROOT})
    assert again.returncode == 1, again.stdout + again.stderr
    assert "still shows" in again.stdout
