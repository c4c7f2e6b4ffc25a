"""The Triton postprocess kernel against its Python reference, bit for bit.

Without CUDA the kernel runs in Triton's interpreter (tests/conftest.py selects it
before triton is imported); with CUDA it is compiled and every test runs on the GPU.
"""

from __future__ import annotations

import pathlib

import pytest
import torch
from hypothesis import HealthCheck, Phase, given, note, settings

from stagecheck.impl.postprocess import BACKENDS, KernelDecision, MambaStateSpec, kernel_decisions
from stagecheck.impl.postprocess_ref import apply_state_copy
from stagecheck.oracles.kernel.scenarios import (KernelInputs, KernelScenario, LayerSpec,
                                                 build_kernel_inputs, compare_kernel_outputs,
                                                 kernel_scenarios, make_kernel_scenario,
                                                 page_layout, state_bytes)

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"

BS = 4
# (computed, scheduled, draft, accepted, state_idx) with block_size 4:
SAVE_SHIFT = (6, 3, 2, 3, 1)    # running 7, aligned 8: bias 1, dest 1 == src: shift, accepted -> 1
SAVE_COPY = (4, 4, 0, 1, 0)     # running 8, aligned 8: bias 0, dest 1 != src 0: plain copy
NO_COPY = (4, 4, 0, 3, 1)       # running 8, new 10, aligned 8: bias 0, src == dest: accepted -> 1 only
NOTHING = (3, 2, 0, 1, 1)       # running 5, aligned 4 < 5: nothing at all
SHIFT_2 = (5, 4, 3, 4, 1)       # running 6, new 9, aligned 8: bias 2, src == dest

TARGETS = pathlib.Path(__file__).resolve().parents[1] / "targets"


def layer(group: int = 0, conv: tuple[int, int, str] = (4, 3, "float16"),
          temporal: tuple[list[int], str] = ([2, 3], "float32"), **kw) -> LayerSpec:
    return LayerSpec(group=group, conv_width=conv[0], conv_inner=conv[1], conv_dtype=conv[2],
                     temporal_shape=temporal[0], temporal_dtype=temporal[1], **kw)


def run_both(scenario: KernelScenario, **kwargs) -> tuple[KernelInputs, KernelInputs]:
    """Run reference and Triton on fresh copies; assert they agree bit for bit."""
    reference = build_kernel_inputs(scenario, DEVICE).run("reference")
    kernel = build_kernel_inputs(scenario, DEVICE).run("triton", **kwargs)
    differences = compare_kernel_outputs(reference, kernel)
    assert differences == [], "\n".join(differences + [scenario.to_json()])
    return reference, kernel


def changed_blocks(scenario: KernelScenario, after: KernelInputs) -> list[list[int]]:
    """Per state: the physical blocks whose bytes changed."""
    before = build_kernel_inputs(scenario, DEVICE)
    result = []
    for old, new in zip(before.states, after.states):
        diff = state_bytes(old.tensor) != state_bytes(new.tensor)
        result.append(diff.any(dim=1).nonzero().flatten().tolist())
    return result


# --------------------------------------------------------------------------- decisions


def test_kernel_decisions_cases() -> None:
    reqs = [SAVE_SHIFT, SAVE_COPY, NO_COPY, NOTHING, SHIFT_2]
    columns = list(zip(*reqs))
    decisions = kernel_decisions(columns[4], columns[1], columns[0], columns[2], columns[3],
                                 len(reqs), BS)
    assert decisions == [KernelDecision(1, 1, 1, True, True), KernelDecision(0, 1, 0, True, False),
                         KernelDecision(1, 1, 0, False, True), None,
                         KernelDecision(1, 1, 2, True, True)]


# --------------------------------------------------------------------------- hand-crafted


def test_bias_zero_copies_whole_state_between_blocks() -> None:
    scenario = make_kernel_scenario([SAVE_COPY], BS, [layer()])
    _, out = run_both(scenario)
    table = scenario.block_tables[0][0]
    assert changed_blocks(scenario, out) == [[table[1]], [table[1]]]
    before = build_kernel_inputs(scenario, DEVICE)
    for old, new in zip(before.states, out.states):
        assert torch.equal(_bits(new.tensor[table[1]]), _bits(old.tensor[table[0]]))
    assert out.num_accepted.tolist() == [1]


def _bits(tensor: torch.Tensor) -> torch.Tensor:
    return tensor.contiguous().view(torch.uint8)


