"""The renderers, against snapshots: what a user reads for fixed results.

A snapshot is the exact text in ``tests/unit/snapshots/``. When a renderer changes on
purpose, re-create them with ``STAGECHECK_UPDATE_SNAPSHOTS=1 python -m pytest
tests/unit/test_report.py`` and review the diff like any other change.
"""

from __future__ import annotations

import json
import os
import pathlib
from dataclasses import replace
from xml.etree import ElementTree as ET

import pytest

from stagecheck.oracles.campaign import CampaignResult
from stagecheck.oracles.options import CampaignConfig
from stagecheck.oracles.report import (json_document, pytest_example, render_campaign,
                                       render_json, render_junit, render_replay)
from stagecheck.oracles.report.json import campaign_body
from stagecheck.spec import DEFAULT_SCHEMA, ERROR, INFO, Finding
from tests.helpers import scenario

SNAPSHOTS = pathlib.Path(__file__).parent / "snapshots"


def matches_snapshot(name: str, text: str) -> None:
    path = SNAPSHOTS / name
    if os.environ.get("STAGECHECK_UPDATE_SNAPSHOTS"):
        SNAPSHOTS.mkdir(exist_ok=True)
        path.write_text(text)
    assert path.exists(), f"no snapshot {name}: run with STAGECHECK_UPDATE_SNAPSHOTS=1"
    assert text == path.read_text(), f"{name} changed; see the module docstring"


def result() -> CampaignResult:
    s = scenario().to_dict()
    error = Finding("slot_alignment", ERROR, "computed[1] holds 8, expected "
                    "requests[r].num_computed_tokens = 7 for request 'req-b'", side="candidate",
                    field="computed", slot=1, view="cpu", candidate=8, expected=7,
                    kernel_impact=True, scenario=s, examples_to_find=4,
                    extra={"slots": [1], "values": [100, 8, 2**31 - 1, -1, -1, -1]})
    info = Finding("same_message", INFO, "same exception type, different message text",
                   in_contract=True, baseline="a", candidate="b", scenario=s,
                   examples_to_find=9, extra={"context": "failure path: live request 'req-b'"})
    return CampaignResult("legacy", "file.py::stage", CampaignConfig(examples=50, seed=3),
                          [error, info], examples_in_contract=4, examples_out_of_contract=50,
                          seconds=1.25, schema=DEFAULT_SCHEMA)


def test_campaign_text():
    matches_snapshot("campaign.txt", render_campaign(result(), saved={
        "slot_alignment-c54416b8f4": ".stagecheck/findings/slot_alignment-c54416b8f4.json"},
        verbose=True))


def test_clean_campaign_text_says_how_to_search_harder():
    clean = CampaignResult("legacy", "single-loop", CampaignConfig(examples=20), [],
                           examples_in_contract=20, examples_out_of_contract=20, seconds=0.5)
    matches_snapshot("campaign_clean.txt", render_campaign(clean))


def test_campaign_json_envelope_and_body():
    document = json_document("diff", campaign_body(result()), result().verdict())
    data = json.loads(render_json(document))
    assert data["schema_version"] == 1 and data["tool"] == "stagecheck"
    assert data["command"] == "diff" and data["verdict"] == "different"
    assert data["examples"] == {"in_contract": 4, "out_of_contract": 50, "edge": 0,
                                "instrumented": 0, "kernel": 0}
    assert data["engine"] == "batched" and data["jobs"] == 1
    assert [f["invariant"] for f in data["findings"]] == ["slot_alignment", "same_message"]
    assert data["findings"][0]["id"] == result().findings[0].id


def test_junit_is_well_formed_with_a_failure_per_error():
    root = ET.fromstring(render_junit(result()))
    (suite,) = root.findall("testsuite")
    cases = {c.get("name"): c for c in suite.findall("testcase")}
    assert cases["slot_alignment"].find("failure") is not None
    assert cases["same_message"].find("failure") is None
    # one error, one failure (its kernel impact is part of it, listed by kernel_results)
    assert suite.get("failures") == "1"
    assert cases["kernel_results"].find("failure") is None
    strict = ET.fromstring(render_junit(result(), strict=True)).find("testsuite")
    assert strict.get("failures") == "2"


def test_replay_text():
    f = result().findings[0]
    saved = {"finding": f.to_dict(), "baseline": "legacy", "candidate": "file.py::stage"}
    matches_snapshot("replay.txt", render_replay("x.json", saved, "legacy", "file.py::stage",
                                                 "cpu", [f]))
    assert "no longer shows a difference" in render_replay("x.json", saved, "legacy",
                                                           "single-loop", "cpu", [])


