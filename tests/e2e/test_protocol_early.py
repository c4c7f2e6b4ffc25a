"""Torch operations the host issues on device tensors, and pinned memory device work reads
in place, end to end (``tests/targets/protocols/_early/``): the CPU model runs such an
operation at once, after what is queued ahead of it, and that must never hide a race (an
upload it ran early is an error when the host writes its source before seeing it
complete; a download it ran early lands in host memory only when the host learns it
complete); an operation whose result's size depends on the device's data makes the host
wait; a read in place is an upload the host must see complete before writing again."""

from __future__ import annotations

import os

import pytest

from tests.helpers import ROOT, assert_outcome, run_stagecheck

HERE = os.path.join(ROOT, "tests", "targets", "protocols", "_early")

CASES = [
    ("positions_event_window.py", "Positions", 0, ()),
    ("positions_written_early.py", "Positions", 1,
     ("[no_copy_hazard-", "host write (seen as a changed value) of pos_cpu",
      "why an error: the host issued torch mul on device tensors queued behind this",
      "0 info finding(s)")),
    ("counts_read_after_event.py", "Counts", 0, ()),
    ("counts_read_before_event.py", "Counts", 1,
     ("[readback_as_written-", "= -7777", "why an error: possibly a read before a download "
      "landed: download", "had not been seen landed when step")),
    ("indices_event_after_gather.py", "Indices", 0, ()),
    ("indices_one_buffer.py", "Indices", 1,
     ("[no_copy_hazard-", "host write (seen as a changed value) of idx_cpu",
      "-> device work _gather (read in place, not copied)", "readback_as_written")),
    # what a kernel read in place, where nothing reads its result back (an audit: the
    # race was an info finding "without an effect", exit 0: pinned arguments read in
    # place were never compared with what the host held at the launch)
    ("offsets_event_after_kernel.py", "Offsets", 0, ("0 error finding(s), 0 info finding(s)",)),
    ("offsets_one_buffer.py", "Offsets", 1,
     ("[no_copy_hazard-", "-> device work _offset (read in place, not copied)",
      "[device_read_as_meant-", "_offset read off[0] = 10, but the host held 0 for it at "
      "the launch (it reads that pinned memory in place, not a copy of it)",
      "0 info finding(s)")),
    ("mapping_after_unique.py", "Mapping", 0, ("0 error finding(s), 0 info finding(s)",)),
    ("mapping_without_wait.py", "Mapping", 1,
     ("[no_copy_hazard-", "host write (torch __setitem__) of map_cpu",
      "the host issued torch __eq__ on device tensors")),
]


@pytest.mark.parametrize("name, component, code, words", CASES, ids=[c[0] for c in CASES])
def test_host_issued_torch_operations_never_hide_a_race(name, component, code, words,
                                                        tmp_path):
    protocol = name.split("_")[0] + "_protocol.py"
    proc = run_stagecheck("spec", f"{os.path.join(HERE, name)}::{component}", "--protocol",
                          os.path.join(HERE, protocol), "--save-dir", tmp_path, "--examples",
                          "120", "--strict")
    assert_outcome(proc, code, words)


def test_a_finding_against_the_baseline_shows_the_baselines_run(tmp_path):
    # the table under a baseline finding was the candidate's run, with no hazard in it
    proc = run_stagecheck("diff", f"{os.path.join(HERE, 'positions_written_early.py')}::Positions",
                          f"{os.path.join(HERE, 'positions_event_window.py')}::Positions",
                          "--protocol", os.path.join(HERE, "positions_protocol.py"),
                          "--save-dir", tmp_path, "--examples", "120")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    head, _, rest = proc.stdout.partition("[no_copy_hazard-")
    assert "(baseline) step 1 (step): host write" in rest.split("\n", 1)[0], rest
    table = rest.split("shown by:", 1)[1].split("\n[", 1)[0]
    assert "host-write-pending-upload pos_cpu[0]" in table, table
