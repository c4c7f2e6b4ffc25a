"""The command line, end to end in a subprocess, and its usage errors."""

import json
import os
import subprocess
import sys
import textwrap

import pytest

from stagecheck.oracles import messages
from stagecheck.oracles.cli import main

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BUGGY = os.path.join(ROOT, "tests", "targets", "buggy_swapped_views.py")


def run_cli(*args, cwd=ROOT):
    return subprocess.run([sys.executable, "-m", "stagecheck", *args], cwd=cwd,
                          capture_output=True, text=True, timeout=600)


def test_diff_legacy_single_loop_is_clean_and_shows_failure_path_differences(tmp_path):
    out = tmp_path / "report.json"
    proc = run_cli("diff", "legacy", "single-loop", "--json", str(out),
                   "--save-dir", str(tmp_path / "found"))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "verdict: EQUIVALENT" in proc.stdout
    report = json.loads(out.read_text())
    assert report["verdict"] == "equivalent"
    assert report["examples"]["in_contract"] >= 300
    assert report["examples"]["out_of_contract"] >= 300
    findings = report["findings"]
    assert findings and all(f["severity"] == "info" for f in findings)
    seen = {(f["invariant"], f["in_contract"]) for f in findings}
    # domain.md section 2: partial writes differ on the missing-index path (in contract),
    # legacy copied state_idx before a KeyError (out of contract), message text changed.
    assert ("same_buffers", True) in seen
    assert ("same_copies", False) in seen
    assert ("same_message", True) in seen
    msg = next(f for f in findings if f["invariant"] == "same_message" and f["in_contract"])
    assert "stage_mamba_state_idx_to_gpu" in msg["baseline"]
    assert "stage_postprocess_inputs_to_gpu" in msg["candidate"]
    # --strict turns info findings into a difference
    strict = run_cli("diff", "legacy", "single-loop", "--strict", "--examples", "50",
                     "--save-dir", str(tmp_path / "found"))
    assert strict.returncode == 1


def test_buggy_file_target_exit_1_saved_finding_replays(tmp_path):
    found = tmp_path / "found"
    proc = run_cli("diff", "single-loop", f"{BUGGY}::stage_postprocess_inputs_to_gpu",
                   "--save-dir", str(found))
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "slot_alignment" in proc.stdout and "verdict: DIFFERENT" in proc.stdout
    assert " slot  request" in proc.stdout           # the slot table of the shrunk scenario
    files = [f for f in sorted(found.glob("slot_alignment-*.json"))
             if json.loads(f.read_text())["finding"]["severity"] == "error"]
    assert files
    replay = run_cli("replay", str(files[0]))
    assert replay.returncode == 1 and "slot_alignment" in replay.stdout
    fixed = run_cli("replay", str(files[0]), "--candidate", "legacy")
    assert fixed.returncode == 0, fixed.stdout


def test_spec_command_checks_one_target():
    assert main(["spec", "single-loop", "--examples", "40"]) == 0
    assert main(["spec", f"{BUGGY}::stage_postprocess_inputs_to_gpu", "--examples", "40"]) == 1


def test_vllm_style_file_runs_without_vllm(tmp_path):
    path = tmp_path / "mamba_utils.py"
    path.write_text(textwrap.dedent('''
        import numpy as np
        import torch
        from vllm.v1.core.sched.output import SchedulerOutput
        from vllm.v1.worker.gpu_input_batch import CachedRequestState
        from vllm.config import VllmConfig

        _MSG = "preprocess must run before stage_postprocess_inputs_to_gpu"

        @torch.inference_mode()
        def stage_postprocess_inputs_to_gpu(ctx, scheduler_output: SchedulerOutput,
                                            req_ids: list[str], num_reqs: int,
                                            requests: dict[str, CachedRequestState],
                                            mamba_state_idx: dict[str, int]) -> None:
            for i, req_id in enumerate(req_ids[:num_reqs]):
                assert req_id in mamba_state_idx, f"no state index for {req_id}: {_MSG}"
                _write(ctx, i, req_id, scheduler_output, requests, mamba_state_idx)
            for buf in (ctx.mamba_state_idx_buf, ctx.num_scheduled_tokens_buf,
                        ctx.num_computed_tokens_buf, ctx.num_draft_tokens_buf):
                buf.copy_to_gpu(num_reqs)

        def _write(ctx, i, req_id, so, requests, idx):
            ctx.mamba_state_idx_buf.np[i] = idx[req_id]
            ctx.num_scheduled_tokens_buf.np[i] = so.num_scheduled_tokens[req_id]
            ctx.num_computed_tokens_buf.np[i] = requests[req_id].num_computed_tokens
            ctx.num_draft_tokens_buf.np[i] = len(so.scheduled_spec_decode_tokens.get(req_id, []))

        class Unrelated(VllmConfig):
            pass
    '''))
    proc = run_cli("diff", "single-loop", f"{path}::stage_postprocess_inputs_to_gpu",
                   "--examples", "100", "--save-dir", str(tmp_path / "f"))
    assert proc.returncode == 0, proc.stdout + proc.stderr