def test_a_replay_lists_one_cause_once_with_the_saved_finding_first():
    f = result().findings[0]
    saved = {"finding": f.to_dict(), "baseline": "legacy", "candidate": "file.py::stage"}
    same_slot = [Finding("same_buffers", ERROR, f"{view} computed[1] (live): baseline 7, "
                         "candidate 8", side="both", field="computed", slot=1, view=view)
                 for view in ("cpu", "gpu")]
    other = Finding("same_buffers", ERROR, "cpu draft[3] (live): baseline 0, candidate 1",
                    side="both", field="draft", slot=3, view="cpu")
    # replayed findings carry no example of their own: they share the saved one
    lines = render_replay("x.json", saved, "legacy", "file.py::stage", "cpu",
                          [*same_slot, other, replace(f, scenario=None)]).splitlines()
    assert lines[1].startswith("  error: slot_alignment (candidate) computed[1] holds 8")
    assert lines[1].endswith("(the saved finding)")
    assert lines[2] == "    2 more finding(s) of this error:"
    assert lines[3:5] == [f"      same_buffers (both) {v} computed[1] (live): baseline 7, "
                          "candidate 8" for v in ("cpu", "gpu")]
    assert lines[5].startswith("  error: same_buffers (both) cpu draft[3]")
    assert lines[-1].endswith("still shows 4 error finding(s)")


def test_pytest_example_imports_only_the_public_api_and_runs(tmp_path):
    code = pytest_example(result().findings[0], "legacy", "single-loop")
    imports = [line for line in code.splitlines() if line.startswith(("import", "from"))]
    assert imports == ["import json", "from hypothesis import Phase, example, given, settings",
                       "from stagecheck import StagingScenario, evaluate, load_target, "
                       "staging_scenarios"]
    assert "deadline=None" in code
    namespace: dict = {}
    exec(compile(code, "snippet.py", "exec"), namespace)
    test = next(v for k, v in namespace.items() if k.startswith("test_"))
    test()   # legacy vs single-loop on the finding's scenario: no error finding


@pytest.mark.parametrize("severity", [ERROR, INFO])
def test_every_finding_line_names_its_id_side_and_contract(severity):
    f = [g for g in result().findings if g.severity == severity][0]
    text = render_campaign(result(), verbose=True)
    assert f"[{f.id}] ({f.side}, in contract" in text
    assert f"[{f.id}]" in render_campaign(result())     # grouped infos name an example


def test_replay_files_keep_the_schema_and_their_names_cover_it(tmp_path):
    """A replay file records the schema its finding was judged against (how --schema
    loads it again) and the pinned targets; its digest covers the schema too, so the
    same pair under another schema never writes (or overwrites) the same file."""
    from stagecheck.oracles.report.replay import load_replay, save_findings
    builtin = result()
    user = result()
    user.schema_spec = str(tmp_path / "my_schema.py") + ":SCHEMA"
    first = save_findings(builtin, str(tmp_path / "a"))
    second = save_findings(user, str(tmp_path / "b"))
    assert set(first) == set(second)                     # the same bugs ...
    for fid in first:                                    # ... in files of other names
        assert os.path.basename(first[fid]) != os.path.basename(second[fid])
        assert os.path.basename(first[fid]).startswith(f"{fid}-")
        saved, _ = load_replay(second[fid])
        assert saved["schema"] == user.schema_spec
        assert (saved["baseline"], saved["candidate"]) == ("legacy", "file.py::stage")
    again = save_findings(result(), str(tmp_path / "c"))   # same pair, same schema
    assert [os.path.basename(p) for p in again.values()] == \
        [os.path.basename(p) for p in first.values()]


def test_a_shrunk_scenario_too_large_to_read_is_named_not_printed_as_a_test():
    from dataclasses import replace

    from stagecheck.oracles.report.text import INLINE_SCENARIO_CHARS
    small = result()
    assert "SCENARIO = StagingScenario.from_dict" in render_campaign(small)
    error = small.findings[0]
    large = dict(error.scenario, inputs={**error.scenario["inputs"],
                                         "padding": ["x" * 100] * (INLINE_SCENARIO_CHARS // 50)})
    big = replace(small, findings=[replace(error, scenario=large), small.findings[1]])
    saved = {error.id: ".stagecheck/findings/x.json --baseline legacy --candidate file.py::stage"}
    text = render_campaign(big, saved=saved)
    assert "SCENARIO = StagingScenario.from_dict" not in text
    assert f"[{error.id}] the shrunk scenario has" in text
    assert "stagecheck replay .stagecheck/findings/x.json --baseline legacy" in text
    assert "it was not saved (--no-save): run again without --no-save" in render_campaign(big)


def test_a_pasted_test_loads_the_schema_and_runs_the_example_as_the_run_did():
    # a --schema run's test must load that schema (before, load_target without it failed
    # with "give its schema with --schema") and run the example with the run's options
    from stagecheck.oracles.options import RunOptions
    code = pytest_example(result().findings[0], "legacy", "single-loop",
                          schema="mamba-postprocess", run=RunOptions(deferred_copies=True))
    assert "SCHEMA = load_schema('mamba-postprocess')" in code
    assert "@given(staging_scenarios(schema=SCHEMA))" in code
    assert "OPTIONS = RunOptions(deferred_copies=True)" in code
    assert "load_target('single-loop', SCHEMA), scenario, OPTIONS)" in code
    namespace: dict = {}
    exec(compile(code, "snippet.py", "exec"), namespace)
    next(v for k, v in namespace.items() if k.startswith("test_"))()
