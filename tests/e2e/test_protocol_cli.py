"""Protocols on the command line, end to end in a subprocess: ``diff``/``spec --protocol``
on each built-in protocol's fixtures, the protocol chosen by the target's name, options a
protocol run does not read, ``protocol check`` on good and bad files, ``replay`` of a
saved protocol finding, and the pytest fixture's ``assert_protocol`` in a pytester
session."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

from stagecheck.oracles import messages
from tests.e2e.test_pytest_plugin import _autoloaded, _plugin_args
from tests.protocol_catalog import BUILTIN, PROTOCOLS, REPORTED, expected, fixtures, target

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
EXAMPLE = os.path.join(ROOT, "docs", "examples", "token_stager_protocol.py")
pytest_plugins = ["pytester"]


def run_cli(*args, cwd=ROOT):
    return subprocess.run([sys.executable, "-m", "stagecheck", *args], cwd=cwd,
                          capture_output=True, text=True, timeout=600)


def _hazard_named(stdout: str, path) -> bool:
    """Whether the report names one of the hazards or divergences ``path`` expects."""
    wanted = {(inv, kind) for name in expected(path) for inv, kind in REPORTED[name]}
    return any(f"[{inv}-" in stdout and (kind is None or kind in stdout) for inv, kind in wanted)


@pytest.mark.parametrize("protocol", BUILTIN)
def test_each_builtin_protocols_buggy_fixture_exits_1_naming_the_hazard(protocol, tmp_path):
    buggy = fixtures(protocol, "buggy")[0]
    out = tmp_path / "report.json"
    proc = run_cli("spec", target(buggy), "--protocol", protocol, "--examples", "200",
                   "--save-dir", str(tmp_path / "found"), "--json", str(out), "-q")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "verdict: VIOLATES THE PROTOCOL" in proc.stdout
    assert _hazard_named(proc.stdout, buggy), proc.stdout
    # the step table of the shortest sequence, the replay line and the pytest test
    assert "step  operation" in proc.stdout and "in flight" in proc.stdout
    assert "replay: stagecheck replay " in proc.stdout
    assert "def test_" in proc.stdout and "check_sequence(" in proc.stdout
    document = json.loads(out.read_text())
    assert document["verdict"] == "different" and document["protocol"] == protocol
    errors = [f for f in document["findings"] if f["severity"] == "error"]
    assert errors and all(os.path.isfile(f["replay"]) for f in errors)


@pytest.mark.parametrize("protocol", BUILTIN)
def test_each_builtin_protocols_fixed_fixture_exits_0(protocol, tmp_path):
    (fixed,) = fixtures(protocol, "fixed")
    proc = run_cli("spec", target(fixed), "--protocol", protocol, "--examples", "60",
                   "--save-dir", str(tmp_path / "found"), "-q")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "verdict: HOLDS THE PROTOCOL — 0 error finding(s)" in proc.stdout
    # a clean run says how to try harder, with the budget it had
    assert messages.PROTOCOL_CLEAN_HINT.format(
        more=600, examples=60, seed=0,
        device="; on a GPU, --device cuda runs it on the device") in proc.stdout


def test_diff_of_fixed_and_buggy_exits_1_and_fixed_and_equivalent_exit_0(tmp_path):
    protocol = "valid-count-readback"
    (fixed,) = fixtures(protocol, "fixed")
    buggy, rewrite = fixtures(protocol, "buggy")[0], fixtures(protocol, "equivalent")[0]
    different = run_cli("diff", target(fixed), target(buggy), "--protocol", protocol,
                        "--save-dir", str(tmp_path), "-q")
    assert different.returncode == 1, different.stdout + different.stderr
    assert "verdict: DIFFERENT" in different.stdout and "(candidate)" in different.stdout
    same = run_cli("diff", target(fixed), target(rewrite), "--protocol", protocol,
                   "--examples", "60", "--save-dir", str(tmp_path), "-q")
    assert same.returncode == 0, same.stdout + same.stderr
    assert "verdict: EQUIVALENT" in same.stdout


def test_the_targets_method_name_chooses_the_builtin_protocol_and_says_so(tmp_path):
    (buggy,) = [f for f in fixtures("input-prep-event", "buggy") if "narrow" in f.name]
    proc = run_cli("spec", f"{buggy}::GPUModelRunner.synchronize_input_prep",
                   "--save-dir", str(tmp_path))
    assert proc.returncode == 1, proc.stdout + proc.stderr
    said = messages.PROTOCOL_CHOSEN.format(protocol="input-prep-event",
                                           name="GPUModelRunner.synchronize_input_prep")
    assert proc.stdout.startswith(said) and said in proc.stderr
    # a staging function a schema describes stays one call per example
    staging = run_cli("spec", "single-loop", "--examples", "20", "--save-dir", str(tmp_path),
                      "-q")
    assert staging.returncode == 0 and "stagecheck protocol" not in staging.stdout


@pytest.mark.parametrize("args,flag", [
    (["--kernel", "always"], "--kernel"),
    (["--steps", "3"], "--steps"),
    (["--deferred-copies"], "--deferred-copies"),
    (["--schema", "mamba-postprocess"], "--schema"),
])
def test_an_option_a_protocol_run_does_not_read_is_exit_2_naming_it(args, flag, tmp_path):
    (fixed,) = fixtures("valid-count-readback", "fixed")
    proc = run_cli("spec", target(fixed), "--protocol", "valid-count-readback", *args,
                   "--save-dir", str(tmp_path))
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert f"option {flag}: {flag}" in proc.stderr and "leave " + flag + " out" in proc.stderr
    assert "Traceback" not in proc.stderr and proc.stdout == ""
    # the options it says a protocol run reads are those this protocol reads: a multi-step
    # protocol refuses --max-capacity too, so it is not offered
    reads = proc.stderr.split("a protocol run reads ", 1)[1].split(";", 1)[0]
    assert "--examples" in reads and "--seed" in reads and "--max-capacity" not in reads
    assert "--json" in reads and "--strict" in reads    # the report options apply too


def test_gpu_busy_cycles_on_the_cpu_is_exit_2_not_a_setting_nothing_read(tmp_path):
    (fixed,) = fixtures("valid-count-readback", "fixed")
    for args in (("spec", target(fixed), "--protocol", "valid-count-readback"),
                 ("diff", "legacy", "single-loop")):
        proc = run_cli(*args, "--gpu-busy-cycles", "5", "--save-dir", str(tmp_path))
        assert proc.returncode == 2, proc.stdout + proc.stderr
        problem, fix = messages.CUDA_ONLY
        assert ("option --gpu-busy-cycles: " + problem.format(value=5)) in proc.stderr
        assert fix in proc.stderr and proc.stdout == ""
    quiet = run_cli("diff", "legacy", "single-loop", "--gpu-busy-cycles", "0", "--examples",
                    "5", "--save-dir", str(tmp_path), "-q")
    assert quiet.returncode == 0, quiet.stdout + quiet.stderr     # 0 turns it off: allowed


def test_junit_and_markdown_are_refused_for_a_protocol_run(tmp_path):
    (fixed,) = fixtures("valid-count-readback", "fixed")
    proc = run_cli("spec", target(fixed), "--protocol", "valid-count-readback",
                   "--junit-xml", str(tmp_path / "j.xml"))
    assert proc.returncode == 2
    assert "option --junit-xml: --junit-xml is not written for a protocol run" in proc.stderr


def test_protocol_and_target_mistakes_are_exit_2_naming_the_argument(tmp_path):
    (fixed,) = fixtures("valid-count-readback", "fixed")
    unknown = run_cli("spec", target(fixed), "--protocol", "no-such-protocol")
    assert unknown.returncode == 2
    assert "option --protocol: 'no-such-protocol' is neither a built-in protocol" \
        in unknown.stderr
    missing_class = run_cli("spec", f"{fixed}::NoSuchRunner", "--protocol",
                            "valid-count-readback", "--save-dir", str(tmp_path))
    assert missing_class.returncode == 2
    assert "argument TARGET:" in missing_class.stderr and "'NoSuchRunner'" in missing_class.stderr
    assert "classes there: CachedRequestState, GPUModelRunner" in missing_class.stderr


@pytest.mark.parametrize("name", ["GPUModelRunner", "GPUModelRunner.execute_model"])
def test_a_name_several_builtin_protocols_drive_asks_for_one(name, tmp_path):
    (fixed,) = fixtures("valid-count-readback", "fixed")
    proc = run_cli("spec", f"{fixed}::{name}", "--save-dir", str(tmp_path))
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert f"argument TARGET: '{fixed}::{name}' names '{name}', which several built-in " \
        "protocols drive (condense-inflight-d2h, input-prep-event, mamba-align-steps, " \
        "valid-count-readback); choose one with --protocol NAME" in proc.stderr
    pair = run_cli("diff", "legacy", f"{fixed}::{name}", "--save-dir", str(tmp_path))
    assert pair.returncode == 2 and "argument CANDIDATE: " in pair.stderr


def test_a_builtin_staging_function_given_to_a_component_protocol_says_what_it_needs():
    proc = run_cli("spec", "legacy", "--protocol", "input-prep-event")
    assert proc.returncode == 2 and "ModuleNotFoundError" not in proc.stderr
    assert "argument TARGET: " + messages.PROTOCOL_BUILTIN_TARGET[0].format(
        value="legacy", component="GPUModelRunner") in proc.stderr


def test_a_missing_function_in_a_file_of_classes_points_at_protocols():
    (fixed,) = fixtures("valid-count-readback", "fixed")
    proc = run_cli("diff", "legacy", f"{fixed}::nosuch")
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert messages.TARGET_CLASSES_THERE.format(
        classes="CachedRequestState, GPUModelRunner") in proc.stderr


def test_a_protocol_file_given_as_a_schema_says_it_is_a_protocol():
    protocol_file = os.path.join(ROOT, "tests", "targets", "protocols", "_reuse",
                                 "scratch_protocol.py")
    for argv in (("schema", "check", protocol_file),
                 ("diff", "legacy", "single-loop", "--schema", protocol_file),
                 ("diff", "legacy", "single-loop", "--schema", protocol_file + ":OTHER")):
        proc = run_cli(*argv)
        assert proc.returncode == 2 and "Traceback" not in proc.stderr
        assert "declares a protocol (PROTOCOL), not a StagingSchema" in proc.stderr
        # the fix names the protocol the file declares (not a :NAME it does not have)
        assert f"stagecheck protocol check {protocol_file}; " in proc.stderr
        check = run_cli("protocol", "check", protocol_file)
        assert check.returncode == 0, check.stdout + check.stderr


def test_protocol_check_passes_a_good_file_and_the_builtins():
    proc = run_cli("protocol", "check", EXAMPLE)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "the declaration is right" in proc.stdout and "one step: stage" in proc.stdout
    for name in BUILTIN:
        assert run_cli("protocol", "check", name).returncode == 0
    # the whole step space is shown, its parameters included
    tables = os.path.join(ROOT, "tests", "targets", "protocols", "_tables",
                          "block_table_protocol.py")
    shown = run_cli("protocol", "check", tables)
    assert shown.returncode == 0, shown.stdout + shown.stderr
    assert ("steps per sequence 1..6, batch of 1..4 request(s), drafts up to 0, dummy steps "
            "off, preemption on, prompts up to 8 token(s), temperatures 0, 0.5, 0.7, 1, "
            "block_size in 2, 4") in shown.stdout
    listed = run_cli("protocol", "list")
    assert listed.returncode == 0 and all(name in listed.stdout for name in BUILTIN)


def test_protocol_check_dry_runs_a_target_that_needs_a_shim(tmp_path):
    """An audit: the dry run's load error said 'give each name with --shim FILE.py', and
    'protocol check' refused --shim."""
    stager = (ROOT + "/tests/targets/protocols/_machinery/fixed_token_stager.py")
    source = open(stager).read().replace(
        "import torch\n", "import torch\nfrom vllm.config import tokens_per_row\n").replace(
        "n = len(token_ids)", "n = tokens_per_row(len(token_ids))")
    (tmp_path / "stager.py").write_text(source)
    (tmp_path / "shims.py").write_text("def tokens_per_row(n):\n    return n\n")
    without = run_cli("protocol", "check", EXAMPLE, "stager.py::TokenStager", cwd=tmp_path)
    assert without.returncode == 2 and "--shim" in without.stderr, without.stderr
    shimmed = run_cli("protocol", "check", EXAMPLE, "stager.py::TokenStager",
                      "--shim", "shims.py", cwd=tmp_path)
    assert shimmed.returncode == 0, shimmed.stdout + shimmed.stderr
    assert "dry run through stager.py::TokenStager" in shimmed.stdout
    assert "--protocol " + EXAMPLE + " --shim shims.py" in shimmed.stdout
    # a shim with nothing to read it (no TARGET) is refused, never silently unused
    alone = run_cli("protocol", "check", EXAMPLE, "--shim", "shims.py", cwd=tmp_path)
    assert alone.returncode == 2, alone.stdout + alone.stderr
    assert "option --shim: " + messages.PROTOCOL_CHECK_SHIM_UNUSED[0].format(
        value=str(tmp_path / "shims.py")) in alone.stderr


def test_a_method_the_candidate_renamed_is_said_of_the_candidate_not_the_protocol(tmp_path):
    """An audit: a diff whose candidate renamed the method the protocol's operation calls
    said 'its own code for operation ... raised AttributeError ..., fix the protocol's
    function there', naming neither target."""
    stager = ROOT + "/tests/targets/protocols/_machinery/fixed_token_stager.py"
    source = open(stager).read()
    renamed = source.replace("    def stage(self", "    def stage_tokens(self")
    assert renamed != source
    (tmp_path / "renamed.py").write_text(renamed)
    for sides in ((stager + "::TokenStager", "renamed.py::TokenStager"),
                  ("renamed.py::TokenStager", stager + "::TokenStager")):
        proc = run_cli("diff", *sides, "--protocol", EXAMPLE, "--examples", "5",
                       "--no-save", "-q", cwd=tmp_path)
        assert proc.returncode == 2, proc.stdout + proc.stderr
        assert ("operation 'stage' uses 'stage' of TokenStager of target "
                "renamed.py::TokenStager at " + EXAMPLE + ":22") in proc.stderr, proc.stderr
        assert messages.PROTOCOL_COMPONENT_LACKS[1].format(
            kind="TokenStager", attr="stage") in proc.stderr
        # the renamed method, as the closest name
        assert "has no attribute 'stage' (did you mean stage_tokens?)" in proc.stderr


