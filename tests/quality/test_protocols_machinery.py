"""The protocol machinery end to end: a single staging call as a protocol of one step,
a user's protocol file (the worked example of docs/protocols.md), hangs and crashes,
differences between two targets, saved findings replayed, the pasted pytest test."""

import pathlib

import pytest

from stagecheck.oracles.campaign import run_campaign
from stagecheck.oracles.errors import SchemaError, TargetLoadError
from stagecheck.oracles.options import CampaignConfig
from stagecheck.oracles.protocol import (ProtocolConfig, check_sequence, load_protocol,
                                         protocol_spec, run_protocol_campaign)
from stagecheck.oracles.report.protocol_replay import (load_protocol_replay, replay_protocol,
                                                        save_protocol_findings)
from stagecheck.oracles.report.protocol_snippet import protocol_pytest_example
from stagecheck.oracles.report.protocol_text import render_protocol
from stagecheck.oracles.targets import load_target

ROOT = pathlib.Path(__file__).resolve().parents[2]
EXAMPLE = str(ROOT / "docs" / "examples" / "token_stager_protocol.py")
TOY = ROOT / "tests" / "targets" / "protocols" / "_machinery"
SINGLE = "single-call:mamba-postprocess"
STAGE = "stage_postprocess_inputs_to_gpu"


def toy(name: str) -> str:
    return f"{TOY / name}.py::TokenStager"


# ---------------------------------------------------------------- one call, one step

def test_a_single_call_is_a_protocol_of_one_step_and_legacy_equals_single_loop():
    result = run_protocol_campaign("legacy", "single-loop", SINGLE,
                                   ProtocolConfig(sequences=150))
    assert result.verdict() == "equivalent", [f.message for f in result.errors]
    assert all(len(f.scenario["steps"]) == 1 for f in result.findings)


@pytest.mark.parametrize("fixture", ["buggy_loop_one_slot_short", "buggy_copy_whole_buffer",
                                     "buggy_draft_written_after_copy",
                                     "buggy_raw_copy_then_recount_drafts"])
def test_a_single_call_protocol_finds_what_a_campaign_finds(fixture):
    spec = f"tests/targets/{fixture}.py::{STAGE}"
    protocol = run_protocol_campaign("single-loop", spec, SINGLE,
                                     ProtocolConfig(sequences=150))
    campaign = run_campaign(load_target("single-loop"), load_target(spec),
                            CampaignConfig.from_options(examples=150, deferred_copies=True,
                                                        out_of_contract=False))
    found = {f.invariant for f in protocol.errors}
    assert found and found & {f.invariant for f in campaign.errors}, found


# ---------------------------------------------------------------- a user's protocol

def test_the_worked_example_finds_the_planted_race_and_passes_the_fix():
    buggy = run_protocol_campaign(None, toy("buggy_token_stager"), EXAMPLE,
                                  ProtocolConfig(sequences=100))
    kinds = {(f.invariant, f.extra.get("kind")) for f in buggy.errors}
    assert ("no_copy_hazard", "host-write-pending-upload") in kinds
    assert any(inv == "device_read_as_meant" for inv, _ in kinds)
    hazard = next(f for f in buggy.errors if f.invariant == "no_copy_hazard")
    assert hazard.field == "ids_cpu" and hazard.extra["slots"]
    fixed = run_protocol_campaign(None, toy("fixed_token_stager"), EXAMPLE,
                                  ProtocolConfig(sequences=100))
    assert fixed.errors == [] and fixed.findings == []


def test_a_process_wide_thread_pool_is_not_a_thread_left_running():
    """A component whose writes run on a module-level ``ThreadPoolExecutor``: its idle
    threads stay after every sequence, and are not reported as left running (before:
    an info finding, and a fresh worker after every sequence)."""
    pooled = run_protocol_campaign(toy("fixed_token_stager"), toy("pooled_token_stager"),
                                   EXAMPLE, ProtocolConfig(sequences=30))
    assert pooled.verdict() == "equivalent"
    assert pooled.findings == [], [f.message for f in pooled.findings]


