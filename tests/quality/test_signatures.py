"""Signature drift (issue 23, item 8): a built-in schema covers its function across the
releases that changed its signature, with an adapter per signature chosen by the
parameters the target has; a signature no adapter maps is exit 2 naming the parameters
and the bridge, and the bridge, followed, works. The fixtures are in the shape of each
release (``tests/targets/<schema>/signatures/``)."""

from __future__ import annotations

import json
import pathlib

import pytest

from stagecheck.oracles import messages
from stagecheck.oracles.cli import main
from stagecheck.oracles.targets import load_target
from stagecheck.spec.schemas import BUILTIN_SCHEMAS

ROOT = pathlib.Path(__file__).resolve().parents[2]
FUSED = ROOT / "tests" / "targets" / "mamba-preprocess-fused" / "signatures"
BACKUP = ROOT / "tests" / "targets" / "specdec-backup-tokens" / "signatures"
METHOD = "EagleProposer.prepare_next_token_ids_padded"
SCALAR = f"{FUSED / 'scalar_path.py'}::preprocess_mamba"
SCALAR_PLANTED = f"{FUSED / 'scalar_path_planted.py'}::preprocess_mamba"
NO_SPEC = f"{BACKUP / 'eagle_no_spec.py'}::{METHOD}"
SEQ_LENS = f"{BACKUP / 'eagle_seq_lens.py'}::{METHOD}"
INDICES = f"{BACKUP / 'eagle_discard_indices.py'}::{METHOD}"
#: a worker's first call imports torch lazily, which takes seconds on a loaded machine
SLOW_FIRST_CALL = ("--timeout", "60")


def _diff(tmp_path, *argv) -> tuple[int, dict]:
    out = tmp_path / "report.json"
    code = main(["diff", *argv, *SLOW_FIRST_CALL, "--json", str(out), "--quiet",
                 "--save-dir", str(tmp_path / "findings")])
    return code, json.loads(out.read_text()) if out.exists() else {}


def _errors(report: dict) -> set[str]:
    return {f["invariant"] for f in report["findings"] if f["severity"] == "error"}


def test_each_release_s_target_gets_the_adapter_of_its_parameters():
    fused, backup = BUILTIN_SCHEMAS["mamba-preprocess-fused"], BUILTIN_SCHEMAS[
        "specdec-backup-tokens"]
    scalar = load_target(SCALAR)
    assert scalar.schema is fused and scalar.profile.signature is fused.signatures[0]
    assert "align_ctx" not in scalar.profile.parameters and scalar.profile.buffers() == ()
    assert load_target("preprocess-fused").profile.signature is None
    eagle = load_target(NO_SPEC)
    assert eagle.profile.signature is backup.signatures[0]
    assert eagle.profile.parameters[1] == "common_attn_metadata"
    assert load_target("backup-tokens").profile.signature is None


def test_the_nine_parameter_release_is_equivalent_to_the_fused_one(tmp_path):
    code, report = _diff(tmp_path, SCALAR, "preprocess-fused")
    assert code == 0 and _errors(report) == set(), report["findings"][:2]
    assert report["examples"]["in_contract"] == 300
    infos = {f["invariant"] for f in report["findings"]}
    assert "same_fields" in infos      # only the fused release stages the three buffers


def test_a_planted_difference_across_signatures_is_found(tmp_path):
    code, report = _diff(tmp_path, SCALAR_PLANTED, "preprocess-fused", "--no-out-of-contract")
    assert code == 1 and _errors(report) & {"inputs_unchanged", "same_inputs_after"}, \
        _errors(report)
    code, report = _diff(tmp_path, SCALAR, SCALAR_PLANTED, "--no-out-of-contract")
    assert code == 1 and "same_inputs_after" in _errors(report)


def test_the_v0_18_fix_is_equivalent_to_the_later_signature(tmp_path):
    code, report = _diff(tmp_path, NO_SPEC, "backup-tokens", "--examples", "150")
    assert code == 0 and _errors(report) == set(), report["findings"][:2]


def test_the_v0_18_bug_differing_only_in_body_is_found_against_both_signatures(tmp_path):
    code, report = _diff(tmp_path, SEQ_LENS, "backup-tokens", "--examples", "150",
                         "--no-out-of-contract")
    assert code == 1 and "same_buffers" in _errors(report), _errors(report)
    code, report = _diff(tmp_path, SEQ_LENS, NO_SPEC, "--examples", "150",
                         "--no-out-of-contract")
    assert code == 1 and "same_buffers" in _errors(report), _errors(report)


def test_an_unmapped_parameter_is_named_with_its_bridge_and_the_bridge_works(tmp_path,
                                                                             capsys):
    code, _ = _diff(tmp_path, INDICES, "backup-tokens")
    err = capsys.readouterr().err
    assert code == 2 and messages.TARGET_SIGNATURE[0].split("{")[1].split("}")[1] in err
    assert "no adapter maps parameter(s) 'discard_request_indices', " \
        "'num_discarded_requests'" in err and "it lacks 'discard_request_mask'" in err
    assert "Signature(parameters, build)" in err and "v0.18, eagle.py" in err
    code, report = _diff(tmp_path, "--schema", str(BACKUP / "bridge_schema.py"), INDICES,
                         "backup-tokens", "--examples", "150")
    assert code == 0 and _errors(report) == set(), report["findings"][:2]
