"""The mutation catalog, the upstream-style baseline and the kill matrix (issue 6).

The score tests run the catalog on a reduced budget (100 examples per stream, in-contract
stream only: the out-of-contract stream gives info findings, never kills). The docs'
kill matrices use the default budget and every oracle (``docs/mutants.md``).
"""

from __future__ import annotations

import json
import os

import pytest

from stagecheck.oracles._preload import preload_project_modules
from stagecheck.oracles.cli import main
from stagecheck.oracles.errors import UsageError
from stagecheck.oracles.mutants import (CATALOG, Mutant, MutantsConfig, evaluate_mutant,
                                        generate_mutants, run_mutants, upstream_example_test,
                                        upstream_missing_index_test)
from stagecheck.oracles.report import render_mutants
from stagecheck.oracles.targets import load_target, target_source

HERE = os.path.dirname(os.path.abspath(__file__))
FIXTURES = os.path.join(HERE, "..", "targets")
CI_BUDGET = 200

preload_project_modules()


def _mutants(target: str, operators=None) -> list[Mutant]:
    source, filename, function = target_source(target)
    return generate_mutants(source, filename, function, load_target(target).profile,
                            operators)


@pytest.fixture(scope="module")
def catalog() -> dict[str, list[Mutant]]:
    return {t: _mutants(t) for t in ("legacy", "single-loop")}


def _fixture(name: str) -> str:
    return os.path.join(FIXTURES, name) + "::stage_postprocess_inputs_to_gpu"


# ------------------------------------------------------------------------- the catalog

@pytest.mark.parametrize("operator", [op.name for op in CATALOG])
def test_every_operator_has_a_site_on_legacy_or_single_loop(catalog, operator):
    found = [m for ms in catalog.values() for m in ms if m.operator == operator]
    assert found, f"operator {operator} produced no mutant on legacy nor single-loop"
    for m in found:
        assert m.description and m.location.line > 0 and m.location.function


def test_mutants_load_differ_and_record_operator_and_location(catalog):
    for target, mutants in catalog.items():
        source, _, function = target_source(target)
        lines = source.splitlines()
        assert len({m.id for m in mutants}) == len(mutants)
        assert len({m.source for m in mutants}) == len(mutants)   # no duplicate mutant
        for m in mutants:
            func = m.load()
            assert callable(func) and func.__name__ == function
            assert m.diff.startswith("---") and ("\n+" in m.diff or "\n-" in m.diff)
            assert 1 <= m.location.line <= len(lines)
            # the location names a line of the function (or helper) it says
            assert m.location.function in m.source


def test_legacy_helpers_are_mutated(catalog):
    functions = {m.location.function for m in catalog["legacy"]}
    assert {"_stage_mamba_state_idx_to_gpu", "_stage_token_counts_to_gpu",
            "stage_postprocess_inputs_to_gpu"} <= functions


def test_equivalence_reasons_come_only_from_the_operators_that_know_them(catalog):
    operators = {m.operator for ms in catalog.values() for m in ms if m.equivalent_reason}
    assert operators <= {"assert_dropped", "index_to_get", "dtype_narrowing",
                         "non_blocking_toggled", "full_req_ids", "loop_bound_off_by_one"}
    for ms in catalog.values():
        for m in ms:
            if m.operator == "assert_dropped" and m.equivalent_reason:
                assert "is not None" in m.description
            if m.operator == "dtype_narrowing" and m.equivalent_reason:
                assert "len(" in m.description
            if m.operator == "non_blocking_toggled":
                assert "CUDA hazard detector (issue 7)" in m.equivalent_reason


def test_none_checks_of_the_later_generation_are_not_labeled_equivalent():
    # there, mamba_state_idx_buf may be None: the None check can fire
    mutants = _mutants("prefix-migration", ["assert_dropped"])
    assert mutants and not any(m.equivalent_reason for m in mutants)


def test_file_and_git_targets_are_mutated_from_their_source():
    src, filename, name = target_source(_fixture("buggy_swapped_views.py"))
    assert "vllm" in src and filename.endswith("buggy_swapped_views.py")
    mutants = generate_mutants(src, filename, name)
    assert mutants and all(callable(m.load()) for m in mutants)   # vllm imports not run
    src, filename, name = target_source("git:HEAD:impl/staging_legacy.py::"
                                        "stage_postprocess_inputs_to_gpu")
    assert filename == "git:HEAD:impl/staging_legacy.py" and "_stage_token_counts_to_gpu" in src


