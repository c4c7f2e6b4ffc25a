"""The fixture catalogs of the built-in schemas (``tests/targets/<schema>/``), and the
two checks every catalog gets: a buggy refactor is caught naming one of the invariants
its line 2 expects; an equivalent rewrite gives no error finding."""

from __future__ import annotations

import pathlib
import re

from stagecheck.oracles.campaign import run_campaign
from stagecheck.oracles.options import CampaignConfig
from stagecheck.oracles.targets import load_target

TARGETS = pathlib.Path(__file__).resolve().parent / "targets"


def expected_invariants(path: pathlib.Path) -> set[str]:
    match = re.search(r"^# stagecheck-expect: (.+)$", path.read_text(), re.M)
    assert match, f"{path.name} lacks a '# stagecheck-expect:' line"
    assert path.read_text().splitlines()[1] == match.group(0), "the expect line is line 2"
    return {x.strip() for x in match.group(1).split(",")} - {"none"}


def catalog(schema: str) -> tuple[list[pathlib.Path], list[pathlib.Path]]:
    folder = TARGETS / schema
    return sorted(folder.glob("buggy_*.py")), sorted(folder.glob("equivalent_*.py"))


def documented(schema: str) -> set[str]:
    """The fixture files ``tests/targets/<schema>/README.md`` describes."""
    readme = (TARGETS / schema / "README.md").read_text()
    return set(re.findall(r"`((?:buggy|equivalent)_\w+\.py)`", readme))


def assert_caught(reference: str, path: pathlib.Path, function: str) -> set[str]:
    """The default in-contract budget finds the bug, naming an expected invariant."""
    candidate = load_target(f"{path}::{function}")
    result = run_campaign(load_target(reference), candidate,
                          CampaignConfig.from_options(out_of_contract=False))
    assert result.verdict() == "different"
    named = {f.invariant for f in result.errors}
    expected = expected_invariants(path)
    assert expected and named & expected, (named, expected)
    for f in result.errors:
        assert f.scenario is not None and f.in_contract
    return named


def assert_clean(reference: str, path: pathlib.Path, function: str):
    """Both streams with the default budget: no error finding."""
    assert expected_invariants(path) == set()
    result = run_campaign(load_target(reference), load_target(f"{path}::{function}"),
                          CampaignConfig.from_options())
    assert result.errors == [], [f.message for f in result.errors]
    return result
