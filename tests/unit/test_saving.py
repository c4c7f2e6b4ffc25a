"""What a run saves (issue 23, item 12): every error finding, info findings only when
asked, nothing for a run without one; the ``.stagecheck`` folder ignores itself for
git; a save folder keeps its last runs and the replay files they name."""

from __future__ import annotations

import json
import os
import time

from stagecheck.oracles.campaign import CampaignResult
from stagecheck.oracles.options import CampaignConfig
from stagecheck.oracles.report.replay import (GITIGNORE, KEEP_RUNS, kept_findings,
                                              mark_ignored, prune_runs, save_run)
from stagecheck.spec import ERROR, INFO, Finding
from tests.helpers import scenario


def _finding(invariant: str, severity: str, n: int = 0) -> Finding:
    s = scenario(num_reqs=n % 4).to_dict()         # four distinct scenarios
    return Finding(invariant=invariant, severity=severity, message=f"m{n}", scenario=s)


def _result(*findings: Finding) -> CampaignResult:
    return CampaignResult("legacy", "single-loop", CampaignConfig.from_options(),
                          findings=list(findings), examples_in_contract=10)


def _save(directory, result, infos=False, keep=KEEP_RUNS, run="run"):
    return save_run(result, str(directory), run, "diff", {"baseline": None,
                    "candidate": None}, result.verdict(), infos=infos, keep=keep)


def test_an_info_only_run_saves_nothing_unless_asked(tmp_path):
    folder = tmp_path / ".stagecheck" / "findings"
    result = _result(_finding("same_message", INFO), _finding("same_outcome", INFO, 1))
    assert kept_findings(result) == []
    assert _save(folder, result) == ({}, None)
    assert not (tmp_path / ".stagecheck").exists()
    saved, manifest = _save(folder, result, infos=True)
    assert len(saved) == 2 and os.path.isfile(manifest)


def test_every_error_is_saved_and_the_manifest_lists_every_finding(tmp_path):
    folder = tmp_path / ".stagecheck" / "findings"
    error, info = _finding("slot_alignment", ERROR), _finding("same_message", INFO, 1)
    saved, manifest = _save(folder, _result(error, info))
    assert set(saved) == {error.id} and os.path.isfile(saved[error.id])
    listed = json.loads(open(manifest).read())["findings"]
    assert {f["id"]: f["file"] for f in listed} == {error.id: saved[error.id], info.id: None}
    assert (tmp_path / ".stagecheck" / ".gitignore").read_text() == GITIGNORE


def test_a_run_under_other_settings_never_replaces_a_replay_file(tmp_path):
    """An audit: the same pair's finding under --deferred-copies was saved over the one of
    the run without it, and the first run's manifest then named the second's file."""
    folder = tmp_path / ".stagecheck" / "findings"
    error = _finding("copy_discipline", ERROR)
    plain, _ = _save(folder, _result(error), run="plain")
    deferred = CampaignResult("legacy", "single-loop",
                              CampaignConfig.from_options(deferred_copies=True),
                              findings=[error], examples_in_contract=10)
    later, _ = _save(folder, deferred, run="deferred")
    assert plain[error.id] != later[error.id]
    assert json.loads(open(plain[error.id]).read())["run"]["deferred_copies"] is False
    assert json.loads(open(later[error.id]).read())["run"]["deferred_copies"] is True


def test_the_gitignore_goes_to_the_stagecheck_folder_only_and_is_never_replaced(tmp_path):
    own = tmp_path / ".stagecheck" / "findings" / "deep"
    own.mkdir(parents=True)
    (tmp_path / ".stagecheck" / ".gitignore").write_text("mine\n")
    assert mark_ignored(str(own)) == str(tmp_path / ".stagecheck" / ".gitignore")
    assert (tmp_path / ".stagecheck" / ".gitignore").read_text() == "mine\n"
    elsewhere = tmp_path / "ci" / "findings"
    assert mark_ignored(str(elsewhere)) is None
    _save(elsewhere, _result(_finding("slot_alignment", ERROR)))
    assert not (tmp_path / "ci" / ".gitignore").exists()
    assert not (elsewhere / ".gitignore").exists()


def _age(path: str, seconds: float) -> None:
    stamp = time.time() - seconds
    os.utime(path, (stamp, stamp))


def test_old_runs_and_the_files_only_they_name_are_pruned(tmp_path):
    folder = tmp_path / "findings"
    manifests, files = [], []
    for k in range(4):
        saved, manifest = _save(folder, _result(_finding("slot_alignment", ERROR, k),
                                                _finding("tail_policy", ERROR, 0)),
                                keep=100, run=f"run{k}")
        for path in (*saved.values(), manifest):
            _age(path, 100 - 10 * k)            # run k was written before run k + 1
        manifests.append(manifest)
        files.append(saved)
    shared = files[0][_finding("tail_policy", ERROR, 0).id]     # every run names it
    removed = prune_runs(str(folder), keep=2)
    assert set(removed) == {manifests[0], manifests[1],
                            files[0][_finding("slot_alignment", ERROR, 0).id],
                            files[1][_finding("slot_alignment", ERROR, 1).id]}
    assert os.path.isfile(shared) and all(os.path.isfile(m) for m in manifests[2:])
    assert sorted(os.listdir(folder / "runs")) == ["run2.json", "run3.json"]


def test_pruning_never_touches_what_a_manifest_names_outside_the_folder(tmp_path):
    folder = tmp_path / "findings"
    (folder / "runs").mkdir(parents=True)
    outside = tmp_path / "precious.json"
    outside.write_text("{}")
    rewritten = folder / "again.json"
    rewritten.write_text("{}")
    old = folder / "runs" / "old.json"
    old.write_text(json.dumps({"stagecheck_run": 1, "findings": [{"file": str(outside)},
                                                                 {"file": str(rewritten)},
                                                                 {"file": "../precious.json"}]}))
    _age(str(old), 50)
    _age(str(outside), 100)
    new = folder / "runs" / "new.json"
    new.write_text(json.dumps({"stagecheck_run": 1, "findings": []}))
    assert prune_runs(str(folder), keep=1) == [str(old)]   # the rewritten file is newer
    assert outside.exists() and rewritten.exists()


def test_pruning_never_removes_a_users_json_file_in_the_runs_folder(tmp_path):
    """An audit: 25 JSON files of the user's in ``runs/`` (not manifests: no
    ``stagecheck_run``) lost the 5 oldest to a run's pruning; only manifests are pruned,
    and what a user's file names is never removed."""
    folder = tmp_path / "findings"
    (folder / "runs").mkdir(parents=True)
    named = folder / "named.json"
    named.write_text("{}")
    _age(str(named), 500)
    mine = []
    for k in range(5):
        path = folder / "runs" / f"exp{k:02}.json"
        path.write_text(json.dumps({"findings": [{"file": str(named)}], "k": k}))
        _age(str(path), 400 - k)
        mine.append(path)
    (folder / "runs" / "notes.json").write_text("[1, 2]")
    assert prune_runs(str(folder), keep=1) == []
    assert all(p.exists() for p in mine) and named.exists()
