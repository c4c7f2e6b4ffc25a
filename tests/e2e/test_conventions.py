"""What users of Python test tools expect (issue 13): --version, --device choices, help
on every option, exit codes and an example in each --help, fast usage errors,
[tool.stagecheck] in pyproject.toml, progress where it runs, --quiet, mutants --jobs,
and triton as an extra."""

from __future__ import annotations

import argparse
import io
import os
import re
import shlex
import subprocess
import sys
import textwrap
import time

import pytest

import stagecheck
from stagecheck.oracles import cli, messages
from stagecheck.oracles.cli import build_parser, main
from stagecheck.oracles.config import KEYS, find_pyproject, load_config
from stagecheck.oracles.errors import ConfigError
from stagecheck.oracles.options import DEVICES, cpu_count
from stagecheck.oracles.progress import Progress, format_duration, interval

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
HEAVY = ("torch", "numpy", "hypothesis", "triton", "crosshair")
PROGRESS_LINE = re.compile(r"^stagecheck diff: (finished: )?(edge cases )?\d+/\d+ examples, "
                           r"\d+ findings?, .*elapsed", re.M)


def run_cli(*args, cwd=ROOT, env=None, timeout=600):
    return subprocess.run([sys.executable, "-m", "stagecheck", *args], cwd=cwd,
                          capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, **(env or {})})


def all_parsers() -> dict[str, argparse.ArgumentParser]:
    """Every parser of the command line by its prog (``stagecheck schema check``...)."""
    out, todo = {}, [build_parser()]
    while todo:
        parser = todo.pop()
        out[parser.prog] = parser
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                todo.extend(action.choices.values())
    return out


def commands() -> dict[str, argparse.ArgumentParser]:
    top = build_parser()
    (sub,) = [a for a in top._actions if isinstance(a, argparse._SubParsersAction)]
    return dict(sub.choices)


# ------------------------------------------------------------------------------ --version

def test_version_prints_the_package_version(capsys):
    assert main(["--version"]) == 0
    assert capsys.readouterr().out.strip() == f"stagecheck {stagecheck.__version__}"
    proc = run_cli("--version")
    assert proc.returncode == 0 and proc.stdout.strip() == f"stagecheck {stagecheck.__version__}"


@pytest.mark.parametrize("argv", [["--help"], ["diff", "--help"], ["schema", "check", "--help"],
                                  ["--version"]])
