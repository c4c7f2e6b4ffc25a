"""What a new user's audit of the protocol feature found (issue 22, with issues 21 and 23's
bars), end to end in a subprocess: a protocol file that exits or hangs is loaded in a worker
first (never a verdict), a bare file target is told to name the component class, a replay
file outside the repository is refused once with every part to give, ``protocol check``
lists every problem in one run, the reports count everything tried (edge cases, shrinking),
round floats and name the build step, progress speaks singular, and a misspelt
``[tool.stagecheck]`` key gets a "did you mean"."""

from __future__ import annotations

import io
import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import time

import pytest

from stagecheck.oracles import messages
from stagecheck.oracles.errors import SchemaError, UsageError
from stagecheck.oracles.progress import Progress
from stagecheck.oracles.report.replay import check_trusted
from tests.protocol_catalog import fixtures, target

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
EXAMPLE = os.path.join(ROOT, "docs", "examples", "token_stager_protocol.py")
MACHINERY = os.path.join(ROOT, "tests", "targets", "protocols", "_machinery")
HOSTILE = os.path.join(ROOT, "tests", "targets", "hostile")


def run_cli(*args, cwd=ROOT, env=None):
    return subprocess.run([sys.executable, "-m", "stagecheck", *args], cwd=cwd,
                          capture_output=True, text=True, timeout=600,
                          env={**os.environ, "PYTHONPATH": ROOT, **(env or {})})


# ------------------------------------------------------------------ 1: protocol files are code

def test_a_protocol_file_that_exits_never_ends_the_process_that_loads_it():
    """``load_protocol`` in this very process (as the fixture and a pasted
    ``check_sequence`` test call it): the file's ``os._exit(0)`` ends a worker, and here it
    is a ``SchemaError`` naming the file (were it imported here, pytest itself would end)."""
    from stagecheck.oracles.protocol import load_protocol
    path = os.path.join(HOSTILE, "protocol_os_exit.py")
    with pytest.raises(SchemaError) as caught:
        load_protocol(path)
    assert messages.PROTOCOL_ENDED[0].format(value=path, what="exited the interpreter with "
                                             "code 0") in str(caught.value)


def test_a_protocol_file_whose_import_loops_is_a_hang_said_of_the_file(monkeypatch):
    from stagecheck.oracles.protocol import load_protocol
    monkeypatch.setenv("STAGECHECK_LOAD_SECONDS", "2")
    path = os.path.join(HOSTILE, "protocol_import_loop.py")
    with pytest.raises(SchemaError) as caught:
        load_protocol(path)
    assert messages.PROTOCOL_PROBE_HUNG[0].format(
        value=path, part="module-level code", limit=1.6, where=path + ":3") in str(caught.value)


def test_a_protocol_file_that_crashes_its_process_is_exit_2_naming_it(tmp_path):
    """A segmentation fault at import (a C extension's crash) ends the worker that loads
    the file first: exit 2 naming the file and the signal, no verdict, nothing saved."""
    path = tmp_path / "crashes.py"
    path.write_text("import ctypes\n\nctypes.string_at(0)\n")
    proc = run_cli("spec", f"{MACHINERY}/fixed_token_stager.py::TokenStager", "--protocol",
                   str(path), "--save-dir", str(tmp_path / "saved"), cwd=tmp_path)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    said = messages.PROTOCOL_ENDED[0].format(value=str(path), what="killed by SIGSEGV")
    assert f"option --protocol: {said}" in proc.stderr
    assert proc.stdout == "" and not (tmp_path / "saved").exists()


def test_a_right_protocol_file_loads_guarded_and_runs_as_before(tmp_path):
    """The checker's copy of a protocol file has its functions guarded; the run is the
    same: the buggy component is found, the fixed one holds."""
    from stagecheck.oracles.protocol import load_protocol
    protocol = load_protocol(EXAMPLE)
    assert getattr(protocol.build, "__stagecheck_guarded__", False)
    assert getattr(protocol.operations[0].when, "__stagecheck_guarded__", False)
    buggy = run_cli("spec", f"{MACHINERY}/buggy_token_stager.py::TokenStager", "--protocol",
                    EXAMPLE, "--examples", "50", "--no-save", "-q")
    assert buggy.returncode == 1, buggy.stdout + buggy.stderr
    fixed = run_cli("spec", f"{MACHINERY}/fixed_token_stager.py::TokenStager", "--protocol",
                    EXAMPLE, "--examples", "20", "--no-save", "-q")
    assert fixed.returncode == 0, fixed.stdout + fixed.stderr


