"""Every buggy refactor in tests/targets is caught; every equivalent rewrite is clean."""

import pathlib
import re

import pytest

from stagecheck.oracles.campaign import run_campaign
from stagecheck.oracles.options import CampaignConfig
from stagecheck.oracles.targets import load_target

TARGETS = pathlib.Path(__file__).resolve().parents[1] / "targets"
FUNCTION = "stage_postprocess_inputs_to_gpu"


def expected_invariants(path: pathlib.Path) -> set[str]:
    match = re.search(r"^# stagecheck-expect: (.+)$", path.read_text(), re.M)
    assert match, f"{path.name} lacks a '# stagecheck-expect:' line"
    return {x.strip() for x in match.group(1).split(",")} - {"none"}


BUGGY = sorted(TARGETS.glob("buggy_*.py"))
EQUIVALENT = sorted(TARGETS.glob("equivalent_*.py"))


def test_the_catalog_is_the_one_its_readme_documents():
    """Every fixture file is described in tests/targets/README.md, and every file the
    README describes exists (so the parametrized tests below run over all of them)."""
    readme = (TARGETS / "README.md").read_text()
    documented = set(re.findall(r"`((?:buggy|equivalent)_\w+\.py)`", readme))
    assert documented == {p.name for p in BUGGY + EQUIVALENT}


@pytest.mark.parametrize("path", BUGGY, ids=lambda p: p.stem)
def test_buggy_refactor_is_caught_with_the_default_budget(path):
    candidate = load_target(f"{path}::{FUNCTION}")
    # the default in-contract budget; the out-of-contract stream cannot give errors
    result = run_campaign(load_target("single-loop"), candidate,
                          CampaignConfig.from_options(out_of_contract=False))
    assert result.verdict() == "different"
    named = {f.invariant for f in result.errors}
    assert named & expected_invariants(path), (named, expected_invariants(path))
    for f in result.errors:
        assert f.scenario is not None and f.in_contract


@pytest.mark.parametrize("path", EQUIVALENT, ids=lambda p: p.stem)
@pytest.mark.parametrize("baseline", ["legacy", "single-loop"])
def test_equivalent_rewrite_gives_no_error(path, baseline):
    candidate = load_target(f"{path}::{FUNCTION}")
    result = run_campaign(load_target(baseline), candidate, CampaignConfig.from_options())
    assert result.errors == [], [f.message for f in result.errors]
