"""The JUnit XML renderer (for CI): one test case per invariant of a findings result."""

from __future__ import annotations

import json
from xml.etree import ElementTree as ET

from stagecheck.spec import DIFFERENCES, ERROR, INVARIANTS

__all__ = ["render_junit"]


def render_junit(result, strict: bool = False, name: str | None = None) -> str:
    """One test case per invariant; a failure per error finding (and info with strict)."""
    names = [inv.id for inv in INVARIANTS]
    if result.baseline:
        names += list(DIFFERENCES)
    name = name or (f"stagecheck diff {result.baseline} {result.candidate}" if result.baseline
                    else f"stagecheck spec {result.candidate}")
    failing = [f for f in result.findings if f.severity == ERROR or strict]
    suite = ET.Element("testsuite", name=name, tests=str(len(names)),
                       failures=str(len({f.invariant for f in failing})), errors="0",
                       time=f"{result.seconds:.3f}")
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