@pytest.mark.parametrize("request_", [SAVE_SHIFT, SHIFT_2], ids=["bias1", "bias2"])
def test_overlapping_conv_shift_in_one_block(request_: tuple[int, ...]) -> None:
    scenario = make_kernel_scenario([request_], BS, [layer(conv=(4, 5, "bfloat16"))])
    _, out = run_both(scenario)
    bias = scenario.decisions()[0].bias
    table = scenario.block_tables[0][0]
    before = build_kernel_inputs(scenario, DEVICE)
    conv_old, conv_new = before.states[0].tensor[table[1]], out.states[0].tensor[table[1]]
    assert torch.equal(_bits(conv_new[:4 - bias]), _bits(conv_old[bias:]))
    assert torch.equal(_bits(conv_new[4 - bias:]), _bits(conv_old[4 - bias:]))
    temporal_old, temporal_new = before.states[1].tensor, out.states[1].tensor
    assert torch.equal(_bits(temporal_new[table[1]]), _bits(temporal_old[table[1 + bias]]))
    assert out.num_accepted.tolist() == [1]


def test_conv_shift_wider_than_window_copies_nothing() -> None:
    scenario = make_kernel_scenario([SHIFT_2], BS, [layer(conv=(2, 3, "float32"))])
    _, out = run_both(scenario)
    assert changed_blocks(scenario, out)[0] == []  # bias 2 >= conv_width 2


def test_src_equals_dest_without_bias_only_normalizes_accepted() -> None:
    scenario = make_kernel_scenario([NO_COPY, NOTHING], BS, [layer()])
    _, out = run_both(scenario)
    assert changed_blocks(scenario, out) == [[], []]
    assert out.num_accepted.tolist() == [1, 1]  # 3 -> 1; NOTHING keeps its 1


def test_nothing_to_do_keeps_accepted() -> None:
    scenario = make_kernel_scenario([(1, 4, 3, 2, 0)], BS, [layer()])  # running 2, new 3: aligned 0
    assert scenario.decisions() == [None]
    _, out = run_both(scenario)
    assert changed_blocks(scenario, out) == [[], []] and out.num_accepted.tolist() == [2]


def test_several_layers_groups_and_dtypes() -> None:
    layers = [layer(0, (4, 3, "float16"), ([2, 3], "float32")),
              layer(1, (3, 8, "bfloat16"), ([4, 2, 2], "bfloat16"), temporal_first=True, pad_bytes=6),
              layer(2, (2, 1, "float32"), ([5], "float16"), pad_bytes=16),
              layer(1, (4, 7, "float32"), ([1, 3], "float32"), temporal_first=True)]
    scenario = make_kernel_scenario([SAVE_SHIFT, SAVE_COPY, NO_COPY, NOTHING, SHIFT_2], BS, layers,
                                    num_groups=3)
    _, out = run_both(scenario)
    assert all(blocks for blocks in changed_blocks(scenario, out)[:2])
    assert out.num_accepted.tolist() == [1, 1, 1, 1, 1]


def test_num_reqs_zero_touches_nothing() -> None:
    scenario = make_kernel_scenario([], BS, [layer()], tail=3)
    _, out = run_both(scenario)
    assert compare_kernel_outputs(out, build_kernel_inputs(scenario, DEVICE)) == []


def test_tail_slots_with_garbage_are_not_read() -> None:
    scenario = make_kernel_scenario([SAVE_SHIFT, SAVE_COPY], BS, [layer(), layer(1)], tail=3)
    assert scenario.num_computed[2:] and min(scenario.state_idx[2:]) < 0
    _, out = run_both(scenario)
    trimmed = make_kernel_scenario([SAVE_SHIFT, SAVE_COPY], BS, [layer(), layer(1)], tail=0)
    _, clean = run_both(trimmed)
    for a, b in zip(out.states, clean.states):
        assert torch.equal(_bits(a.tensor), _bits(b.tensor))
    assert out.num_accepted.tolist() == [1, 1] + scenario.num_accepted[2:]


def test_aliased_columns_share_one_block() -> None:
    scenario = make_kernel_scenario([(6, 3, 2, 3, 0)], BS, [layer()])  # bias 1, src 0, dest 1
    table = scenario.block_tables[0][0]
    table[1] = table[0]                   # dest and src map to the same physical block
    _, out = run_both(scenario)
    assert changed_blocks(scenario, out)[0] == [table[0]]


def test_temporal_copy_split_into_parts() -> None:
    big = layer(conv=(4, 2, "float32"), temporal=([3, 37, 11], "float16"))  # 2442 bytes: odd words
    scenario = make_kernel_scenario([SAVE_SHIFT, SAVE_COPY, SHIFT_2], BS, [big, layer(1)])
    run_both(scenario, num_parts=3)  # 1221 words in parts of 1024: a full, a partial, an empty part


