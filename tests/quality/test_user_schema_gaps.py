"""User schemas for the schema language's gaps of issue 23 (items 1, 2, 3, 5, 6), each
written as a user would from docs/schemas.md, each through the command line:

- ``forget_finished_schema.py``: an inputs-only contract (``fields=()``) whose id set
  the adapter passes as None when the scenario says so;
- ``sampling_seeds_schema.py``: a field with ``derive=None`` (values not checked, tail
  and copy still are);
- ``accepted_reset_schema.py``: ``num_reqs_is_len`` with a per-slot input (the
  out-of-contract stream), and one array asked for twice (the same array, so the
  declared mutation is seen where the function makes it);
- ``seeds_device_schema.py``: an adapter that reads ``buf.gpu.device`` (the list model
  does not offer it): ``schema check`` exit 2 naming it, ``spec`` runs.
"""

from __future__ import annotations

import json
import pathlib
import subprocess
import sys

import pytest

from stagecheck.oracles.cli import main

ROOT = pathlib.Path(__file__).resolve().parents[2]
HERE = ROOT / "tests" / "user_schema"


def _run(tmp_path, schema: str, *argv) -> tuple[int, dict]:
    out = tmp_path / "report.json"
    code = main([*argv, "--schema", str(HERE / schema), "--json", str(out),
                 "--save-dir", str(tmp_path / "findings"), "--quiet"])
    return code, json.loads(out.read_text())


def _errors(report: dict) -> set[str]:
    return {f["invariant"] for f in report["findings"] if f["severity"] == "error"}


def _target(module: str, function: str) -> str:
    return f"{HERE / module}::{function}"


@pytest.mark.parametrize("schema", ["forget_finished_schema.py", "sampling_seeds_schema.py",
                                    "accepted_reset_schema.py"])
def test_each_gap_s_schema_passes_schema_check(schema, capsys):
    assert main(["schema", "check", str(HERE / schema)]) == 0, capsys.readouterr().err


# ---------------------------------------------------------------- item 2 and item 3 (None)

FORGET = {
    "planted_keeps_preempted": {"inputs_unchanged"},
    "planted_iterates_none": {"expected_outcome"},
    "planted_clears_live": {"inputs_unchanged"},
}


def test_an_inputs_only_contract_is_clean_on_its_function(tmp_path):
    reference = _target("forget_finished.py", "forget_finished")
    code, report = _run(tmp_path, "forget_finished_schema.py", "diff", reference, reference)
    assert code == 0 and report["findings"] == []
    assert report["examples"]["in_contract"] == 300


@pytest.mark.parametrize("planted", sorted(FORGET))
def test_an_inputs_only_contract_finds_each_planted_bug(tmp_path, planted):
    code, report = _run(tmp_path, "forget_finished_schema.py", "spec", "--no-out-of-contract",
                        _target("forget_finished.py", planted))
    assert code == 1 and _errors(report) & FORGET[planted], _errors(report)


# ---------------------------------------------------------------- item 1: derive=None

def test_derive_none_leaves_values_free_but_checks_tail_and_copy(tmp_path):
    code, report = _run(tmp_path, "sampling_seeds_schema.py", "spec",
                        _target("sampling_seeds.py", "other_hash"))
    assert code == 0 and report["findings"] == []
    code, report = _run(tmp_path, "sampling_seeds_schema.py", "spec",
                        _target("sampling_seeds.py", "planted_tail_kept"))
    assert code == 1 and "tail_policy" in _errors(report)
    code, report = _run(tmp_path, "sampling_seeds_schema.py", "spec",
                        _target("sampling_seeds.py", "planted_live_upload"))
    assert code == 1 and "copy_discipline" in _errors(report)
    code, report = _run(tmp_path, "sampling_seeds_schema.py", "diff",
                        _target("sampling_seeds.py", "stage_sampling_seeds"),
                        _target("sampling_seeds.py", "other_hash"))
    assert code == 1 and _errors(report) == {"same_buffers"}     # the two still differ


# ---------------------------------------------------------------- items 3 (array twice), 6

def test_one_array_asked_for_twice_shows_the_declared_mutation(tmp_path):
    reference = _target("accepted_reset.py", "stage_accepted")
    code, report = _run(tmp_path, "accepted_reset_schema.py", "diff", reference, reference)
    assert code == 0 and report["findings"] == [], report["findings"]
    # num_reqs is len(req_ids) and the only input is per slot: the out-of-contract
    # stream still runs (batches longer than the buffers)
    assert report["examples"]["out_of_contract"] == 300


@pytest.mark.parametrize("planted, invariant", [
    ("planted_resets_every_slot", "inputs_unchanged"), ("planted_reset_first", "slot_alignment")])
def test_the_shared_array_schema_finds_each_planted_bug(tmp_path, planted, invariant):
    code, report = _run(tmp_path, "accepted_reset_schema.py", "spec",
                        _target("accepted_reset.py", planted))
    assert code == 1 and invariant in _errors(report), _errors(report)


# ---------------------------------------------------------------- item 5: buf.gpu.device

def _stagecheck(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "stagecheck", *args], capture_output=True,
                          text=True, timeout=240, cwd=ROOT)


def test_an_adapter_the_list_model_cannot_build_is_exit_2_for_schema_check_only(tmp_path):
    schema = str(HERE / "seeds_device_schema.py")
    done = _stagecheck("schema", "check", schema)
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    assert ".device of a device tensor is not offered by the list model" in done.stderr
    assert "seeds_device_schema.py:18" in done.stderr and "b.device" in done.stderr
    done = _stagecheck("spec", "--schema", schema, "--quiet", "--save-dir",
                       str(tmp_path / "findings"),
                       _target("sampling_seeds.py", "planted_tail_kept"))
    assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr
    assert "tail_policy" in done.stdout
