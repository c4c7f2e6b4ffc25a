"""Audit fixes of protocol runs on the command line, end to end in a subprocess: the
pasted pytest test of a target that needs a shim reproduces the finding; a class given to
a one-call (``single-call:``) protocol says what to give instead; an operation that never
ran is warned of (the text report, ``--json``, ``protocol check``'s dry runs)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from stagecheck.oracles import messages

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
EXAMPLE = os.path.join(ROOT, "docs", "examples", "token_stager_protocol.py")
MACHINERY = os.path.join(ROOT, "tests", "targets", "protocols", "_machinery")


def run_cli(*args, cwd=ROOT):
    return subprocess.run([sys.executable, "-m", "stagecheck", *args], cwd=cwd,
                          capture_output=True, text=True, timeout=600)


def _pasted_test(report: str) -> str:
    """The first reproduction test of a text report, as printed."""
    lines = report.split("REPRODUCE:", 1)[1].splitlines()
    start = lines.index("import json")
    end = next(k for k in range(start, len(lines)) if lines[k].startswith("    assert not "))
    return "\n".join(lines[start:end + 1]) + "\n"


def test_the_pasted_test_of_a_target_that_needs_a_shim_reproduces_the_finding(tmp_path):
    """An audit: the pasted test's ``ProtocolConfig(...)`` dropped ``--shim``, so it failed
    loading the target ('uses 1 global name(s) stagecheck cannot provide') instead of
    showing the race."""
    source = open(os.path.join(MACHINERY, "buggy_token_stager.py")).read()
    engine = source.replace(
        "import torch\n", "import torch\nfrom vllm.config import tokens_per_row\n").replace(
        "n = len(token_ids)", "n = tokens_per_row(len(token_ids))")
    assert engine != source
    (tmp_path / "stager.py").write_text(engine)
    (tmp_path / "shims.py").write_text("def tokens_per_row(n):\n    return n\n")
    proc = run_cli("spec", "stager.py::TokenStager", "--protocol", EXAMPLE, "--shim",
                   "shims.py", "--no-save", "--json", "report.json", cwd=tmp_path)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    # the report and --json name what the target took from a shim, as a one-call run's do
    took = f"tokens_per_row from {tmp_path / 'shims.py'}"
    assert f"  target: stager.py::TokenStager (shims: {took})" in proc.stdout, proc.stdout
    (target,) = json.loads((tmp_path / "report.json").read_text())["targets"]
    assert target["shims"] == [took], target
    pasted = _pasted_test(proc.stdout)
    assert f"shims=({str(tmp_path / 'shims.py')!r},)" in pasted, pasted
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "test_pasted.py").write_text(pasted)
    ran = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                          "test_pasted.py"], cwd=elsewhere, capture_output=True, text=True,
                         timeout=600)
    out = ran.stdout + ran.stderr
    assert ran.returncode == 1 and "AssertionError" in out, out
    assert "[no_copy_hazard-" in out and "cannot provide" not in out, out


def test_a_class_given_to_a_one_call_protocol_says_to_give_a_staging_function(tmp_path):
    """An audit: the fix said to give --protocol NAME|FILE, which was given."""
    stager = os.path.join(MACHINERY, "fixed_token_stager.py")
    proc = run_cli("spec", f"{stager}::TokenStager", "--protocol",
                   "single-call:mamba-postprocess", "--no-save", cwd=tmp_path)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    problem = messages.PROTOCOL_SINGLE_CALL_CLASS[0].format(
        value=f"{stager}::TokenStager", name="TokenStager", schema="mamba-postprocess")
    assert f"argument TARGET: {problem}" in proc.stderr, proc.stderr
    assert "--protocol NAME|FILE" not in proc.stderr and "Traceback" not in proc.stderr


def test_an_operation_that_never_ran_is_warned_of_by_every_report(tmp_path):
    """An audit: an operation whose ``when`` is false at every step (``step.kind ==
    'decode'``, a kind the generator never draws) let a racy target pass with 'HOLDS THE
    PROTOCOL' and ``protocol check`` exit 0, saying nothing."""
    source = open(EXAMPLE).read()
    never = source.replace('Operation("stage", stage, ',
                           'Operation("stage", stage, when=lambda s: s.kind == "decode", ')
    assert never != source
    protocol = tmp_path / "never_protocol.py"
    protocol.write_text(never)
    buggy = os.path.join(MACHINERY, "buggy_token_stager.py") + "::TokenStager"
    out = tmp_path / "report.json"
    proc = run_cli("spec", buggy, "--protocol", str(protocol), "--examples", "20",
                   "--no-save", "--json", str(out), cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr     # the exit code stands
    document = json.loads(out.read_text())
    steps = document["never_ran"]["steps"]
    assert document["never_ran"] == {"operations": ["stage"], "device_work": ["embed"],
                                     "sequences": 20, "steps": steps, "cut_short": 0} \
        and steps >= 20
    for what, name in (("operation", "stage"), ("device work", "embed")):
        assert messages.PROTOCOL_NEVER_RAN.format(
            what=what, name=name, sequences=20, steps=steps, run="run",
            why=messages.PROTOCOL_NEVER_RAN_WHY[what]) in proc.stdout.splitlines(), proc.stdout
    # protocol check: the dry run through a target, and the when functions alone
    checked = run_cli("protocol", "check", str(protocol), buggy, cwd=tmp_path)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert "  warning: operation 'stage' never ran in the 10 step sequence(s)" in checked.stdout
    assert "of the dry run: nothing of it was checked" in checked.stdout
    alone = run_cli("protocol", "check", str(protocol), cwd=tmp_path)
    assert alone.returncode == 0, alone.stdout + alone.stderr
    assert "  warning: operation 'stage' never ran in the 30 step sequence(s)" in alone.stdout
    # the right protocol: no warning
    right = run_cli("protocol", "check", EXAMPLE, cwd=tmp_path)
    assert right.returncode == 0 and "warning:" not in right.stdout, right.stdout


def test_two_runs_that_ran_other_operations_are_refused_naming_the_first_that_moved(tmp_path):
    """An audit: a protocol whose ``when`` changes between runs was refused with "(first run
    ran every step, second run ran every step)", which names nothing that moved."""
    source = open(EXAMPLE).read()
    old = 'Operation("stage", stage, '
    assert old in source
    (tmp_path / "proto.py").write_text(      # runs the operation at the process's first step
        "import itertools\n_CALLS = itertools.count()\n" + source.replace(
            old, 'Operation("stage", stage, when=lambda s: next(_CALLS) == 0, '))
    fixed = os.path.join(MACHINERY, "fixed_token_stager.py") + "::TokenStager"
    proc = run_cli("diff", fixed, fixed, "--protocol", "proto.py", "--examples", "30",
                   "--no-save", cwd=tmp_path)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert messages.PROTOCOL_UNSTEADY[0].split("{")[1].split("}")[1][:20] in proc.stderr
    assert "ran every step, second run ran every step" not in proc.stderr, proc.stderr
    assert ("(the first run ran step 0 (stage), the second run no more operation)"
            in proc.stderr), proc.stderr


def test_protocol_check_refuses_a_protocol_whose_runs_of_one_sequence_differ(tmp_path):
    """An audit: an ``observe`` returning random numbers passed ``protocol check FILE
    TARGET`` ("without a mistake of the protocol") and was refused only by the ``diff``
    that followed; the dry run now runs the target against itself too."""
    source = open(EXAMPLE).read()
    old = "    device_work=("
    assert old in source
    (tmp_path / "proto.py").write_text("import random\n" + source.replace(
        old, "    observe=lambda ctx: {'drawn': random.random()},\n" + old))
    fixed = os.path.join(MACHINERY, "fixed_token_stager.py") + "::TokenStager"
    proc = run_cli("protocol", "check", "proto.py", fixed, cwd=tmp_path)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "two runs of the same step sequence differ (after step 0 the host holds " \
           "observe()['drawn'] = " in proc.stderr, proc.stderr
    assert "baseline" not in proc.stderr and "Traceback" not in proc.stderr
    steady = run_cli("protocol", "check", EXAMPLE, fixed, cwd=tmp_path)
    assert steady.returncode == 0, steady.stdout + steady.stderr


def test_protocol_check_says_a_check_that_raises_as_a_problem_of_the_file(tmp_path):
    """An audit: a protocol's check raising in the dry run was said without the file in
    its prefix and without the "has N problem(s)" line every other problem gets."""
    source = open(EXAMPLE).read()
    old = "    device_work=("
    (tmp_path / "proto.py").write_text(
        "from stagecheck.spec.protocol import ProtocolCheck\n" + source.replace(
            old, "    checks=(ProtocolCheck('boom', 'raises.', lambda seq, trace: 1 / 0),),\n"
            + old))
    fixed = os.path.join(MACHINERY, "fixed_token_stager.py") + "::TokenStager"
    proc = run_cli("protocol", "check", "proto.py", fixed, cwd=tmp_path)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    lines = proc.stderr.splitlines()
    assert lines[0].startswith("stagecheck: error: protocol 'token-stager' (proto.py): "
                               "checks[0] ('boom') raised ZeroDivisionError"), proc.stderr
    assert lines[-1] == "stagecheck: error: " + messages.PROTOCOL_CHECK_FAILED.format(
        name="token-stager", where="proto.py", count=1), proc.stderr


def test_protocol_check_says_how_to_fix_an_operation_that_raises_without_itself(tmp_path):
    """An audit: the protocol's own operation raising in ``protocol check FILE TARGET``'s
    dry run said to run ``stagecheck protocol check FILE TARGET``: the command running."""
    source = open(EXAMPLE).read()
    old = "def stage(ctx):\n"
    assert old in source
    (tmp_path / "proto.py").write_text(source.replace(old, old + "    int('not a number')\n"))
    fixed = os.path.join(MACHINERY, "fixed_token_stager.py") + "::TokenStager"
    proc = run_cli("protocol", "check", "proto.py", fixed, cwd=tmp_path)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    first = proc.stderr.splitlines()[0]
    assert "its own code for operation 'stage' raised ValueError" in first, proc.stderr
    assert first.endswith("; " + messages.PROTOCOL_CODE_RAISED_CHECK_FIX), proc.stderr
    assert "protocol check" not in first
