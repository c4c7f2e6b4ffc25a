"""The text report: info findings one line per reason (full detail under --verbose), slot
tables that show the flagged slot's values."""

from __future__ import annotations

from dataclasses import replace

from stagecheck.oracles import messages
from stagecheck.oracles.report.finding_text import finding_lines, info_groups, slot_table
from stagecheck.oracles.report.json import campaign_body
from stagecheck.oracles.report.text import render_campaign, render_replay
from stagecheck.spec import DEFAULT_SCHEMA, ERROR, INFO, Finding
from tests.helpers import scenario
from tests.unit.test_report import result

FLAG = ("the two contracts differ (run_prefix_state_migration=False): only one side needs "
        "mamba_state_idx")


def infos() -> list[Finding]:
    """Nine info findings, three reasons: 5 share one (three invariants), 3 another whose
    particulars (request ids, numbers) differ, 1 has no 'why allowed'."""
    out = []
    for i, inv in enumerate(["same_buffers"] * 3 + ["same_copies", "same_outcome"]):
        out.append(Finding(inv, INFO, f"{inv} difference {i}", field=f"f{i}",
                           extra={"context": FLAG}))
    for i in range(3):
        out.append(Finding("same_buffers", INFO, f"oob {i}", in_contract=False, field=f"g{i}",
                           extra={"context": f"out of contract: live request 'req-{i}' "
                                  f"missing from requests; num_reqs={i + 2} outside [0, {i}]"}))
    out.append(Finding("same_fields", INFO, "only the candidate stages is_prefilling"))
    return out


def campaign(findings):
    return replace(result(), findings=findings)


def test_info_groups_by_reason_with_counts():
    groups = info_groups(infos())
    assert [len(g.findings) for g in groups] == [5, 3, 1]
    assert groups[0].reason == FLAG
    assert groups[0].invariants == {"same_buffers": 3, "same_copies": 1, "same_outcome": 1}
    assert groups[1].reason.startswith("out of contract: live request 'req-0'")
    assert not groups[1].in_contract
    assert groups[2].invariants == {"same_fields": 1}


def test_text_report_shows_one_line_per_reason_and_verbose_shows_each():
    fs = infos()
    text = render_campaign(campaign(fs))
    header = messages.INFO_GROUPED.format(findings=9, reasons=3)
    assert header in text
    section = text.split("INFO (")[1].split("\n\n")[0].splitlines()[1:]
    assert len(section) == 3
    assert section[0].startswith(f"  5 × in contract: {FLAG} [same_buffers 3, same_copies 1, "
                                 "same_outcome 1] — e.g. [")
    assert fs[0].id in section[0] and fs[0].message in section[0]
    assert section[1].startswith("  3 × out of contract: live request 'req-0'")
    assert not any(f.id in text for f in fs[1:5])      # only one example per reason
    verbose = render_campaign(campaign(fs), verbose=True)
    assert header not in verbose
    for f in fs:
        assert f"[{f.id}]" in verbose and f.message in verbose


def test_flagged_slot_shows_both_values_of_a_spec_finding_without_a_value_list():
    s = scenario()
    # mirror_consistency: the candidate's gpu slot 1 holds -2 where cpu holds 7
    f = Finding("mirror_consistency", ERROR, "gpu computed[1] = -2 but cpu holds 7",
                side="candidate", field="computed", slot=1, view="gpu", expected=7,
                candidate=-2, scenario=s.to_dict(), extra={"slots": [1]})
    rows = slot_table(f, DEFAULT_SCHEMA)
    flagged = [r for r in rows if r.endswith("<")]
    assert len(flagged) == 1
    cells = flagged[0].split()
    # slot request live before expected baseline candidate view <
    assert cells[0] == "1" and cells[4] == "7" and cells[5] == "-" and cells[6] == "-2"


def test_a_baseline_side_finding_puts_its_values_in_the_baseline_column():
    s = scenario()
    f = Finding("slot_alignment", ERROR, "computed[1] holds 8", side="baseline",
                field="computed", slot=1, view="cpu", candidate=8, expected=7,
                scenario=s.to_dict(), extra={"slots": [1], "values": [100, 8, 5, -1, -1, -1]})
    rows = slot_table(f, DEFAULT_SCHEMA)
    flagged = [r for r in rows if r.endswith("<")][0].split()
    assert flagged[5] == "8" and flagged[6] == "-"
    row0 = rows[1].split()
    assert row0[5] == "100" and row0[6] == "-"