def test_out_of_range_ids_are_skipped_by_both() -> None:
    scenario = make_kernel_scenario([SAVE_COPY, SAVE_SHIFT, SAVE_COPY], BS, [layer(), layer(1)])
    scenario.block_tables[0][0][1] = scenario.num_blocks       # dest block past the end
    scenario.block_tables[1][1][2] = -5                        # temporal source block negative
    scenario.state_idx[2] = -1                                 # source column before the table
    _, out = run_both(scenario)
    changed = changed_blocks(scenario, out)
    assert changed[0] == [scenario.block_tables[0][1][1]]     # only request 1's conv shift
    assert changed[3] == [scenario.block_tables[1][0][1]]     # request 0 only (1, 2 skipped)


def test_bad_backend_is_refused() -> None:
    inputs = build_kernel_inputs(make_kernel_scenario([SAVE_COPY], BS, [layer()]), DEVICE)
    with pytest.raises(ValueError) as error:
        inputs.run("cuda-graph")
    message = str(error.value)
    assert "backend" in message and "'cuda-graph'" in message
    assert all(repr(name) in message for name in BACKENDS)


@pytest.mark.parametrize("mutate, words", [
    (lambda x: setattr(x, "num_draft", x.num_draft.to("meta")), "one device"),
    (lambda x: setattr(x, "state_idx", x.state_idx.long()), "state_idx"),
    (lambda x: setattr(x, "num_computed", x.num_computed[:1]), "num_computed"),
    (lambda x: x.states.__setitem__(0, MambaStateSpec(x.states[0].tensor, "conv", 7)), "group"),
    (lambda x: x.states.__setitem__(0, MambaStateSpec(x.states[0].tensor, "ssm", 0)), "kind"),
    (lambda x: x.states.__setitem__(1, MambaStateSpec(x.states[1].tensor.transpose(1, 2), "temporal", 0)),
     "contiguous"),
])
def test_malformed_inputs_are_refused(mutate, words: str) -> None:
    inputs = build_kernel_inputs(make_kernel_scenario([SAVE_COPY, NO_COPY], BS, [layer()]), DEVICE)
    mutate(inputs)
    for backend in BACKENDS:
        with pytest.raises(ValueError, match=words):
            inputs.run(backend)


def test_scenario_round_trips_through_json() -> None:
    scenario = make_kernel_scenario([SAVE_SHIFT], BS, [layer(1, pad_bytes=2)], tail=1, seed=7)
    assert KernelScenario.from_json(scenario.to_json()) == scenario


def test_page_layout_respects_alignment() -> None:
    layout = page_layout(layer(conv=(3, 3, "float16"), temporal=([1], "float32"), pad_bytes=2))
    assert layout.conv_offset == 0 and layout.conv_bytes == 18
    assert layout.temporal_offset == 20 and layout.page_bytes == 28


# --------------------------------------------------------------------------- property


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow],
          derandomize=True)
@given(kernel_scenarios())
def test_kernel_matches_reference(scenario: KernelScenario) -> None:
    note(scenario.to_json())
    run_both(scenario)


def request_kinds(scenario: KernelScenario) -> set[str]:
    """Which kinds of live request a scenario holds (for the strategy's coverage)."""
    kinds = set()
    narrowest = min(l.conv_width for l in scenario.layers)
    for i, d in enumerate(scenario.decisions()):
        if d is None:
            kinds.add("nothing")
        elif not d.copy:
            kinds.add("accepted only")
        elif d.src == d.dest:
            kinds.add("overlapping shift" if d.bias < narrowest else "shift past window")
        else:
            kinds.add("copy between columns")
            if any(t[i][d.src] == t[i][d.dest] for t in scenario.block_tables):
                kinds.add("aliased blocks")
    return kinds


def test_strategy_reaches_every_kind_of_request() -> None:
    seen: set[str] = set()

    @settings(max_examples=150, phases=[Phase.generate], derandomize=True, database=None)
    @given(kernel_scenarios())
    def collect(scenario: KernelScenario) -> None:
        seen.update(request_kinds(scenario))
        seen.add("tail garbage" if len(scenario.state_idx) > scenario.num_reqs else "no tail")

    collect()
    assert seen == {"nothing", "accepted only", "overlapping shift", "shift past window",
                    "copy between columns", "aliased blocks", "tail garbage", "no tail"}


# --------------------------------------------------------------------------- planted bugs
# Buggy Python variants of the reference: the comparison must tell each from the kernel.


