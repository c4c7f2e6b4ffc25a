"""The JUnit XML renderer (for CI): one test case per invariant of a findings result."""

from __future__ import annotations

import json
from xml.etree import ElementTree as ET

from stagecheck.spec import DIFFERENCES, ERROR, INVARIANTS

__all__ = ["render_junit"]


def render_junit(result, strict: bool = False, name: str | None = None,
                 targets: dict | None = None) -> str:
    """One test case per invariant; a failure per error finding (and info with strict).

    A run a signal stopped adds a test case ``interrupted`` with an error (no verdict;
    the failures are those found so far). ``targets`` (each side's ``Target.record()``)
    become properties of the suite: the specs, the pinned specs and the commit SHAs.
    """
    interrupted = getattr(result, "interrupted", None)
    names = [inv.id for inv in INVARIANTS]
    if result.baseline:
        names += list(DIFFERENCES)
    name = name or (f"stagecheck diff {result.baseline} {result.candidate}" if result.baseline
                    else f"stagecheck spec {result.candidate}")
    failing = [f for f in result.findings if f.severity == ERROR or strict]
    suite = ET.Element("testsuite", name=name, tests=str(len(names) + bool(interrupted)),
                       failures=str(len({f.invariant for f in failing})),
                       errors=str(int(bool(interrupted))), time=f"{result.seconds:.3f}")
    if targets:
        props = ET.SubElement(suite, "properties")
        for side, record in targets.items():
            for key in ("spec", "resolved", "sha"):
                if record and record.get(key):
                    ET.SubElement(props, "property", name=f"{side}.{key}", value=str(record[key]))
    if interrupted:
        case = ET.SubElement(suite, "testcase", classname=name, name="interrupted", time="0")
        examples = result.examples_in_contract + result.examples_out_of_contract
        ET.SubElement(case, "error", type="interrupted", message=(
            f"no verdict: interrupted by {interrupted} after {examples} example(s); "
            f"{len(result.findings)} finding(s) so far"))
    for inv in names:
        case = ET.SubElement(suite, "testcase", classname=name, name=inv, time="0")
        mine = [f for f in failing if f.invariant == inv]
        if mine:
            failure = ET.SubElement(case, "failure", message=mine[0].message,
                                    type=mine[0].severity)
            failure.text = "\n".join(f"[{f.id}] ({f.side}) {f.message}\n"
                                     + json.dumps(f.scenario, sort_keys=True) for f in mine)
    root = ET.Element("testsuites", name="stagecheck")
    root.append(suite)
    return ET.tostring(root, encoding="unicode", xml_declaration=True)