@pytest.mark.parametrize("redirect", [">&-", ">/dev/full"])
def test_help_or_version_that_cannot_be_written_is_exit_2(argv, redirect):
    # --help was exit 0 with its text lost (an audit's finding); --version was exit 2 already
    if redirect == ">/dev/full" and not os.path.exists("/dev/full"):
        pytest.skip("no /dev/full here")
    command = f"{shlex.quote(sys.executable)} -m stagecheck {shlex.join(argv)} {redirect}"
    proc = subprocess.run(command, shell=True, cwd=ROOT, capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 2, proc.stderr
    assert messages.STDOUT_LOST in proc.stderr and "Traceback" not in proc.stderr


def test_help_still_answers_exit_0_in_process(capsys):
    assert main(["diff", "--help"]) == 0
    assert capsys.readouterr().out.startswith("usage: stagecheck diff")


# ------------------------------------------------------------------------------ options

def test_every_device_option_has_the_choices_cpu_and_cuda():
    seen = []
    for name, parser in commands().items():
        for action in parser._actions:
            if "--device" in action.option_strings:
                assert tuple(action.choices) == DEVICES, name
                assert "{cpu,cuda}" in parser.format_help(), name
                seen.append(name)
    assert sorted(seen) == ["bench", "diff", "kernel", "replay", "spec"]


@pytest.mark.parametrize("argv", [["kernel", "--device", "gpu"], ["replay", "x.json", "--device",
                                                                    "tpu"]])
def test_a_wrong_device_names_the_choices(argv, capsys):
    assert main(argv) == 2
    problem, fix = messages.BAD_DEVICE
    assert f"option --device: {problem.format(value=argv[-1])}; {fix}" in capsys.readouterr().err


def test_every_option_and_positional_has_help_text():
    missing = []
    for prog, parser in all_parsers().items():
        for action in parser._actions:
            if isinstance(action, (argparse._HelpAction, argparse._SubParsersAction)):
                continue
            if not action.help or action.help == argparse.SUPPRESS:
                missing.append(f"{prog} {action.option_strings or action.dest}")
    assert not missing, missing


@pytest.mark.parametrize("name", sorted(commands()))
def test_each_command_help_shows_exit_codes_and_an_example_that_parses(name):
    text = commands()[name].format_help()
    flat = " ".join(text.split())
    assert "exit codes: 0 " in flat and "; 2 usage or load error" in flat
    assert "130/143 interrupted" in flat
    example = text.split("example:\n", 1)[1].strip().splitlines()[0]
    argv = shlex.split(example)
    assert argv[:2] == ["stagecheck", name]
    build_parser().parse_args(argv[1:])    # a usage error would raise


def subcommands() -> dict[str, argparse.ArgumentParser]:
    """``schema list``, ``protocol check``...: the subcommands of the commands that have."""
    out = {}
    for name, parser in commands().items():
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                out.update({f"{name} {sub}": p for sub, p in action.choices.items()})
    return out


@pytest.mark.parametrize("name", sorted(subcommands()))
def test_each_subcommand_help_shows_exit_codes_and_an_example_that_parses(name):
    text = subcommands()[name].format_help()
    flat = " ".join(text.split())
    assert "exit codes: 0 " in flat and "; 2 usage or load error" in flat
    example = text.split("example:\n", 1)[1].strip().splitlines()[0]
    argv = shlex.split(example)
    assert argv[:3] == ["stagecheck", *name.split()]
    build_parser().parse_args(argv[1:])


def test_help_of_the_top_level_lists_the_commands_and_exits_0():
    proc = run_cli("--help")
    assert proc.returncode == 0
    assert "exit codes:" in proc.stdout and "[tool.stagecheck]" in proc.stdout


# ------------------------------------------------------------------------------ fast usage errors

BAD_ARGS = [["diff", "legacy", "single-loop", "--exampls", "3"], ["frobnicate"],
            ["diff", "legacy", "single-loop", "--kernel", "sometimes"],
            ["diff", "legacy", "single-loop", "--examples", "many"],
            ["mutants", "legacy", "--jobs", "0"]]


@pytest.mark.parametrize("argv", BAD_ARGS, ids=" ".join)
def test_a_usage_error_imports_no_heavy_library(argv):
    code = ("import sys; from stagecheck.oracles.cli import main; "
            f"code = main({argv!r}); "
            f"print(code, sorted(m for m in {HEAVY!r} if m in sys.modules))")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          cwd=ROOT, timeout=60)
    assert proc.stdout.strip() == "2 []", proc.stdout + proc.stderr
    assert proc.stderr.startswith("stagecheck: error: ")


def test_a_typo_answers_in_well_under_a_second(tmp_path):
    """A misspelt option is answered without loading the analysis: the answer costs well
    under a second of CPU time (the child's, as the kernel counts it, so busy CPUs do not
    decide; torch alone takes seconds of CPU to import) and imports no heavy library
    (``-X importtime`` lists every module the command imported)."""
    with open(tmp_path / "stderr", "w+") as err:
        proc = subprocess.Popen([sys.executable, "-X", "importtime", "-m", "stagecheck", "diff",
                                 "legacy", "single-loop", "--exampls", "3"], cwd=ROOT,
                                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=err)
        _, status, usage = os.wait4(proc.pid, 0)      # this child's own CPU time
        proc.returncode = os.waitstatus_to_exitcode(status)
        err.seek(0)
        stderr = err.read()
    assert proc.returncode == 2 and "unrecognized arguments: --exampls" in stderr, stderr
    imported = {line.split("|")[-1].strip().split(".")[0]
                for line in stderr.splitlines() if line.startswith("import time:")}
    assert "stagecheck" in imported and not imported & set(HEAVY), sorted(imported)
    cpu = usage.ru_utime + usage.ru_stime
    assert 0 < cpu < 1.0, cpu


# ------------------------------------------------------------------------------ [tool.stagecheck]

def write_pyproject(folder, body: str) -> str:
    path = folder / "pyproject.toml"
    path.write_text("[project]\nname = 'x'\n\n" + textwrap.dedent(body))
    return str(path)


def parsed(argv):
    return cli._parse(build_parser(), argv)


