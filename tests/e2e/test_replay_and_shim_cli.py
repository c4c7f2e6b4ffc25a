"""``replay`` and ``--shim`` on the command line, end to end in a subprocess: ``replay``
takes ``-q``/``--quiet`` as the other commands do; a replayed finding of ``spec`` says its
verdict in ``spec``'s words, a pair's in a pair's; a shim that is missing, a FIFO, a device,
a folder or does not import is said of ``--shim`` (or of its ``[tool.stagecheck]`` key), and
a shim file put where a target goes says how to give it; staging and protocol replay files
that are not what they claim fail with the same errors."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pytest

from stagecheck.oracles import messages
from tests.e2e.test_pytest_plugin import _autoloaded, _plugin_args
from tests.protocol_catalog import fixtures, target

pytest_plugins = ["pytester"]

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
#: uploads one slot short: two error findings under ``spec`` (copy_discipline,
#: mirror_consistency), an error finding against ``single-loop`` under ``diff``
BUGGY = os.path.join(ROOT, "tests", "targets", "buggy_copy_one_slot_short.py")
FUNCTION = "stage_postprocess_inputs_to_gpu"
QUICK = ("--examples", "40", "-q")


def run_cli(*args, cwd=ROOT):
    return subprocess.run([sys.executable, "-m", "stagecheck", *args], cwd=cwd,
                          capture_output=True, text=True, timeout=600)


def _error_findings(stdout: str) -> int:
    """The error findings a replay's text lists: each error's head line and the findings
    of the same cause listed under it ('N more finding(s) of this error:')."""
    lines = stdout.splitlines()
    heads = sum(1 for x in lines if x.startswith("  error: "))
    return heads + sum(int(x.split()[0]) for x in lines
                       if x.endswith("more finding(s) of this error:"))


def _saved_errors(folder) -> list:
    return [f for f in sorted(folder.glob("*.json"))
            if json.loads(f.read_text())["finding"]["severity"] == "error"]


@pytest.fixture(scope="module")
def spec_finding(tmp_path_factory):
    """A folder holding the buggy file (inside its trust boundary: no git, the folder
    itself) and the replay files ``spec`` saved of it; the spec run's stdout."""
    work = tmp_path_factory.mktemp("spec-finding")
    shutil.copy(BUGGY, work / "buggy.py")
    proc = run_cli("spec", f"buggy.py::{FUNCTION}", *QUICK, "--save-dir", "found", cwd=work)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    files = _saved_errors(work / "found")
    assert files
    return work, files[0], proc.stdout


# ------------------------------------------------------------------ 1: replay -q


def test_replay_takes_quiet_short_and_long_with_the_other_commands_meaning(spec_finding):
    work, file, _ = spec_finding
    (work / "helpers.py").write_text("def cdiv(a, b):\n    return -(a // -b)\n")
    (work / "pyproject.toml").write_text('[tool.stagecheck]\nshims = ["helpers.py"]\n')
    try:
        loud = run_cli("replay", str(file), cwd=work)
        assert loud.returncode == 1, loud.stdout + loud.stderr
        # without it, the settings taken from [tool.stagecheck] are said on stderr
        assert messages.CONFIG_USED.split("{")[0] in loud.stderr
        for flag in ("-q", "--quiet"):
            quiet = run_cli("replay", flag, str(file), cwd=work)
            assert quiet.returncode == 1, quiet.stdout + quiet.stderr
            assert quiet.stderr == "" and quiet.stdout == loud.stdout
    finally:
        (work / "pyproject.toml").unlink()
    helps = run_cli("replay", "--help")
    assert "--quiet, -q" in helps.stdout


# ------------------------------------------------------------------ 2: verdict words


def test_a_replayed_spec_finding_says_whether_it_still_fails_in_specs_words(spec_finding):
    work, file, spec_stdout = spec_finding
    violates = messages.SPEC_VERDICT["DIFFERENT"]
    assert f"verdict: {violates} — " in spec_stdout         # the words spec itself uses
    still = run_cli("replay", str(file), cwd=work)
    assert still.returncode == 1, still.stdout + still.stderr
    verdict = next(x for x in still.stdout.splitlines() if x.startswith("verdict: "))
    errors = _error_findings(still.stdout)
    assert verdict == messages.REPLAY_SPEC_STILL.format(
        verdict=violates, what="example", against="the spec", count=errors)
    assert errors >= 1
    # one target: no pair words, no missing baseline shown as "None vs"
    for word in ("DIFFERENT", "EQUIVALENT", "None vs", "no longer shows a difference"):
        assert word not in still.stdout
    assert f"spec of {work / 'buggy.py'}::{FUNCTION} on cpu" in still.stdout.splitlines()[0]
    fixed = run_cli("replay", str(file), "--candidate", "single-loop", cwd=work)
    assert fixed.returncode == 0, fixed.stdout + fixed.stderr
    assert fixed.stdout.splitlines()[-1] == messages.REPLAY_SPEC_NOW.format(
        verdict=messages.SPEC_VERDICT["EQUIVALENT"], what="example", against="the spec")
    assert "DIFFERENT" not in fixed.stdout and "EQUIVALENT" not in fixed.stdout


