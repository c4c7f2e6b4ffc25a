"""Reports of a campaign: readable text, JSON, saved replay files."""

from __future__ import annotations

import json
import os
from collections import defaultdict

from oracles import messages
from oracles.differential import CampaignResult
from spec import ERROR, INVARIANTS_BY_ID, Finding, StagingScenario
from spec.schema import FIELDS_BY_NAME

DIFF_STATEMENTS = {
    "same_outcome": "Both generations end the same way (return, or the same exception type).",
    "same_message": "Both raise with the same message text (info: the contract is the type "
                    "and the request id).",
    "same_buffers": "Every CPU view and GPU mirror, live slots and tail, ends identical.",
    "same_copies": "Each buffer is copied over the same ranges.",
    "same_inputs_after": "The inputs look the same after both calls.",
    "same_fields": "Both stage the same fields (info where a generation adds or drops one).",
    "kernel_results": "The postprocess kernel gives bit-identical results on both sides' "
                      "mirrors.",
}


def statement(invariant: str) -> str:
    inv = INVARIANTS_BY_ID.get(invariant)
    return inv.statement if inv else DIFF_STATEMENTS.get(invariant, "")


def slot_table(f: Finding, max_rows: int = 12) -> list[str]:
    """The finding's scenario as a small table of slots for its field."""
    if not f.scenario or not f.field or f.field not in FIELDS_BY_NAME:
        return []
    s = StagingScenario.from_dict(f.scenario)
    field = FIELDS_BY_NAME[f.field]
    view = f.view or "cpu"
    extra = f.extra or {}
    base = extra.get("baseline_values")
    cand = extra.get("candidate_values") or extra.get("values")
    before = (s.initial_cpu if view == "cpu" else s.initial_gpu).get(field.buffer)
    rows = [f"{'slot':>4}  {'request':<10} {'live':<4}  {'before':>11}  {'expected':>11}  "
            f"{'baseline':>11}  {'candidate':>11}  view"]
    flagged = set(extra.get("slots", [f.slot] if f.slot is not None else []))
    for i in range(min(s.capacity, max_rows)):
        r = s.req_ids[i] if i < len(s.req_ids) else "-"
        live = i < s.num_reqs
        if live:
            try:
                expected = field.derive(s, r)
            except KeyError:
                expected = "(missing)"
        else:
            expected = before[i] if before else "-"
        cells = [_cell(before[i] if before else None), _cell(expected),
                 _cell(base[i] if base and i < len(base) else None),
                 _cell(cand[i] if cand and i < len(cand) else None)]
        mark = " <" if i in flagged else ""
        rows.append(f"{i:>4}  {r:<10} {'yes' if live else 'tail':<4}  {cells[0]:>11}  "
                    f"{cells[1]:>11}  {cells[2]:>11}  {cells[3]:>11}  {view}{mark}")
    if s.capacity > max_rows:
        rows.append(f"  ... {s.capacity - max_rows} more slots")
    return rows


def _cell(v) -> str:
    return "-" if v is None else str(v)


def pytest_example(f: Finding, baseline: str | None, candidate: str) -> str:
    """A ready pytest test that reproduces ``f`` with hypothesis ``@example``.

    It carries the scenario as plain data, so it survives hypothesis upgrades (its
    example database does not).
    """
    scenario = json.dumps(f.scenario, sort_keys=True)
    base = f'load_target("{baseline}")' if baseline else "None"
    name = f.id.replace("-", "_")
    return (
        "import json\n"
        "from hypothesis import Phase, example, given, settings\n"
        "from oracles.differential import evaluate\n"
        "from oracles.strategies import staging_scenarios\n"
        "from oracles.targets import load_target\n"
        "from spec import StagingScenario\n\n"
        f"SCENARIO = StagingScenario.from_dict(json.loads({scenario!r}))\n\n\n"
        "@settings(phases=[Phase.explicit], database=None)\n"
        "@given(staging_scenarios())\n"
        "@example(SCENARIO)\n"
        f"def test_{name}(scenario):\n"
        f"    findings, _, _ = evaluate({base}, load_target(\"{candidate}\"), scenario)\n"
        "    assert not [f for f in findings if f.severity == 'error'], findings\n")