# ------------------------------------------------------------------ 2: a bare file target

@pytest.mark.parametrize("command", ["spec", "diff"])
def test_a_bare_file_target_of_a_protocol_run_is_told_to_name_the_component_class(command):
    buggy = f"{MACHINERY}/buggy_token_stager.py"
    args = ([command, buggy] if command == "spec" else
            [command, f"{MACHINERY}/fixed_token_stager.py::TokenStager", buggy])
    proc = run_cli(*args, "--protocol", EXAMPLE, "--no-save")
    assert proc.returncode == 2, proc.stdout + proc.stderr
    problem, fix = messages.PROTOCOL_TARGET_FILE
    said = problem.format(value=buggy, what="component class TokenStager",
                          protocol="token-stager")
    argument = "TARGET" if command == "spec" else "CANDIDATE"
    assert f"argument {argument}: {said}" in proc.stderr
    assert fix.format(value=buggy, name="TokenStager") in proc.stderr
    assert "::FUNCTION" not in proc.stderr and "Traceback" not in proc.stderr


def test_a_bare_file_target_names_the_files_class_closest_to_a_misspelt_component(tmp_path):
    # an audit: the fix named the protocol's misspelt component, a class the file lacks,
    # and following it failed a second time
    protocol = tmp_path / "typo_protocol.py"
    source = open(EXAMPLE, encoding="utf-8").read()
    assert 'component="TokenStager"' in source
    protocol.write_text(source.replace('component="TokenStager"', 'component="TokenStagr"'))
    buggy = f"{MACHINERY}/buggy_token_stager.py"
    proc = run_cli("spec", buggy, "--protocol", str(protocol), "--no-save")
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert messages.PROTOCOL_TARGET_FILE[1].format(value=buggy, name="TokenStager") \
        in proc.stderr
    assert "TokenStagr" not in proc.stderr


def test_a_bare_file_target_of_a_builtin_or_one_call_protocol_names_its_class_or_function():
    (fixed,) = fixtures("valid-count-readback", "fixed")
    proc = run_cli("spec", str(fixed), "--protocol", "valid-count-readback", "--no-save")
    assert proc.returncode == 2
    assert f"write '{fixed}::GPUModelRunner'" in proc.stderr
    one_call = run_cli("spec", str(fixed), "--protocol", "single-call:mamba-postprocess",
                       "--no-save")
    assert one_call.returncode == 2
    assert f"write '{fixed}::stage_postprocess_inputs_to_gpu'" in one_call.stderr
    assert "::FUNCTION" not in proc.stderr + one_call.stderr


# ------------------------------------------------------------------ 3: replay, one refusal

def test_a_protocol_replay_outside_the_repository_is_refused_once_with_every_part(tmp_path):
    """The target and the protocol file lie outside the folder the replay runs in (not a
    repository): one refusal names both and a command line that gives both, and that
    command runs as printed."""
    shutil.copy(f"{MACHINERY}/buggy_token_stager.py", tmp_path / "stager.py")
    shutil.copy(EXAMPLE, tmp_path / "protocol.py")
    work = tmp_path / "work"
    work.mkdir()
    component, protocol = f"{tmp_path}/stager.py::TokenStager", f"{tmp_path}/protocol.py"
    found = run_cli("spec", component, "--protocol", protocol, "--examples", "50", "-q",
                    cwd=work)
    assert found.returncode == 1, found.stdout + found.stderr
    printed = next(x for x in found.stdout.splitlines() if "replay: stagecheck replay" in x)
    file = shlex.split(printed.split("replay: ", 1)[1])[2]
    refused = run_cli("replay", file, cwd=work)
    assert refused.returncode == 2, refused.stdout + refused.stderr
    assert refused.stderr.count("stagecheck: error:") == 1
    problem = messages.REPLAY_UNTRUSTED_PARTS[0].format(
        value=file, top=work, parts=f"the candidate target {component!r}; the protocol file "
                                    f"{protocol!r}")
    assert problem in refused.stderr
    command = refused.stderr.split("name it yourself: ", 1)[1].strip()
    assert command == (f"stagecheck replay {file} --candidate {component} "
                       f"--protocol {protocol}")
    again = run_cli(*shlex.split(command)[1:], cwd=work)
    assert again.returncode == 1, again.stdout + again.stderr     # runs as printed
    as_printed = run_cli(*shlex.split(printed.split("replay: ", 1)[1])[1:], cwd=work)
    assert as_printed.returncode == 1, as_printed.stdout + as_printed.stderr