def test_a_spec_findings_untrusted_target_names_only_the_candidate_flag(spec_finding,
                                                                          tmp_path):
    _, file, _ = spec_finding
    proc = run_cli("replay", str(file), cwd=tmp_path)     # buggy.py: outside tmp_path
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "stagecheck replay FILE --candidate CANDIDATE" in proc.stderr
    assert "--baseline" not in proc.stderr and "Traceback" not in proc.stderr


def test_a_replayed_pair_finding_keeps_a_pairs_words(tmp_path):
    shutil.copy(BUGGY, tmp_path / "buggy.py")
    proc = run_cli("diff", "single-loop", f"buggy.py::{FUNCTION}", *QUICK, "--save-dir",
                   "found", cwd=tmp_path)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    file = _saved_errors(tmp_path / "found")[0]
    still = run_cli("replay", str(file), cwd=tmp_path)
    assert still.returncode == 1, still.stdout + still.stderr
    errors = _error_findings(still.stdout)
    assert still.stdout.splitlines()[-1] == messages.REPLAY_PAIR_STILL.format(
        verdict="DIFFERENT", what="example", count=errors)
    fixed = run_cli("replay", str(file), "--candidate", "single-loop", cwd=tmp_path)
    assert fixed.returncode == 0, fixed.stdout + fixed.stderr
    assert messages.REPLAY_NOTHING in fixed.stdout
    assert fixed.stdout.splitlines()[-1] == messages.REPLAY_PAIR_NOW.format(
        verdict="EQUIVALENT", what="example")


def test_a_replay_runs_the_example_under_the_copy_model_it_was_found_with(tmp_path):
    # a write-after-copy hazard shows only with --deferred-copies on the CPU: the replay
    # file keeps it (before, the replay of the hazard's file did not show the hazard)
    shutil.copy(os.path.join(ROOT, "tests", "targets", "buggy_draft_written_after_copy.py"),
                tmp_path / "late.py")
    proc = run_cli("spec", f"late.py::{FUNCTION}", *QUICK, "--deferred-copies",
                   "--save-dir", "found", cwd=tmp_path)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    hazard = sorted((tmp_path / "found").glob("no_copy_hazard-*.json"))[0]
    assert json.loads(hazard.read_text())["run"]["deferred_copies"] is True
    again = run_cli("replay", str(hazard), cwd=tmp_path)
    assert again.returncode == 1, again.stdout + again.stderr
    assert "error: no_copy_hazard" in again.stdout


# ------------------------------------------------------------------ 3: a shim misplaced


def _special(kind: str, tmp_path) -> str:
    if kind == "fifo":
        os.mkfifo(tmp_path / "shim.py")
    elif kind == "device":
        os.symlink("/dev/zero", tmp_path / "shim.py")
    elif kind == "folder":
        (tmp_path / "shim.py").mkdir()
    return "shim.py"


@pytest.mark.parametrize("kind, problem, fix", [
    ("missing", "shim 'shim.py' does not exist", messages.SHIM_MISSING[1].split("(")[0]),
    ("folder", "shim 'shim.py' does not exist (or is a folder)",
     messages.SHIM_MISSING[1].split("(")[0]),
    ("fifo", "is a FIFO (named pipe), not a file",
     messages.NOT_A_REGULAR_FILE[1].format(what="shim")),
    ("device", "is a character device, not a file",
     messages.NOT_A_REGULAR_FILE[1].format(what="shim")),
])
@pytest.mark.parametrize("command", [("diff", "legacy", "single-loop"),
                                     ("spec", f"{BUGGY}::{FUNCTION}"),
                                     ("bench", "legacy", "single-loop"),
                                     ("replay", "any.json")])
def test_a_shim_that_is_no_file_is_said_of_the_shim_option(command, kind, problem, fix,
                                                             tmp_path):
    value = _special(kind, tmp_path)
    proc = run_cli(*command, "--shim", value, cwd=tmp_path)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    line = proc.stderr.strip()
    assert line.startswith("stagecheck: error: option --shim: "), line
    assert repr(value) in line and problem in line and fix in line
    assert "argument" not in line and "Traceback" not in proc.stderr
    assert proc.stdout == ""      # checked before any run (a builtin pair reads no shim)