def bug_conv_high_to_low(x: KernelInputs) -> None:
    """Overlapping shift done row by row from the high end: re-reads rows it overwrote."""
    for req, d in enumerate(x.scenario.decisions()):
        if d is None:
            continue
        if d.normalize_accepted:
            x.num_accepted[req] = 1
        if not d.copy:
            continue
        for spec in x.states:
            table = x.block_tables[spec.group]
            if spec.kind == "temporal":
                apply_state_copy(spec, table, req, d)
                continue
            width = spec.tensor.shape[1]
            src, dst = int(table[req, d.src]), int(table[req, d.dest])
            for row in reversed(range(width - d.bias)):
                spec.tensor[dst, row] = spec.tensor[src, row + d.bias]


def bug_copy_block_stride(x: KernelInputs) -> None:
    """Temporal copies take their size from the block (page) stride, not the state."""
    for req, d in enumerate(x.scenario.decisions()):
        if d is None:
            continue
        if d.normalize_accepted:
            x.num_accepted[req] = 1
        if not d.copy:
            continue
        for index, spec in enumerate(x.states):
            table = x.block_tables[spec.group]
            if spec.kind == "conv":
                apply_state_copy(spec, table, req, d)
                continue
            page = x.pages[index // 2]
            stride, offset = page.shape[1], page_layout(x.scenario.layers[index // 2]).temporal_offset
            flat = page.view(-1)
            src = int(table[req, d.src + d.bias]) * stride + offset
            dst = int(table[req, d.dest]) * stride + offset
            size = min(stride, flat.numel() - max(src, dst))
            flat[dst:dst + size] = flat[src:src + size].clone()


def bug_accepted_live(x: KernelInputs) -> None:
    """Every (request, state) program reads the live accepted count and resets it."""
    s = x.scenario
    for req in range(s.num_reqs):
        for spec in x.states:
            d = kernel_decisions(s.state_idx, s.num_scheduled, s.num_computed, s.num_draft,
                                 x.num_accepted, s.num_reqs, s.block_size)[req]
            if d is None:
                continue
            if d.normalize_accepted:
                x.num_accepted[req] = 1
            if d.copy:
                apply_state_copy(spec, x.block_tables[spec.group], req, d)


def bug_group_ignored(x: KernelInputs) -> None:
    """Every state looked up in group 0's block table."""
    for req, d in enumerate(x.scenario.decisions()):
        if d is None:
            continue
        if d.normalize_accepted:
            x.num_accepted[req] = 1
        if d.copy:
            for spec in x.states:
                apply_state_copy(spec, x.block_tables[0], req, d)


@pytest.mark.parametrize("bug, where", [
    (bug_conv_high_to_low, "layer0.conv"),      # the shifted window of request 0
    (bug_copy_block_stride, "layer0.conv"),     # the next block's conv bytes, overrun
    (bug_accepted_live, "layer0.temporal"),     # state 1 of request 0 sees accepted == 1: no save
    (bug_group_ignored, "layer1.conv(g1)"),     # group 1's states saved into group 0's blocks
])
def test_planted_bugs_are_caught(bug, where: str) -> None:
    layers = [layer(0, (4, 3, "float16"), ([2, 3], "float32")),
              layer(1, (4, 2, "bfloat16"), ([3], "float16"))]
    scenario = make_kernel_scenario([SAVE_SHIFT, SAVE_COPY], BS, layers, spare_blocks=3)
    _, kernel = run_both(scenario)
    buggy = build_kernel_inputs(scenario, DEVICE)
    bug(buggy)
    differences = compare_kernel_outputs(kernel, buggy)
    assert any(line.startswith(where) for line in differences), differences


def test_kernel_impact_is_undecided_on_values_no_int32_buffer_holds():
    # out of contract the spec's values can lie beyond int32 (here computed 2**31): a
    # target that stages nothing returns, and the kernel cannot run on the spec's side
    # (before: a torch RuntimeError from the impact check)
    from stagecheck.oracles.kernel.impact import kernel_impact
    from stagecheck.oracles.observe import observe
    from stagecheck.oracles.targets import load_target
    from tests.helpers import scenario
    nothing = load_target(str(TARGETS / "hostile" / "returns_generator.py")
                          + "::stage_postprocess_inputs_to_gpu")
    s = scenario(num_computed_tokens={"req-a": 2**31, "req-b": 7, "req-c": 1, "req-p": 55})
    b = observe(nothing, s)
    assert b.returned
    assert kernel_impact(s, None, b, nothing.profile, always=True) is None
    fits = scenario(num_computed_tokens={"req-a": 2**31 - 9, "req-b": 7, "req-c": 1,
                                         "req-p": 55})
    assert kernel_impact(fits, None, observe(nothing, fits), nothing.profile,
                         always=True) is not None
