"""Internal errors are never verdicts (issue 20, item 4, the command line): an exception
inside stagecheck (not inside the code under test) is exit 3, one line on stderr names
the file that holds its traceback, and what the run found before it is still written."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import xml.etree.ElementTree as ET

import pytest

from stagecheck.oracles import messages
from stagecheck.oracles.commands.base import internal
from stagecheck.oracles.commands.crash import EXIT_INTERNAL, is_internal
from stagecheck.oracles.errors import TargetLoadError
from stagecheck.oracles.worker import WorkerError

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BUGGY = os.path.join(ROOT, "tests", "targets", "buggy_swapped_views.py") + \
    "::stage_postprocess_inputs_to_gpu"
#: runs the command line with one stage of stagecheck replaced by one that raises
PLANTED = """
import sys
from stagecheck.oracles import campaign
from stagecheck.oracles.commands import bench

def boom(*args, **kwargs):
    raise RuntimeError("planted internal error")

campaign._Search.kernel_impact = boom      # after the streams: findings are kept by then
bench.run_bench = boom
from stagecheck.oracles.cli import main
sys.exit(main(sys.argv[1:]))
"""


def planted(*argv, cwd, tmp):
    return subprocess.run([sys.executable, "-c", PLANTED, *map(str, argv)], cwd=cwd,
                          capture_output=True, text=True, timeout=600,
                          env={**os.environ, "TMPDIR": str(tmp)})


def test_an_internal_error_in_a_campaign_is_exit_3_and_what_it_found_is_written(tmp_path):
    proc = planted("diff", "single-loop", BUGGY, "--json", "r.json", "--junit-xml", "r.xml",
                   "--markdown", "r.md", "--save-dir", "found", "--quiet", cwd=tmp_path,
                   tmp=tmp_path)
    assert proc.returncode == EXIT_INTERNAL == 3, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr and proc.stdout == ""
    (line,) = proc.stderr.splitlines()                         # one line
    head = messages.INTERNAL_ERROR.split("{")[0]
    assert line.startswith(head) and "RuntimeError: planted internal error" in line
    # the traceback is in the file the line names, under the save folder
    saved = list((tmp_path / "found").glob("stagecheck-internal-error-*.txt"))
    assert len(saved) == 1 and f"the full traceback is in found/{saved[0].name}" in line
    text = saved[0].read_text()
    assert "Traceback (most recent call last)" in text and "planted internal error" in text
    assert "kernel_impact" in text and "'diff'" in text           # where, and the command
    # the findings of the search before the error: replay files, manifest, every report
    document = json.loads((tmp_path / "r.json").read_text())
    assert document["verdict"] == "internal-error"
    assert "internal error" in document["interrupted"]
    errors = [f for f in document["findings"] if f["severity"] == "error"]
    assert errors and {f["invariant"] for f in errors} >= {"slot_alignment"}
    replays = [f for f in sorted((tmp_path / "found").glob("slot_alignment-*.json"))
               if json.loads(f.read_text())["finding"]["severity"] == "error"]
    assert replays
    (manifest,) = (tmp_path / "found" / "runs").glob("*.json")
    assert json.loads(manifest.read_text())["verdict"] == "internal-error"
    assert f"is saved: found/runs/{manifest.name}" in line and "r.json" in line
    cases = ET.parse(tmp_path / "r.xml").getroot().iter("testcase")
    stopped = [c for c in cases if c.get("name") == "interrupted"]
    assert stopped and "internal error" in stopped[0].find("error").get("message")
    assert "internal error" in (tmp_path / "r.md").read_text()
    # the saved finding replays (it is a finding of the code, found before the error)
    again = subprocess.run([sys.executable, "-m", "stagecheck", "replay", str(replays[0])],
                           cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert again.returncode == 1, again.stdout + again.stderr


def test_an_internal_error_without_a_save_folder_goes_to_the_temporary_folder(tmp_path):
    proc = planted("bench", "legacy", "single-loop", "--json", "b.json", cwd=tmp_path,
                   tmp=tmp_path)
    assert proc.returncode == 3, proc.stdout + proc.stderr
    (line,) = proc.stderr.splitlines()
    (saved,) = tmp_path.glob("stagecheck-internal-error-*.txt")
    assert str(saved.name) in line and "planted internal error" in saved.read_text()
    assert not (tmp_path / "b.json").exists()       # no partial result: no report


def test_an_internal_error_under_no_save_writes_nothing_under_the_repository(tmp_path):
    work = tmp_path / "repo"
    work.mkdir()
    proc = planted("diff", "single-loop", BUGGY, "--no-save", "--quiet", cwd=work,
                   tmp=tmp_path)
    assert proc.returncode == 3, proc.stdout + proc.stderr
    (saved,) = tmp_path.glob("stagecheck-internal-error-*.txt")
    assert saved.name in proc.stderr and "planted internal error" in saved.read_text()
    assert list(work.iterdir()) == []          # no .stagecheck folder, no file


def test_usage_errors_stay_2_and_a_worker_failure_is_internal():
    assert not is_internal(TargetLoadError("bad target"))
    assert is_internal(RuntimeError("bug")) and is_internal(KeyError("x"))
    failed = WorkerError("stagecheck failed inside its worker: ...")
    assert internal(failed) and is_internal(failed)


@pytest.mark.parametrize("command", ["diff", "spec", "replay", "kernel", "symbolic", "bench",
                                     "mutants", "schema"])
def test_every_help_says_what_exit_3_means(command):
    proc = subprocess.run([sys.executable, "-m", "stagecheck", command, "--help"], cwd=ROOT,
                          capture_output=True, text=True, timeout=60)
    flat = " ".join(proc.stdout.split())
    assert "3 internal error (a bug in stagecheck: no verdict)" in flat
