"""A finding as a ready pytest test, importing only stagecheck's public API."""

from __future__ import annotations

import json

from stagecheck.spec import Finding

__all__ = ["pytest_example"]


def pytest_example(f: Finding, baseline: str | None, candidate: str) -> str:
    """A pytest test that reproduces ``f`` with hypothesis ``@example``.

    It carries the scenario as plain data, so it survives hypothesis upgrades (its
    example database does not); ``deadline=None`` because a loaded CI machine must
    not turn a slow example into a failure of its own.
    """
    scenario = json.dumps(f.scenario, sort_keys=True)
    base = f"load_target({baseline!r})" if baseline else "None"
    name = "".join(ch if ch.isalnum() else "_" for ch in f.id)
    return (
        "import json\n"
        "from hypothesis import Phase, example, given, settings\n"
        "from stagecheck import StagingScenario, evaluate, load_target, staging_scenarios\n\n"
        f"SCENARIO = StagingScenario.from_dict(json.loads({scenario!r}))\n\n\n"
        "@settings(phases=[Phase.explicit], database=None, deadline=None)\n"
        "@given(staging_scenarios())\n"
        "@example(SCENARIO)\n"
        f"def test_{name}(scenario):\n"
        f"    findings = evaluate({base}, load_target({candidate!r}), scenario).findings\n"
        "    assert not [f for f in findings if f.severity == 'error'], findings\n")