BAD = [
    (["diff", "legacy"], "missing argument(s): CANDIDATE; run 'stagecheck diff --help'"),
    (["diff", "legacy", "single-loop", "--deferred-copies=yes"],
     "option --deferred-copies takes no value, but was given 'yes': write --deferred-copies "
     "alone"),
    (["diff", "legacy", "nope"], "is not a builtin target"),
    (["diff", "legacy", "singleloop"], "is not a builtin target (did you mean single-loop?)"),
    (["diff", "legacy", "missing.py::f"], "does not exist"),
    (["diff", "legacy", "tests/targets/buggy_swapped_views.py::nothing"], "has no module-level"),
    (["diff", "legacy", "tests/targets/buggy_swapped_views.py::"], "is malformed"),
    (["diff", "legacy", "json:dumps"], "no built-in schema describes function"),
    (["diff", "legacy", "tests/targets/buggy_swapped_views.py::_helper_with_the_wrong_signature"],
     "has no module-level function"),
    (["diff", "legacy", "no_such_module_xyz:f"], "cannot be imported"),
    (["diff", "legacy", "argparse:ArgumentParser"], "not a function"),
    (["diff", "legacy", "single-loop", "--device", "tpu"], "is not a device"),
    (["diff", "legacy", "single-loop", "--examples", "0"], "whole number >= 1"),
    (["diff", "legacy", "single-loop", "--examples", "many"], "whole number >= 1"),
    (["diff", "legacy", "single-loop", "--seed", "x"], "option --seed"),
    (["diff", "legacy", "single-loop", "--timeout", "-1"], "positive number of seconds"),
    (["diff", "legacy", "single-loop", "--json", "/nonexistent/dir/r.json"], "cannot write"),
    (["diff", "legacy", "single-loop", "--frobnicate"], "unrecognized arguments"),
    (["replay", "/nonexistent.json"], "cannot read"),
    (["diff", "legacy", "single-loop", "--json", "r.out", "--junit-xml", "r.out"],
     "give each report its own path"),
    (["diff", "legacy", "single-loop", "--max-capacity", "0"], "option --max-capacity"),
    (["diff", "legacy", "single-loop", "--kernel", "sometimes"],
     "option --kernel: 'sometimes' is not one of auto, always, off"),
    (["spec", "tests/targets/README.md::f"], "is not valid Python"),
    (["kernel", "--examples", "-3"], "option --examples"),
    (["symbolic", "legacy", "single-loop", "--timeout", "0"], "positive number of seconds"),
    (["symbolic", "legacy", "nope.py::f"], "does not exist"),
    (["bench", "legacy", "single-loop", "--device", "gpu"], "is not a device"),
    (["mutants", "legacy", "--budget", "none"], "option --budget"),
    (["frobnicate"], "invalid choice"),
    (["dif", "legacy", "single-loop"], "(did you mean diff?)"),
    (["protocol", "chek", "x.py"], "(did you mean check?)"),
    (["mutants", "legacy", "--oracles", ","], "option --oracles"),
    (["mutants", "legacy", "--operators", "swapped_view"],
     "option --operators: swapped_view is not an operator (did you mean swapped_views?); "),
    # a value that starts with '-' and reads as a number was argparse's "expected one argument"
    (["spec", "legacy", "--timeout", "-inf"],
     "option --timeout: '-inf' is not a positive number of seconds; give e.g. 5"),
    (["spec", "legacy", "--timeout", "-nan"], "option --timeout: '-nan' is not a positive"),
    (["diff", "legacy", "single-loop", "--examples", "-1e5"],
     "option --examples: '-1e5' is not a whole number >= 1"),
    (["spec", "legacy", "--shim", ""], "option --shim: '' is empty; give the path of a Python "
     "file, e.g. shims/vllm_helpers.py"),          # was: [''] is not a list of paths
    # an option given without its value says what the value is (was: "expected one argument")
    (["diff", "legacy", "single-loop", "--json"],
     "option --json needs a value and got none: --json PATH"),
    ([], None),
]


@pytest.mark.parametrize("argv,needle", BAD, ids=lambda x: " ".join(x) if isinstance(x, list)
                         else str(x))
def test_bad_invocations_exit_2_with_a_message(argv, needle, capsys):
    assert main(argv) == 2
    err = capsys.readouterr().err
    if needle:
        assert needle in err and err.startswith("stagecheck: error: ")
        assert "Traceback" not in err


