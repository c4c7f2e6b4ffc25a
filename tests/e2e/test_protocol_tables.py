"""Device work that reads part of a table (``tests/targets/protocols/_tables/``): a
vLLM-v1-shaped block table whose slot-mapping kernel is given the whole device table and
indexes it by request and block. Rows of finished requests stay stale on the device (the
host clears them in pinned memory and uploads only live rows): what the kernel never reads
is not what it read, so the fixed runner holds the protocol and the buggy one (rows edited
before the input-preparation event is waited on) is found for its race, not for a stale
row."""

from __future__ import annotations

import os

from tests.helpers import ROOT, assert_outcome, run_stagecheck

HERE = os.path.join(ROOT, "tests", "targets", "protocols", "_tables")
PROTOCOL = os.path.join(HERE, "block_table_protocol.py")


def _spec(name, tmp_path):
    return run_stagecheck("spec", f"{os.path.join(HERE, name)}::BlockTableRunner",
                          "--protocol", PROTOCOL, "--save-dir", tmp_path, "--examples",
                          "300", "--strict")


def test_a_kernel_indexing_a_block_table_is_judged_only_where_it_reads(tmp_path):
    assert_outcome(_spec("block_table_fixed.py", tmp_path), 0,
                   ("HOLDS THE PROTOCOL", "0 error finding(s), 0 info finding(s)"))


def test_rows_edited_before_the_event_are_a_race_and_nothing_else(tmp_path):
    proc = _spec("block_table_buggy.py", tmp_path)
    assert_outcome(proc, 1, ("[no_copy_hazard-", "host-write-pending-upload",
                             "block_table.block_table.cpu"))
    # every value the kernel is said to have read wrongly is one it indexed: row 0 of a
    # capacity-1 batch after shrinking, never a stale row of a finished request
    for line in proc.stdout.splitlines():
        if "_slot_mapping_kernel read block_table[" in line:
            assert "block_table[(0, 0)]" in line or "block_table[0][0]" in line, line
