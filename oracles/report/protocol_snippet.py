"""A protocol finding as a ready pytest test, importing only stagecheck."""

from __future__ import annotations

import json

from stagecheck.spec.findings import Finding

__all__ = ["protocol_pytest_example"]


def protocol_pytest_example(f: Finding, baseline: str | None, candidate: str,
                            protocol: str) -> str:
    """A pytest test that runs ``f``'s shortest step sequence again and fails while the
    sequence still shows an error finding. It carries the sequence as plain data."""
    sequence = json.dumps(f.scenario, sort_keys=True)
    name = "".join(ch if ch.isalnum() else "_" for ch in f.id)
    return (
        "import json\n"
        "from stagecheck.oracles.protocol import check_sequence\n\n"
        f"SEQUENCE = json.loads({sequence!r})\n\n\n"
        f"def test_{name}():\n"
        f"    findings = check_sequence({baseline!r}, {candidate!r}, {protocol!r}, SEQUENCE)\n"
        "    assert not [f for f in findings if f.severity == 'error'], findings\n")
