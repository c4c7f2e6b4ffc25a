"""What ``stagecheck diff`` leaves in the user's repository (issue 23, item 12), through
the command line in a subprocess, run in a fresh git repository: a clean or info-only
run leaves nothing; a run with errors saves them under ``.stagecheck/``, which git
ignores; ``--save-infos``, ``--no-save`` and ``--json -``."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from stagecheck.oracles import messages

ROOT = Path(__file__).resolve().parents[2]
BUGGY = f"{ROOT / 'tests' / 'targets' / 'buggy_copy_one_slot_short.py'}" \
        "::stage_postprocess_inputs_to_gpu"
BUDGET = ("--examples", "60")


@pytest.fixture
def repo(tmp_path) -> Path:
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    return tmp_path


def _stagecheck(cwd: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "stagecheck", *args], capture_output=True,
                          text=True, timeout=300, cwd=cwd)


def _untracked(repo: Path) -> str:
    return subprocess.run(["git", "status", "--porcelain", "--untracked-files=all"],
                          capture_output=True, text=True, cwd=repo, check=True).stdout


def test_an_info_only_run_leaves_nothing_and_says_how_to_save_its_infos(repo):
    done = _stagecheck(repo, "diff", "legacy", "single-loop", *BUDGET)
    assert done.returncode == 0, done.stderr
    assert "info finding(s)" in done.stdout and " 0 info" not in done.stdout
    assert not (repo / ".stagecheck").exists() and _untracked(repo) == ""
    assert messages.INFOS_NOT_SAVED.split("{")[1].split("}")[1] in done.stderr


def test_a_run_with_errors_saves_them_in_a_folder_git_ignores(repo):
    done = _stagecheck(repo, "diff", "legacy", BUGGY, *BUDGET)
    assert done.returncode == 1, done.stderr
    folder = repo / ".stagecheck" / "findings"
    files = list(folder.glob("*.json"))
    assert files and all(json.loads(f.read_text())["finding"]["severity"] == "error"
                         for f in files)
    assert len(list((folder / "runs").glob("*.json"))) == 1
    assert (repo / ".stagecheck" / ".gitignore").read_text().splitlines()[-1] == "*"
    assert _untracked(repo) == ""
    replay = next(line for line in done.stdout.splitlines() if "stagecheck replay" in line)
    assert ".stagecheck/findings/" in replay


def test_save_infos_saves_the_info_findings_too(repo):
    done = _stagecheck(repo, "diff", "legacy", "single-loop", *BUDGET, "--save-infos")
    assert done.returncode == 0, done.stderr
    files = list((repo / ".stagecheck" / "findings").glob("*.json"))
    assert files and {json.loads(f.read_text())["finding"]["severity"] for f in files} == \
        {"info"}
    assert "replay: stagecheck replay" in done.stdout


def test_each_finding_of_the_json_names_its_replay_file(repo):
    # an audit: the protocol documents had it, diff's and spec's did not (the manifest only)
    done = _stagecheck(repo, "diff", "legacy", BUGGY, *BUDGET, "--json", "-", "--quiet")
    assert done.returncode == 1, done.stderr
    findings = json.loads(done.stdout)["findings"]
    errors = [f for f in findings if f["severity"] == "error"]
    assert errors and all((repo / f["replay"]).is_file() for f in errors), errors
    assert all(json.loads((repo / f["replay"]).read_text())["finding"]["id"] == f["id"]
               for f in errors)
    assert all(f["replay"] is None for f in findings if f["severity"] == "info")


def test_no_save_writes_nothing_even_for_errors(repo):
    done = _stagecheck(repo, "diff", "legacy", BUGGY, *BUDGET, "--no-save")
    assert done.returncode == 1 and "ERRORS" in done.stdout, done.stderr
    assert not (repo / ".stagecheck").exists()
    assert "stagecheck replay" not in done.stdout


def test_a_target_inside_the_repository_leaves_no_hypothesis_folder_there(repo):
    # an audit: hypothesis cached the constants of the target's file, a local module, in
    # .hypothesis/constants/ of the current folder (--no-save too)
    stager = repo / "stager.py"
    stager.write_text(Path(BUGGY.split("::")[0]).read_text())
    done = _stagecheck(repo, "diff", "legacy", "stager.py::stage_postprocess_inputs_to_gpu",
                       *BUDGET, "--no-save")
    assert done.returncode == 1 and "ERRORS" in done.stdout, done.stderr
    assert sorted(p.name for p in repo.iterdir()) == [".git", "stager.py"]


def test_json_to_stdout_leaves_the_text_report_to_stderr(repo):
    done = _stagecheck(repo, "diff", "legacy", "single-loop", *BUDGET, "--json", "-",
                       "--quiet")
    assert done.returncode == 0, done.stderr
    document = json.loads(done.stdout)
    assert document["verdict"] == "equivalent" and document["command"] == "diff"
    assert "verdict: EQUIVALENT" in done.stderr
    assert not (repo / "-").exists()


@pytest.mark.parametrize("args,flag,other", [
    (("--no-save", "--save-infos"), "--save-infos", "--no-save"),
    (("--kernel", "off", "--kernel-backend", "triton"), "--kernel-backend",
     "--kernel off (--no-kernel)"),
    (("--no-kernel", "--kernel-backend", "reference"), "--kernel-backend",
     "--kernel off (--no-kernel)"),
])
def test_options_that_contradict_each_other_are_exit_2_naming_both(repo, args, flag, other):
    # was: exit 0, one of them quietly ignored
    done = _stagecheck(repo, "diff", "legacy", "single-loop", *BUDGET, *args)
    assert done.returncode == 2, done.stdout + done.stderr
    assert f"option {flag}: {flag} contradicts {other}: " in done.stderr
    assert done.stdout == "" and _untracked(repo) == ""


@pytest.mark.parametrize("setting,args,kernel,backend", [
    ('kernel-backend = "reference"', ("--no-kernel",), "off", None),
    ('kernel = "off"', ("--kernel-backend", "reference"), "auto", "reference"),
])
def test_a_project_setting_yields_to_a_contradicting_command_line(repo, setting, args, kernel,
                                                                   backend):
    # was: kernel = "off" in the file silently dropped --kernel-backend given on the line
    (repo / "pyproject.toml").write_text(f"[tool.stagecheck]\n{setting}\n")
    done = _stagecheck(repo, "diff", "legacy", "single-loop", *BUDGET, *args, "--no-save",
                       "--json", "-")
    assert done.returncode == 0, done.stdout + done.stderr
    settings = json.loads(done.stdout)["settings"]
    assert (settings["kernel"], settings["kernel_backend"]) == (kernel, backend)


def test_no_save_with_a_save_dir_is_refused_naming_both(tmp_path):
    done = _stagecheck(tmp_path, "diff", "legacy", "single-loop", "--no-save", "--save-dir",
                       "kept")
    assert done.returncode == 2, done.stderr
    assert "--save-dir contradicts --no-save" in done.stderr, done.stderr
    assert not (tmp_path / "kept").exists()


def test_a_default_save_folder_that_cannot_be_made_says_so_and_how_to_run_anyway(tmp_path):
    (tmp_path / ".stagecheck").write_text("a file where the folder would go\n")
    done = _stagecheck(tmp_path, "diff", "legacy", "single-loop", *BUDGET)
    assert done.returncode == 2, done.stderr
    head = messages.SAVE_DIR_DEFAULT_UNWRITABLE[0].split("{value!r}")[1].split(":")[0]
    assert head in done.stderr and "--no-save" in done.stderr, done.stderr
    assert "Traceback" not in done.stderr
    again = _stagecheck(tmp_path, "diff", "legacy", "single-loop", *BUDGET, "--no-save")
    assert again.returncode == 0, again.stderr


def test_the_reproduction_test_in_the_text_report_runs_pasted_as_printed(tmp_path):
    done = _stagecheck(tmp_path, "diff", "legacy", BUGGY, *BUDGET, "--no-save")
    assert done.returncode == 1, done.stderr
    assert messages.REPRODUCE_PASTE in done.stdout
    lines = done.stdout.splitlines()
    start = lines.index("import json")
    end = next(i for i in range(start, len(lines)) if lines[i].startswith("    assert not"))
    (tmp_path / "test_pasted.py").write_text("\n".join(lines[start:end + 1]) + "\n")
    ran = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                          "test_pasted.py"], cwd=tmp_path, capture_output=True, text=True,
                         timeout=600)
    assert ran.returncode == 1 and "1 failed" in ran.stdout, ran.stdout + ran.stderr
    assert "copy_discipline" in ran.stdout, ran.stdout


def test_a_finding_that_needs_earlier_calls_says_so_in_the_report_json_and_replay(tmp_path):
    """A candidate with a stale module-level cache differs only after earlier calls: its
    shrunk example, run again alone in a fresh worker, shows nothing, and every report
    and its replay say so (was: a 1-slot counterexample whose replay said EQUIVALENT)."""
    stale = ROOT / "tests" / "targets" / "history" / "stale_cache_across_calls.py"
    done = _stagecheck(tmp_path, "diff", "single-loop",
                       f"{stale}::stage_postprocess_inputs_to_gpu", *BUDGET, "--json",
                       "report.json")
    assert done.returncode == 1, done.stdout + done.stderr
    assert messages.NOT_SHOWN_ALONE in done.stdout, done.stdout
    errors = [f for f in json.loads((tmp_path / "report.json").read_text())["findings"]
              if f["severity"] == "error"]
    assert errors and all(f["extra"].get("not_alone") for f in errors), errors
    line = next(x for x in done.stdout.splitlines() if "replay: stagecheck replay" in x)
    again = subprocess.run([sys.executable, "-m", "stagecheck", "replay",
                            *line.split("stagecheck replay ", 1)[1].split()],
                           capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert again.returncode == 0 and messages.REPLAY_NOT_ALONE in again.stdout, again.stdout


def test_a_finding_of_every_call_is_not_marked(tmp_path):
    done = _stagecheck(tmp_path, "diff", "legacy", BUGGY, *BUDGET, "--json", "report.json")
    assert done.returncode == 1 and messages.NOT_SHOWN_ALONE not in done.stdout
    errors = [f for f in json.loads((tmp_path / "report.json").read_text())["findings"]
              if f["severity"] == "error"]
    assert errors and not any(f["extra"].get("not_alone") for f in errors), errors