def test_a_mutants_diff_shows_only_what_it_changed_one_line_each():
    # a raw copy_ toggled to blocking needs no helper, and a file without a final newline
    # gave the diff '-old)+new' on one line (an audit's report)
    src = ("import numpy as np\n\n\ndef stage(ctx, scheduler_output, req_ids, num_reqs, "
           "requests, mamba_state_idx):\n    b = ctx.num_draft_tokens_buf\n"
           "    b.gpu[:num_reqs].copy_(b.cpu[:num_reqs], non_blocking=True)")
    (mutant,) = generate_mutants(src, "f.py", "stage", operators=["non_blocking_toggled"])
    assert "_stagecheck_blocking_copy" not in mutant.source
    changed = [line for line in mutant.diff.splitlines()
               if line[:1] in "+-" and not line.startswith(("+++", "---"))]
    assert changed == ["-    b.gpu[:num_reqs].copy_(b.cpu[:num_reqs], non_blocking=True)",
                       "+    b.gpu[:num_reqs].copy_(b.cpu[:num_reqs], non_blocking=False)"]


# ------------------------------------------------------------------- the upstream tests

@pytest.mark.parametrize("target", ["legacy", "single-loop", "prefix-migration"]
                         + [_fixture(f[:-3] + ".py") for f in sorted(os.listdir(FIXTURES))
                            if f.startswith("equivalent_")])
def test_upstream_tests_pass_on_correct_code(target):
    t = load_target(target)
    upstream_example_test(t.func, t.profile)
    upstream_missing_index_test(t.func, t.profile)


@pytest.mark.parametrize("name, caught", [
    ("buggy_swapped_views.py", True), ("buggy_drafts_indexed.py", True),
    ("buggy_wrong_exception_type.py", True), ("buggy_draft_count_carried_over.py", True),
    ("buggy_copy_whole_buffer.py", False), ("buggy_pops_draft_tokens.py", False),
    ("buggy_assert_message_without_id.py", False), ("buggy_early_return_no_reqs.py", False),
])
def test_upstream_tests_catch_some_fixture_bugs_and_miss_others(name, caught):
    func = load_target(_fixture(name)).func
    failed = False
    for test in (upstream_example_test, upstream_missing_index_test):
        try:
            test(func)
        except Exception:
            failed = True
    assert failed is caught


# ------------------------------------------------------------------------ the scores

SCORE_CASES = ([("single-loop", op.name) for op in CATALOG]
               + [("legacy", op.name) for op in CATALOG])


@pytest.mark.parametrize("target, operator", SCORE_CASES)
def test_every_non_equivalent_mutant_is_killed(target, operator):
    # single-loop: spec and differential; legacy: spec alone (the same kills, half the time)
    oracles = ("spec", "differential", "upstream") if target == "single-loop" else (
        "spec", "upstream")
    report = run_mutants(target, MutantsConfig(oracles=oracles, budget=CI_BUDGET,
                                               operators=(operator,), control=False,
                                               out_of_contract=False))
    assert report.results, f"{operator} made no mutant of {target}"
    survivors = [r for r in report.results if not r.killed_by_stagecheck and not r.equivalent]
    assert not survivors, render_mutants(report)
    for r in report.results:
        if r.equivalent:
            assert r.mutant.equivalent_reason     # labeled only with a reason
    assert not any(r.reason_withdrawn for r in report.results), render_mutants(report)


def test_upstream_baseline_misses_mutants_stagecheck_kills():
    report = run_mutants("single-loop", MutantsConfig(
        oracles=("spec", "upstream"), budget=30,
        operators=("whole_buffer_copy", "assert_weakened", "get_to_pop", "early_return"),
        control=False, out_of_contract=False))
    missed = [r for r in report.non_equivalent
              if r.killed_by_stagecheck and not r.killed_by(["upstream"])]
    # a whole-buffer copy rewrites the device tail, which the upstream test never looks at
    assert {r.mutant.operator for r in missed} == {"whole_buffer_copy", "assert_weakened",
                                                   "get_to_pop", "early_return"}
    killed, total = report.stagecheck_score
    assert killed == total and report.upstream_score[0] < killed


# --------------------------------------------------------------- report and command