def test_a_difference_shows_both_sides_on_the_flagged_slot():
    s = scenario()
    f = Finding("same_copies", ERROR, "x", side="both", field="computed", slot=0, view="cpu",
                baseline=3, candidate=4, scenario=s.to_dict())
    flagged = [r for r in slot_table(f, DEFAULT_SCHEMA) if r.endswith("<")]
    assert flagged == [] or "-" not in flagged[0].split()[5:7]
    f = replace(f, extra={"slots": [0]})
    (flagged,) = [r for r in slot_table(f, DEFAULT_SCHEMA) if r.endswith("<")]
    assert flagged.split()[5:7] == ["3", "4"]


def test_each_reason_names_the_replay_file_of_its_example():
    fs = infos()
    saved = {f.id: f"found/{f.id}.json" for f in fs}
    text = render_campaign(campaign(fs), saved=saved)
    replays = [line for line in text.splitlines() if "replay: stagecheck replay" in line]
    assert replays == [f"    replay: stagecheck replay found/{g.example.id}.json"
                       for g in info_groups(fs)]


def test_spec_says_conforms_or_violates_not_equivalent():
    alone = replace(result(), baseline=None, findings=[])
    assert "verdict: CONFORMS" in render_campaign(alone)
    broken = replace(alone, findings=[Finding("tail_policy", ERROR, "tail written")])
    assert "verdict: VIOLATES" in render_campaign(broken)
    assert "verdict: EQUIVALENT" in render_campaign(replace(result(), findings=[]))
    # one target's errors are never a divergence: its heading says what they can be
    assert messages.ERRORS_HEADING_ONE in render_campaign(broken)
    assert "divergence" not in render_campaign(broken)
    assert messages.ERRORS_HEADING_PAIR in render_campaign(result())


def test_a_pair_whose_errors_both_sides_show_alike_says_so():
    """An audit: 'diff X X' of a buggy X said DIFFERENT with nothing to tell that the two
    behave alike (each violates the spec the same way)."""
    r = result()
    error = r.errors[0]
    alike = replace(r, findings=[replace(error, side="baseline"), error])
    assert messages.BOTH_VIOLATE_ALIKE in render_campaign(alike)
    assert messages.BOTH_VIOLATE_ALIKE not in render_campaign(r)     # the candidate's only
    both = replace(error, invariant="same_buffers", side="both")
    differing = replace(r, findings=[replace(error, side="baseline"), error, both])
    assert messages.BOTH_VIOLATE_ALIKE not in render_campaign(differing)


def test_the_replay_and_the_json_of_a_pair_violating_alike_say_so_too():
    """An audit: the alike line was on diff's text report only; the pair's replay of a
    saved finding and the --json document said DIFFERENT with nothing more."""
    r = result()
    error = r.errors[0]
    alike_pair = [replace(error, side="baseline"), error]
    replayed = render_replay("f.json", {"finding": {"id": error.id}}, "a.py::f", "a.py::f",
                             "cpu", alike_pair)
    assert messages.BOTH_VIOLATE_ALIKE in replayed
    assert messages.BOTH_VIOLATE_ALIKE not in render_replay(
        "f.json", {"finding": {"id": error.id}}, "a.py::f", "b.py::f", "cpu", [error])
    assert campaign_body(replace(r, findings=alike_pair))["violate_alike"] is True
    assert campaign_body(r)["violate_alike"] is False
    assert campaign_body(replace(r, baseline=None, findings=alike_pair))["violate_alike"] is False



def test_a_hang_or_crash_says_its_example_was_shrunk_by_size_only():
    """An audit: a hang's 49-slot example with its drawn values read as if those values
    mattered; its shrink changes sizes only (each try waits out a limit)."""
    hang = Finding("expected_outcome", ERROR, "the call did not return within the time "
                   "limit (hang)", extra={"kind": "hang"})
    other = Finding("same_buffers", ERROR, "cpu draft[0]: baseline 1, candidate 2")
    assert messages.SHRUNK_BY_SIZE in "\n".join(finding_lines(hang))
    assert messages.SHRUNK_BY_SIZE not in "\n".join(finding_lines(other))