BAD = {
    "empty_name": ("PROTOCOL = Protocol(name='', summary='s', functions=('A',), "
                   "build=lambda c: None, component='A', operations=(Operation('a', run),))",
                   messages.PROTOCOL_PROBLEM_NAME.format(value="")),
    "duplicate_operations": ("PROTOCOL = Protocol(name='p', summary='s', functions=('A',), "
                             "build=lambda c: None, component='A', "
                             "operations=(Operation('a', run), Operation('a', run)))",
                             "operations named a appear twice: give each its own name"),
    "bad_space": ("PROTOCOL = Protocol(name='p', summary='s', functions=('A',), "
                  "build=lambda c: None, component='A', operations=(Operation('a', run),), "
                  "space=StepSpace(steps=(0, 3)))",
                  "space.steps (0, 3) is not a range (low, high)"),
    "no_state": ("PROTOCOL = Protocol(name='p', summary='s', functions=('A',), "
                 "build=lambda c: None, operations=(Operation('a', run),))",
                 "neither component nor staging is set"),
    "broken_when": ("PROTOCOL = Protocol(name='p', summary='s', functions=('A',), "
                    "build=lambda c: None, component='A', "
                    "operations=(Operation('a', run, when=lambda v: v.no_such_field),))",
                    "operations[0] ('a').when raised AttributeError"),
    "not_a_protocol": ("PROTOCOL = 42", "the declaration is a int, not a Protocol"),
    "path_name": ("PROTOCOL = Protocol(name='../x', summary='s', functions=('A',), "
                  "build=lambda c: None, component='A', operations=(Operation('a', run),))",
                  "name '../x' is not a plain name: "),
    "no_functions": ("PROTOCOL = Protocol(name='p', summary='s', functions=(), "
                     "build=lambda c: None, component='A', operations=(Operation('a', run),))",
                     "functions () names nothing: give the names of the classes, methods "
                     "or functions this protocol drives"),
}