def test_config_sets_defaults_and_the_command_line_wins(tmp_path, monkeypatch, capsys):
    write_pyproject(tmp_path, """
        [tool.stagecheck]
        examples = 40
        seed = 3
        max-capacity = 5
        save-dir = "found"
        strict = true
        shims = ["helpers.py"]
        jobs = 1
        """)
    work = tmp_path / "src" / "deep"
    work.mkdir(parents=True)
    monkeypatch.chdir(work)        # found walking up, as pytest finds its rootdir file
    args = parsed(["diff", "legacy", "single-loop"])
    assert (args.examples, args.seed, args.max_capacity, args.strict) == (40, 3, 5, True)
    assert args.save_dir == str(tmp_path / "found")            # from the file's folder
    assert args.shim == [str(tmp_path / "helpers.py")]
    assert messages.CONFIG_USED.split("{")[0] in capsys.readouterr().err
    args = parsed(["diff", "legacy", "single-loop", "--examples", "7", "--shim", "mine.py",
                   "--save-dir", "here"])
    assert (args.examples, args.shim, args.save_dir) == ("7", ["mine.py"], "here")
    assert parsed(["mutants", "legacy"]).jobs == 1
    assert parsed(["kernel"]).examples == "100"     # kernel keeps its own default (README)
    assert parsed(["kernel"]).seed == 3             # a key sets the commands its option names
    assert parsed(["symbolic", "legacy", "single-loop"]).max_capacity == "4"   # ...no others


def test_config_runs_end_to_end(tmp_path):
    write_pyproject(tmp_path, """
        [tool.stagecheck]
        examples = 30
        save-dir = "found"
        """)
    proc = run_cli("diff", "legacy", "single-loop", "--quiet", "--save-infos", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "settings from [tool.stagecheck]" not in proc.stderr    # --quiet
    assert list((tmp_path / "found").glob("*.json"))
    proc = run_cli("diff", "legacy", "single-loop", cwd=tmp_path)
    assert "settings from [tool.stagecheck] in pyproject.toml: examples=30" in proc.stderr
    # a setting the command line overrides is not said to come from the file
    proc = run_cli("diff", "legacy", "single-loop", "--examples", "20", cwd=tmp_path)
    assert "examples=30" not in proc.stderr and "save-dir=" in proc.stderr
    assert "tried 20 in-contract" in proc.stdout


def test_an_unknown_key_is_exit_2_naming_the_key_the_file_and_the_valid_keys(tmp_path):
    path = write_pyproject(tmp_path, """
        [tool.stagecheck]
        exampels = 40
        """)
    proc = run_cli("diff", "legacy", "single-loop", cwd=tmp_path)
    assert proc.returncode == 2
    problem, fix = messages.CONFIG_UNKNOWN_KEY
    assert proc.stderr.strip() == "stagecheck: error: " + problem.format(
        value="exampels", path=path, hint=messages.DID_YOU_MEAN.format(option="examples")
    ) + "; " + fix.format(known=", ".join(sorted(KEYS)))
    assert "max-capacity" in proc.stderr and "Traceback" not in proc.stderr


@pytest.mark.parametrize("body,needle", [
    ("examples = 0", "is not a whole number >= 1"),
    ("examples = 'many'", "'examples' is a TOML string ('many'), not a whole number"),
    # text the command line would read as a number is another TOML type here
    ("examples = '50'", "is a TOML string ('50'), not a whole number; write it as "
                        "examples = 50"),
    ("examples = 50.0", "is a TOML float (50.0), not a whole number; write it as "
                        "examples = 50"),
    ("timeout = '2.5'", "not a number of seconds; write it as timeout = 2.5"),
    ("shims = 'x.py'", "is a TOML string ('x.py'), not a list of strings; write it as "
                       "shims = [\"...\"]"),
    ("device = 'tpu'", "is not a device"),
    ("kernel = 'sometimes'", "is not one of auto, always, off"),
    ("timeout = -1", "positive number of seconds"),
    ("strict = 'yes'", "is not true or false"),
    ("shims = [1]", "is not a list of paths"),
    ("jobs = 1000", "larger than 64"),
])
def test_a_bad_value_is_refused_as_the_option_refuses_it(tmp_path, monkeypatch, body, needle):
    path = write_pyproject(tmp_path, "[tool.stagecheck]\n" + body + "\n")
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ConfigError) as caught:
        load_config()
    key = body.split(" =")[0]
    assert str(caught.value).startswith(f"[tool.stagecheck] {key} in {path}: ")
    assert needle in str(caught.value)


def test_one_key_set_twice_in_two_spellings_is_refused(tmp_path, monkeypatch):
    # was: max_capacity = 8 and max-capacity = 16 ran with 16, silently
    path = write_pyproject(tmp_path, "[tool.stagecheck]\nmax_capacity = 8\n"
                                     "max-capacity = 16\n")
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ConfigError) as caught:
        load_config()
    assert str(caught.value) == messages.CONFIG_TWICE[0].format(
        value="max-capacity", path=path, first="max_capacity", second="max-capacity") + \
        "; " + messages.CONFIG_TWICE[1]


