"""The JUnit XML renderer (for CI): one test case per invariant of a findings result.

The document follows the structure of the JUnit XML that pytest writes with
``junit_family=xunit2`` (the Jenkins ``junit-10.xsd`` family; ``tests/unit/junit-10.xsd``
states it and a test validates every report against it):

- ``<testsuites>`` holds one ``<testsuite>`` whose ``name`` is also every test case's
  ``classname``: a dotted identifier, ``stagecheck.<command>.<baseline>__<candidate>``
  (``stagecheck.spec.<target>``), each target spec reduced to letters, digits and ``_``,
  so a dashboard groups the cases as a package and a class;
- suite ``<properties>``: the tool version, the command and verdict, every setting that
  shapes the run, each side's spec, resolved spec and commit SHA, the kernel impact of
  every finding whose impact is known (``kernel_impact.<finding id>``: yes/no), and how
  the times were measured (``time.method``);
- a test case per invariant (and per difference for ``diff``); an error finding (any
  finding with ``--strict``) is a ``<failure>``; info findings go to the case's
  ``<system-out>``, so nothing is dropped; ``kernel_results`` fails when a failing
  finding changed the kernel's results (kernel impact: yes);
- times: the suite's ``time`` is the run's measured duration; the invariants are all
  checked on every example, so no per-invariant time exists, and each case's ``time``
  is the run's duration split evenly among the cases (``time.method`` says so).

Every text taken from findings, targets or exceptions goes through
``report.escape``: control characters become visible escapes, so the XML is always
well-formed.
"""

from __future__ import annotations

import json
import re
from xml.etree import ElementTree as ET

from stagecheck import __version__
from stagecheck.oracles.report.escape import escape, escape_lines
from stagecheck.oracles.report.json import campaign_settings
from stagecheck.spec import DIFFERENCES, ERROR, INVARIANTS

__all__ = ["TIME_METHOD", "junit_classname", "render_junit"]

#: the ``time.method`` property: how the test cases' times were obtained
TIME_METHOD = ("split: the run's measured duration divided evenly among the test cases "
               "(every invariant is checked on every example, so there is no per-invariant "
               "time); the suite's time is the measured duration")


def _ident(spec: str | None) -> str:
    """A target spec as one identifier: letters, digits and ``_`` (``single-loop`` ->
    ``single_loop``, ``dir/t.py::f`` -> ``t_py_f``, ``git:HEAD~1:dir/t.py::f`` ->
    ``git_HEAD_1_t_py_f``)."""
    spec = spec or ""
    if "::" in spec:    # a file target: its file's name and the function, not the folders
        head, function = spec.rsplit("::", 1)
        prefix, _, path = head.rpartition(":")          # git:REV:path
        spec = f"{prefix}:{path.replace(chr(92), '/').rsplit('/', 1)[-1]}::{function}"
    text = re.sub(r"[^0-9A-Za-z_]+", "_", spec).strip("_")
    return text or "target"


def junit_classname(command: str, baseline: str | None, candidate: str) -> str:
    """``stagecheck.diff.legacy__single_loop`` / ``stagecheck.spec.single_loop``."""
    sides = f"{_ident(baseline)}__{_ident(candidate)}" if baseline else _ident(candidate)
    return f"stagecheck.{_ident(command)}.{sides}"


def _finding_text(f, full: bool = True) -> str:
    impact = "" if f.kernel_impact is None else \
        f", kernel impact: {'yes' if f.kernel_impact else 'no'}"
    where = "in contract" if f.in_contract else "out of contract"
    head = f"[{escape(f.id)}] ({f.side}, {where}{impact}) {escape(f.message)}"
    lines = [head]
    if f.extra.get("context"):
        lines.append(f"  why allowed: {escape(f.extra['context'])}")
    if full and f.scenario:
        lines.append("  scenario: " + json.dumps(f.scenario, sort_keys=True))
    return "\n".join(lines)


def _settings(result, strict: bool) -> dict:
    return campaign_settings(result, strict)


def _prop(props: ET.Element, name: str, value) -> None:
    if value is None:
        return
    if isinstance(value, bool):
        value = "true" if value else "false"
    elif isinstance(value, (list, tuple)):
        value = ",".join(str(v) for v in value)
    ET.SubElement(props, "property", name=escape(name), value=escape(value))