@pytest.mark.parametrize("name", sorted(BAD))
def test_protocol_check_names_the_part_the_value_and_the_fix(name, tmp_path):
    declaration, said = BAD[name]
    path = tmp_path / f"{name}.py"
    path.write_text("from stagecheck.spec.protocol import Operation, Protocol, StepSpace\n\n"
                    "def run(ctx):\n    return None\n\n" + declaration + "\n")
    proc = run_cli("protocol", "check", str(path))
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert said in proc.stderr, proc.stderr
    assert "Traceback" not in proc.stderr and proc.stdout == ""


def test_a_dry_run_mistake_names_the_protocol_once_and_guesses_a_common_dtype(tmp_path):
    """An audit: the problem line said "protocol 'X' (file): protocol 'X': ctx.tensor got
    dtype 'int23' (did you mean int3?)": the name twice, and torch's sub-byte int3 guessed
    before int32."""
    source = open(EXAMPLE).read().replace(
        "    return ctx.component(4 * ctx.sequence.capacity, ctx.device, pin_memory=True)",
        "    ctx.tensor([0], 'int23')\n"
        "    return ctx.component(4 * ctx.sequence.capacity, ctx.device, pin_memory=True)")
    (tmp_path / "typo.py").write_text(source)
    stager = ROOT + "/tests/targets/protocols/_machinery/fixed_token_stager.py::TokenStager"
    proc = run_cli("protocol", "check", "typo.py", stager, cwd=tmp_path)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    line = proc.stderr.splitlines()[0]
    assert "ctx.tensor got dtype 'int23' (did you mean int32?)" in line, line
    assert line.count("protocol 'token-stager'") == 1, line


