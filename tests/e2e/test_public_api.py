"""The public API takes what the docs show (issue 23, item 14): target names included,
one clean error for bad input; the docs' example runs as written."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

import stagecheck
from stagecheck.oracles import messages
from stagecheck.impl.staging_single_loop import stage_postprocess_inputs_to_gpu

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BUGGY = "tests/targets/buggy_swapped_views.py::stage_postprocess_inputs_to_gpu"
SMALL = stagecheck.CampaignConfig.from_options(examples=40, out_of_contract=False)


def test_run_campaign_takes_target_names_as_the_command_line_does():
    result = stagecheck.run_campaign("legacy", "single-loop", SMALL)
    assert result.verdict() == "equivalent"
    assert (result.baseline, result.candidate) == ("legacy", "single-loop")
    assert result.examples_in_contract == 40


def test_run_campaign_takes_files_functions_targets_and_no_baseline():
    found = stagecheck.run_campaign("single-loop", os.path.join(ROOT, BUGGY), SMALL)
    assert found.verdict() == "different"
    assert stagecheck.run_campaign(None, stage_postprocess_inputs_to_gpu, SMALL
                                   ).verdict() == "equivalent"
    same = stagecheck.run_campaign(stagecheck.load_target("legacy"), "single-loop", SMALL)
    assert same.verdict() == "equivalent"


@pytest.mark.parametrize("args,where,needle", [
    (("legacy", "nope"), "candidate", "is not a builtin target"),
    (("nope.py::f", "legacy"), "baseline", "does not exist"),
    (("legacy", 42), "candidate", messages.NOT_A_TARGET[0].format(value=42, kind="int")),
    (("legacy", "single-loop", {"examples": 3}), "config", "is not a CampaignConfig"),
])
def test_bad_input_is_one_clean_error_naming_the_argument(args, where, needle):
    with pytest.raises(stagecheck.StagecheckError) as caught:
        stagecheck.run_campaign(*args)
    assert str(caught.value).startswith(f"{where}: ") and needle in str(caught.value)
    assert caught.value.__cause__ is None and caught.value.__suppress_context__ or \
        caught.value.__context__ is None


def test_the_docstring_example_runs_as_written_and_errors_print_no_chained_traceback():
    example = stagecheck.__doc__.split(">>> ", 1)[1]
    lines = [ln.split(">>> ", 1)[-1] for ln in stagecheck.__doc__.splitlines()
             if ln.strip().startswith(">>> ")]
    assert lines[1] == 'result = stagecheck.run_campaign("legacy", "single-loop")', example
    code = "\n".join(lines[:2] + ["print(result.verdict())"])
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          cwd=ROOT, timeout=600)
    assert proc.stdout.strip() == "equivalent", proc.stderr
    bad = subprocess.run([sys.executable, "-c", "import stagecheck; "
                          "stagecheck.run_campaign('legacy', 'nope')"], capture_output=True,
                         text=True, cwd=ROOT, timeout=600)
    assert "During handling of the above exception" not in bad.stderr
    assert bad.stderr.strip().splitlines()[-1].startswith(
        "stagecheck.oracles.errors.TargetLoadError: candidate: 'nope' is not a builtin target")
