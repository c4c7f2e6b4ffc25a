"""The contracts on spec/models.py: CrossHair finds nothing on the generations, and
they bite.

``crosshair check`` runs on spec/models.py through the real command line with a
small per-condition budget and must report nothing. Then planted violations, each in
a *copy* of the single-loop generation (impl/staging_single_loop.py) with one change,
run under the same contract, must be refuted by CrossHair on the postcondition that
states the broken invariant.
"""

from __future__ import annotations

import importlib.util
import inspect
import os
import resource
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

import pytest

import stagecheck.spec.models as models
from stagecheck.impl import staging_legacy, staging_single_loop
from stagecheck.spec.models import ModelRun, run_model, scenario_of

ROOT = Path(__file__).resolve().parents[2]
GENERATIONS = (staging_legacy.stage_postprocess_inputs_to_gpu,
               staging_single_loop.stage_postprocess_inputs_to_gpu)

#: Seconds per postcondition for the clean check (14 postconditions in all).
CLEAN_BUDGET = float(os.environ.get("STAGECHECK_CROSSHAIR_BUDGET", "2"))
#: Upper bound on the seconds CrossHair may take to refute one planted violation.
PLANTED_BUDGET = float(os.environ.get("STAGECHECK_CROSSHAIR_PLANTED_BUDGET", "60"))
#: Seconds per postcondition for the not-vacuous check: at 2 s the slower CI host
#: confirmed 2 paths of slot_alignment (this host 3); at 6 s this host confirmed 17 and
#: 25 in two runs.
REACH_BUDGET = max(3 * CLEAN_BUDGET, 6.0)


