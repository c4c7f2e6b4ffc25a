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
- a test case per invariant (and per difference for ``diff``); an error is a
  ``<failure>`` of the case of the invariant that heads it: error findings that share
  a cause are one error (``oracles.collect.error_groups``), so one bug fails one case,
  and the body lists every member; with ``--strict`` each info finding fails its
  case too. A failure's body is what the text report prints: the finding, its slot
  table, the replay command and the members. Info findings go to the case's
  ``<system-out>``, so nothing is dropped, and so do the members an error of another
  case holds; ``kernel_results`` fails on its own findings (a kernel difference no
  staging finding explains), and lists the errors that change the kernel's results;
- a case that cannot fail on the run (``unfailable``: ``no_copy_hazard`` on the CPU
  without ``--deferred-copies``, ``kernel_results`` with the kernel oracle off, an
  info-only check without ``--strict``) is ``<skipped>`` with the reason;
- times: the suite's ``time`` is the run's measured duration; the invariants are all
  checked on every example, so no per-invariant time exists, and each case's ``time``
  is the run's duration split evenly among the cases (``time.method`` says so).

Every text taken from findings, targets or exceptions goes through
``report.escape``: control characters become visible escapes, so the XML is always
well-formed.
"""

from __future__ import annotations

import re
from xml.etree import ElementTree as ET

from stagecheck import __version__
from stagecheck.oracles import messages
from stagecheck.oracles.collect import error_groups
from stagecheck.oracles.report.escape import escape, escape_lines
from stagecheck.oracles.report.finding_text import finding_lines
from stagecheck.oracles.report.json import campaign_settings
from stagecheck.oracles.report.text import examples_tried
from stagecheck.spec import DIFFERENCES, ERROR, INVARIANTS
from stagecheck.spec.findings import context_label

__all__ = ["TIME_METHOD", "junit_classname", "render_junit", "unfailable"]

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


def _finding_text(f, saved: dict | None = None) -> str:
    """An info finding in one or two lines: its headline, why it is allowed, and the
    command that replays it where it was saved (never the raw scenario)."""
    impact = "" if f.kernel_impact is None else \
        f", kernel impact: {'yes' if f.kernel_impact else 'no'}"
    where = "in contract" if f.in_contract else "out of contract"
    lines = [f"[{escape(f.id)}] ({f.side}, {where}{impact}) {escape(f.message)}"]
    if f.extra.get("context"):
        lines.append(f"  {context_label(f)}: {escape(f.extra['context'])}")
    if saved and f.id in saved:
        lines.append(f"  replay: stagecheck replay {escape(saved[f.id])}")
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


def unfailable(result, strict: bool = False) -> dict[str, str]:
    """The invariants (and differences) that cannot fail on this run, each with why: a
    JUnit report marks them ``<skipped>`` rather than passed."""
    c, schema = result.config, getattr(result, "schema", None)
    out: dict[str, str] = {}
    if c.run.device == "cpu" and not c.run.deferred_copies:
        out["no_copy_hazard"] = ("a CPU run's copies are synchronous, so no write can land in "
                                 "a queued copy: run with --deferred-copies (the CPU model of "
                                 "asynchronous copies) or --device cuda to check it")
    if c.run.kernel == "off":
        out["kernel_results"] = "the kernel oracle is off (--kernel off)"
    elif schema is not None and schema.consumer is None:
        out["kernel_results"] = f"schema {schema.name!r} declares no consumer kernel"
    if schema is not None and not any(f.missing is not None for f in schema.fields):
        out["missing_input"] = f"schema {schema.name!r} declares no missing-input policy"
    if not strict:
        for inv in ("padded_read", "same_message", "same_fields"):
            out[inv] = ("an info-only check: its findings are listed, and fail the run only "
                        "with --strict")
    return out


def _group_text(g, saved: dict | None, schema) -> str:
    """One error group as the text report shows it: the head with its slot table and
    replay command, then every member."""
    lines = finding_lines(g.head, saved, schema, g.members)
    if g.members:
        lines.append("  " + messages.GROUP_MEMBERS.format(count=len(g.members), cause=g.cause))
        lines += [f"    [{escape(f.id)}] {escape(f.message)}" for f in g.members]
    return "\n".join(lines)


def render_junit(result, strict: bool = False, name: str | None = None,
                 targets: dict | None = None, command: str | None = None,
                 saved: dict | None = None) -> str:
    """One test case per invariant: a failure per error (the error findings grouped by
    cause: ``oracles.collect.error_groups``, each failing the case of its head's
    invariant, its members listed), and with ``strict`` per failing info finding; the
    body is what the text report prints (slot table, the replay command of ``saved``
    files); info findings in ``<system-out>``; a case that cannot fail on this run
    (``unfailable``) is ``<skipped>`` with the reason.

    A run a signal stopped adds a test case ``interrupted`` with an error (no verdict;
    the failures are those found so far). ``targets`` (each side's ``Target.record()``)
    become properties of the suite: the specs, the pinned specs and the commit SHAs.
    """
    interrupted = getattr(result, "interrupted", None)
    command = command or ("diff" if result.baseline else "spec")
    schema = getattr(result, "schema", None)
    names = [inv.id for inv in INVARIANTS]
    if result.baseline:
        names += list(DIFFERENCES)
    classname = junit_classname(command, result.baseline, result.candidate)
    name = name or classname
    groups = error_groups(result.findings)
    strict_infos = [f for f in result.infos if strict]
    passing = [f for f in result.infos if not strict]
    grouped_under = {f.id: g for g in groups for f in g.findings}
    impact = [g for g in groups if g.kernel_impact]
    failed_cases = {g.head.invariant for g in groups} | {f.invariant for f in strict_infos}
    skipped = {inv: why for inv, why in unfailable(result, strict).items()
               if inv in names and inv not in failed_cases}
    cases = len(names) + bool(interrupted)
    seconds = max(float(result.seconds), 0.0)
    each = f"{seconds / cases:.3f}"
    verdict = "interrupted" if interrupted else result.verdict(strict)

    root = ET.Element("testsuites", name="stagecheck", tests=str(cases),
                      failures=str(len(failed_cases)), errors=str(int(bool(interrupted))),
                      time=f"{seconds:.3f}")
    suite = ET.SubElement(root, "testsuite", name=escape(name), tests=str(cases),
                          failures=str(len(failed_cases)),
                          errors=str(int(bool(interrupted))), skipped=str(len(skipped)),
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
    _prop(props, "errors.groups", len(groups))
    _prop(props, "time.method", TIME_METHOD)

    if interrupted:
        case = ET.SubElement(suite, "testcase", classname=classname, name="interrupted",
                             time=each)
        examples = examples_tried(result)
        ET.SubElement(case, "error", type="interrupted", message=(
            f"no verdict: interrupted by {escape(interrupted)} after {examples} example(s); "
            f"{len(result.findings)} finding(s) so far"))
    for inv in names:
        case = ET.SubElement(suite, "testcase", classname=classname, name=inv, time=each)
        headed = [g for g in groups if g.head.invariant == inv]
        mine = [f for f in strict_infos if f.invariant == inv]
        notes: list[str] = []
        if headed or mine:
            first = headed[0].head if headed else mine[0]
            members = sum(len(g.findings) for g in headed)
            message = escape(first.message) + (
                f" (and {len(headed) - 1} more error(s))" if len(headed) > 1 else "") + (
                f"; {members} finding(s) share this cause" if members > 1 and len(headed) == 1
                else "")
            failure = ET.SubElement(case, "failure", message=message,
                                    type=ERROR if headed else first.severity)
            failure.text = "\n\n".join([_group_text(g, saved, schema) for g in headed]
                                       + ["\n".join(finding_lines_of(f, saved, schema))
                                          for f in mine])
        elif inv in skipped:
            ET.SubElement(case, "skipped", message=escape(skipped[inv]))
        others = [f for f in result.errors if f.invariant == inv
                  and grouped_under[f.id].head.invariant != inv]
        if others:
            heads = sorted({grouped_under[f.id].id for f in others})
            notes.append(f"{len(others)} error finding(s) of this invariant belong to the "
                         f"error(s) {', '.join(heads)}, reported (and failed) under the "
                         "invariant of their head: one error per cause")
        if inv == "kernel_results" and impact:
            notes.append(f"{len(impact)} error(s) change the postprocess kernel's results "
                         "(kernel impact: yes), each failed under its own invariant: "
                         + ", ".join(g.id for g in impact))
        infos = [f for f in passing if f.invariant == inv]
        if infos:
            notes.append(f"{len(infos)} info finding(s) (differences the spec allows; "
                         "--strict makes them failures):\n"
                         + "\n".join(_finding_text(f, saved) for f in infos))
        if notes:
            out = ET.SubElement(case, "system-out")
            out.text = "\n".join(notes)
    summary = ET.SubElement(suite, "system-out")
    summary.text = (f"verdict: {verdict}; {len(groups)} error(s) from {len(result.errors)} "
                    f"error finding(s), {len(result.infos)} info finding(s); "
                    f"{result.examples_in_contract} in-contract and "
                    f"{result.examples_out_of_contract} out-of-contract examples in "
                    f"{seconds:.3f} s")
    text = ET.tostring(root, encoding="unicode", xml_declaration=True)
    return escape_lines(text) if _UNSAFE_LEFT.search(text) else text


def finding_lines_of(f, saved: dict | None, schema) -> list[str]:
    return finding_lines(f, saved, schema)


# a last guard: anything the escapes above did not reach (a stray control character in
# a value no one expected) is made visible rather than left to break the document
_UNSAFE_LEFT = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")