def render_junit(result, strict: bool = False, name: str | None = None,
                 targets: dict | None = None, command: str | None = None) -> str:
    """One test case per invariant; a failure per failing invariant (error findings, and
    info findings with ``strict``), info findings in ``<system-out>``.

    A run a signal stopped adds a test case ``interrupted`` with an error (no verdict;
    the failures are those found so far). ``targets`` (each side's ``Target.record()``)
    become properties of the suite: the specs, the pinned specs and the commit SHAs.
    """
    interrupted = getattr(result, "interrupted", None)
    command = command or ("diff" if result.baseline else "spec")
    names = [inv.id for inv in INVARIANTS]
    if result.baseline:
        names += list(DIFFERENCES)
    classname = junit_classname(command, result.baseline, result.candidate)
    name = name or classname
    failing = [f for f in result.findings if f.severity == ERROR or strict]
    passing = [f for f in result.findings if f not in failing]
    impact = [f for f in failing if f.kernel_impact]
    failed_cases = {f.invariant for f in failing} | ({"kernel_results"} if impact and
                                                     "kernel_results" in names else set())
    cases = len(names) + bool(interrupted)
    seconds = max(float(result.seconds), 0.0)
    each = f"{seconds / cases:.3f}"
    verdict = "interrupted" if interrupted else result.verdict(strict)

    root = ET.Element("testsuites", name="stagecheck", tests=str(cases),
                      failures=str(len(failed_cases)), errors=str(int(bool(interrupted))),
                      time=f"{seconds:.3f}")
    suite = ET.SubElement(root, "testsuite", name=escape(name), tests=str(cases),
                          failures=str(len(failed_cases)),
                          errors=str(int(bool(interrupted))), skipped="0",
                          time=f"{seconds:.3f}")
    props = ET.SubElement(suite, "properties")
    _prop(props, "stagecheck.version", __version__)
    _prop(props, "stagecheck.command", command)
    _prop(props, "stagecheck.verdict", verdict)
    for key, value in _settings(result, strict).items():
        _prop(props, f"settings.{key}", value)
    for side, record in (targets or {}).items():
        for key in ("spec", "resolved", "sha", "origin", "shims"):
            if record and record.get(key):
                _prop(props, f"{side}.{key}", record[key])
    for f in result.findings:
        if f.kernel_impact is not None:
            _prop(props, f"kernel_impact.{f.id}", "yes" if f.kernel_impact else "no")
    _prop(props, "findings.error", len(result.errors))
    _prop(props, "findings.info", len(result.infos))
    _prop(props, "time.method", TIME_METHOD)

    if interrupted:
        case = ET.SubElement(suite, "testcase", classname=classname, name="interrupted",
                             time=each)
        examples = result.examples_in_contract + result.examples_out_of_contract
        ET.SubElement(case, "error", type="interrupted", message=(
            f"no verdict: interrupted by {escape(interrupted)} after {examples} example(s); "
            f"{len(result.findings)} finding(s) so far"))
    for inv in names:
        case = ET.SubElement(suite, "testcase", classname=classname, name=inv, time=each)
        mine = [f for f in failing if f.invariant == inv]
        if inv == "kernel_results" and impact and not mine:
            failure = ET.SubElement(case, "failure", type="kernel-impact", message=(
                f"{len(impact)} failing finding(s) change the postprocess kernel's results "
                "(kernel impact: yes); each is reported under its invariant"))
            failure.text = "\n".join(_finding_text(f, full=False) for f in impact)
        elif mine:
            failure = ET.SubElement(case, "failure", message=escape(mine[0].message),
                                    type=mine[0].severity)
            failure.text = "\n".join(_finding_text(f) for f in mine)
        infos = [f for f in passing if f.invariant == inv]
        if infos:
            out = ET.SubElement(case, "system-out")
            out.text = (f"{len(infos)} info finding(s) (differences the spec allows; "
                        "--strict makes them failures):\n"
                        + "\n".join(_finding_text(f) for f in infos))
    summary = ET.SubElement(suite, "system-out")
    summary.text = (f"verdict: {verdict}; {len(result.errors)} error finding(s), "
                    f"{len(result.infos)} info finding(s); "
                    f"{result.examples_in_contract} in-contract and "
                    f"{result.examples_out_of_contract} out-of-contract examples in "
                    f"{seconds:.3f} s")
    text = ET.tostring(root, encoding="unicode", xml_declaration=True)
    return escape_lines(text) if _UNSAFE_LEFT.search(text) else text


# a last guard: anything the escapes above did not reach (a stray control character in
# a value no one expected) is made visible rather than left to break the document
_UNSAFE_LEFT = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")