def test_crosshair_check_finds_nothing_on_the_models():
    """The bound is on CrossHair's CPU time (its own per-condition budget bounds each
    condition): on a machine whose CPUs are busy the wall clock says nothing about it, and
    the subprocess's timeout is only a guard against a hang."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    proc = subprocess.run(
        [sys.executable, "-m", "crosshair", "check",
         f"--per_condition_timeout={CLEAN_BUDGET}", "spec/models.py"],
        cwd=ROOT, capture_output=True, text=True, timeout=900)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.strip() == "", proc.stdout
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    assert cpu < 60 + 20 * CLEAN_BUDGET


def test_the_models_run_concretely_and_satisfy_their_own_contracts():
    """The postconditions hold on hand-picked in-contract runs (also outside CrossHair)."""
    cases = [  # capacity, num_ids, num_reqs, scheduled, computed, drafts, state_idx, missing
        (3, 3, 2, (5, 6, 7), (1, 2, 3), (0, 2, 1), (9, 8, 7), -1),
        (3, 3, 3, (5, 6, 7), (1, 2, 3), (0, 2, 1), (9, 8, 7), 1),     # r1 lacks an index
        (1, 0, 0, (0, 0, 0), (0, 0, 0), (0, 0, 0), (0, 0, 0), -1),    # empty batch
    ]
    for stage in GENERATIONS:
        for case in cases:
            assert models.shape_ok(*case[:3])
            s = scenario_of(*case, (-1, -1, -1), (-2, -2, -2))
            assert models.in_contract(s)
            run = run_model(stage, s)
            assert run.observation.returned == (case[-1] == -1)
            for predicate in (models.slot_alignment, models.tail_policy,
                              models.mirror_consistency, models.copy_discipline,
                              models.missing_input, models.expected_outcome,
                              models.inputs_unchanged):
                assert predicate(run), (stage.__module__, case, predicate.__name__)


# --------------------------------------------------------------------------------------
# Planted violations
# --------------------------------------------------------------------------------------

def _single_loop_source() -> str:
    return inspect.getsource(staging_single_loop)


#: name -> (replacements inside stage_single_loop, postconditions that must be refuted)
PLANTED = {
    "loop_stops_one_short": (
        [("enumerate(req_ids[:num_reqs])", "enumerate(req_ids[:num_reqs - 1])")],
        ["slot_alignment"]),
    "writes_the_tail": (
        [("enumerate(req_ids[:num_reqs])", "enumerate(req_ids)")],
        ["tail_policy"]),
    "keyerror_instead_of_assertion": (
        [("        assert req_id in mamba_state_idx, (\n", "        (\n")],
        ["missing_input"]),
    "copies_before_the_loop": (
        [("    draft_buf.copy_to_gpu(num_reqs)\n", ""),
         ("    spec_tokens = scheduler_output.scheduled_spec_decode_tokens\n",
          "    spec_tokens = scheduler_output.scheduled_spec_decode_tokens\n"
          "    draft_buf.copy_to_gpu(num_reqs)\n")],
        ["copy_discipline"]),
    "pops_the_drafts": (
        [("len(spec_tokens.get(req_id, ()))", "len(spec_tokens.pop(req_id, ()))")],
        ["inputs_unchanged"]),
}


def _planted_module(name: str, tmp_path: Path):
    """The single-loop generation with one planted bug, under the contract of
    ``models.run_single_loop`` (its docstring and body, calling the planted copy)."""
    replacements, _ = PLANTED[name]
    original = _single_loop_source()
    planted = original
    for old, new in replacements:
        assert planted.count(old) >= 1, (name, old)
        planted = planted.replace(old, new, 1)
    assert planted != original
    entry = inspect.getsource(models.run_single_loop)
    assert entry.count("staging_single_loop.stage_postprocess_inputs_to_gpu") == 1
    entry = entry.replace("staging_single_loop.stage_postprocess_inputs_to_gpu",
                          "stage_postprocess_inputs_to_gpu")
    predicates = ", ".join(["copy_discipline", "expected_outcome", "in_contract",
                            "inputs_unchanged", "mirror_consistency", "missing_input",
                            "tail_policy", "run_model", "scenario_of", "shape_ok",
                            "slot_alignment", "Ints", "ModelRun"])
    path = tmp_path / f"planted_{name}.py"
    path.write_text(f"{planted}\n\nfrom stagecheck.spec.models import {predicates}\n\n\n{entry}")
    spec_ = importlib.util.spec_from_file_location(f"planted_{name}", path)
    module = importlib.util.module_from_spec(spec_)
    sys.modules[spec_.name] = module
    spec_.loader.exec_module(module)
    return module


def analyze(fn, postconditions: list[str], budget: float) -> dict[str, tuple[list[str], int]]:
    """Run CrossHair on ``fn``'s postconditions named in ``postconditions``.

    Returns {postcondition name: (counterexample messages, paths on which it held)};
    no messages where none was found within ``budget`` seconds per postcondition.
    """
    import crosshair.core_and_libs  # noqa: F401
    from crosshair.condition_parser import condition_parser
    from crosshair.core import analyze_calltree
    from crosshair.fnutil import FunctionInfo
    from crosshair.options import DEFAULT_OPTIONS, AnalysisOptionSet
    from crosshair.statespace import MessageType
    from time import process_time

    options = DEFAULT_OPTIONS.overlay(AnalysisOptionSet(per_condition_timeout=budget))
    with condition_parser(options.analysis_kind) as parser:
        conditions = parser.get_fn_conditions(FunctionInfo.from_fn(fn))
    out: dict[str, tuple[list[str], int]] = {}
    for post in conditions.post:
        name = post.expr_source.split("(")[0].strip()
        if name not in postconditions:
            continue
        opts = replace(options)
        opts.deadline = process_time() + budget
        with condition_parser(options.analysis_kind):
            analysis = analyze_calltree(opts, replace(conditions, post=[post]))
        messages = [m.message for m in analysis.messages
                    if m.state not in (MessageType.CONFIRMED, MessageType.CANNOT_CONFIRM)]
        out[name] = (messages, analysis.num_confirmed_paths)
    return out


def refuted(fn, postconditions: list[str], budget: float) -> dict[str, list[str]]:
    return {name: messages for name, (messages, _) in analyze(fn, postconditions, budget).items()}


def test_the_clean_check_is_not_vacuous():
    """The preconditions are satisfiable: CrossHair completes paths on which the
    postconditions are evaluated (a contract nothing can reach would pass trivially)."""
    found = analyze(models.run_single_loop, ["slot_alignment", "missing_input"],
                    REACH_BUDGET)
    for name, (messages, confirmed) in found.items():
        assert messages == [], messages
        assert confirmed >= 3, (name, confirmed)


@pytest.mark.parametrize("name", sorted(PLANTED))
def test_planted_violation_is_found(name, tmp_path):
    module = _planted_module(name, tmp_path)
    _, expected = PLANTED[name]
    started = time.monotonic()
    found = refuted(module.run_single_loop, expected, PLANTED_BUDGET)
    elapsed = time.monotonic() - started
    for post in expected:
        assert found.get(post), f"{name}: CrossHair did not refute {post} in {PLANTED_BUDGET}s"
        assert "false when calling run_single_loop" in found[post][0], found[post]
    print(f"{name}: refuted {expected} in {elapsed:.1f} s")


def test_planted_counterexample_breaks_the_spec_check_too(tmp_path):
    """A planted model's counterexample is a real violation for spec.check as well."""
    from stagecheck.spec import check
    module = _planted_module("loop_stops_one_short", tmp_path)
    s = scenario_of(1, 1, 1, (7, 0, 0), (3, 0, 0), (0, 0, 0), (5, 0, 0), -1, (0,) * 3, (0,) * 3)
    assert models.in_contract(s)
    run: ModelRun = run_model(module.stage_postprocess_inputs_to_gpu, s)
    invariants = {f.invariant for f in check(run.scenario, run.observation, models.PROFILE)}
    assert "slot_alignment" in invariants
    assert not models.slot_alignment(run)
