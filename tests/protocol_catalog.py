"""The fixtures of the built-in protocols (``tests/targets/protocols/<protocol>/``), and the
names their line 2 expects, mapped to what stagecheck reports.

A fixture's ``# stagecheck-expect:`` line uses the catalogue's names
(tests/targets/protocols/README.md) or stagecheck's own invariant ids; ``REPORTED`` says
which ``(invariant, kind)`` of a finding stands for each (kind None: any kind).
"""

from __future__ import annotations

import pathlib
import re

ROOT = pathlib.Path(__file__).resolve().parents[1]
PROTOCOLS = ROOT / "tests" / "targets" / "protocols"
BUILTIN = ("input-prep-event", "mamba-align-steps", "valid-count-readback",
           "condense-inflight-d2h")
COMPONENT = "GPUModelRunner"

REPORTED = {
    "write_before_upload": {("no_copy_hazard", "host-write-pending-upload")},
    "read_before_download": {("no_copy_hazard", "host-read-pending-download")},
    "write_before_download": {("no_copy_hazard", "host-write-pending-download")},
    "consumer_reads_pending_upload": {("no_copy_hazard", "device-read-pending-write"),
                                      ("device_read_as_meant", "host-intent")},
    "reuse_while_pending": {("no_copy_hazard", "pinned-reused-pending-copy")},
    "device_read_mismatch": {("device_read_as_meant", None)},
    "readback_mismatch": {("readback_as_written", None), ("counts_follow_requests", None)},
    "no_copy_hazard": {("no_copy_hazard", None)},
    "device_read_as_meant": {("device_read_as_meant", None)},
    "step_outcome": {("step_outcome", None)},
}


def expected(path: pathlib.Path) -> set[str]:
    line = path.read_text().splitlines()[1]
    match = re.match(r"^# stagecheck-expect: (.+)$", line)
    assert match, f"{path.name}: line 2 is not a '# stagecheck-expect:' line"
    return {x.strip() for x in match.group(1).split(",")} - {"none"}


def reports(finding, name: str) -> bool:
    """Whether ``finding`` stands for the expected ``name``."""
    return any(finding.invariant == inv and (kind is None or finding.extra.get("kind") == kind)
               for inv, kind in REPORTED[name])


def fixtures(protocol: str, prefix: str) -> list[pathlib.Path]:
    return sorted((PROTOCOLS / protocol).glob(f"{prefix}_*.py"))


def target(path: pathlib.Path, component: str = COMPONENT) -> str:
    return f"{path}::{component}"