def test_usage_message_constants_are_what_is_printed(capsys):
    main(["diff", "legacy", "single-loop", "--device", "tpu"])
    problem, fix = messages.BAD_DEVICE
    assert (f"option --device: {problem.format(value='tpu')}; {fix}"
            in capsys.readouterr().err)


def test_a_replay_file_whose_scenario_cannot_be_built_exits_2(tmp_path, capsys):
    from tests.helpers import scenario
    data = scenario().to_dict()
    data["initial_cpu"]["num_draft_tokens_buf"] = [2**40] * data["capacity"]
    path = tmp_path / "bad.json"
    path.write_text(json.dumps({"stagecheck_replay": 1, "baseline": "legacy",
                                "candidate": "single-loop",
                                "finding": {"id": "x", "scenario": data}}))
    assert main(["replay", str(path)]) == 2
    assert "cannot be built" in capsys.readouterr().err
    path.write_text("{not json")
    assert main(["replay", str(path)]) == 2
    assert "is not a stagecheck replay file" in capsys.readouterr().err



def test_the_printed_replay_line_runs_as_printed_for_targets_outside_the_repository(tmp_path):
    # a replay file runs outside targets only when the command line names them
    # (issue 11's trust boundary), so the line a run prints names them itself
    source = open(os.path.join(ROOT, "impl", "staging_single_loop.py")).read()
    (tmp_path / "good.py").write_text(source)
    (tmp_path / "bad.py").write_text(source.replace("computed_buf.copy_to_gpu(num_reqs)",
                                                    "computed_buf.copy_to_gpu(num_reqs - 1)"))
    func = "::stage_postprocess_inputs_to_gpu"
    done = run_cli("diff", str(tmp_path / "good.py") + func, str(tmp_path / "bad.py") + func,
                   "--examples", "100", "--quiet", "--save-dir", str(tmp_path / "f"))
    assert done.returncode == 1, done.stdout + done.stderr
    lines = [ln.split("replay: ", 1)[1] for ln in done.stdout.splitlines() if "replay: " in ln]
    assert lines and all("--baseline" in ln and "--candidate" in ln for ln in lines)
    argv = __import__("shlex").split(lines[0])
    assert argv[:2] == ["stagecheck", "replay"]
    again = run_cli(*argv[1:])
    assert again.returncode == 1, again.stdout + again.stderr
    inside = run_cli("diff", "legacy", "single-loop", "--examples", "50", "--quiet",
                     "--save-dir", str(tmp_path / "g"), "--save-infos")
    assert "replay: stagecheck replay" in inside.stdout and "--baseline" not in inside.stdout


# ------------------------------------------------------------------ issue 23, item 13

MISSPELT = [
    (["diff", "legacy", "single-loop", "--exampls", "3"], "diff", "--examples"),
    (["spec", "legacy", "--max-capasity", "3"], "spec", "--max-capacity"),
    (["kernel", "--exampel", "3"], "kernel", "--examples"),
    (["mutants", "legacy", "--budgte", "3"], "mutants", "--budget"),
    (["symbolic", "legacy", "single-loop", "--max-path", "3"], "symbolic", "--max-paths"),
    (["replay", "x.json", "--candidat", "legacy"], "replay", "--candidate"),
    (["schema", "check", "x", "--frobnicate"], "schema check", None),
    (["spec", "legacy", "--ex", "5"], "spec", "--examples"),     # a prefix of one: was --seed
]


@pytest.mark.parametrize("argv,command,closest", MISSPELT, ids=lambda x: " ".join(x)
                         if isinstance(x, list) else str(x))
def test_a_misspelt_option_names_the_closest_option_of_that_command(argv, command, closest):
    proc = run_cli(*argv)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    (line,) = proc.stderr.splitlines()
    word = next(w for w in argv if w.startswith("--"))
    assert line.startswith(f"stagecheck: error: unrecognized arguments: {word}")
    if closest:
        assert messages.DID_YOU_MEAN.format(option=closest) in line
    else:
        assert "did you mean" not in line
    # it points to the command's own help, which lists the option it suggests
    assert line.endswith(f"run 'stagecheck {command} --help' for the options")
    helped = run_cli(*command.split(), "--help")
    assert helped.returncode == 0 and (closest is None or closest in helped.stdout)


@pytest.mark.parametrize("argv,word", [
    (["diff", "legacy", "single-loop", "--example", "10"], "--example"),
    (["diff", "legacy", "single-loop", "--exam", "10"], "--exam"),
    (["mutants", "legacy", "--bud", "5", "--list"], "--bud"),
    (["--vers"], "--vers"),
])
def test_abbreviations_are_refused_not_run(argv, word, tmp_path):
    extra = ["--save-dir", str(tmp_path)] if argv[0] == "diff" else []
    proc = run_cli(*argv, *extra)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert f"unrecognized arguments: {word}" in proc.stderr
    assert proc.stdout == ""                                 # nothing ran, nothing listed
    assert not any(tmp_path.iterdir())