def test_protocol_check_of_files_that_cannot_be_loaded_is_exit_2(tmp_path):
    raising = tmp_path / "raising.py"
    raising.write_text("raise ValueError('broken on purpose')\n")
    none = tmp_path / "none.py"
    none.write_text("X = 1\n")
    for path, said in ((raising, "raised ValueError: broken on purpose"),
                       (none, "has no Protocol named 'PROTOCOL'"),
                       (tmp_path / "missing.py", "does not exist")):
        proc = run_cli("protocol", "check", str(path))
        assert proc.returncode == 2, proc.stderr
        assert "argument PROTOCOL: " in proc.stderr and said in proc.stderr


def test_a_saved_protocol_finding_replays(tmp_path):
    protocol = "valid-count-readback"
    buggy = fixtures(protocol, "buggy")[0]
    (fixed,) = fixtures(protocol, "fixed")
    found = tmp_path / "found"
    proc = run_cli("spec", target(buggy), "--protocol", protocol, "--save-dir", str(found),
                   "-q", cwd=str(tmp_path))
    assert proc.returncode == 1, proc.stdout + proc.stderr
    saved = sorted(found.glob("*.json"))
    assert saved and json.loads(saved[0].read_text())["stagecheck_protocol_replay"] == 1
    # the printed line names the target (outside tmp_path's trust boundary) and runs as is
    line = next(x for x in proc.stdout.splitlines() if "replay: stagecheck replay" in x)
    assert "--candidate" in line
    again = run_cli("replay", str(saved[0]), "--candidate", target(buggy), cwd=str(tmp_path))
    assert again.returncode == 1, again.stdout + again.stderr
    still = messages.REPLAY_SPEC_STILL.split("{count}")[0].format(
        verdict=messages.PROTOCOL_SPEC_VERDICT["DIFFERENT"], what="step sequence",
        against="the protocol")          # a finding of spec: spec's words, not a pair's
    assert still in again.stdout and "DIFFERENT" not in again.stdout
    fixed_run = run_cli("replay", str(saved[0]), "--candidate", target(fixed),
                        cwd=str(tmp_path))
    assert fixed_run.returncode == 0, fixed_run.stdout + fixed_run.stderr
    assert messages.REPLAY_SPEC_NOW.format(
        verdict=messages.PROTOCOL_SPEC_VERDICT["EQUIVALENT"], what="step sequence",
        against="the protocol") in fixed_run.stdout
    assert "EQUIVALENT" not in fixed_run.stdout
    # a replay file does not run a target it names outside the trust boundary by itself
    untrusted = run_cli("replay", str(saved[0]), cwd=str(tmp_path))
    assert untrusted.returncode == 2 and "name it yourself" in untrusted.stderr


