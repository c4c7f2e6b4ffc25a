"""Kernel oracle 2: does a staging difference reach the postprocess kernel's results?"""

from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from stagecheck.oracles.campaign import run_campaign
from stagecheck.oracles.options import CampaignConfig
from stagecheck.oracles.kernel import impact
from stagecheck.oracles.kernel.campaign import run_kernel_campaign
from stagecheck.oracles.kernel.impact import annotate, kernel_impact
from stagecheck.oracles.observe import observe
from stagecheck.oracles.targets import load_target
from stagecheck.spec import Finding
from tests.helpers import scenario

FUNC = "stage_postprocess_inputs_to_gpu"
PROFILE = load_target("single-loop").profile


def impacts(bug):
    # the hypothesis engine shrinks these to live-slot findings (the batched one may stop
    # at another error first, e.g. an int32 overflow of the post-step count)
    result = run_campaign(load_target("single-loop"),
                          load_target(f"tests/targets/buggy_{bug}.py::{FUNC}"),
                          CampaignConfig.from_options(out_of_contract=False,
                                                      engine="hypothesis"))
    assert result.errors
    return {(f.invariant, f.field, f.view): f.kernel_impact for f in result.errors}


@pytest.mark.parametrize("bug", ["loop_one_slot_short", "post_step_computed",
                                 "draft_count_carried_over", "uint16_computed_counts",
                                 "draft_view_aliases_computed"])
def test_live_slot_bugs_reach_the_kernel(bug):
    found = impacts(bug)
    live = {k: v for k, v in found.items() if k[0] in ("same_buffers", "slot_alignment")}
    assert live and all(v is True for v in live.values()), found


def test_tail_only_bug_does_not_reach_the_kernel():
    found = impacts("copy_whole_buffer")
    assert found and all(v is False for v in found.values()), found


def test_computed_and_scheduled_swapped_cannot_reach_the_kernel():
    # the kernel only uses computed + scheduled - draft: the swap is invisible to it
    found = impacts("swapped_views")
    assert found and all(v is False for v in found.values()), found


def test_always_mode_finds_no_kernel_difference_between_the_generations():
    result = run_campaign(load_target("legacy"), load_target("single-loop"),
                          CampaignConfig.from_options(examples=60, kernel="always", out_of_contract=False))
    assert result.errors == []


def test_a_kernel_difference_without_a_staging_finding_is_an_error():
    s = scenario(num_scheduled_tokens={"req-a": 5, "req-b": 1, "req-c": 4, "req-p": 4},
                 num_computed_tokens={"req-a": 3, "req-b": 7, "req-c": 8, "req-p": 55})
    a = observe(load_target("single-loop"), s)
    b = observe(load_target("single-loop"), s)
    b.gpu["num_computed_tokens_buf"][0] += 1       # a mirror no comparison was asked about
    assert kernel_impact(s, a, b, PROFILE).impact
    (f,) = annotate([], s, a, b, PROFILE, always=True)
    assert f.invariant == "kernel_results" and f.severity == "error" and f.kernel_impact


def test_findings_about_tails_and_unread_fields_have_no_impact():
    s = scenario()
    a = observe(load_target("single-loop"), s)
    b = observe(load_target("single-loop"), s)
    tail = Finding("tail_policy", "error", "x", field="computed", slot=4, view="gpu")
    prefill = Finding("same_buffers", "error", "x", field="is_prefilling", slot=0)
    tail_after, prefill_after = annotate([tail, prefill], s, a, b, PROFILE)
    assert tail_after.kernel_impact is False and prefill_after.kernel_impact is False
    assert tail.kernel_impact is None   # findings are values: annotate made new ones


def test_kernel_oracle_1_through_the_interpreter():
    result = run_kernel_campaign(examples=15, seed=3)
    assert result.clean and result.examples == 15


