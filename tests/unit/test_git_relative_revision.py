"""A revision counted back from another (``HEAD~5``) that the history does not reach is
exit 2 with a fix that works: it said to fetch it as a branch of a remote ("git fetch
origin HEAD~5:refs/remotes/origin/HEAD~5"), a command git refuses."""

import os
import subprocess

import pytest

from stagecheck.oracles import messages
from stagecheck.oracles.errors import TargetLoadError
from stagecheck.oracles.targets import load_target


def test_a_relative_revision_beyond_the_history_is_not_told_to_be_fetched(tmp_path,
                                                                          monkeypatch):
    git = ["git", "-c", "user.email=a@b", "-c", "user.name=a"]
    subprocess.run(["git", "init", "-q"], cwd=tmp_path, check=True)
    (tmp_path / "f.py").write_text("def g(ctx):\n    return None\n")
    subprocess.run(["git", "add", "f.py"], cwd=tmp_path, check=True)
    subprocess.run([*git, "commit", "-qm", "one"], cwd=tmp_path, check=True)
    monkeypatch.chdir(tmp_path)
    with pytest.raises(TargetLoadError) as info:
        load_target("git:HEAD~5:f.py::g")
    said = str(info.value)
    assert "refs/remotes" not in said and "git fetch origin HEAD~5" not in said, said
    assert messages.GIT_BAD_RELATIVE_REVISION[1].format(rev="HEAD~5") in said, said
    assert os.getcwd() == str(tmp_path)
