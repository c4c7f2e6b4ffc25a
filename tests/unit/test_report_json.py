"""One JSON shape for every command: the envelope (schema version, tool version, command,
verdict, settings, targets) beside a command-specific body; docs/json.md documents both."""

from __future__ import annotations

import json
import pathlib
import re

import pytest

from stagecheck import __version__
from stagecheck.oracles.bench import BenchResult, BenchRow
from stagecheck.oracles.kernel.campaign import KernelCampaignResult
from stagecheck.oracles.mutants.matrix import MutationReport
from stagecheck.oracles.mutants.runners import MutantsConfig
from stagecheck.oracles.report.json import (ENVELOPE, SCHEMA_VERSION, bench_settings,
                                            campaign_body, campaign_settings, json_document,
                                            kernel_settings, mutants_settings, render_json,
                                            symbolic_settings)
from stagecheck.oracles.symbolic.result import SymbolicResult
from tests.unit.test_report import result

DOCS = pathlib.Path(__file__).parents[2] / "docs" / "json.md"
TARGETS = {"baseline": {"spec": "legacy"}, "candidate": {"spec": "single-loop"}}


def documents() -> dict[str, dict]:
    r = result()
    sym = SymbolicResult("legacy", "single-loop", paths_explored=3, max_paths=10)
    kernel = KernelCampaignResult(examples=5, seed=2)
    bench = BenchResult("legacy", "single-loop", "cpu",
                        [BenchRow(1, 1e-6, 1e-6, 1.0, 1.0, 1.0, 20, 10)], repeats=20,
                        min_time=0.5)
    config = MutantsConfig(oracles=("spec",), budget=30)
    report = MutationReport("single-loop", "s.py", "stage", ["spec"], 30, 60.0, 160)
    made = {
        "diff": json_document("diff", campaign_body(r, False, TARGETS), "different",
                              settings=campaign_settings(r), targets=TARGETS),
        "spec": json_document("spec", campaign_body(replace_baseline(r)), "different",
                              settings=campaign_settings(r, True),
                              targets={"baseline": None, "candidate": {"spec": "x"}}),
        "symbolic": json_document("symbolic", sym.to_dict(), "different",
                                  settings=symbolic_settings(sym, True), targets=TARGETS),
        "kernel": json_document("kernel", kernel.to_dict(), "equivalent",
                                settings=kernel_settings(kernel)),
        "bench": json_document("bench", bench.to_dict(), "measured",
                               settings=bench_settings(bench), targets=TARGETS),
        "mutants": json_document("mutants", report.to_dict(), "all-killed",
                                 settings=mutants_settings(config),
                                 targets={"target": {"spec": "single-loop"}}),
    }
    return {k: json.loads(render_json(v)) for k, v in made.items()}


def replace_baseline(r):
    from dataclasses import replace
    return replace(r, baseline=None)


@pytest.mark.parametrize("command", ["diff", "spec", "symbolic", "kernel", "bench", "mutants"])
def test_every_command_carries_the_envelope(command):
    data = documents()[command]
    assert set(ENVELOPE) <= set(data)
    assert data["schema_version"] == SCHEMA_VERSION and data["tool"] == "stagecheck"
    assert data["version"] == __version__ and data["command"] == command
    assert isinstance(data["settings"], dict) and data["settings"]


def test_the_envelope_verdict_wins_over_a_body_verdict():
    sym = SymbolicResult("a", "b")
    data = json_document("symbolic", sym.to_dict(), "different")
    assert sym.to_dict()["verdict"] == "equivalent" and data["verdict"] == "different"
    # without an explicit one, the body's is kept; likewise targets
    assert json_document("diff", {"verdict": "x", "targets": {"a": 1}})["targets"] == {"a": 1}


def test_campaign_settings_cover_what_shapes_the_run():
    s = documents()["diff"]["settings"]
    for key in ("examples", "seed", "max_capacity", "strict", "device", "kernel", "engine",
                "jobs", "timeout", "steps", "out_of_contract", "schema"):
        assert key in s, key
    assert s["examples"] == 50 and s["seed"] == 3 and s["strict"] is False
    assert documents()["spec"]["settings"]["strict"] is True
    assert documents()["diff"]["targets"] == TARGETS


def test_docs_json_md_names_every_field():
    """docs/json.md lists every envelope key and every top-level key of each body."""
    text = DOCS.read_text()
    documented = set(re.findall(r"^\| `([a-z_]+)`", text, flags=re.M))
    for command, data in documents().items():
        missing = set(data) - documented
        assert not missing, (command, sorted(missing))
        missing = set(data["settings"]) - documented
        assert not missing, (command, "settings", sorted(missing))