def test_device_work_reading_the_state_through_self_is_compared_with_what_the_host_meant(
        tmp_path):
    """An audit's upstream BlockTable: ``compute_slot_mapping`` hands its kernel
    ``self.block_table.gpu``, not an argument, and the race on its pinned rows passed as
    info ("no effect on what the device work read")."""
    buggy = run_protocol_campaign(None, toy("buggy_self_read_token_stager"), EXAMPLE,
                                  ProtocolConfig(sequences=100))
    read = [f for f in buggy.errors if f.invariant == "device_read_as_meant"]
    assert read and "ids_gpu" in read[0].message, [f.message for f in buggy.findings]
    assert any(f.invariant == "no_copy_hazard" for f in buggy.errors)
    fixed = run_protocol_campaign(None, toy("fixed_self_read_token_stager"), EXAMPLE,
                                  ProtocolConfig(sequences=100))
    assert fixed.findings == [], [f.message for f in fixed.findings]
    # what it reads through self is compared, not logged: a refactor that renames the
    # mirror is the same code
    renamed = tmp_path / "renamed_self_read_token_stager.py"
    renamed.write_text((TOY / "fixed_self_read_token_stager.py").read_text()
                       .replace("ids_gpu", "token_ids_gpu"))
    same = run_protocol_campaign(toy("fixed_self_read_token_stager"),
                                 f"{renamed}::TokenStager", EXAMPLE,
                                 ProtocolConfig(sequences=60))
    assert same.verdict() == "equivalent", [f.message for f in same.findings]


def test_work_run_inside_a_synchronous_copy_is_seen_reading_what_it_read():
    """Queued device work that a synchronous (pageable) upload waits for runs inside the
    copy's handling; its reads are still seen (they were None, a false
    device_read_as_meant: "embed read ids[0] = None under this completion schedule")."""
    result = run_protocol_campaign(None, toy("unread_download_token_stager"), EXAMPLE,
                                   ProtocolConfig(sequences=100))
    assert result.errors == [] and result.findings == [], [f.message for f in result.findings]


def test_a_numpy_read_before_a_download_landed_names_that_download_as_the_cause():
    """A numpy read is not seen; its effect is. The findings named only the download the
    changed value later went into (step 1's), not the earlier download that had not landed
    when the host read its memory (step 0's): each now says which had not landed."""
    result = run_protocol_campaign(None, toy("numpy_read_token_stager"), EXAMPLE,
                                   ProtocolConfig(sequences=50))
    found = {f.invariant: f for f in result.errors}
    assert set(found) == {"readback_as_written", "device_read_as_meant"}
    for f in found.values():
        cause = f.extra["context"]
        assert cause.startswith("possibly a read before a download landed: download ")
        assert "(step 0, stage) had not been seen landed when step 1 (stage) began" in cause


def test_a_functional_difference_between_two_targets_is_same_trace():
    result = run_protocol_campaign(toy("fixed_token_stager"), toy("off_by_one_token_stager"),
                                   EXAMPLE, ProtocolConfig(sequences=50))
    assert [f.invariant for f in result.errors] == ["same_trace"]
    assert result.errors[0].side == "both"


def test_a_hanging_target_is_a_finding_not_an_error_of_stagecheck():
    result = run_protocol_campaign(None, toy("hangs_token_stager"), EXAMPLE,
                                   ProtocolConfig(sequences=20, timeout=1.0))
    (f,) = result.errors
    assert f.invariant == "step_outcome" and f.extra["kind"] == "hang"


def test_a_target_that_ends_its_process_is_a_finding():
    result = run_protocol_campaign(None, toy("exits_token_stager"), EXAMPLE,
                                   ProtocolConfig(sequences=20))
    (f,) = result.errors
    assert f.invariant == "step_outcome" and f.extra["kind"] == "crash"
    assert "code 3" in f.message


# ---------------------------------------------------------------- findings kept