def test_a_bad_config_is_exit_2_but_help_and_version_still_answer(tmp_path, capsys,
                                                                 monkeypatch):
    write_pyproject(tmp_path, "[tool.stagecheck]\nseed = 'x'\n")
    monkeypatch.chdir(tmp_path)
    assert main(["spec", "legacy"]) == 2
    assert "[tool.stagecheck] seed in" in capsys.readouterr().err
    assert main(["--version"]) == 0


def test_the_search_stops_at_the_first_pyproject(tmp_path, monkeypatch):
    write_pyproject(tmp_path, "[tool.stagecheck]\nexamples = 40\n")
    inner = tmp_path / "inner"
    inner.mkdir()
    write_pyproject(inner, "")           # no table: no settings, the outer file is not read
    monkeypatch.chdir(inner)
    assert find_pyproject() == str(inner / "pyproject.toml")
    assert load_config().values == {}
    assert parsed(["diff", "legacy", "single-loop"]).examples == "300"


def test_a_toml_error_is_exit_2_naming_the_file(tmp_path, monkeypatch, capsys):
    path = write_pyproject(tmp_path, "[tool.stagecheck\n")
    monkeypatch.chdir(tmp_path)
    assert main(["diff", "legacy", "single-loop"]) == 2
    assert f"cannot read {path!r}" in capsys.readouterr().err


# ------------------------------------------------------------------------------ progress

def test_progress_lines_when_stderr_is_not_a_terminal(tmp_path):
    proc = run_cli("diff", "legacy", "single-loop", "--examples", "3000", "--save-dir",
                   str(tmp_path), env={"STAGECHECK_PROGRESS_INTERVAL": "0.05"})
    assert proc.returncode == 0, proc.stderr
    lines = PROGRESS_LINE.findall(proc.stderr)
    assert len(lines) >= 3, proc.stderr
    assert re.search(r"examples/s, [\d.]+ s elapsed, ~[\d.]+ s left", proc.stderr), proc.stderr
    assert "\r" not in proc.stderr and "\x1b" not in proc.stderr    # plain lines in a log
    assert "stagecheck diff: finished: " in proc.stderr
    assert "stagecheck diff:" not in proc.stdout


def test_quiet_turns_progress_off(tmp_path):
    proc = run_cli("diff", "legacy", "single-loop", "--examples", "3000", "--quiet",
                   "--save-dir", str(tmp_path), env={"STAGECHECK_PROGRESS_INTERVAL": "0.05"})
    assert proc.returncode == 0
    assert not PROGRESS_LINE.search(proc.stderr), proc.stderr


FAST_LINES = {"STAGECHECK_PROGRESS_INTERVAL": "0.05"}


def test_mutants_progress_rows_and_lines_and_quiet():
    argv = ("mutants", "single-loop", "--oracles", "spec", "--budget", "20", "--operators",
            "full_req_ids,loop_bound_off_by_one")
    proc = run_cli(*argv, env=FAST_LINES)
    assert proc.returncode == 0, proc.stderr
    assert re.search(r"^\[1/3\] m\d+ full_req_ids ", proc.stderr, re.M), proc.stderr
    assert re.search(r"^stagecheck mutants: (finished: )?\d/3 mutants, \d killed, 0 equivalent, "
                     r"0 survived, ", proc.stderr, re.M), proc.stderr
    quiet = run_cli(*argv, "--quiet", env=FAST_LINES)
    assert quiet.returncode == 0 and quiet.stderr == "", quiet.stderr


def test_symbolic_progress_shows_paths_and_elapsed_while_it_explores():
    proc = run_cli("symbolic", "legacy", "single-loop", "--max-paths", "8", env=FAST_LINES)
    assert proc.returncode in (0, 2), proc.stderr          # 2: undecided (numpy)
    assert re.search(r"^stagecheck symbolic: exploring \d/8 paths, ", proc.stderr, re.M), \
        proc.stderr
    assert re.search(r"^stagecheck symbolic: finished: (\d+)/\1 paths, \1 judged", proc.stderr,
                     re.M), proc.stderr