def test_kill_matrix_text_and_json(tmp_path, capsys):
    path = tmp_path / "mutants.json"
    code = main(["mutants", "single-loop", "--oracles", "spec,upstream", "--budget", "20",
                 "--json", str(path), "--operators", "whole_buffer_copy,non_blocking_toggled"])
    out = capsys.readouterr().out
    assert code == 0          # every non-equivalent mutant killed
    assert "| spec" in out and "| upstream" in out
    assert "STAGECHECK (any of spec)" in out and "UPSTREAM BASELINE" in out
    assert out.count("killed by stagecheck, missed by the upstream tests: m01, m02, m03, "
                     "m04\n") == 1
    assert "EQUIVALENT: equivalent on CPU: copies are synchronous" in out
    assert "+    _stagecheck_blocking_copy(state_idx_buf, num_reqs)" in out   # survivor diff
    data = json.loads(path.read_text())
    assert data["command"] == "mutants" and data["verdict"] == "all-killed"
    assert data["scores"]["stagecheck"] == {"killed": 4, "total": 4, "score": 1.0}
    assert data["scores"]["upstream_baseline"]["killed"] == 0
    assert len(data["results"]) == 8 and len(data["equivalent"]) == 4
    first = data["results"][0]
    assert first["operator"] == "whole_buffer_copy" and first["location"]["line"] > 0
    assert first["outcomes"]["spec"]["status"] == "killed"


def test_command_exit_1_when_a_non_equivalent_mutant_survives(capsys):
    code = main(["mutants", "single-loop", "--oracles", "upstream", "--budget", "10",
                 "--operators", "whole_buffer_copy"])
    assert code == 1
    assert "NOT EQUIVALENT (no reason)" in capsys.readouterr().out


def test_list_prints_the_mutants_without_running_them(capsys):
    assert main(["mutants", "single-loop", "--list", "--operators", "early_return"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines and all(" early_return " in line for line in lines)


def test_an_unavailable_oracle_is_marked_and_not_counted():
    original = load_target("single-loop")
    (mutant,) = _mutants("single-loop", ["early_return"])[:1]
    config = MutantsConfig(oracles=("spec", "symbolic"), budget=40, control=False)
    result = evaluate_mutant(original, mutant, config, {"symbolic": "crosshair is missing"})
    assert result.outcomes["symbolic"].cell() == "n/a"
    assert result.outcomes["symbolic"].note == "crosshair is missing"
    assert result.killed_by(["spec", "symbolic"]) == ["spec"]


@pytest.mark.parametrize("argv, words", [
    (["--oracles", "spec,fuzz"], ["option --oracles", "fuzz is not an oracle",
                                  "spec, differential, kernel, symbolic, upstream"]),
    (["--oracles", ""], ["option --oracles", "(empty)"]),
    (["--budget", "0"], ["option --budget", "'0'"]),
    (["--operators", "nope"], ["option --operators", "nope is not an operator"]),
    (["--jobs", "x"], ["option --jobs", "'x'"]),
])
def test_bad_options_are_usage_errors(argv, words, capsys):
    assert main(["mutants", "single-loop", *argv]) == 2
    err = capsys.readouterr().err
    for w in words:
        assert w in err, err


def test_the_options_object_refuses_what_the_command_line_refuses():
    with pytest.raises(UsageError) as info:
        MutantsConfig(oracles=("spec", "fuzz"))
    assert info.value.option == "oracles" and "fuzz" in str(info.value)


def test_kernel_column_finds_a_reaching_difference_the_first_error_hides():
    # copy_hoisted of the state-index copy: the stream's first error (seed 0) is a
    # failure-path finding that never reaches the kernel; the stale state indices of
    # in-contract batches do. Before the impact probe recorded such differences (and
    # looked at more than the smallest example of each), this column missed it.
    report = run_mutants("single-loop", MutantsConfig(
        oracles=("differential", "kernel"), budget=300, operators=("copy_hoisted",),
        control=False))
    hoisted = [r for r in report.results if "state_idx_buf" in r.mutant.description]
    assert len(hoisted) == 1, render_mutants(report)
    outcomes = hoisted[0].outcomes
    assert outcomes["differential"].status == "killed"
    assert outcomes["kernel"].status == "killed", render_mutants(report)
    assert "kernel" in hoisted[0].killed_by(["kernel"])