def test_the_fixture_asserts_a_protocol_with_a_reproduce_line(pytester):
    protocol = "input-prep-event"
    (fixed,) = fixtures(protocol, "fixed")
    buggy = [f for f in fixtures(protocol, "buggy") if "narrow" in f.name][0]
    pytester.makepyfile(test_user=textwrap.dedent(f"""
        def test_fixed_holds(stagecheck):
            result = stagecheck.assert_protocol({target(fixed)!r}, {protocol!r},
                                                examples=30, seed=0)
            assert result.sequences_run == 30 and result.errors == []

        def test_method_name_chooses_the_protocol(stagecheck):
            stagecheck.assert_protocol({str(fixed) + '::GPUModelRunner._dummy_run'!r},
                                       examples=10, seed=0)

        def test_buggy_fails(stagecheck):
            stagecheck.assert_protocol({target(buggy)!r}, {protocol!r}, examples=100, seed=0)

        def test_bad_option(stagecheck):
            stagecheck.assert_protocol({target(fixed)!r}, {protocol!r}, timeout=-1)
    """))
    result = pytester.runpytest_subprocess(*_autoloaded("hypothesispytest"), *_plugin_args(),
                                           "-p", "no:cacheprovider", timeout=300)
    result.assert_outcomes(passed=2, failed=2)
    out = result.stdout.str()
    buggy_part = out.split("_ test_buggy_fails _")[1].split("_ test_bad_option _")[0]
    assert "verdict: VIOLATES THE PROTOCOL" in buggy_part and "step  operation" in buggy_part
    assert (f"reproduce: stagecheck spec {target(buggy)} --protocol {protocol} "
            "--examples 100 --seed 0") in buggy_part.replace("\n", "")
    assert "stagecheck: keyword timeout: -1 is not a positive number" in out
    assert "Traceback" not in out
    assert str(PROTOCOLS) in buggy_part
    # its replay line runs as printed from the test's folder: it names the target the
    # replay file cannot run by itself (outside that folder)
    replay = next(x for x in buggy_part.splitlines() if "replay: stagecheck replay" in x)
    assert f"--candidate {target(buggy)}" in replay, replay


