"""``replay`` refuses an option the file's kind of finding does not read (exit 2 naming the
option), and a target given on its command line that cannot be read is blamed on that
option, not on the replay file."""

from __future__ import annotations

import glob
import json
import os
import subprocess
import sys

import pytest

from stagecheck.oracles import messages
from tests.helpers import ROOT, assert_outcome, run_stagecheck

PROTOCOL_CANDIDATE = ("tests/targets/protocols/input-prep-event/buggy_narrow_event_window.py"
                      "::GPUModelRunner")
ONE_CALL_CANDIDATE = "tests/targets/buggy_loop_one_slot_short.py::stage_postprocess_inputs_to_gpu"


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    """A protocol finding's replay file and a one-call finding's."""
    folder = tmp_path_factory.mktemp("saved")
    proc = run_stagecheck("spec", PROTOCOL_CANDIDATE, "--protocol", "input-prep-event",
                          "--examples", "30", "-q", "--save-dir", folder / "protocol")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    proc = run_stagecheck("diff", "legacy", ONE_CALL_CANDIDATE, "--examples", "50", "-q",
                          "--save-dir", folder / "one_call")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    return (sorted(glob.glob(str(folder / "protocol" / "*.json")))[0],
            sorted(glob.glob(str(folder / "one_call" / "*.json")))[0])


def _refused(proc, where: str, *words: str) -> None:
    assert_outcome(proc, 2)
    assert f"error: {where}: " in proc.stderr, proc.stderr
    for word in words:
        assert word in proc.stderr, proc.stderr


def test_a_protocol_findings_replay_refuses_a_schema(saved):
    protocol_file, _ = saved
    _refused(run_stagecheck("replay", protocol_file, "--schema", "mamba-postprocess"),
             "option --schema", messages.REPLAY_HOLDS_SEQUENCE, "leave --schema out")


def test_a_one_call_findings_replay_refuses_a_protocol(saved):
    _, one_call_file = saved
    _refused(run_stagecheck("replay", one_call_file, "--protocol", "input-prep-event"),
             "option --protocol", messages.REPLAY_HOLDS_EXAMPLE, "leave --protocol out")


@pytest.mark.parametrize("flag", ["--candidate", "--baseline"])
def test_a_missing_target_given_to_a_protocol_replay_is_that_arguments(saved, flag):
    protocol_file, _ = saved
    _refused(run_stagecheck("replay", protocol_file, flag, "nosuch.py::X"),
             f"argument {flag}", "'nosuch.py'")


def test_a_schema_the_project_sets_is_left_out_of_a_protocol_replay(saved, tmp_path):
    # was: exit 2 ("--schema ... does not apply"), with no way to leave it out
    protocol_file, _ = saved
    (tmp_path / "pyproject.toml").write_text('[tool.stagecheck]\nschema = "mamba-postprocess"\n')
    proc = subprocess.run([sys.executable, "-m", "stagecheck", "replay", protocol_file,
                           "--candidate", os.path.join(ROOT, PROTOCOL_CANDIDATE)],
                          capture_output=True, text=True, timeout=300, cwd=tmp_path,
                          env={**os.environ, "PYTHONPATH": ROOT})
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "still" in proc.stdout and "does not apply" not in proc.stderr