def test_oracle_2_runs_the_triton_kernel_through_the_interpreter():
    config = CampaignConfig.from_options(examples=8, kernel="always", kernel_backend="triton",
                            out_of_contract=False)
    assert run_campaign(load_target("legacy"), load_target("single-loop"), config).errors == []
    s = scenario(num_scheduled_tokens={"req-a": 5, "req-b": 1, "req-c": 4, "req-p": 4},
                 num_computed_tokens={"req-a": 3, "req-b": 7, "req-c": 8, "req-p": 55})
    a = observe(load_target("single-loop"), s)
    b = observe(load_target("single-loop"), s)
    b.gpu["num_computed_tokens_buf"][0] += 1
    assert kernel_impact(s, a, b, PROFILE, backend="triton").impact


def _sides():
    """Two sides' live staged arrays for ``scenario()``'s 3 live requests: b is a copy of a
    with some counts changed (often keeping computed + scheduled, as a swap does)."""
    count = st.integers(0, 9)
    side = st.fixed_dictionaries({k: st.lists(count, min_size=3, max_size=3)
                                  for k in ("state_idx", "scheduled", "computed", "draft")})

    def changed(a, data):
        b = {k: list(v) for k, v in a.items()}
        for _ in range(data.draw(st.integers(1, 3))):
            i, how = data.draw(st.integers(0, 2)), data.draw(st.integers(0, 2))
            if how == 0:       # a swap that keeps the sum the kernel reads
                b["scheduled"][i], b["computed"][i] = b["computed"][i], b["scheduled"][i]
            else:
                key = data.draw(st.sampled_from(sorted(b)))
                b[key][i] = data.draw(count)
        return b
    return side, changed


@settings(max_examples=150, deadline=None)
@given(st.data())
def test_equal_decisions_skip_the_reference_and_change_no_verdict(data):
    """The shortcut (both sides decide alike: the reference's results are the same) gives
    what running the reference on both sides gives, difference for difference."""
    side, changed = _sides()
    a = data.draw(side)
    b = changed(a, data)
    s = scenario()
    with_shortcut = impact.mamba_postprocess_results_differ(s, a, b)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(impact, "_settled_without_running", lambda *args: False)
        assert impact.mamba_postprocess_results_differ(s, a, b) == with_shortcut


def test_a_swap_the_kernel_cannot_see_runs_no_kernel(monkeypatch):
    s = scenario()
    a = {"state_idx": [1, 2, 3], "scheduled": [5, 1, 7], "computed": [100, 7, 3],
         "draft": [2, 0, 1]}
    b = {**a, "scheduled": [100, 1, 7], "computed": [5, 7, 3]}

    def no_kernel(*args):
        raise AssertionError("the kernel ran")
    monkeypatch.setattr(impact, "_run_side", no_kernel)
    assert impact.mamba_postprocess_results_differ(s, a, b) == []
    with pytest.raises(AssertionError, match="the kernel ran"):   # decisions differ: it runs
        impact.mamba_postprocess_results_differ(s, a, {**a, "computed": [96, 7, 3]})


def test_a_target_that_raises_stops_the_kernel_in_spec_as_in_diff(tmp_path):
    """An audit: ``spec`` of a target that raises said kernel impact "no" (no baseline read
    as one that raised too), ``diff`` against a baseline that returned "yes"."""
    path = tmp_path / "raises.py"
    path.write_text("def stage_postprocess_inputs_to_gpu(ctx, scheduler_output, req_ids, "
                    "num_reqs, requests, mamba_state_idx):\n"
                    "    raise RuntimeError('staging failed')\n")
    s = scenario()
    a = observe(load_target("single-loop"), s)
    b = observe(load_target(f"{path}::stage_postprocess_inputs_to_gpu"), s)
    assert a.returned and not b.returned
    finding = Finding("expected_outcome", "error", "raised")
    (in_spec,) = annotate([finding], s, None, b, PROFILE)
    (in_diff,) = annotate([replace(finding, invariant="same_outcome")], s, a, b, PROFILE)
    assert in_spec.kernel_impact is True and in_diff.kernel_impact is True
