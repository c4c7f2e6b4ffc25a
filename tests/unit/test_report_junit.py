"""JUnit XML: valid against tests/unit/junit-10.xsd (the xunit2 / junit-10 structure pytest
uses) with info findings present, nothing dropped, kernel impact and targets as
properties, real times, dotted classnames, control characters escaped."""

from __future__ import annotations

import pathlib
import re
from dataclasses import replace
from xml.etree import ElementTree as ET

import pytest

from stagecheck.oracles.campaign import CampaignResult
from stagecheck.oracles.options import CampaignConfig, RunOptions
from stagecheck.oracles.report import render_junit
from stagecheck.oracles.report.junit import TIME_METHOD, junit_classname
from stagecheck.spec import DEFAULT_SCHEMA, ERROR, INFO, Finding
from tests.helpers import scenario
from tests.unit.junit_schema import Schema

SCHEMA = Schema(pathlib.Path(__file__).parent / "junit-10.xsd")
DOTTED = re.compile(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)+")
TARGETS = {"baseline": {"spec": "legacy", "resolved": "legacy", "sha": None, "shims": []},
           "candidate": {"spec": "git:HEAD~1:impl/x.py::stage", "sha": "a" * 40,
                         "resolved": "git:" + "a" * 40 + ":impl/x.py::stage", "shims": []}}


def result(strict_infos: int = 2, interrupted: str | None = None) -> CampaignResult:
    s = scenario().to_dict()
    error = Finding("slot_alignment", ERROR, "computed[1] holds 8, expected 7", side="candidate",
                    field="computed", slot=1, view="cpu", candidate=8, expected=7,
                    kernel_impact=True, scenario=s, examples_to_find=4)
    infos = [Finding("same_message", INFO, f"different message text {i}", scenario=s,
                     kernel_impact=False, extra={"context": "failure path: live request "
                                                 f"'req-{i}'", "kind": str(i)})
             for i in range(strict_infos)]
    return CampaignResult("legacy", "git:HEAD~1:impl/x.py::stage",
                          CampaignConfig(examples=50, seed=3), [error, *infos],
                          examples_in_contract=40, examples_out_of_contract=50, seconds=2.5,
                          schema=DEFAULT_SCHEMA, interrupted=interrupted)


def parse(text: str):
    root = ET.fromstring(text)
    (suite,) = root.findall("testsuite")
    cases = {c.get("name"): c for c in suite.findall("testcase")}
    props = {p.get("name"): p.get("value") for p in suite.find("properties")}
    return root, suite, cases, props


@pytest.mark.parametrize("strict", [False, True])
@pytest.mark.parametrize("interrupted", [None, "SIGINT"])
def test_valid_against_the_junit_10_schema_with_info_findings(strict, interrupted):
    r = result(interrupted=interrupted)
    assert r.infos
    text = render_junit(r, strict, targets=TARGETS)
    assert SCHEMA.errors(text) == []


def test_the_schema_checker_rejects_what_the_schema_forbids():
    good = render_junit(result(), targets=TARGETS)
    assert SCHEMA.errors(good) == []
    broken = {
        "time": good.replace('time="2.500"', 'time="2,5 s"', 1),
        "order": good.replace("<properties>", "<system-out>x</system-out><properties>", 1),
        "required": re.sub(r'<testcase classname="([^"]*)" name="[^"]*"',
                           r'<testcase classname="\1"', good, count=1),
        "unknown attribute": good.replace("<testcase ", '<testcase colour="red" ', 1),
        "unknown element": good.replace("</properties>", "</properties><note/>", 1),
    }
    for what, text in broken.items():
        assert text != good, what
        assert SCHEMA.errors(text), what


def test_info_findings_are_in_system_out_and_properties():
    _, suite, cases, props = parse(render_junit(result(), targets=TARGETS))
    out = cases["same_message"].find("system-out")
    assert cases["same_message"].find("failure") is None
    assert out is not None and "2 info finding(s)" in out.text
    for f in result().infos:
        assert f.id in out.text and f.message in out.text
    assert props["findings.info"] == "2" and props["findings.error"] == "1"
    # with --strict the info findings are failures instead
    _, _, strict_cases, _ = parse(render_junit(result(), strict=True))
    assert strict_cases["same_message"].find("failure") is not None