def test_no_save_writes_nothing_and_json_dash_puts_the_document_on_stdout(tmp_path):
    buggy = fixtures("condense-inflight-d2h", "buggy")[0]
    proc = run_cli("spec", target(buggy), "--protocol", "condense-inflight-d2h", "--no-save",
                   "--json", "-", "-q", cwd=str(tmp_path))
    assert proc.returncode == 1, proc.stdout + proc.stderr
    document = json.loads(proc.stdout)              # the document alone on stdout
    assert document["verdict"] == "different"
    assert all(f["replay"] is None for f in document["findings"])
    assert "verdict: VIOLATES THE PROTOCOL" in proc.stderr     # the report on stderr
    assert not (tmp_path / ".stagecheck").exists()


def test_a_protocol_that_cannot_build_the_component_is_exit_2_never_a_finding(tmp_path):
    """The new-user audit's case: the input-preparation runner driven by the Mamba protocol,
    whose build passes arguments that runner's constructor does not take. The component's
    code never ran, so nothing is found against it and nothing is saved."""
    path = target(fixtures("input-prep-event", "fixed")[0])
    proc = run_cli("spec", path, "--protocol", "mamba-align-steps", "--examples", "5",
                   "--save-dir", str(tmp_path / "saved"))
    problem = messages.PROTOCOL_BUILD_MISMATCH[0].split(":")[0].format(
        value="mamba-align-steps", component="GPUModelRunner")
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert problem in proc.stderr and "got multiple values for argument" in proc.stderr
    assert "Traceback" not in proc.stderr and "VIOLATES" not in proc.stdout
    assert not (tmp_path / "saved").exists() or not any((tmp_path / "saved").rglob("*.json"))


def test_max_capacity_on_a_protocol_with_its_own_step_space_is_exit_2_never_ignored():
    path = target(fixtures("input-prep-event", "fixed")[0])
    proc = run_cli("spec", path, "--protocol", "input-prep-event", "--max-capacity", "4000",
                   "--no-save")
    problem = messages.PROTOCOL_CAPACITY_UNUSED[0].split(":")[0].format(
        value=4000, protocol="input-prep-event")
    assert proc.returncode == 2 and problem in proc.stderr, proc.stderr
    assert "option --max-capacity" in proc.stderr and "Traceback" not in proc.stderr


@pytest.mark.parametrize("key,flag", [("max-drafts", "--max-drafts"),
                                      ("max-capacity", "--max-capacity")])