def test_findings_are_saved_replayed_and_pasted_as_a_pytest_test(tmp_path):
    result = run_protocol_campaign(None, toy("buggy_token_stager"), EXAMPLE,
                                   ProtocolConfig(sequences=100))
    saved = save_protocol_findings(result, str(tmp_path), protocol_spec(load_protocol(EXAMPLE)))
    assert set(saved) == {f.id for f in result.findings}
    path = saved[result.errors[0].id]
    document, seq = load_protocol_replay(path)
    assert document["protocol"] == EXAMPLE and seq.steps
    again = replay_protocol(path)
    assert {f.key for f in again if f.severity == "error"} >= {result.errors[0].key}
    assert [f for f in replay_protocol(path, candidate=toy("fixed_token_stager"))
            if f.severity == "error"] == []
    report = render_protocol(result, saved)
    assert "in flight" in report and "replay: stagecheck replay " in report
    assert "host-write-pending-upload ids_cpu" in report
    # the pasted test loads the protocol as the run did: from its file, not by its name
    assert result.loadable_protocol() != result.protocol
    assert f"{result.loadable_protocol()!r}, SEQUENCE, ProtocolConfig(" in report
    # ... and with the run options that decide its verdict (the time limit of a hang)
    assert f"timeout={result.config.timeout!r}" in report
    source = protocol_pytest_example(result.errors[0], None, toy("buggy_token_stager"),
                                     EXAMPLE, result.config)
    namespace: dict = {}
    exec(compile(source, "pasted_test.py", "exec"), namespace)
    test = next(v for k, v in namespace.items() if k.startswith("test_"))
    with pytest.raises(AssertionError):
        test()
    fixed = source.replace("buggy_token_stager", "fixed_token_stager")
    exec(compile(fixed, "pasted_fixed_test.py", "exec"), namespace)
    next(v for k, v in namespace.items() if k.startswith("test_"))()


def test_check_sequence_runs_one_sequence():
    result = run_protocol_campaign(None, toy("buggy_token_stager"), EXAMPLE,
                                   ProtocolConfig(sequences=100))
    shortest = result.errors[0].scenario
    findings = check_sequence(None, toy("buggy_token_stager"), EXAMPLE, shortest)
    assert any(f.severity == "error" for f in findings)


def test_a_target_that_cannot_load_is_named_by_its_position(tmp_path):
    classless = tmp_path / "classless_stager.py"
    classless.write_text("def stage(ids):\n    return ids\n")
    with pytest.raises(TargetLoadError) as raised:
        run_protocol_campaign(toy("fixed_token_stager"), f"{classless}::TokenStager", EXAMPLE,
                              ProtocolConfig(sequences=3))
    assert raised.value.target_index == 1 and "classless_stager.py" in str(raised.value)


def test_a_protocol_whose_own_operation_raises_is_its_mistake_never_a_finding(tmp_path):
    """The held-out audit's case: a bug in the protocol's own function (not in the code
    under test it calls) stops the run with a SchemaError naming the protocol's file and
    line (exit 2 on the command line), instead of a step_outcome finding against the code."""
    source = pathlib.Path(EXAMPLE).read_text()
    bad = source.replace("def stage(ctx):\n",
                         "def stage(ctx):\n    ctx.sequence.capacity[0]     # a bug of the protocol\n")
    assert bad != source
    path = tmp_path / "bad_protocol.py"
    path.write_text(bad)
    with pytest.raises(SchemaError) as info:
        run_protocol_campaign(None, toy("fixed_token_stager"), str(path),
                              ProtocolConfig(sequences=5))
    text = str(info.value)
    assert "its own code for operation 'stage' raised TypeError" in text
    assert f"{path}:" in text and "not the code under test" in text
    # the code under test raising stays a finding about that code
    result = run_protocol_campaign(None, toy("exits_token_stager"), EXAMPLE,
                                   ProtocolConfig(sequences=20))
    assert any(f.invariant == "step_outcome" for f in result.errors)


# ---------------------------------------------------------------- the user's mistakes

MISTAKES = ROOT / "tests" / "targets" / "protocols" / "_mistakes"


@pytest.mark.parametrize("fixture", ["build_raises", "build_misspelt_context", "observe_raises",
                                     "device_work_names_tensor"])
def test_a_protocol_mistake_on_the_command_line_is_exit_2_and_saves_nothing(
        fixture, tmp_path, monkeypatch, capsys):
    """Each was a finding against the code (exit 1) or an internal error (exit 3, with a
    crash file under .stagecheck/findings although --no-save was given)."""
    from stagecheck.oracles.cli import main

    monkeypatch.chdir(tmp_path)
    code = main(["spec", toy("fixed_token_stager"), "--protocol", str(MISTAKES / f"{fixture}.py"),
                 "--examples", "5", "--no-save", "--quiet"])
    err = capsys.readouterr().err
    assert code == 2, err
    assert "option --protocol: " in err and "Traceback" not in err
    if fixture != "device_work_names_tensor":
        assert f"{MISTAKES / fixture}.py:" in err and "not the code under test" in err
    assert not (tmp_path / ".stagecheck").exists()