def test_a_run_manifest_given_to_replay_names_the_replay_files_it_lists(tmp_path):
    # a user who follows "its manifest lists them: .stagecheck/findings/runs/RUN.json" and
    # gives that file to replay was told "not a stagecheck replay file (TypeError: ...)"
    save = tmp_path / "findings"
    buggy = "tests/targets/buggy_copy_one_slot_short.py::stage_postprocess_inputs_to_gpu"
    ran = run_stagecheck("diff", "legacy", buggy, "--examples", "20", "--no-out-of-contract",
                         "--save-dir", save, "-q", timeout=240)
    assert ran.returncode == 1, ran.stderr
    (manifest,) = (save / "runs").glob("*.json")
    findings = json.loads(manifest.read_text())["findings"]
    listed = findings[0]["file"]
    proc = run_stagecheck("replay", manifest, timeout=240)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
    # the files it saved, not every finding it lists (an info finding has no file: was
    # "the 12 replay file(s)" of a run that saved 3)
    saved = [f for f in findings if f["file"]]
    said = messages.REPLAY_IS_MANIFEST[0].format(value=str(manifest), count=len(saved))
    assert said in proc.stderr, proc.stderr
    document = json.loads(manifest.read_text())     # with info findings listed, unsaved
    document["findings"] += [{"file": None, "id": f"padded_read-{k}", "invariant":
                              "padded_read", "severity": "info"} for k in range(9)]
    infos = tmp_path / "with_infos.json"
    infos.write_text(json.dumps(document))
    proc = run_stagecheck("replay", infos, timeout=240)
    assert proc.returncode == 2, proc.stderr
    assert messages.REPLAY_IS_MANIFEST[0].format(value=str(infos), count=len(saved)) \
        in proc.stderr, proc.stderr
    assert f"stagecheck replay {listed}" in proc.stderr, proc.stderr


def test_a_schema_given_to_replay_that_cannot_call_the_files_targets_is_that_options(tmp_path):
    # was blamed on "argument --baseline", which the user had not given
    user = os.path.join(ROOT, "tests", "user_schema")
    ran = run_stagecheck("spec", os.path.join(user, "accepted_reset.py")
                         + "::planted_resets_every_slot", "--schema",
                         os.path.join(user, "accepted_reset_schema.py"), "-q", "--save-dir",
                         tmp_path, "--examples", "20")
    assert ran.returncode == 1, ran.stdout + ran.stderr
    files = sorted(tmp_path.glob("*.json"))
    _refused(run_stagecheck("replay", files[0], "--schema", "mamba-postprocess"),
             "option --schema", "cannot take the arguments of schema",
             "or leave --schema mamba-postprocess out")


def test_a_schema_given_to_replay_other_than_the_examples_is_refused(saved):
    # was: the other schema's build raised on the example's inputs, blamed on the schema
    _, one_call_file = saved
    problem = messages.REPLAY_OTHER_SCHEMA[0].format(
        value="specdec-backup-tokens", given="specdec-backup-tokens",
        saved="mamba-postprocess")
    _refused(run_stagecheck("replay", one_call_file, "--schema", "specdec-backup-tokens"),
             "option --schema", problem, messages.REPLAY_OTHER_SCHEMA[1])


def test_a_replay_file_with_a_run_value_out_of_range_names_its_field(saved, tmp_path):
    _, one_call_file = saved
    data = json.loads(open(one_call_file).read())
    data["run"]["timeout"] = -1
    edited = tmp_path / "edited.json"
    edited.write_text(json.dumps(data))
    _refused(run_stagecheck("replay", edited), "argument FILE (its field 'run.timeout')",
             "-1 is not a positive number of seconds")


def test_a_target_the_file_names_that_moved_is_said_of_the_files_field(tmp_path):
    # an audit: it was "argument --candidate", an option the user never gave; it now says
    # the file's field and how to name the target where it lies now (which then runs)
    def stagecheck(*args):
        return subprocess.run([sys.executable, "-m", "stagecheck", *map(str, args)],
                              capture_output=True, text=True, timeout=600, cwd=tmp_path)

    function = ONE_CALL_CANDIDATE.split("::")[1]
    (tmp_path / "stage.py").write_text(open(ONE_CALL_CANDIDATE.split("::")[0]).read())
    ran = stagecheck("diff", "legacy", f"stage.py::{function}", "--examples", "50", "-q",
                     "--save-dir", "found")
    assert ran.returncode == 1, ran.stdout + ran.stderr
    file = sorted((tmp_path / "found").glob("*.json"))[0]
    (tmp_path / "stage.py").rename(tmp_path / "moved.py")
    _refused(stagecheck("replay", file), "argument FILE (its field 'candidate')",
             "does not exist", messages.REPLAY_TARGET_ELSEWHERE.format(flag="--candidate"))
    again = stagecheck("replay", file, "--candidate", f"moved.py::{function}")
    assert again.returncode == 1, again.stdout + again.stderr
