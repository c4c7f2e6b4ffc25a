"""One error per bug (issue 20, item 5): error findings that share a cause are one group."""

from __future__ import annotations

import json
from xml.etree import ElementTree as ET

from stagecheck.oracles.campaign import CampaignResult
from stagecheck.oracles.collect import error_groups
from stagecheck.oracles.options import CampaignConfig
from stagecheck.oracles.report import render_campaign, render_junit
from stagecheck.oracles.report.json import campaign_body
from stagecheck.oracles.report.markdown import render_markdown
from stagecheck.spec import DEFAULT_SCHEMA, ERROR, INFO, Finding
from tests.helpers import scenario

FIELDS = ("state_idx", "scheduled", "computed", "draft")


def off_by_one(example=None) -> list[Finding]:
    """What an off-by-one loop gives: slot 0 stale in four fields, both views, and
    against the spec (8 same_buffers + 4 slot_alignment findings on one example)."""
    s = (example or scenario()).to_dict()
    out = [Finding("same_buffers", ERROR, f"{view} {f}[0] (live): baseline 0, candidate -1",
                   field=f, slot=0, view=view, scenario=s, kernel_impact=True,
                   extra={"slots": [0]}) for f in FIELDS for view in ("cpu", "gpu")]
    out += [Finding("slot_alignment", ERROR, f"{f}[0] holds -1, expected 0", side="candidate",
                    field=f, slot=0, view="cpu", scenario=s) for f in FIELDS]
    return out


def test_an_off_by_one_is_one_group_of_twelve_headed_by_the_spec_statement():
    (g,) = error_groups(off_by_one())
    assert len(g.findings) == 12 and len(g.members) == 11
    assert g.head.invariant == "slot_alignment" and g.head.field == "computed"
    assert g.kernel_impact is True
    assert "slot 0" in g.cause


def test_the_same_invariant_and_field_on_other_examples_is_the_same_error():
    a = scenario().to_dict()
    b = scenario(num_reqs=2).to_dict()
    found = [Finding("same_buffers", ERROR, "cpu draft[0]", field="draft", slot=0, view="cpu",
                     scenario=a),
             Finding("same_buffers", ERROR, "gpu draft[1]", field="draft", slot=1, view="gpu",
                     scenario=b)]
    (g,) = error_groups(found)
    assert len(g.findings) == 2


def test_a_copy_range_joins_the_values_it_leaves_on_its_example():
    s = scenario().to_dict()
    found = [Finding("mirror_consistency", ERROR, "gpu computed[0] = -2 but cpu holds 100",
                     field="computed", slot=0, view="gpu", scenario=s),
             Finding("copy_discipline", ERROR, "computed copied 0 time(s)", field="computed",
                     scenario=s, extra={"kind": "range"}),
             Finding("copy_discipline", ERROR, "draft copied 0 time(s)", field="draft",
                     scenario=s, extra={"kind": "range"})]
    (g,) = error_groups(found)
    assert g.head.invariant == "copy_discipline"      # what the code did heads the group


def test_a_missing_copy_shrunk_to_another_example_than_its_mirror_is_one_error():
    """A forgotten copy: its copy_discipline finding shrinks to an empty batch, the
    mirror it leaves stale to a batch of one; one field's copy findings are one error,
    and another field's stay apart."""
    empty, one = scenario(num_reqs=0).to_dict(), scenario(num_reqs=1).to_dict()
    found = [Finding("copy_discipline", ERROR, "draft copied 0 time(s)", side="candidate",
                     field="draft", scenario=empty, extra={"kind": "range"}),
             Finding("same_copies", ERROR, "draft copied over [(0, 0)] by the baseline, []",
                     field="draft", scenario=empty, side="both"),
             Finding("mirror_consistency", ERROR, "gpu draft[0] = -2 but cpu holds 0",
                     side="candidate", field="draft", slot=0, view="gpu", scenario=one),
             Finding("mirror_consistency", ERROR, "gpu computed[0] = -2 but cpu holds 0",
                     side="candidate", field="computed", slot=3, view="gpu",
                     scenario=scenario(num_reqs=2).to_dict())]
    groups = error_groups(found)
    assert [len(g.findings) for g in groups] == [3, 1]
    assert groups[0].head.invariant == "copy_discipline"
    assert "copy of one field" in groups[0].cause