@pytest.mark.parametrize("kind, problem", [
    ("fifo", "is a FIFO (named pipe), not a file"),
    ("device", "is a character device, not a file"),
])
@pytest.mark.parametrize("command, where", [
    (("diff", "legacy", "single-loop", "--protocol"), "option --protocol"),
    (("protocol", "check"), "argument PROTOCOL"),
])
def test_a_fifo_or_device_given_as_the_protocol_file_is_named_as_such(command, where, kind,
                                                                        problem, tmp_path):
    value = _special(kind, tmp_path)
    proc = run_cli(*command, value, cwd=tmp_path)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert proc.stderr.strip() == f"stagecheck: error: {where}: {value!r} {problem}: " + \
        messages.NOT_A_REGULAR_FILE[0].split("not a file: ")[1].format(
            what="protocol file") + "; " + messages.NOT_A_REGULAR_FILE[1].format(
            what="protocol file")       # was: "does not exist"


def test_a_shim_from_the_config_file_is_said_of_its_key(tmp_path):
    (tmp_path / "pyproject.toml").write_text('[tool.stagecheck]\nshims = ["gone.py"]\n')
    proc = run_cli("diff", "legacy", "single-loop", cwd=tmp_path)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert proc.stderr.splitlines()[-1].startswith(
        f"stagecheck: error: [tool.stagecheck] shims in {tmp_path / 'pyproject.toml'}: "
        f"shim {str(tmp_path / 'gone.py')!r} does not exist")


@pytest.mark.parametrize("command", [
    ("spec", f"{BUGGY}::{FUNCTION}", *QUICK),
    ("diff", "single-loop", f"{BUGGY}::{FUNCTION}", *QUICK),
    ("mutants", f"{BUGGY}::{FUNCTION}", "--list"),
    ("spec", target(fixtures("valid-count-readback", "fixed")[0]), "--protocol",
     "valid-count-readback", *QUICK),
])
def test_a_shim_that_does_not_import_is_said_of_the_shim_option(command, tmp_path):
    (tmp_path / "shim.py").write_text("raise RuntimeError('boom')\n")
    proc = run_cli(*command, "--shim", "shim.py", cwd=tmp_path)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    problem, fix = messages.SHIM_BROKEN
    assert proc.stderr.strip() == "stagecheck: error: option --shim: " + problem.format(
        value=str(tmp_path / "shim.py"), error="RuntimeError: boom") + "; " + fix


def test_a_broken_shim_a_replay_file_names_is_said_of_the_file(tmp_path):
    shutil.copy(BUGGY, tmp_path / "buggy.py")
    shim = tmp_path / "shim.py"
    shim.write_text("def cdiv(a, b):\n    return -(a // -b)\n")
    proc = run_cli("spec", f"buggy.py::{FUNCTION}", *QUICK, "--shim", "shim.py",
                   "--save-dir", "found", cwd=tmp_path)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    file = _saved_errors(tmp_path / "found")[0]
    assert json.loads(file.read_text())["shims"] == [str(shim)]
    shim.write_text("raise RuntimeError('boom')\n")
    problem, fix = messages.SHIM_BROKEN
    broken = problem.format(value=str(shim), error="RuntimeError: boom") + "; " + fix
    saved = run_cli("replay", str(file), cwd=tmp_path)       # the file's shim: the file's
    assert saved.returncode == 2, saved.stdout + saved.stderr
    assert saved.stderr.strip() == "stagecheck: error: argument FILE: " + broken
    given = run_cli("replay", str(file), "--shim", "shim.py", cwd=tmp_path)
    assert given.returncode == 2, given.stdout + given.stderr
    assert given.stderr.strip() == "stagecheck: error: option --shim: " + broken


@pytest.mark.parametrize("command, argument", [
    (("diff", "legacy", "{shim}"), "argument CANDIDATE"),
    (("diff", "{shim}", "single-loop"), "argument BASELINE"),
    (("spec", "{shim}"), "argument TARGET"),
    (("spec", "{shim}", "--protocol", "valid-count-readback"), "argument TARGET"),
    (("mutants", "{shim}"), "argument TARGET"),
])
def test_a_shim_file_given_as_a_target_says_how_to_give_it(command, argument, tmp_path):
    (tmp_path / "helpers.py").write_text("def cdiv(a, b):\n    return -(a // -b)\n")
    proc = run_cli(*(w.format(shim="helpers.py") for w in command), cwd=tmp_path)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    problem, fix = messages.TARGET_FILE_WITHOUT_FUNCTION
    fields = {"value": "helpers.py"}
    if "--protocol" in command:     # a protocol's target is its component class
        problem, fix = messages.PROTOCOL_TARGET_FILE
        fields.update(what="component class GPUModelRunner", name="GPUModelRunner",
                      protocol="valid-count-readback")
    assert proc.stderr.strip() == f"stagecheck: error: {argument}: " + problem.format(
        **fields) + "; " + fix.format(**fields)
    assert "--shim helpers.py" in proc.stderr