def text_report(result: CampaignResult, strict: bool = False, saved: dict | None = None,
                show_tests: bool = True) -> str:
    c = result.config
    what = (f"{result.baseline} vs {result.candidate}" if result.baseline
            else f"spec of {result.candidate}")
    lines = [f"stagecheck: {what} on {c.device}",
             f"tried {result.examples_in_contract} in-contract and "
             f"{result.examples_out_of_contract} out-of-contract examples (seed {c.seed}, "
             f"capacity <= {c.max_capacity}, budget {c.examples} per stream) in "
             f"{result.seconds:.1f} s" + ("; a stream stops at its first error finding, "
                                          "then shrinks it" if result.errors else "")]
    errors, infos = result.errors, result.infos
    verdict = result.verdict(strict)
    lines.append(f"verdict: {verdict.upper()} — {len(errors)} error finding(s), "
                 f"{len(infos)} info finding(s)" + (" (--strict: info counts)" if strict else ""))
    for severity, group, title in ((ERROR, errors, "ERRORS (spec violations or in-contract "
                                    "divergence)"),
                                   ("info", infos, "INFO (failure-path and out-of-contract "
                                    "differences the spec allows)")):
        if not group:
            continue
        lines += ["", title]
        by_inv = defaultdict(list)
        for f in group:
            by_inv[f.invariant].append(f)
        for inv, fs in by_inv.items():
            lines.append(f"  {inv}: {statement(inv)}")
            for f in fs:
                where = "in contract" if f.in_contract else "out of contract"
                impact = ("" if f.kernel_impact is None
                          else f", kernel impact: {'yes' if f.kernel_impact else 'no'}")
                lines.append(f"    [{f.id}] ({f.side}, {where}{impact}) {f.message}")
                if f.extra.get("context"):
                    lines.append(f"      why allowed: {f.extra['context']}")
                if f.examples_to_find is not None:
                    lines.append(f"      found after {f.examples_to_find} example(s)")
                if severity == ERROR:
                    lines += ["      " + row for row in slot_table(f)]
                if saved and f.id in saved:
                    lines.append(f"      replay: stagecheck replay {saved[f.id]}")
    if errors and show_tests:
        distinct = {json.dumps(f.scenario, sort_keys=True): f for f in errors}
        lines += ["", f"REPRODUCE: {len(distinct)} shrunk scenario(s) as pytest tests "
                  "(they survive hypothesis upgrades)"]
        for f in distinct.values():
            lines += ["", *("    " + row for row in
                            pytest_example(f, result.baseline, result.candidate).splitlines())]
    if not errors:
        lines += ["", messages.CLEAN_RUN_HINT.format(
            more=c.examples * 10, examples=c.examples, seed=c.seed, capacity=c.max_capacity)]
    return "\n".join(lines)


def json_report(result: CampaignResult, strict: bool = False) -> dict:
    c = result.config
    return {
        "verdict": result.verdict(strict),
        "baseline": result.baseline,
        "candidate": result.candidate,
        "device": c.device,
        "seed": c.seed,
        "seconds": round(result.seconds, 3),
        "examples": {"in_contract": result.examples_in_contract,
                     "out_of_contract": result.examples_out_of_contract},
        "findings": [f.to_dict() for f in result.findings],
    }


def save_findings(result: CampaignResult, directory: str) -> dict[str, str]:
    """Write one replay file per finding; return finding id -> path."""
    os.makedirs(directory, exist_ok=True)
    saved = {}
    for f in result.findings:
        path = os.path.join(directory, f"{f.id}.json")
        with open(path, "w", encoding="utf-8") as fh:
            json.dump({"stagecheck_replay": 1, "baseline": result.baseline,
                       "candidate": result.candidate, "device": result.config.device,
                       "finding": f.to_dict()}, fh, indent=1, sort_keys=True)
        saved[f.id] = path
    return saved


def junit_xml(result: CampaignResult, strict: bool = False) -> str:
    """One test case per invariant; a failure per error finding (and info with strict)."""
    from xml.etree import ElementTree as ET

    from spec import INVARIANTS
    names = [inv.id for inv in INVARIANTS]
    if result.baseline:
        names += list(DIFF_STATEMENTS)
    name = (f"stagecheck diff {result.baseline} {result.candidate}" if result.baseline
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