def test_every_parser_refuses_abbreviations():
    import argparse

    from stagecheck.oracles.cli import build_parser
    todo, seen = [build_parser()], 0
    while todo:
        parser = todo.pop()
        assert parser.allow_abbrev is False, parser.prog
        seen += 1
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                todo.extend(action.choices.values())
    assert seen == 15          # stagecheck, its 9 commands, schema list|show|check,
    #                            protocol list|check


# ------------------------------------------------------------------ an audit's findings

def test_mutants_with_no_mutant_is_exit_2_naming_the_target_and_the_operators():
    # was: "0 mutant(s) ... 0/0" and exit 0, nothing checked
    target = "tests/targets/hostile/chdir.py::stage_postprocess_inputs_to_gpu"
    proc = run_cli("mutants", target, "--oracles", "spec", "--budget", "10", "--operators",
                   "swapped_views", "-q", "--jobs", "1")
    assert proc.returncode == 2, proc.stdout + proc.stderr
    (line,) = proc.stderr.splitlines()
    assert line.startswith("stagecheck: error: option --operators: no operator of "
                           f"swapped_views applies to {target}: 0 mutants")
    assert "the operators that apply to it are full_req_ids, " in line
    assert "swapped_views" not in line.split("apply to it are")[1]
    assert proc.stdout == ""


@pytest.mark.parametrize("argv,where", [
    (["spec", "LOOP.py::f"], "argument TARGET"),
    (["spec", "LOOP::f"], "argument TARGET"),
    (["spec", "legacy", "--shim", "LOOP.py"], "option --shim"),
    (["spec", "legacy", "--schema", "LOOP.py"], "option --schema"),
    (["spec", "legacy", "--schema", "LOOP"], "option --schema"),
    (["spec", "legacy", "--protocol", "LOOP.py"], "option --protocol"),
    (["spec", "legacy", "--protocol", "LOOP"], "option --protocol"),
    (["spec", "legacy", "--examples", "5", "--save-dir", "LOOP"], "option --save-dir"),
    (["spec", "legacy", "--examples", "5", "--json", "LOOP"], "option --json"),
    (["spec", "legacy", "--examples", "5", "--markdown", "LOOP"], "option --markdown"),
])
def test_a_symbolic_link_loop_is_named_as_one_and_refused(argv, where, tmp_path, monkeypatch,
                                                          capsys):
    # was "does not exist", "a symbolic link to ..., which does not exist", or for --json
    # and --markdown the loop replaced by the report at exit 0 (an audit's finding)
    monkeypatch.chdir(tmp_path)
    for name in ("LOOP", "LOOP.py"):
        os.symlink(name, tmp_path / name)
    assert main([*argv, "--quiet"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"stagecheck: error: {where}: ") and "Traceback" not in err
    assert "is a symbolic link loop (Too many levels of symbolic links)" in err
    assert "does not exist" not in err
    assert os.path.islink(tmp_path / "LOOP") and os.path.islink(tmp_path / "LOOP.py")


# a time budget asked of a command that has none (was: '--seconds' read as '--seed')
TIME_ASKED = [
    (["diff", "legacy", "single-loop", "--seconds", "5"], "diff",
     messages.NO_TIME_BUDGET.format(command="stagecheck diff", how=", ".join(
         (messages.NO_TIME_BUDGET_EXAMPLES, messages.NO_TIME_BUDGET_TIMEOUT)))),
    (["kernel", "--time=5"], "kernel", messages.NO_TIME_BUDGET.format(
        command="stagecheck kernel", how=messages.NO_TIME_BUDGET_EXAMPLES)),
    (["mutants", "legacy", "--duration", "5"], "mutants",
     messages.DID_YOU_MEAN.format(option="--budget")),
    (["symbolic", "legacy", "single-loop", "--seconds", "5"], "symbolic",
     messages.DID_YOU_MEAN.format(option="--timeout")),
]


@pytest.mark.parametrize("argv,command,hint", TIME_ASKED, ids=lambda x: " ".join(x)
                         if isinstance(x, list) else str(x)[:20])
def test_a_time_budget_option_names_what_sets_how_long_the_command_runs(argv, command, hint):
    proc = run_cli(*argv)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    (line,) = proc.stderr.splitlines()
    assert hint in line and "--seed" not in line and "--json" not in line
    assert line.endswith(f"run 'stagecheck {command} --help' for the options")