def test_protocol_check_with_a_target_dry_runs_build_operations_and_observe(capsys):
    """Without a target, protocol check runs only the 'when' functions (and says what it
    did not run); with one, a mistake in build or observe is found there (exit 2)."""
    from stagecheck.oracles import messages
    from stagecheck.oracles.cli import main

    bad = str(MISTAKES / "observe_raises.py")
    assert main(["protocol", "check", bad]) == 0
    out = capsys.readouterr().out
    assert "not run: build, the operations' run and observe" in out
    assert main(["protocol", "check", bad, toy("fixed_token_stager")]) == 2
    err = capsys.readouterr().err
    assert "its own observe raised KeyError" in err and f"{bad}:" in err
    assert main(["protocol", "check", str(MISTAKES / "build_raises.py"),
                 toy("fixed_token_stager")]) == 2
    assert "its own build raised ValueError" in capsys.readouterr().err
    # a right protocol: the dry run is said, and findings of the code are only counted
    assert main(["protocol", "check", EXAMPLE, toy("buggy_token_stager")]) == 0
    out = capsys.readouterr().out
    assert "dry run through " in out and "step sequence(s) ran build" in out
    assert "finding(s) on them" in out
    assert main(["protocol", "check", EXAMPLE, toy("fixed_token_stager")]) == 0
    out = capsys.readouterr().out
    assert messages.PROTOCOL_CHECK_DRY_RUN.split("{")[0].strip() in out
    assert "finding(s) on them" not in out
    # only the parts the protocol declares are said to have run (it has no observe, no
    # checks of its own)
    assert "step sequence(s) ran build and every operation without a mistake" in out
    # the target is checked as a protocol run checks it
    assert main(["protocol", "check", EXAMPLE, toy("fixed_token_stager") + ".nope"]) == 2
    assert "argument TARGET: " in capsys.readouterr().err


def test_memory_the_state_takes_on_later_is_named_by_its_path_and_ids_stay_stable():
    """A pinned buffer allocated on the first step (after an unrelated pinned allocation)
    reads as ``ids_cpu``, and its finding has the id of the same bug in the stager that
    allocates the buffer when built: ids do not move with allocation order."""
    eager = run_protocol_campaign(None, toy("buggy_token_stager"), EXAMPLE,
                                  ProtocolConfig(sequences=100))
    lazy = run_protocol_campaign(None, toy("lazy_token_stager"), EXAMPLE,
                                 ProtocolConfig(sequences=100))
    hazards = [f for f in lazy.errors if f.invariant == "no_copy_hazard"]
    assert hazards and all(f.field == "ids_cpu" for f in hazards)
    assert "pinned tensor" not in render_protocol(lazy)
    assert {f.id for f in hazards} <= {f.id for f in eager.errors}


def test_one_bug_reads_as_one_error_headed_by_its_race():
    result = run_protocol_campaign(None, toy("buggy_token_stager"), EXAMPLE,
                                   ProtocolConfig(sequences=100))
    assert len(result.errors) >= 2          # the race, and what the lookup read
    report = render_protocol(result)
    assert f"1 error(s) from {len(result.errors)} error finding(s)" in report
    errors = report.split("ERRORS (1)")[1].split("REPRODUCE")[0]
    head = errors.splitlines()[1]
    assert head.startswith("[no_copy_hazard-")
    # the table under the head, before its members
    assert errors.index("shown by:") < errors.index("more finding(s) of this error")
    assert report.count("def test_") == 1


def test_the_pasted_test_runs_from_any_folder_and_fails_with_the_messages(tmp_path,
                                                                          monkeypatch):
    monkeypatch.chdir(ROOT)
    relative = "tests/targets/protocols/_machinery/buggy_token_stager.py::TokenStager"
    result = run_protocol_campaign(None, relative, EXAMPLE, ProtocolConfig(sequences=100))
    head = result.errors[0]
    source = protocol_pytest_example(head, None, relative, "docs/examples/"
                                     "token_stager_protocol.py")
    assert repr(f"{ROOT / relative}") in source and repr(EXAMPLE) in source
    monkeypatch.chdir(tmp_path)                # pasted into another project's tests
    namespace: dict = {}
    exec(compile(source, "pasted_test.py", "exec"), namespace)
    test = next(v for k, v in namespace.items() if k.startswith("test_"))
    with pytest.raises(AssertionError) as failed:
        test()
    shown = str(failed.value)
    assert f"[{head.id}] {head.message}" in shown and "Finding(" not in shown