def test_kernel_progress_counts_scenarios():
    proc = run_cli("kernel", "--examples", "6", env=FAST_LINES)
    assert proc.returncode == 0, proc.stderr
    assert re.search(r"^stagecheck kernel: (finished: )?\d/6 scenarios, ", proc.stderr, re.M), \
        proc.stderr
    quiet = run_cli("kernel", "--examples", "6", "--quiet", env=FAST_LINES)
    assert "stagecheck kernel:" not in quiet.stderr


def test_a_short_run_prints_no_progress_line_at_the_default_interval(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "STAGECHECK_PROGRESS_INTERVAL"}
    proc = subprocess.run([sys.executable, "-m", "stagecheck", "spec", "single-loop",
                           "--examples", "20", "--save-dir", str(tmp_path)], cwd=ROOT,
                          capture_output=True, text=True, timeout=600, env=env)
    assert proc.returncode == 0 and "stagecheck spec:" not in proc.stderr


class FakeClock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_plain_progress_lines_every_interval_with_rate_findings_and_eta():
    out, clock = io.StringIO(), FakeClock()
    progress = Progress("diff", "examples", 5200, counters=("findings",), stream=out,
                        tty=False, every=5.0, clock=clock)
    clock.now += 5.0
    progress.update(850, findings=1)
    assert out.getvalue() == ""                  # the first line after two intervals
    clock.now += 5.0
    progress.update(2400, findings=2)
    assert out.getvalue() == ("stagecheck diff: 2400/5200 examples, 2 findings, 240 examples/s, "
                              "10.0 s elapsed, ~11.7 s left\n")
    clock.now += 4.0
    progress.update(3300)
    assert out.getvalue().count("\n") == 1        # then one every interval
    clock.now += 1.0
    progress.update(3600)
    assert out.getvalue().count("\n") == 2
    progress.close()
    assert out.getvalue().splitlines()[-1].startswith("stagecheck diff: finished: 3600/5200")


def test_after_a_signal_progress_writes_nothing_more():
    out, clock, signalled = io.StringIO(), FakeClock(), []
    progress = Progress("diff", "examples", 100, stream=out, tty=False, every=1.0, clock=clock,
                        stopped=lambda: bool(signalled))
    clock.now += 2.0
    progress.update(10)
    assert out.getvalue().count("\n") == 1
    signalled.append("SIGINT")
    clock.now += 5.0
    progress.update(20)
    progress.close()                              # no "finished" line either
    assert out.getvalue().count("\n") == 1


def test_the_terminal_line_is_a_bar_redrawn_in_place_and_erased_at_the_end():
    out, clock = io.StringIO(), FakeClock()
    progress = Progress("mutants", "mutants", 10, counters=("killed",), stream=out, tty=True,
                        clock=clock)
    clock.now += 30
    progress.update(5, killed=4)
    text = out.getvalue()
    assert text.startswith("\r\x1b[K") and "\n" not in text
    assert "[##########----------] 5/10 mutants · 4 killed" in text and "~30.0 s left" in text
    progress.print_above("[6/10] M6 ...")
    assert out.getvalue().endswith("\r\x1b[K[6/10] M6 ...\n")
    progress.close()
    assert not progress.drawn


def test_the_ticker_keeps_lines_coming_while_nothing_advances():
    out = io.StringIO()
    with Progress("symbolic", "paths", stream=out, tty=False, every=0.05) as progress:
        progress.update(0, phase="exploring")
        capped = time.monotonic() + 120                 # a cap against a hang only
        while len(out.getvalue().splitlines()) < 3 and time.monotonic() < capped:
            time.sleep(0.01)                            # the event (three lines), not a time
    *lines, last = out.getvalue().splitlines()
    assert len(lines) >= 3 and all(line.startswith("stagecheck symbolic: exploring 0 paths")
                                   for line in lines)
    assert last.startswith("stagecheck symbolic: finished: exploring 0 paths")


def test_interval_comes_from_the_environment():
    assert interval({}) == 5.0
    assert interval({"STAGECHECK_PROGRESS_INTERVAL": "0.5"}) == 0.5
    assert interval({"STAGECHECK_PROGRESS_INTERVAL": "soon"}) == 5.0
    assert interval({"STAGECHECK_PROGRESS_INTERVAL": "-1"}) == 5.0
    assert [format_duration(s) for s in (4.66, 125, 3720)] == ["4.7 s", "2 min 05 s",
                                                               "1 h 02 min"]


# ------------------------------------------------------------------------------ mutants --jobs

