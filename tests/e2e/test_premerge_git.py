"""The documented pre-merge workflow, end to end, on a throwaway git repository."""

import json
import os
import pathlib
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
VLLM_HEADER = (
    "# SPDX-License-Identifier: Apache-2.0\n"
    "from vllm.v1.core.sched.output import SchedulerOutput\n"
    "from vllm.v1.worker.gpu_input_batch import CachedRequestState\n"
    "import torch\n\n\n"
    "def preprocess_mamba(scheduler_output: SchedulerOutput, ctx) -> None:\n"
    "    raise NotImplementedError  # unrelated engine code, never compiled\n\n\n")
PATH = "vllm/v1/worker/mamba_utils.py"
FUNC = "stage_postprocess_inputs_to_gpu"


def git(repo, *args):
    subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True,
                   env={**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t",
                        "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t"})


def commit(repo, body, message):
    target = repo / PATH
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(VLLM_HEADER + body)
    git(repo, "add", PATH)
    git(repo, "commit", "-qm", message)


def stagecheck(repo, *args):
    return subprocess.run([sys.executable, "-m", "stagecheck", *args], cwd=repo,
                          capture_output=True, text=True, timeout=600)


@pytest.fixture
def repo(tmp_path):
    repo = tmp_path / "engine"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    commit(repo, (ROOT / "impl/staging_legacy.py").read_text(), "legacy staging")
    git(repo, "checkout", "-q", "-b", "refactor")
    commit(repo, (ROOT / "impl/staging_single_loop.py").read_text(), "merge the two loops")
    return repo


def test_premerge_command_clean_refactor(repo):
    proc = stagecheck(repo, "diff", f"git:main:{PATH}::{FUNC}", f"{PATH}::{FUNC}",
                      "--junit-xml", "stagecheck.xml", "--json", "stagecheck.json")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "verdict: EQUIVALENT" in proc.stdout
    xml = (repo / "stagecheck.xml").read_text()
    assert "<testsuite" in xml and "<failure" not in xml and 'name="slot_alignment"' in xml
    # nothing left behind by reading the revision: no worktree, no checkout change
    status = subprocess.run(["git", "status", "--porcelain"], cwd=repo, capture_output=True,
                            text=True).stdout
    assert PATH not in status
    worktrees = subprocess.run(["git", "worktree", "list"], cwd=repo, capture_output=True,
                               text=True).stdout
    assert len(worktrees.strip().splitlines()) == 1


def test_premerge_command_planted_bug_gives_exit_1_and_a_replay_file(repo):
    buggy = (ROOT / "impl/staging_single_loop.py").read_text().replace(
        "state_idx_buf.copy_to_gpu(num_reqs)", "state_idx_buf.copy_to_gpu()")
    commit(repo, buggy, "copy the whole state-index buffer")
    proc = stagecheck(repo, "diff", f"git:main:{PATH}::{FUNC}", f"{PATH}::{FUNC}",
                      "--junit-xml", "stagecheck.xml")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "verdict: DIFFERENT" in proc.stdout and "copy_discipline" in proc.stdout
    assert "<failure" in (repo / "stagecheck.xml").read_text()
    replays = [f for f in sorted((repo / ".stagecheck" / "findings").glob("copy_discipline-*"))
               if json.loads(f.read_text())["finding"]["severity"] == "error"]
    assert replays
    again = stagecheck(repo, "replay", str(replays[0]))
    assert again.returncode == 1 and "copy_discipline" in again.stdout
    fixed = stagecheck(repo, "replay", str(replays[0]), "--candidate",
                       f"git:refactor~1:{PATH}::{FUNC}")
    assert fixed.returncode == 0, fixed.stdout + fixed.stderr


@pytest.mark.parametrize("target,needle", [
    (f"git:no-such-rev:{PATH}::{FUNC}", "is unknown to git"),
    (f"git:main:vllm/missing.py::{FUNC}", "does not exist at revision"),
    (f"git:main:{PATH}::no_such_function", "has no module-level function"),
    (f"git:main:{PATH}", f"'git:main:{PATH}::NAME' (e.g. 'git:main:{PATH}::{FUNC}')"),
])
def test_revision_errors_exit_2(repo, target, needle):
    proc = stagecheck(repo, "diff", "legacy", target)
    assert proc.returncode == 2 and needle in proc.stderr, proc.stderr
    assert "Traceback" not in proc.stderr


def test_revision_outside_a_repository_exits_2(tmp_path):
    proc = stagecheck(tmp_path, "diff", "legacy", f"git:main:{PATH}::{FUNC}")
    assert proc.returncode == 2 and "is not inside a git repository" in proc.stderr
