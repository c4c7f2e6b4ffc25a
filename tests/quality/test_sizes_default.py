"""The default ``stagecheck diff`` (no options) at the sizes engines run (issue 20, item 1).

Fast paths behind batch-size thresholds up to 1,024 and a draft count capped at 5 are
found by the default command, each shrunk to its threshold; equivalent vectorised
rewrites (numpy over every live slot) stay EQUIVALENT.
"""

from __future__ import annotations

import json
import pathlib
import subprocess
import sys

import pytest

from stagecheck.oracles.campaign import run_campaign
from stagecheck.oracles.options import CampaignConfig
from stagecheck.oracles.targets import load_target

TARGETS = pathlib.Path(__file__).resolve().parents[1] / "targets"
FUNCTION = "stage_postprocess_inputs_to_gpu"

#: fixture -> the live count its fast path needs (None: the capacity itself)
THRESHOLDS = {"buggy_fast_path_12_forgets_drafts": 12,
              "buggy_fast_path_100_forgets_drafts": 100,
              "buggy_fast_path_257_forgets_drafts": 257,
              "buggy_fast_path_512_forgets_drafts": 512,
              "buggy_fast_path_1024_forgets_drafts": 1024,
              # 601 to 999: no threshold of the list, reached by the "any size" band
              "buggy_fast_path_601_to_999_forgets_drafts": 601,
              # 3, 10, 17, ...: scattered sizes, shrunk to the smallest of them
              "buggy_fast_path_every_7th_size_forgets_drafts": 3,
              "buggy_fast_path_full_batch_forgets_drafts": None}


def default_diff(tmp_path: pathlib.Path, fixture: str, *options: str) -> tuple[int, dict]:
    """``stagecheck diff legacy FIXTURE::f`` with no search option but ``options`` (the
    report and the replay files go to ``tmp_path``)."""
    report = tmp_path / "report.json"
    proc = subprocess.run(
        [sys.executable, "-m", "stagecheck", "diff", "legacy",
         f"{TARGETS / (fixture + '.py')}::{FUNCTION}", "--quiet", "--json", str(report),
         "--save-dir", str(tmp_path / "found"), *options],
        capture_output=True, text=True, timeout=600, cwd=tmp_path)
    assert proc.returncode in (0, 1), proc.stdout + proc.stderr
    return proc.returncode, json.loads(report.read_text())


def draft_errors(report: dict) -> list[dict]:
    errors = [f for f in report["findings"] if f["severity"] == "error"]
    assert errors and all(f["field"] == "draft" and f["in_contract"] for f in errors), errors
    return errors


@pytest.mark.parametrize("fixture", sorted(THRESHOLDS))
def test_a_fast_path_behind_a_batch_size_is_found_and_shrunk_to_its_threshold(
        tmp_path, fixture):
    code, report = default_diff(tmp_path, fixture)
    assert code == 1 and report["verdict"] == "different"
    assert report["settings"]["max_capacity"] == 1024
    threshold = THRESHOLDS[fixture]
    for f in draft_errors(report):
        s = f["scenario"]
        if threshold is None:           # a full batch: the smallest one
            assert s["num_reqs"] == s["capacity"] == 1
        else:
            assert s["num_reqs"] == threshold, (f["id"], s["num_reqs"])
        # the shrunk example keeps one request with drafts, the one the path forgets
        drafted = [r for r in s["req_ids"][: s["num_reqs"]]
                   if s["inputs"]["spec_decode_tokens"].get(r)]
        assert len(drafted) == 1


def test_a_draft_count_capped_at_5_is_found_with_six_drafts(tmp_path):
    code, report = default_diff(tmp_path, "buggy_draft_count_capped_at_5")
    assert code == 1 and report["settings"]["max_drafts"] == 16
    for f in draft_errors(report):
        s = f["scenario"]
        assert s["num_reqs"] == 1
        assert [len(v) for v in s["inputs"]["spec_decode_tokens"].values()] == [6]


def test_a_fast_path_for_exactly_300_is_found_with_ten_times_the_budget(tmp_path):
    """An ``==`` threshold needs that exact size: the default budget draws about a third
    of the thresholds exactly (docs/schemas.md, "Sizes"), ``--examples 3000`` nearly all."""
    code, report = default_diff(tmp_path, "rare_fast_path_exactly_300_forgets_drafts",
                                "--examples", "3000")
    assert code == 1
    assert {f["scenario"]["num_reqs"] for f in draft_errors(report)} == {300}


@pytest.mark.parametrize("fixture", ["equivalent_fast_path_vectorized",
                                     "equivalent_numpy_all_live_slots"])
def test_an_equivalent_vectorised_rewrite_is_equivalent(tmp_path, fixture):
    code, report = default_diff(tmp_path, fixture)
    assert code == 0 and report["verdict"] == "equivalent"
    assert not [f for f in report["findings"] if f["severity"] == "error"]


def test_the_hypothesis_engine_of_the_plugin_shrinks_a_threshold_to_itself():
    """The pytest plugin's engine draws the same sizes; an error on a large example goes
    to the scenario shrinker (hypothesis's would redraw every request per step)."""
    candidate = load_target(f"{TARGETS / 'buggy_fast_path_100_forgets_drafts.py'}::{FUNCTION}")
    result = run_campaign(load_target("single-loop"), candidate,
                          CampaignConfig(engine="hypothesis", out_of_contract=False,
                                         examples=200))
    assert result.verdict() == "different"
    assert {f.scenario["num_reqs"] for f in result.errors} == {100}


def test_the_hypothesis_engine_keeps_the_scenario_shrinkers_smallest_and_counts_no_shrink_tries():
    """An audit (the fixture, random seeds): an error hypothesis had shrunk to 8 requests
    was kept at 8 although the scenario shrinker went on to 1 (the first example a
    shrinker settled on was kept); and hypothesis's shrinking tries were counted as
    examples drawn ("tried 207" where 40 were)."""
    candidate = load_target(f"{TARGETS / 'buggy_draft_count_capped_at_5.py'}::{FUNCTION}")
    for seed in (756510697, 0, 1):
        result = run_campaign(load_target("single-loop"), candidate,
                              CampaignConfig(engine="hypothesis", out_of_contract=False,
                                             examples=300, seed=seed, derandomize=False))
        assert result.verdict() == "different", seed
        for f in result.errors:
            assert f.scenario["num_reqs"] == 1, (seed, f.scenario["num_reqs"])
            assert max(map(len, f.scenario["inputs"]["spec_decode_tokens"].values())) == 6
        assert result.examples_in_contract == min(f.examples_to_find for f in result.errors)