def test_mutants_jobs_defaults_to_the_cpus_this_process_may_use():
    expected = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") \
        else os.cpu_count()
    assert cpu_count() == min(expected, 64)
    assert build_parser().parse_args(["mutants", "legacy"]).jobs == str(cpu_count())
    assert f"here {cpu_count()}" in commands()["mutants"].format_help()


def test_mutants_jobs_default_follows_the_affinity(monkeypatch):
    if not hasattr(os, "sched_getaffinity") or hasattr(os, "process_cpu_count"):
        pytest.skip("the affinity is read through os.sched_getaffinity before Python 3.13")
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1, 2})
    assert cpu_count() == 3


# ------------------------------------------------------------------------------ triton

@pytest.fixture
def no_triton(tmp_path):
    """An environment where ``import triton`` fails, in this process's children and
    theirs (the worker processes), as on a machine without the kernel extra."""
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text("import sys\nsys.modules['triton'] = None\n")
    path = os.pathsep.join(p for p in (str(site), os.environ.get("PYTHONPATH")) if p)
    return {"PYTHONPATH": path}


def test_kernel_without_triton_is_exit_2_naming_the_extra(no_triton):
    proc = run_cli("kernel", "--examples", "2", env=no_triton)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert messages.KERNEL_EXTRA in proc.stderr and "Traceback" not in proc.stderr
    assert proc.stderr.startswith("stagecheck: error: stagecheck kernel")


def test_the_triton_backend_without_triton_is_exit_2_naming_the_extra(no_triton, tmp_path):
    proc = run_cli("diff", "legacy", "single-loop", "--kernel-backend", "triton",
                   "--save-dir", str(tmp_path), env=no_triton)
    assert proc.returncode == 2
    assert messages.KERNEL_EXTRA in proc.stderr and "--kernel-backend reference" in proc.stderr


def test_the_main_job_runs_without_triton(no_triton, tmp_path):
    probe = run_cli("--version", env=no_triton)
    assert probe.returncode == 0
    check = subprocess.run([sys.executable, "-c", "import triton"], capture_output=True,
                           env={**os.environ, **no_triton})
    assert check.returncode != 0                          # the simulation holds
    proc = run_cli("diff", "legacy", "single-loop", "--kernel", "always", "--examples", "100",
                   "--save-dir", str(tmp_path), env=no_triton)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "verdict: EQUIVALENT" in proc.stdout
    proc = run_cli("diff", "legacy", "tests/targets/buggy_swapped_views.py::"
                   "stage_postprocess_inputs_to_gpu", "--examples", "100", "--save-dir",
                   str(tmp_path), env=no_triton)
    assert proc.returncode == 1, proc.stdout + proc.stderr   # kernel impact: reference backend


def test_kernel_auto_on_cuda_falls_back_to_the_reference_backend(monkeypatch, capsys):
    from stagecheck.oracles.commands import campaign
    monkeypatch.setattr(campaign, "triton_available", lambda: False)
    values = dict(kernel="auto", kernel_backend=None, device="cuda", quiet=False)
    assert campaign.kernel_backend(values) == "reference"
    assert capsys.readouterr().err.strip() == messages.TRITON_FALLBACK
    values = dict(kernel="auto", kernel_backend=None, device="cpu", quiet=False)
    assert campaign.kernel_backend(values) is None      # cpu: the reference backend already
    monkeypatch.setattr(campaign, "triton_available", lambda: True)
    values = dict(kernel="auto", kernel_backend=None, device="cuda", quiet=False)
    assert campaign.kernel_backend(values) is None      # triton there: the default stands


def test_triton_is_an_extra_and_icontract_is_gone():
    import tomllib
    with open(os.path.join(ROOT, "pyproject.toml"), "rb") as handle:
        project = tomllib.load(handle)["project"]
    names = [re.split(r"[<>=;\[ ]", d)[0] for d in project["dependencies"]]
    assert "triton" not in names and "icontract" not in names
    assert any(d.startswith("triton") for d in project["optional-dependencies"]["kernel"])
    assert "stagecheck[kernel]" in project["optional-dependencies"]["test"]
    assert "tomli>=2.0; python_version < '3.11'" in project["dependencies"]


def test_the_schema_help_example_runs_outside_the_repository(tmp_path):
    # issue 23, item 15: an installed package has no tests/ folder to name
    text = commands()["schema"].format_help()
    example = text.split("example:\n", 1)[1].strip().splitlines()[0]
    assert "tests/" not in example
    proc = run_cli(*shlex.split(example)[1:], cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    for name, parser in commands().items():
        assert "tests/" not in parser.format_help().split("example:\n", 1)[1], name
