"""A saved protocol finding replays under the run options that found it: a hang found
with ``--timeout`` is a hang again (its replay file and its pasted test keep the limit);
a device the machine lacks is exit 2, as on ``spec``."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PROTOCOL = os.path.join(ROOT, "docs", "examples", "token_stager_protocol.py")
FIXED = os.path.join(ROOT, "tests", "targets", "protocols", "_machinery",
                     "fixed_token_stager.py")


def _slow(source: str) -> str:
    """The fixed stager, 1.5 s slower per step: a hang under --timeout 0.3, none under the
    default."""
    head = "    def stage(self, token_ids):\n"
    assert head in source
    return "import time\n" + source.replace(head, head + "        time.sleep(1.5)\n")


def run_cli(*args, cwd):
    return subprocess.run([sys.executable, "-m", "stagecheck", *args], cwd=cwd,
                          capture_output=True, text=True, timeout=600)


@pytest.fixture(scope="module")
def hang(tmp_path_factory):
    """A hang found with --timeout 0.3 (the folder, the run, its replay file)."""
    folder = tmp_path_factory.mktemp("hang")
    shutil.copy(PROTOCOL, folder / "proto.py")
    (folder / "slow.py").write_text(_slow(open(FIXED, encoding="utf-8").read()))
    proc = run_cli("spec", "slow.py::TokenStager", "--protocol", "proto.py", "--examples", "3",
                   "--timeout", "0.3", cwd=str(folder))
    assert proc.returncode == 1 and "hung" in proc.stdout, proc.stdout + proc.stderr
    (saved,) = sorted((folder / ".stagecheck" / "findings").glob("step_outcome-*.json"))
    return folder, proc, saved


def test_a_hang_found_with_a_timeout_replays_as_a_hang(hang):
    folder, _, saved = hang
    assert json.loads(saved.read_text())["run"]["timeout"] == 0.3
    again = run_cli("replay", str(saved), cwd=str(folder))
    assert again.returncode == 1, again.stdout + again.stderr
    assert "still fails" in again.stdout and "hung" in again.stdout


def test_the_pasted_test_of_a_hang_passes_the_timeout_and_fails(hang):
    folder, proc, _ = hang
    lines = proc.stdout.splitlines()
    start = lines.index("import json")                  # pasted as printed
    test = lines[start:start + 10]
    assert any("timeout=0.3" in line for line in test), test
    (folder / "test_pasted.py").write_text("\n".join(test) + "\n")
    ran = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                          "test_pasted.py"], cwd=str(folder), capture_output=True, text=True,
                         timeout=600)
    assert ran.returncode == 1 and "hung" in ran.stdout, ran.stdout + ran.stderr


@pytest.mark.skipif(subprocess.run([sys.executable, "-c", "import torch, sys; "
                                    "sys.exit(torch.cuda.is_available())"]).returncode != 0,
                    reason="the machine has a CUDA device")
def test_replaying_on_cuda_without_a_cuda_device_is_exit_2_as_spec_says_it(hang):
    folder, _, saved = hang
    given = run_cli("replay", str(saved), "--device", "cuda", cwd=str(folder))
    assert given.returncode == 2, given.stdout + given.stderr
    assert "option --device: 'cuda' was asked for but torch sees no CUDA device" in given.stderr
    data = json.loads(saved.read_text())
    (folder / "cuda.json").write_text(json.dumps({**data, "device": "cuda"}))
    kept = run_cli("replay", "cuda.json", cwd=str(folder))
    assert kept.returncode == 2, kept.stdout + kept.stderr
    assert "argument FILE (its field 'device'): 'cuda' was asked for" in kept.stderr
    assert "Traceback" not in given.stderr + kept.stderr


BUGGY = os.path.join(ROOT, "tests", "targets", "protocols", "_machinery", "buggy_token_stager.py")
DAEMON = os.path.join(ROOT, "tests", "targets", "hostile", "daemon_stager.py")


@pytest.mark.parametrize("source, flags, still", [
    (BUGGY, (), "VIOLATES THE PROTOCOL"),
    (DAEMON, ("--save-infos",), "still shows"),
], ids=["error", "info"])
def test_a_replay_shows_the_step_table_of_the_sequence_it_ran(tmp_path, source, flags, still):
    """A replay, of an error or of an info finding that still shows, prints the step
    sequence it ran and the run's table (step, operation, completion, copies in flight,
    hazard), as the report that found it did (was: only the findings' headlines)."""
    shutil.copy(PROTOCOL, tmp_path / "proto.py")
    shutil.copy(source, tmp_path / "stager.py")
    found = run_cli("spec", "stager.py::TokenStager", "--protocol", "proto.py",
                    "--examples", "20", "-q", *flags, cwd=tmp_path)
    assert found.returncode in (0, 1), found.stdout + found.stderr
    saved = sorted((tmp_path / ".stagecheck" / "findings").glob("*.json"))
    assert saved, found.stdout
    again = run_cli("replay", str(saved[0]), cwd=tmp_path)
    assert still in again.stdout, again.stdout + again.stderr
    table = again.stdout.split("  shown by:\n", 1)
    assert len(table) == 2, again.stdout
    assert "step(s), capacity" in table[1] and "hazard / outcome" in table[1], again.stdout


def test_a_protocol_replay_lists_the_saved_finding_first_and_marks_it(tmp_path):
    """The docs' worked example saves several error findings of one sequence: the replay
    of each lists that one first, marked, as a one-call replay does (was: in the order
    the run found them, unmarked)."""
    buggy = os.path.join(ROOT, "tests", "targets", "protocols", "_machinery",
                         "buggy_token_stager.py")
    proc = run_cli("spec", f"{buggy}::TokenStager", "--protocol", PROTOCOL, "--save-dir",
                   str(tmp_path / "found"), cwd=ROOT)     # in the repository: its code trusted
    assert proc.returncode == 1, proc.stdout + proc.stderr
    files = sorted((tmp_path / "found").glob("*.json"))
    assert len(files) >= 2, files
    for saved in files:
        finding = json.loads(saved.read_text())["finding"]
        if finding["severity"] != "error":
            continue
        again = run_cli("replay", str(saved), cwd=ROOT)
        assert again.returncode == 1, again.stdout + again.stderr
        heads = [line for line in again.stdout.splitlines()
                 if line.lstrip().startswith("[") and "] (" in line]
        assert heads and heads[0].lstrip().startswith(f"[{finding['id']}]"), again.stdout
        assert heads[0].endswith("(the saved finding)"), again.stdout
        assert sum("(the saved finding)" in line for line in heads) == 1, again.stdout