def test_every_untrusted_part_of_a_replay_file_is_named_in_one_refusal(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    saved = {"baseline": "/elsewhere/a.py::f", "candidate": "/elsewhere/b.py::f",
             "shims": ["/elsewhere/shim.py"], "schema": "/elsewhere/s.py"}
    with pytest.raises(UsageError) as caught:
        check_trusted(saved, "r.json")
    text = str(caught.value)
    for part in ("the baseline target '/elsewhere/a.py::f'",
                 "the candidate target '/elsewhere/b.py::f'", "the shim '/elsewhere/shim.py'",
                 "the schema file '/elsewhere/s.py'"):
        assert part in text
    assert text.endswith("stagecheck replay r.json --baseline /elsewhere/a.py::f --candidate "
                         "/elsewhere/b.py::f --shim /elsewhere/shim.py --schema "
                         "/elsewhere/s.py")
    # what the command line names is not asked for again
    check_trusted(saved, "r.json", "legacy", "legacy", shims_given=True, schema_given=True)


# ------------------------------------------------------------------ 4: protocol check

MANY_PROBLEMS = '''
from stagecheck.spec.protocol import Operation, Protocol, StepSpace


def run(ctx):
    return None


PROTOCOL = Protocol(
    name="", summary="s", functions=("A",), build=None, component="A.b",
    operations=(Operation("a", run, when=lambda v: v.no_such_field),
                Operation("b", run, when=lambda v: 3), Operation("b", run)),
    space=StepSpace(steps=(0, 3)))
'''


def test_protocol_check_reports_every_problem_in_one_run(tmp_path):
    path = tmp_path / "many.py"
    path.write_text(MANY_PROBLEMS)
    proc = run_cli("protocol", "check", str(path))
    assert proc.returncode == 2, proc.stdout + proc.stderr
    said = [line.split(f"({path}): ", 1)[1] for line in proc.stderr.splitlines()
            if f"({path}): " in line]
    expected = [messages.PROTOCOL_PROBLEM_NAME.format(value=""),
                messages.PROTOCOL_PROBLEM_CALLABLE.format(part="build", value=None),
                messages.PROTOCOL_PROBLEM_COMPONENT.format(value="A.b"),
                messages.PROTOCOL_PROBLEM_DUPLICATE.format(names="b"),
                messages.PROTOCOL_PROBLEM_RANGE.format(part="space.steps", value=(0, 3)),
                "operations[0] ('a').when raised AttributeError",
                "operations[1] ('b').when returned 3 (not a bool)"]
    for problem in expected:
        assert any(line.startswith(problem) for line in said), (problem, said)
    assert len(said) == len(expected)
    assert messages.PROTOCOL_CHECK_FAILED.format(name="", where=path, count=len(expected)) \
        in proc.stderr
    assert proc.stdout == "" and "Traceback" not in proc.stderr


# ------------------------------------------------------------------ 5: reports

def test_the_diff_report_counts_the_edge_cases_it_tried(tmp_path):
    out = tmp_path / "r.json"
    proc = run_cli("diff", "legacy", "single-loop", "--examples", "40", "--no-save", "-q",
                   "--json", str(out))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    examples = json.loads(out.read_text())["examples"]
    assert examples["edge"] > 0
    assert (f"tried {examples['in_contract']} in-contract, {examples['out_of_contract']} "
            f"out-of-contract and {examples['edge']} edge-case examples") in proc.stdout


def test_the_protocol_report_counts_shrinking_rounds_floats_and_names_no_step_minus_one(
        tmp_path):
    (buggy,) = [f for f in fixtures("input-prep-event", "buggy") if "narrow" in f.name]
    out = tmp_path / "r.json"
    proc = run_cli("spec", target(buggy), "--protocol", "input-prep-event", "--no-save",
                   "-q", "--json", str(out))
    assert proc.returncode == 1, proc.stdout + proc.stderr
    sequences = json.loads(out.read_text())["sequences"]
    assert sequences["shrinking"] > 0
    assert re.search(rf"tried {sequences['run']} step sequences? \(seed 0, budget 300\) and "
                     rf"{sequences['shrinking']} more while shrinking", proc.stdout)
    # the host's float32 temperature 0.7 reads 0.7, not its 17-digit expansion
    assert "temperature[0] = 0.5 under this completion schedule, 0.7 when" in proc.stdout
    assert "0.69999998" not in proc.stdout


BROKEN_STAGER = '''
class TokenStager:
    def __init__(self, max_tokens, device, pin_memory=True):
        raise ValueError("no room for the buffers")

    def stage(self, token_ids):
        pass

    def embed(self, ids):
        return ids
'''


def test_a_component_that_fails_to_build_is_said_of_the_build_not_step_minus_one(tmp_path):
    (tmp_path / "broken.py").write_text(BROKEN_STAGER)
    proc = run_cli("spec", f"{tmp_path}/broken.py::TokenStager", "--protocol", EXAMPLE,
                   "--examples", "5", "--no-save", cwd=tmp_path,
                   env={"STAGECHECK_PROGRESS_INTERVAL": "0.05"})
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "(candidate) build (before step 0) raised ValueError: no room for the buffers" \
        in proc.stdout
    row = next(x for x in proc.stdout.splitlines() if "build (before step 0)" in x
               and "raised" in x and not x.startswith("["))
    assert row.split()[0] == "-"
    assert "step -1" not in proc.stdout and "  -1  " not in proc.stdout
    # the progress line: one finding is "1 finding"
    final = [x for x in proc.stderr.splitlines() if "finished:" in x][-1]
    assert "1 finding," in final and "1 findings" not in proc.stderr


def test_progress_counts_speak_singular_for_one():
    progress = Progress("diff", "examples", None, counters=("findings", "killed"),
                        stream=io.StringIO(), tty=False)
    progress.update(1, findings=1, killed=1)
    fields = progress.fields()
    assert fields[0] == "1 example" and "1 finding" in fields and "1 killed" in fields
    progress.update(2, findings=2)
    assert "2 findings" in progress.fields() and progress.fields()[0] == "2 examples"
    progress.update(1, 300, findings=0)
    assert progress.fields()[0] == "1/300 examples" and "0 findings" in progress.fields()


# ------------------------------------------------------------------ 6: [tool.stagecheck]

def test_a_misspelt_config_key_gets_the_closest_key_as_an_option_does(tmp_path):
    (tmp_path / "pyproject.toml").write_text("[tool.stagecheck]\nmax_capacty = 4\n")
    proc = run_cli("spec", "legacy", cwd=tmp_path)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "'max_capacty' is not a key of [tool.stagecheck]" in proc.stderr
    assert messages.DID_YOU_MEAN.format(option="max-capacity") in proc.stderr
    (tmp_path / "pyproject.toml").write_text("[tool.stagecheck]\nzzzq = 4\n")
    far = run_cli("spec", "legacy", cwd=tmp_path)
    assert far.returncode == 2 and "did you mean" not in far.stderr


def test_replay_with_a_protocol_file_that_is_not_there_names_the_option(tmp_path):
    saved = tmp_path / "saved"
    found = run_cli("spec", f"{MACHINERY}/buggy_token_stager.py::TokenStager", "--protocol",
                    EXAMPLE, "--examples", "20", "--save-dir", str(saved), "-q")
    assert found.returncode == 1, found.stdout + found.stderr
    replay = sorted(saved.glob("*.json"))[0]
    gone = str(tmp_path / "moved.py")
    proc = run_cli("replay", str(replay), "--protocol", gone)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    problem = messages.PROTOCOL_FILE_MISSING[0].format(path=gone, value=gone)
    assert f"stagecheck: error: option --protocol: {problem}" in proc.stderr, proc.stderr


def test_every_error_finding_of_a_race_is_shown_by_a_shrunk_sequence():
    # seed 0 draws an 8-step sequence; the first shrink keeps the divergence (3 steps),
    # which no longer shows the race: the race is shrunk again on its own (before, it
    # kept the 8 drawn steps)
    fixture = os.path.join(ROOT, "tests", "targets", "protocols", "condense-inflight-d2h",
                           "buggy_d2h_into_input_batch.py")
    proc = run_cli("spec", f"{fixture}::GPUModelRunner", "--protocol",
                   "condense-inflight-d2h", "--no-save", "--json", "-", "-q")
    assert proc.returncode == 1, proc.stderr
    errors = [f for f in json.loads(proc.stdout)["findings"] if f["severity"] == "error"]
    assert {f["invariant"] for f in errors} == {"no_copy_hazard", "device_read_as_meant"}
    assert all(len(f["scenario"]["steps"]) <= 4 for f in errors), \
        [(f["invariant"], len(f["scenario"]["steps"])) for f in errors]


def test_a_misspelt_component_overridden_by_the_target_class_is_noted(tmp_path):
    misspelt = tmp_path / "misspelt_protocol.py"
    with open(EXAMPLE) as f:
        misspelt.write_text(f.read().replace('component="TokenStager"', 'component="TokenStagr"'))
    target = os.path.join(MACHINERY, "fixed_token_stager.py") + "::TokenStager"
    check = run_cli("protocol", "check", str(misspelt), target)
    assert check.returncode == 0, check.stderr
    assert "component 'TokenStagr' is not a class of" in check.stdout
    assert "(did you mean TokenStager?)" in check.stdout
    spec = run_cli("spec", target, "--protocol", str(misspelt), "--examples", "5",
                   "--no-save")
    assert spec.returncode == 0, spec.stderr
    assert "stagecheck: note: the protocol's component 'TokenStagr'" in spec.stderr
    right = run_cli("protocol", "check", EXAMPLE, target)
    assert right.returncode == 0 and "is not a class of" not in right.stdout


@pytest.mark.parametrize("name", ["stops_stager", "spins_deaf_stager"])
def test_an_operation_no_timer_of_its_worker_can_end_is_ended_by_its_own_deadline(name):
    # each operation has the checker's deadline (--timeout and a grace), not the whole
    # batch's: a step that stops its process (SIGSTOP) or ignores the timer signals and
    # spins is a hang in seconds (was: 388 s, or a run that never ended)
    started = time.monotonic()
    proc = run_cli("spec", os.path.join(HOSTILE, f"{name}.py") + "::TokenStager",
                   "--protocol", EXAMPLE, "--examples", "10", "--timeout", "1", "--no-save")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    # the worker's position says which operation it was in when the checker ended it
    assert "(candidate) step 1 (stage) hung" in proc.stdout, proc.stdout
    assert time.monotonic() - started < 120, time.monotonic() - started


def test_a_replayed_info_finding_says_whether_it_still_shows(tmp_path):
    target = os.path.join(HOSTILE, "daemon_stager.py") + "::TokenStager"
    found = run_cli("spec", target, "--protocol", EXAMPLE, "--examples", "5", "--save-infos",
                    "--save-dir", str(tmp_path / "found"), "-q")
    assert found.returncode == 0, found.stdout + found.stderr
    (saved,) = sorted((tmp_path / "found").glob("no_process_left-*.json"))
    fixed = os.path.join(MACHINERY, "fixed_token_stager.py") + "::TokenStager"
    for candidate, said in ((target, "still shows"), (fixed, "no longer shows")):
        again = run_cli("replay", str(saved), "--candidate", candidate, "--protocol", EXAMPLE)
        assert again.returncode == 0, again.stdout + again.stderr
        assert "the saved info finding [no_process_left-" in again.stdout
        assert said in again.stdout.splitlines()[-1], again.stdout


def test_a_protocol_file_inside_the_folder_is_not_added_to_the_replay_line(tmp_path):
    # the printed line once added '--protocol ABS_PATH' for a file the replay trusts anyway
    shutil.copy(f"{MACHINERY}/buggy_token_stager.py", tmp_path / "stager.py")
    shutil.copy(EXAMPLE, tmp_path / "protocol.py")
    found = run_cli("spec", "stager.py::TokenStager", "--protocol", "protocol.py",
                    "--examples", "50", "-q", cwd=tmp_path)
    assert found.returncode == 1, found.stdout + found.stderr
    printed = next(x for x in found.stdout.splitlines() if "replay: stagecheck replay" in x)
    words = shlex.split(printed.split("replay: ", 1)[1])
    assert "--protocol" not in words and "--candidate" not in words, printed
    again = run_cli(*words[1:], cwd=tmp_path)
    assert again.returncode == 1, again.stdout + again.stderr     # runs as printed


def _interrupted_while_loading(tmp_path, *args: str) -> str:
    """stderr of ``stagecheck ARGS`` given SIGINT while it loads the slow protocol file
    (exit 130)."""
    proc = subprocess.Popen([sys.executable, "-m", "stagecheck", *args,
                             os.path.join(HOSTILE, "protocol_loads_slowly.py")],
                            cwd=tmp_path, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    time.sleep(4)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err
    return err


def test_a_signal_while_the_protocol_file_loads_counts_step_sequences(tmp_path):
    # the interrupted line said 'after 0 example(s)' of a protocol run stopped at loading
    err = _interrupted_while_loading(
        tmp_path, "spec", f"{MACHINERY}/fixed_token_stager.py::TokenStager", "-q",
        "--protocol")
    assert "interrupted by SIGINT after 0 step sequence(s)" in err, err


def test_a_signal_while_protocol_check_loads_its_file_counts_nothing(tmp_path):
    # protocol check runs no examples and no step sequences: was 'after 0 example(s)'
    err = _interrupted_while_loading(tmp_path, "protocol", "check")
    assert err.strip() == messages.INTERRUPTED_UNCOUNTED.format(signal="SIGINT"), err


@pytest.mark.parametrize("start,helper", [
    ("os.popen('sleep 101')", False),
    ("multiprocessing.Process(target=time.sleep, args=(102,)).start()", False),
    ("started()", True),
])
def test_a_process_the_protocols_own_code_starts_any_way_is_its_mistake(start, helper,
                                                                          tmp_path):
    # os.popen (a frozen os), multiprocessing and a helper module of the protocol's once
    # passed the check and were charged to the code under test (no_process_left)
    if helper:
        (tmp_path / "protocol_helper.py").write_text(
            "import subprocess, sys\n\n\ndef started():\n    subprocess.Popen([sys.executable, "
            "'-c', 'import time; time.sleep(103)'], start_new_session=True)\n")
    source = open(os.path.join(HOSTILE, "protocol_build_starts_process.py")).read()
    source = source.replace("import subprocess\n", "import multiprocessing\nimport os\n"
                            "import subprocess\nimport time\n\nsys_path = __import__('sys')."
                            f"path.insert(0, {str(tmp_path)!r})\n"
                            "from protocol_helper import started\n" if helper else
                            "import multiprocessing\nimport os\nimport subprocess\nimport time\n")
    source = source.replace('    subprocess.Popen([sys.executable, "-c", "import time; '
                            'time.sleep(103)"],\n                     start_new_session=True)\n',
                            f"    {start}\n")
    assert start in source
    (tmp_path / "protocol.py").write_text(source)
    proc = run_cli("spec", f"{MACHINERY}/fixed_token_stager.py::TokenStager", "--protocol",
                   str(tmp_path / "protocol.py"), "--examples", "5", "-q", cwd=tmp_path)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "its own code started a process" in proc.stderr
    assert f"{tmp_path / 'protocol.py'}:" in proc.stderr


# ------------------------------------------------ a pinning target: the fix the message gives

def test_a_target_that_pins_on_a_cpu_only_torch_is_told_a_fix_that_runs_here():
    """On a CPU-only torch, ``pin_memory()`` in the target is exit 2 (a limit of the run);
    the message's first fix, the one-step protocol of the target's schema on the CPU model
    of the device (which models pinned memory), runs here and gives a verdict."""
    target = os.path.join(HOSTILE, "pins_host_memory.py") + "::stage_postprocess_inputs_to_gpu"
    refused = run_cli("spec", target, "--examples", "5", "--quiet")
    assert refused.returncode == 2, refused.stderr
    fix = re.search(r"\(--protocol (single-call:[\w-]+)\)", refused.stderr)
    assert fix and fix.group(1) == "single-call:mamba-postprocess", refused.stderr
    checked = run_cli("spec", target, "--protocol", fix.group(1), "--examples", "20")
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert "HOLDS THE PROTOCOL" in checked.stdout
