"""``mutants --list --json PATH`` printed the catalog, wrote no JSON and exited 0: exit 0
while a requested output is missing. The two contradict each other (``--list`` runs
nothing, so there is no report to write): exit 2 naming both, and no file."""

from __future__ import annotations

from stagecheck.oracles import messages
from tests.helpers import run_stagecheck

WHY = "--list prints the mutant catalog and runs nothing, so no --json report would be written"


def test_list_with_json_is_exit_2_naming_both(tmp_path):
    out = tmp_path / "mutants.json"
    proc = run_stagecheck("mutants", "single-loop", "--list", "--json", out, timeout=240)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    said = messages.OPTIONS_CONTRADICT[0].format(value="--list", other="--json", why=WHY)
    assert said in proc.stderr and "Traceback" not in proc.stderr, proc.stderr
    assert not out.exists()


def test_list_alone_still_lists():
    proc = run_stagecheck("mutants", "single-loop", "--list", timeout=240)
    assert proc.returncode == 0 and proc.stdout.startswith("m01 "), proc.stdout[:200]
