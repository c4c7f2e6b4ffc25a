"""The slot table (issue 23, item 11): a tail slot's expected value is what the field's
tail policy says; a large batch shows the slots that matter."""

from __future__ import annotations

import pathlib

from stagecheck.oracles.report.finding_text import slot_table
from stagecheck.oracles.schemas import load_schema
from stagecheck.spec import DEFAULT_SCHEMA, ERROR, Finding, StagingScenario

ROOT = pathlib.Path(__file__).resolve().parents[2]
SAMPLE = load_schema(str(ROOT / "docs" / "examples" / "sample_positions_schema.py"))


def cells(row: str) -> list[str]:
    return row.split()


def test_a_filled_tail_expects_its_fill_value_not_what_it_held_before():
    """docs/schemas.md's worked example: sample_pos's tail must be -1 after the call; the
    table said `expected 888467302` (the slot's old value) for such a slot."""
    s = StagingScenario(
        4, 1, ["req-0"],
        {"num_scheduled_tokens": {"req-0": 3}, "spec_decode_tokens": {},
         "num_computed_tokens": {"req-0": 10}},
        {"sample_pos_buf": [5, 888467302, -7, 123], "num_drafts_buf": [-1] * 4},
        {"sample_pos_buf": [-2] * 4, "num_drafts_buf": [-2] * 4}, "sample-positions")
    for view in ("cpu", "gpu"):      # copied whole: the mirror's tail is -1 too
        f = Finding("same_buffers", ERROR, f"{view} sample_pos[2] (tail): baseline -1, "
                    "candidate -7", field="sample_pos", slot=2, view=view, baseline=-1,
                    candidate=-7, scenario=s.to_dict(),
                    extra={"slots": [1, 2, 3], "baseline_values": [12, -1, -1, -1],
                           "candidate_values": [12, 888467302, -7, 123]})
        header, *rows = slot_table(f, SAMPLE)
        assert cells(header)[:5] == ["slot", "request", "live", "before", "expected"]
        live, tail1, tail2, tail3 = (cells(r) for r in rows)
        assert live[4] == "12"                       # 10 + 3 - 1
        assert tail1[4] == tail2[4] == tail3[4] == "-1", rows
        assert "888467302" not in tail1[4]


def test_an_untouched_tail_expects_its_previous_value_and_a_free_one_anything():
    s = StagingScenario(3, 1, ["req-0"], {
        "num_scheduled_tokens": {"req-0": 1}, "spec_decode_tokens": {},
        "num_computed_tokens": {"req-0": 0}, "num_prompt_tokens": {"req-0": 0},
        "mamba_state_idx": {"req-0": 0}, "run_prefix_state_migration": True,
        "omit_state_idx_buf": False},
        {"num_draft_tokens_buf": [-1, 77, 78]}, {}, DEFAULT_SCHEMA.name)
    f = Finding("same_buffers", ERROR, "cpu draft[1] (tail)", field="draft", slot=1,
                view="cpu", scenario=s.to_dict(), baseline=77, candidate=0)
    _, live, tail1, tail2 = slot_table(f, DEFAULT_SCHEMA)
    assert cells(tail1)[4] == "77" and cells(tail2)[4] == "78"


def test_a_large_batch_shows_the_first_slots_the_flagged_one_and_the_boundary():
    n = 300
    ids = [f"req-{k}" for k in range(n)]
    s = StagingScenario(512, n, ids, {
        "num_scheduled_tokens": dict.fromkeys(ids, 1),
        "spec_decode_tokens": {"req-257": [1, 2]},
        "num_computed_tokens": dict.fromkeys(ids, 0), "num_prompt_tokens": dict.fromkeys(ids, 0),
        "mamba_state_idx": dict.fromkeys(ids, 0), "run_prefix_state_migration": True,
        "omit_state_idx_buf": False}, {"num_draft_tokens_buf": [-1] * 512}, {},
        DEFAULT_SCHEMA.name)
    f = Finding("slot_alignment", ERROR, "draft[257] holds 0, expected 2", side="candidate",
                field="draft", slot=257, view="cpu", candidate=0, expected=2,
                scenario=s.to_dict(), extra={"slots": [257]})
    rows = slot_table(f, DEFAULT_SCHEMA)
    slots = [int(cells(r)[0]) for r in rows[1:] if not r.strip().startswith("...")]
    assert slots == [0, 1, 2, 256, 257, 258, 299, 300]
    flagged = next(r for r in rows if r.split()[0] == "257")
    assert flagged.endswith("cpu <") and cells(flagged)[4] == "2"
    assert rows[-1].strip() == "... 211 more slot(s)"
    assert sum(1 for r in rows if r.strip().startswith("...")) == 3