def test_a_project_setting_of_one_call_runs_does_not_break_a_protocol_run(tmp_path, key, flag):
    """``[tool.stagecheck] max-drafts`` (or ``max-capacity``, which README's example sets)
    is the project's setting for one-call runs: a protocol run says it does not apply and
    goes on (was, for max-capacity: exit 2 naming an option nobody typed); the same option
    typed is exit 2."""
    (tmp_path / "pyproject.toml").write_text(f"[tool.stagecheck]\n{key} = 16\n")
    path = os.path.join(ROOT, target(fixtures("input-prep-event", "fixed")[0]))
    proc = run_cli("spec", path, "--protocol", "input-prep-event", "--examples", "5",
                   "--no-save", "--json", "report.json", cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert messages.PROTOCOL_CONFIG_UNUSED.format(key=key,
                                                  protocol="input-prep-event") in proc.stderr
    settings = json.loads((tmp_path / "report.json").read_text())["settings"]
    assert settings["max_capacity"] == 8          # the setting not used, nor echoed as used
    typed = run_cli("spec", path, "--protocol", "input-prep-event", "--examples", "5",
                    "--no-save", flag, "5", cwd=tmp_path)
    assert typed.returncode == 2 and f"option {flag}" in typed.stderr


def test_a_protocol_run_keeps_its_findings_as_every_run_does(tmp_path):
    """A manifest of what the run saved, and a .stagecheck folder git never shows."""
    subprocess.run(["git", "init", "-q"], cwd=tmp_path, check=True)
    path = os.path.join(ROOT, target(fixtures("input-prep-event", "buggy")[0]))
    proc = run_cli("spec", path, "--protocol", "input-prep-event", "--examples", "20",
                   cwd=tmp_path)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    (manifest,) = (tmp_path / ".stagecheck" / "findings" / "runs").glob("*.json")
    listed = json.loads(manifest.read_text())
    files = [f["file"] for f in listed["findings"] if f["file"]]
    assert files and all(os.path.exists(f) for f in files)
    assert listed["verdict"] == "different" and listed["examples"]["step_sequences"] >= 1
    status = subprocess.run(["git", "status", "--porcelain"], cwd=tmp_path,
                            capture_output=True, text=True, check=True).stdout
    assert status == ""
    # after a blank line: the pytest test above it pastes without it
    assert "\n\n" + messages.MANIFEST_LINE.split("{")[0] in proc.stdout


def test_protocol_check_shows_what_the_file_named_escaped(tmp_path):
    # an operation named with a newline and a terminal escape once reached the terminal raw
    source = open(EXAMPLE, encoding="utf-8").read().replace(
        'Operation("stage", stage,', 'Operation("sta\\nge\\x1b[31m", stage,')
    assert source != open(EXAMPLE, encoding="utf-8").read()
    path = tmp_path / "named.py"
    path.write_text(source)
    proc = run_cli("protocol", "check", str(path), cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    (line,) = [ln for ln in proc.stdout.splitlines() if ln.startswith("  one step: ")]
    assert line == "  one step: sta\\nge\\x1b[31m" and "\x1b" not in proc.stdout


@pytest.mark.parametrize("value,extra,said", [
    ("", (), "option --protocol: '' is empty; give a built-in protocol"),
    (f"{EXAMPLE}:", (), "ends with ':' and names no protocol after it"),
    ("single-call:", (), "'single-call:' names no schema after 'single-call:'"),
    ("input-prep-event", ("--sequences", "4"), "--sequences 4 (did you mean --examples?)"),
])
def test_a_protocol_spec_with_nothing_where_a_name_goes_is_exit_2_saying_so(value, extra, said,
                                                                             tmp_path):
    # an audit's 'FILE:' ran the file's PROTOCOL; '' was 'not a text'; 'single-call:' named
    # '' alone; --sequences (ProtocolConfig's and the fixture's word) had no hint
    proc = run_cli("spec", f"{ROOT}/tests/targets/protocols/_machinery/fixed_token_stager.py"
                   "::TokenStager", "--protocol", value, *extra, cwd=tmp_path)
    assert proc.returncode == 2 and said in proc.stderr, proc.stderr
    assert "Traceback" not in proc.stderr


def test_the_fixtures_sequences_keyword_points_to_examples():
    from stagecheck.oracles.fixture_protocol import protocol_keyword_problems
    (said,) = protocol_keyword_problems({"sequences": 5}, "input-prep-event")
    assert "unknown keyword sequences= (did you mean examples=?)" in said