def test_unrelated_errors_stay_apart_and_infos_are_left_out():
    a, b = scenario().to_dict(), scenario(num_reqs=1).to_dict()
    found = [Finding("slot_alignment", ERROR, "computed[1]", field="computed", slot=1,
                     scenario=a),
             Finding("inputs_unchanged", ERROR, "req_ids was mutated", field="req_ids",
                     scenario=b),
             Finding("same_message", INFO, "another text", scenario=a)]
    groups = error_groups(found)
    assert [len(g.findings) for g in groups] == [1, 1]
    assert {g.head.invariant for g in groups} == {"slot_alignment", "inputs_unchanged"}


def result(findings) -> CampaignResult:
    return CampaignResult("legacy", "file.py::stage", CampaignConfig(examples=50), findings,
                          examples_in_contract=3, examples_out_of_contract=50, seconds=1.0,
                          schema=DEFAULT_SCHEMA)


def test_every_report_shows_one_error_and_keeps_every_finding():
    r = result(off_by_one())
    assert r.verdict() == "different" and len(r.errors) == 12      # the verdict holds
    text = render_campaign(r, show_tests=False)
    assert "verdict: DIFFERENT — 1 error(s) from 12 error finding(s)" in text
    errors = text.split("ERRORS")[1]
    assert errors.count("slot  request") == 1          # one slot table
    assert "11 more finding(s) of this error" in errors
    assert all(f.id in errors for f in r.errors)       # every member listed
    assert len(errors.splitlines()) < 25
    body = campaign_body(r)
    (group,) = body["error_groups"]
    assert group["members"][0] == group["head"] and len(group["members"]) == 12
    assert {f["group"] for f in body["findings"]} == {group["id"]}
    suite = ET.fromstring(render_junit(r)).find("testsuite")
    assert suite.get("failures") == "1"
    failure = suite.find("testcase[@name='slot_alignment']/failure")
    assert all(f.id in failure.text for f in r.errors)
    members = suite.find("testcase[@name='same_buffers']")
    assert members.find("failure") is None
    assert group["id"] in members.find("system-out").text
    md = render_markdown(r)
    assert "### Errors (1, from 12 error finding(s) grouped by cause)" in md
    assert md.count("```text") == 1
    assert json.dumps(body)      # plain data


def test_rows_reordered_are_one_error_though_each_field_first_differs_elsewhere():
    """A fast path that sorts the batch: each field's values differ among the same rows,
    the first differing slot per field where its values happen to differ."""
    s = scenario().to_dict()
    firsts = {"state_idx": 0, "scheduled": 1, "computed": 0, "draft": 2}
    found = [Finding("same_buffers", ERROR, f"{view} {f}[{k}]", field=f, slot=k, view=view,
                     scenario=s, extra={"slots": [x for x in (0, 1, 2) if x >= k]})
             for f, k in firsts.items() for view in ("cpu", "gpu")]
    (g,) = error_groups(found)
    assert len(g.findings) == 8
    # two bugs on one example among rows that do not overlap stay two errors
    apart = [Finding("same_buffers", ERROR, "cpu draft[0]", field="draft", slot=0, view="cpu",
                     scenario=s, extra={"slots": [0]}),
             Finding("same_buffers", ERROR, "cpu computed[4]", field="computed", slot=4,
                     view="cpu", scenario=s, extra={"slots": [4, 5]})]
    assert len(error_groups(apart)) == 2


def test_rows_reordered_shrunk_to_an_example_per_field_are_one_error():
    """Each field's findings shrunk to an example of their own (other values), the same
    two rows differing in a batch of the same shape: one error."""
    found = []
    for k, f in enumerate(FIELDS):
        s = scenario(num_reqs=5).to_dict()
        s["inputs"]["seed_of_field"] = k                 # a different example per field
        found += [Finding("same_buffers", ERROR, f"{view} {f}[1]", field=f, slot=1, view=view,
                          scenario=s, extra={"slots": [1, 4]}) for view in ("cpu", "gpu")]
        found.append(Finding("slot_alignment", ERROR, f"{f}[1]", side="candidate", field=f,
                             slot=1, view="cpu", scenario=s, extra={"slots": [1, 4]}))
    (g,) = error_groups(found)
    assert len(g.findings) == 12