def test_kernel_impact_and_targets_are_properties_and_kernel_results_lists_the_impact():
    r = result()
    _, suite, cases, props = parse(render_junit(r, targets=TARGETS))
    error = r.errors[0]
    assert props[f"kernel_impact.{error.id}"] == "yes"
    assert props[f"kernel_impact.{r.infos[0].id}"] == "no"
    # the error that changes the kernel's results fails once, under its own invariant;
    # kernel_results says so without failing a second time for the same bug
    assert cases["kernel_results"].find("failure") is None
    assert error.id in cases["kernel_results"].find("system-out").text
    assert props["candidate.sha"] == "a" * 40 and props["baseline.spec"] == "legacy"
    assert props["candidate.resolved"].startswith("git:aaaa")
    assert props["settings.seed"] == "3" and props["settings.examples"] == "50"
    assert props["settings.kernel"] == "auto" and props["stagecheck.command"] == "diff"
    assert int(suite.get("failures")) == 1      # slot_alignment
    # a kernel difference no staging finding explains fails kernel_results
    unexplained = replace(r, findings=[Finding("kernel_results", ERROR, "the kernel's "
                                               "results differ", kernel_impact=True)])
    _, _, cases2, _ = parse(render_junit(unexplained))
    assert cases2["kernel_results"].find("failure") is not None


def test_times_are_the_run_duration_split_and_say_so():
    root, suite, cases, props = parse(render_junit(result()))
    assert suite.get("time") == "2.500" and root.get("time") == "2.500"
    times = [float(c.get("time")) for c in cases.values()]
    assert all(t > 0 for t in times)
    assert abs(sum(times) - 2.5) < 0.001 * len(times)
    assert props["time.method"] == TIME_METHOD and TIME_METHOD.startswith("split")


def test_classnames_are_dotted_identifiers():
    _, suite, cases, _ = parse(render_junit(result()))
    names = {c.get("classname") for c in cases.values()} | {suite.get("name")}
    assert names == {"stagecheck.diff.legacy__git_HEAD_1_x_py_stage"}
    assert junit_classname("diff", "legacy", "single-loop") == \
        "stagecheck.diff.legacy__single_loop"
    assert junit_classname("spec", None, "tests/targets/b.py::f") == "stagecheck.spec.b_py_f"
    for name in names:
        assert DOTTED.fullmatch(name)


def test_control_characters_cannot_break_the_xml():
    r = result()
    nasty = "boom \x1b[31mred\x1b[0m \x00 nul \x07 bell \ud800"
    bad = replace(r.errors[0], message=nasty, extra={"context": nasty})
    r = replace(r, findings=[bad, *r.infos], candidate="evil\x00.py::f")
    targets = {"candidate": {"spec": "evil\x00.py::f", "resolved": "x\x1by", "sha": None}}
    text = render_junit(r, targets=targets)
    root = ET.fromstring(text)       # well-formed
    assert SCHEMA.errors(text) == []
    assert "\\x1b[31mred" in text and "\\x00 nul" in text and "\\x07" in text
    assert not re.search("[\x00-\x08\x0b\x0c\x0e-\x1f]", text)
    assert root is not None


def test_a_failure_body_is_the_slot_table_and_the_replay_command_not_raw_json():
    r = result()
    error = r.errors[0]
    saved = {error.id: ".stagecheck/findings/x.json --baseline legacy"}
    _, _, cases, _ = parse(render_junit(r, targets=TARGETS, saved=saved))
    body = cases["slot_alignment"].find("failure").text
    assert "slot  request" in body and "cpu <" in body
    assert "replay: stagecheck replay .stagecheck/findings/x.json --baseline legacy" in body
    assert '"initial_cpu"' not in body and "scenario:" not in body
    # info findings in system-out: no raw scenario either
    out = cases["same_message"].find("system-out").text
    assert '"initial_cpu"' not in out


def test_an_invariant_that_cannot_fail_on_the_run_is_skipped_with_the_reason():
    r = result()
    _, suite, cases, _ = parse(render_junit(r))
    hazard = cases["no_copy_hazard"].find("skipped")
    assert hazard is not None and "--deferred-copies" in hazard.get("message")
    assert cases["padded_read"].find("skipped") is not None           # info-only
    assert cases["slot_alignment"].find("skipped") is None
    assert cases["tail_policy"].find("skipped") is None               # can fail: passed
    assert int(suite.get("skipped")) == len(suite.findall("testcase/skipped"))
    # with the CPU model of asynchronous copies, or --strict, they can fail
    deferred = replace(r, config=CampaignConfig(
        examples=50, run=RunOptions(deferred_copies=True, kernel="off")))
    _, _, cases2, _ = parse(render_junit(deferred))
    assert cases2["no_copy_hazard"].find("skipped") is None
    assert "--kernel off" in cases2["kernel_results"].find("skipped").get("message")
    _, _, strict_cases, _ = parse(render_junit(r, strict=True))
    assert strict_cases["padded_read"].find("skipped") is None
    assert SCHEMA.errors(render_junit(deferred)) == []