def test_the_fixture_says_a_broken_shim_of_its_shims_keyword(pytester):
    shutil.copy(BUGGY, pytester.path / "buggy.py")
    (pytester.path / "shim.py").write_text("raise RuntimeError('boom')\n")
    pytester.makepyfile(test_user=f"""
        def test_broken_shim(stagecheck):
            stagecheck.assert_conforms("buggy.py::{FUNCTION}", examples=5, shims=["shim.py"])
    """)
    result = pytester.runpytest_subprocess(*_autoloaded("hypothesispytest"), *_plugin_args(),
                                           "-p", "no:cacheprovider", timeout=300)
    result.assert_outcomes(failed=1)     # a usage error, said of the keyword, not the target
    problem, fix = messages.SHIM_BROKEN
    result.stdout.fnmatch_lines(["stagecheck: shims: " + problem.format(
        value=str(pytester.path / "shim.py"), error="RuntimeError: boom") + "; " + fix])
    assert "Traceback" not in result.stdout.str()


# ------------------------------------------------------------------ 4: one reader


@pytest.mark.parametrize("content, error", [
    ('{"stagecheck_protocol_replay": 1, "protocol": "valid-count-readback", '
     '"finding": {"scenario": 7}}', "TypeError"),
    ('{"stagecheck_protocol_replay": 1, "protocol": "valid-count-readback", '
     '"finding": {}}', "KeyError"),
    ('{"finding": {"scenario": 7}}', "TypeError"),
    ('{"finding": {"scenario": {}', "JSONDecodeError"),
    ("[" * 100_000, "its JSON is nested too deeply"),
])
def test_staging_and_protocol_replay_files_fail_alike(content, error, tmp_path):
    path = tmp_path / "r.json"
    path.write_text(content)
    proc = run_cli("replay", str(path), "--candidate", "single-loop", cwd=tmp_path)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    problem = messages.REPLAY_MALFORMED[0].split(" (")[0].format(value=str(path))
    assert proc.stderr.startswith(f"stagecheck: error: argument FILE: {problem} ({error}")
    assert "Traceback" not in proc.stderr


def test_a_protocol_replay_file_too_large_or_unreadable_fails_as_a_staging_one(tmp_path):
    big = tmp_path / "big.json"
    with open(big, "w") as fh:
        fh.write('{"stagecheck_protocol_replay": 1, "pad": "')
        fh.write("x" * (17 * 1024 * 1024))
        fh.write('"}')
    proc = run_cli("replay", str(big), cwd=tmp_path)
    too_large = messages.REPLAY_TOO_LARGE[0].split("{")[0]
    assert proc.returncode == 2 and f"argument FILE: {too_large}" in proc.stderr, proc.stderr
    os.mkfifo(tmp_path / "fifo.json")
    fifo = run_cli("replay", str(tmp_path / "fifo.json"), cwd=tmp_path)
    assert fifo.returncode == 2 and "is a FIFO (named pipe), not a file" in fifo.stderr
    assert messages.NOT_A_REGULAR_FILE[1].format(what="replay file") in fifo.stderr
    assert "Traceback" not in proc.stderr + fifo.stderr


@pytest.mark.parametrize("command", [
    ("diff", "legacy", "single-loop", *QUICK, "--no-save"), ("spec", "legacy", *QUICK, "--no-save"),
    ("bench", "legacy", "single-loop"), ("symbolic", "legacy", "single-loop"), ("mutants", "legacy")],
    ids=lambda command: command[0])
def test_a_shim_no_target_reads_is_exit_2_not_ignored(command, tmp_path):
    """Was: exit 0 with a shim that does not even parse, for it was never imported (a file
    target, or a protocol run, imports it and says so)."""
    (tmp_path / "shim.py").write_text("def (:\n")
    proc = run_cli(*command, "--shim", "shim.py", cwd=tmp_path)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    line = proc.stderr.strip()
    assert line.startswith("stagecheck: error: option --shim: "), line
    assert messages.SHIM_UNREAD[1] in line and "is not even imported" in line
    assert proc.stdout == ""


def test_shims_of_the_project_file_may_go_unread_by_a_builtin_run(tmp_path):
    (tmp_path / "shim.py").write_text("def helper():\n    return 1\n")
    (tmp_path / "pyproject.toml").write_text('[tool.stagecheck]\nshims = ["shim.py"]\n')
    proc = run_cli("diff", "legacy", "single-loop", "--examples", "5", "-q", "--no-save",
                   cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
