"""A finding as a ready pytest test, importing only stagecheck's public API."""

from __future__ import annotations

import json

from stagecheck.oracles.options import RunOptions
from stagecheck.spec import Finding

__all__ = ["pytest_example", "snippet_setting"]


def snippet_setting(result, targets: dict | None = None, shims=()) -> dict:
    """What a pasted test needs of the run besides the finding: each side's spec as it
    loads from any folder (``Target.record()``'s ``resolved``), the schema file a
    ``--schema`` run used, the shims, and how each example ran (``RunOptions``)."""
    def pinned(side: str, given):
        record = (targets or {}).get(side) or {}
        return record.get("resolved") or given
    return {"baseline": pinned("baseline", result.baseline) if result.baseline else None,
            "candidate": pinned("candidate", result.candidate),
            "schema": getattr(result, "schema_spec", None), "shims": tuple(shims),
            "run": result.config.run}


def pytest_example(f: Finding, baseline: str | None, candidate: str,
                   schema: str | None = None, shims=(), run=None) -> str:
    """A pytest test that reproduces ``f`` with hypothesis ``@example``.

    It carries the scenario as plain data, so it survives hypothesis upgrades (its
    example database does not); ``deadline=None`` because a loaded CI machine must
    not turn a slow example into a failure of its own. ``schema`` (a ``--schema`` file),
    ``shims`` and ``run`` (the run's ``RunOptions``) are given to the test as the run had
    them, so that it loads the same targets and runs the example the same way.
    """
    scenario = json.dumps(f.scenario, sort_keys=True)
    names = ["StagingScenario", "evaluate", "load_target", "staging_scenarios"]
    head = []
    loads = ""
    if schema:
        names.append("load_schema")
        head.append(f"SCHEMA = load_schema({schema!r})")
        loads = ", SCHEMA"
    if shims:
        head.append(f"SHIMS = {tuple(shims)!r}")
        loads = (loads or ", None") + ", SHIMS"
    options = _run_options(run)
    if options:
        names.append("RunOptions")
        head.append(f"OPTIONS = RunOptions({options})")
    base = f"load_target({baseline!r}{loads})" if baseline else "None"
    name = "".join(ch if ch.isalnum() else "_" for ch in f.id)
    return (
        "import json\n"
        "from hypothesis import Phase, example, given, settings\n"
        f"from stagecheck import {', '.join(sorted(names))}\n\n"
        + "".join(line + "\n" for line in head)
        + f"SCENARIO = StagingScenario.from_dict(json.loads({scenario!r}))\n\n\n"
        "@settings(phases=[Phase.explicit], database=None, deadline=None)\n"
        f"@given(staging_scenarios({'schema=SCHEMA' if schema else ''}))\n"
        "@example(SCENARIO)\n"
        f"def test_{name}(scenario):\n"
        f"    findings = evaluate({base}, load_target({candidate!r}{loads}), scenario"
        f"{', OPTIONS' if options else ''}).findings\n"
        "    errors = [f for f in findings if f.severity == 'error']\n"
        "    assert not errors, '\\n'.join(f'[{f.id}] {f.message}' for f in errors)\n")


def _run_options(run) -> str:
    """``RunOptions`` keywords for the fields of ``run`` that a finding may depend on and
    that differ from the defaults ('' when none does)."""
    if run is None:
        return ""
    default = RunOptions()
    parts = [f"{name}={getattr(run, name)!r}"
             for name in ("device", "deferred_copies", "steps", "timeout")
             if getattr(run, name) != getattr(default, name)]
    return ", ".join(parts)
