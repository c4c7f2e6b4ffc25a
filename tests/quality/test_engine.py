"""The batched engine: results independent of --jobs, findings that replay, a shrinker
as good as hypothesis's, crashes inside a pipelined batch, the sampled instrumented runs."""

import pathlib
import pytest

from stagecheck.oracles.campaign import SAMPLE_EVERY, run_campaign
from stagecheck.oracles.collect import scenario_size
from stagecheck.oracles.evaluate import evaluate
from stagecheck.oracles.options import CampaignConfig, RunOptions
from stagecheck.oracles.targets import load_target
from stagecheck.spec import ERROR, StagingScenario

TARGETS = pathlib.Path(__file__).resolve().parents[1] / "targets"
FUNCTION = "stage_postprocess_inputs_to_gpu"


def _fixture(name: str):
    return load_target(f"{TARGETS / name}::{FUNCTION}")


def _summary(result) -> list[tuple]:
    return [(f.key, f.severity, f.examples_to_find, f.scenario, f.extra.get("engine"))
            for f in result.findings]


@pytest.mark.parametrize("candidate", ["single-loop", "buggy_copy_one_slot_short.py"])
def test_results_are_the_same_for_any_number_of_jobs(candidate):
    target = load_target(candidate) if candidate == "single-loop" else _fixture(candidate)
    base = load_target("legacy")
    runs = {jobs: run_campaign(base, target, CampaignConfig(examples=700, jobs=jobs,
                                                            run=RunOptions(kernel="off")))
            for jobs in (1, 2)}
    assert _summary(runs[1]) == _summary(runs[2])
    assert runs[1].examples_in_contract == runs[2].examples_in_contract
    assert runs[1].examples_out_of_contract == runs[2].examples_out_of_contract
    assert runs[1].examples_instrumented == runs[2].examples_instrumented
    if candidate == "single-loop":   # the whole budget ran, in both streams
        assert runs[1].examples_in_contract == runs[1].examples_out_of_contract == 700
        assert runs[1].verdict() == "equivalent" and runs[1].findings
    else:
        assert runs[1].verdict() == "different"


def test_a_batched_finding_replays_to_the_same_error():
    base, candidate = load_target("single-loop"), _fixture("buggy_swapped_views.py")
    result = run_campaign(base, candidate, CampaignConfig(out_of_contract=False))
    errors = [f for f in result.findings if f.severity == ERROR]
    assert errors and {f.extra.get("engine") for f in errors} == {"random"}
    for f in errors:
        again = evaluate(base, candidate, StagingScenario.from_dict(f.scenario)).findings
        assert f.key in {g.key for g in again}


@pytest.mark.parametrize("name", ["buggy_copy_one_slot_short.py", "buggy_drafts_indexed.py",
                                  "buggy_tail_overrun_padded.py"])
def test_the_shrinker_reaches_what_hypothesis_reaches(name):
    base, candidate = load_target("single-loop"), _fixture(name)

    def smallest(engine: str) -> tuple:
        result = run_campaign(base, candidate, CampaignConfig(engine=engine,
                                                              out_of_contract=False))
        return min(scenario_size(StagingScenario.from_dict(f.scenario))
                   for f in result.findings if f.severity == ERROR)

    batched = smallest("batched")
    assert batched <= smallest("hypothesis")
    assert batched[0] <= 2       # a capacity of one or two slots shows these bugs


def test_write_order_bugs_are_caught_by_the_sampled_instrumented_runs():
    """A write of an equal value after the copy leaves the fast buffers as they should
    be: only the instrumented runs (one in SAMPLE_EVERY, and every flagged example)
    see it, and the engine still reports it."""
    result = run_campaign(load_target("single-loop"), _fixture("buggy_draft_written_after_"
                                                               "copy.py"),
                          CampaignConfig(examples=40 * SAMPLE_EVERY, out_of_contract=False))
    assert any(f.invariant == "copy_discipline" and f.extra.get("kind") == "write-after-copy"
               for f in result.errors)
    assert result.examples_instrumented >= 1


SINGLE_LOOP = (pathlib.Path(__file__).resolve().parents[2] / "impl" /
               "staging_single_loop.py").read_text()
# the single-loop generation, except that a batch of exactly three requests ends its process
CRASHES_ON_THREE = "import os\n" + SINGLE_LOOP.replace(
    "    state_idx_buf = ctx.mamba_state_idx_buf\n",
    "    if num_reqs == 3 and len(req_ids) == 3:\n        os._exit(0)\n"
    "    state_idx_buf = ctx.mamba_state_idx_buf\n")


@pytest.mark.parametrize("jobs", [1, 2])
def test_a_candidate_that_ends_its_process_mid_batch_is_a_finding(tmp_path, jobs):
    path = tmp_path / "crashes.py"
    path.write_text(CRASHES_ON_THREE)
    result = run_campaign(load_target("single-loop"), load_target(f"{path}::{FUNCTION}"),
                          CampaignConfig(examples=2000, jobs=jobs, out_of_contract=False,
                                         run=RunOptions(kernel="off")))
    assert result.verdict() == "different"
    crash = [f for f in result.errors if f.invariant == "expected_outcome"]
    assert crash and "exited the interpreter with code 0" in crash[0].message
    kept = StagingScenario.from_dict(crash[0].scenario)
    assert kept.num_reqs == len(kept.req_ids) == 3
    # the examples before the crash ran and were judged, in order
    assert result.examples_in_contract == crash[0].examples_to_find > 1


def test_an_out_of_contract_difference_its_repaired_example_still_shows_is_an_error(
        monkeypatch):
    # the in-contract stream draws only empty batches here (the bug never shows there);
    # the out-of-contract stream's examples show it, excused by their breach (an input
    # out of its range). Repaired into the contract, the example still shows it: an error
    import stagecheck.oracles.campaign as campaign
    real = campaign.sample_scenario

    def empty(*args, **kwargs):
        s = real(*args, **kwargs)
        s.num_reqs = 0
        return s

    monkeypatch.setattr(campaign, "sample_scenario", empty)
    result = run_campaign(load_target("legacy"), _fixture("buggy_loop_one_slot_short.py"),
                          CampaignConfig(examples=60, edge_examples=0,
                                         run=RunOptions(kernel="off")))
    errors = result.errors
    assert errors, [f.message for f in result.findings]
    assert all(f.in_contract and f.extra.get("engine") == "repaired" for f in errors)
    assert result.verdict() == "different"


def test_a_bug_shown_only_where_a_request_was_missing_is_repaired_into_an_error(tmp_path):
    """An audit: a refactor that zeroes the draft counts of batches of exactly 63 requests
    was EQUIVALENT by default: the only example of 63 live slots also lacked a request
    (out of contract, an info). A live request missing from an input is repaired too (a
    simple entry, the success path), and the difference the repaired example still shows
    is an in-contract error, shrunk to 63 slots."""
    source = (TARGETS / "equivalent_zip_loop.py").read_text()
    line = "len(spec_tokens.get(req_id, ()))"
    assert source.count(line) == 1, "the fixture's draft line moved"
    bug = tmp_path / "zeroes_drafts_at_63.py"
    bug.write_text(source.replace(line, f"(0 if num_reqs == 63 else {line})"))
    result = run_campaign(load_target("single-loop"),
                          load_target(f"{bug}::{FUNCTION}"),
                          CampaignConfig.from_options(kernel="off"))
    assert result.verdict() == "different", [f.message for f in result.findings]
    assert all(f.in_contract for f in result.errors)
    assert {StagingScenario.from_dict(f.scenario).num_reqs for f in result.errors} == {63}
