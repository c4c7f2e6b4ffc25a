"""The pytest plugin: the ``stagecheck`` fixture, the hypothesis profiles, xdist scale-out.

Inner pytest sessions run in subprocesses (pytester) with the plugin loaded the way
a user's suite loads it: through the ``pytest11`` entry point when the installed
metadata has it, else with ``-p stagecheck.oracles.pytest_plugin``.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from importlib.metadata import entry_points
from pathlib import Path

import pytest
from hypothesis import settings

from stagecheck.oracles import messages
from stagecheck.oracles.errors import TargetLoadError, UsageError
from stagecheck.oracles.pytest_plugin import StagecheckFixture, as_target
from stagecheck.oracles.targets import Target, load_target, target_from_callable

pytest_plugins = ["pytester"]

BUGGY = str(Path(__file__).resolve().parents[1] / "targets" / "buggy_swapped_views.py") + \
    "::stage_postprocess_inputs_to_gpu"
# These tests are about the plugin: the kernel oracle (it re-runs the postprocess kernel
# to tell whether a difference reaches it) is left out of the inner runs.
FAST = ', kernel="off"'


def _plugin_args() -> list[str]:
    """Load the plugin once: by its entry point name if installed, else by module."""
    for ep in entry_points(group="pytest11"):
        if ep.value == "stagecheck.oracles.pytest_plugin":
            return ["-p", ep.name]          # -p NAME also loads an entry point by name
    return ["-p", "stagecheck.oracles.pytest_plugin"]


def _autoloaded(*names: str) -> list[str]:
    """``-p`` options for plugins normally autoloaded, where autoloading is off."""
    if not os.environ.get("PYTEST_DISABLE_PLUGIN_AUTOLOAD"):
        return []
    return [arg for name in names for arg in ("-p", name)]


def _run(pytester, *args):
    return pytester.runpytest_subprocess(*_autoloaded("hypothesispytest"), *_plugin_args(),
                                         "-p", "no:cacheprovider", *args, timeout=120)


def _found_after(text: str) -> list[int]:
    """'found after N example(s)' of the error findings (the ERRORS sections) in ``text``."""
    counts, in_errors = [], False
    for line in text.splitlines():
        if line.startswith("ERRORS ("):
            in_errors = True
        elif line.strip() and not line[0].isspace():
            in_errors = False      # the next heading: INFO, the reproduce lines, pytest's
        elif in_errors:
            counts += [int(n) for n in re.findall(r"found after (\d+) example\(s\)", line)]
    return counts


def _tried(text: str) -> list[str]:
    """The 'tried N in-contract and M out-of-contract examples (seed S, ...)' lines,
    without the elapsed time."""
    return [re.sub(r" in [\d.]+ s\b", "", line.strip())
            for line in text.splitlines() if line.strip().startswith("tried ")]


# ----------------------------------------------------------------- in-process units

def test_target_forms_are_accepted():
    from stagecheck.impl.staging_prefix import stage_postprocess_inputs_to_gpu as prefix
    from stagecheck.impl.staging_single_loop import stage_postprocess_inputs_to_gpu as single
    assert as_target("legacy").spec == "legacy"
    loaded = load_target("single-loop")
    assert as_target(loaded) is loaded
    wrapped = as_target(single)
    assert isinstance(wrapped, Target) and wrapped.func is single
    assert wrapped.spec == "stagecheck.impl.staging_single_loop:stage_postprocess_inputs_to_gpu"
    assert not wrapped.profile.keywords
    assert target_from_callable(prefix, "later").profile.takes("run_prefix_state_migration")


def test_callable_with_wrong_signature_is_a_load_error():
    def stage(ctx, scheduler_output):
        pass
    with pytest.raises(TargetLoadError, match="no built-in schema describes function 'stage'"):
        target_from_callable(stage)
    with pytest.raises(TargetLoadError, match="cannot take the arguments of schema"):
        target_from_callable(stage, schema=load_target("legacy").schema)
    with pytest.raises(UsageError, match="42 is not a staging target .it is of type int."):
        as_target(42)


def test_unknown_and_bad_campaign_options_are_refused():
    assert StagecheckFixture().config(seed=3, timeout=2.0).run.timeout == 2.0
    with pytest.raises(pytest.fail.Exception, match="unknown option.*no_such_option"):
        StagecheckFixture().config(no_such_option=1)
    with pytest.raises(pytest.fail.Exception, match=r"keyword timeout: -1 is not a positive number"):
        StagecheckFixture().config(timeout=-1)
    # the list of known options and what the fixture accepts agree (options.TABLE):
    # the database and derandomize come from the profile, so neither is offered
    for reserved in ("database", "derandomize"):
        with pytest.raises(pytest.fail.Exception) as refused:
            StagecheckFixture().config(**{reserved: None})
        text = str(refused.value)
        assert f"unknown option(s) {reserved}=;" in text and "hypothesis-profile" in text
        known = text.split("the fixture takes ", 1)[1].split(" (", 1)[0].split(", ")
        assert "database=" not in known and "derandomize=" not in known
        assert "timeout=" in known and "steps=" in known
    from stagecheck.oracles.options import flat, option_for
    assert "strict=" in known and "shims=" in known     # the methods' own keywords
    for name in (k.rstrip("=") for k in known):     # each offered option is taken
        if name in ("strict", "shims"):             # by assert_* and run, not config
            continue
        default = option_for("diff", name).default_value()
        value = flat(StagecheckFixture().config(**{name: default}))[name]
        assert value == default or default is None, (name, value, default)
    with pytest.raises(pytest.fail.Exception, match="keyword steps: None is not a whole"):
        StagecheckFixture().config(steps=None)   # None only where it is the default


def test_profiles_are_registered_under_stagecheck_names_and_drive_the_defaults():
    ci = settings.get_profile("stagecheck-ci")
    assert (ci.derandomize, ci.max_examples, ci.deadline, ci.database, ci.print_blob) == \
        (True, 100, None, None, True)
    assert settings.get_profile("stagecheck-dev").max_examples == 300
    assert settings.get_profile("stagecheck-thorough").max_examples == 5000
    with pytest.raises(Exception):          # hypothesis's own names stay unregistered
        settings.get_profile("thorough")
    previous = settings.get_current_profile_name()
    try:
        settings.load_profile("stagecheck-ci")
        config = StagecheckFixture().config()
        assert (config.examples, config.derandomize, config.database, config.seed) == \
            (100, True, None, 0)
        settings.load_profile("stagecheck-thorough")
        config = StagecheckFixture().config(seed=7)
        assert (config.examples, config.derandomize, config.seed) == (5000, False, 7)
        assert config.database is not None
    finally:
        settings.load_profile(previous)


# ----------------------------------------------------------------- inner pytest sessions

def test_user_suite_asserts_equivalence_and_fails_on_findings(pytester):
    pytester.makepyfile(test_user=f"""
        from stagecheck.impl.staging_legacy import stage_postprocess_inputs_to_gpu as legacy

        def test_refactor_is_equivalent(stagecheck):
            result = stagecheck.assert_equivalent("legacy", "single-loop", examples=40,
                                                  seed=0{FAST})
            assert result.verdict() == "equivalent" and result.examples_in_contract == 40

        def test_plain_callable_and_spec_only(stagecheck):
            stagecheck.assert_equivalent(legacy, "single-loop", examples=20, seed=1{FAST})
            stagecheck.assert_conforms("single-loop", examples=20, seed=1{FAST})

        def test_info_findings_fail_only_with_strict(stagecheck):
            stagecheck.assert_equivalent("legacy", "single-loop", examples=60, seed=0,
                                         strict=True{FAST})

        def test_buggy_refactor(stagecheck):
            stagecheck.assert_equivalent("legacy", {BUGGY!r}, examples=100, seed=0{FAST})
    """)
    result = _run(pytester, "--hypothesis-profile=stagecheck-dev", "-rf")
    result.assert_outcomes(passed=2, failed=2)
    out = result.stdout.str()
    strict_failure, buggy_failure = out.split("_ test_buggy_refactor _")
    assert "_ test_info_findings_fail_only_with_strict _" in strict_failure
    assert "INFO (failure-path" in strict_failure and "(--strict: info counts)" in strict_failure
    assert "slot_alignment" not in strict_failure
    # its reproduce line asks for --strict too (without it the command line said
    # EQUIVALENT, exit 0), and says the command line's search draws other examples
    (line,) = {ln.strip() for ln in strict_failure.splitlines() if "reproduce: " in ln}
    assert line.startswith("reproduce: stagecheck diff legacy single-loop --examples 60 "
                           "--seed 0 ") and " --strict" in line, line
    assert line.endswith(messages.FIXTURE_REPRODUCE_ENGINE), line
    # the buggy target: the finding and its slot table are the failure message
    assert "verdict: DIFFERENT" in buggy_failure
    assert "ERRORS (spec violations" in buggy_failure and "slot_alignment" in buggy_failure
    assert f"reproduce: stagecheck diff legacy {BUGGY} --examples 100 --seed 0" in buggy_failure
    assert "pytest_plugin.py" not in out   # the report, not a traceback through the plugin


def test_ci_profile_is_selectable_and_derandomized(pytester):
    pytester.makepyfile(test_user=f"""
        from hypothesis import settings

        def test_profile_is_active(stagecheck):
            assert settings.get_current_profile_name() == "stagecheck-ci"
            assert settings.default.derandomize and settings.default.max_examples == 100

        def test_refactor_is_equivalent(stagecheck):
            stagecheck.assert_equivalent("legacy", {BUGGY!r}{FAST})
    """)
    runs = [_run(pytester, "--hypothesis-profile=stagecheck-ci", "-v") for _ in range(2)]
    texts = [r.stdout.str() for r in runs]
    for r, text in zip(runs, texts):
        r.assert_outcomes(passed=1, failed=1)
        assert "stagecheck: hypothesis profile 'stagecheck-ci': 100 examples per stream, " \
               "derandomize=True, database=None" in text
        assert "slot_alignment" in text
    assert _tried(texts[0]) and _tried(texts[0]) == _tried(texts[1])
    assert "out-of-contract examples (seed 0," in texts[0]
    assert _found_after(texts[0]) and _found_after(texts[0]) == _found_after(texts[1])


def test_xdist_workers_share_one_example_database(pytester):
    db = pytester.path / "shared-db"
    pytester.makeconftest(f"""
        from hypothesis import settings
        from hypothesis.database import DirectoryBasedExampleDatabase

        settings.register_profile("shared", settings.get_profile("stagecheck-dev"),
                                  database=DirectoryBasedExampleDatabase({str(db)!r}))
    """)
    pytester.makepyfile(test_user=f"""
        def test_one(stagecheck):
            stagecheck.assert_equivalent("legacy", {BUGGY!r}, examples=50{FAST})

        def test_two(stagecheck):
            stagecheck.assert_equivalent("legacy", {BUGGY!r}, examples=80{FAST})
    """)
    args = (*_autoloaded("xdist"), "-n", "2", "--hypothesis-profile=shared")
    first = _run(pytester, *args)
    first.assert_outcomes(failed=2)
    out = first.stdout.str()
    assert "created: 2/2 workers" in out
    assert out.count("slot_alignment") >= 2
    saved = [p for p in db.rglob("*") if p.is_file()]
    assert saved, "the failing example was not saved in the shared database"
    # A later run (here again on two workers) replays the saved failing example first:
    # both tests find the bug on their first example, whatever seed each one drew.
    second = _run(pytester, *args)
    second.assert_outcomes(failed=2)
    found = _found_after(second.stdout.str())
    assert found and set(found) == {1}, (_found_after(out), found)


def test_an_unrelated_projects_profile_names_are_left_alone(pytester):
    """Installing stagecheck changes no other project's runs: ``--hypothesis-profile=dev``
    is hypothesis's error there, not a profile of ours."""
    pytester.makepyfile(test_other="def test_nothing():\n    pass\n")
    result = _run(pytester, "--hypothesis-profile=dev")
    assert result.ret != 0
    assert "dev" in (result.stderr.str() + result.stdout.str())


def test_a_project_with_its_own_spec_impl_and_oracles_packages(pytester):
    """One import name: a user project whose own top-level packages are called spec, impl
    and oracles runs the fixture and the command line without any collision."""
    for package in ("spec", "impl", "oracles"):
        pytester.mkpydir(package)
        (pytester.path / package / "__init__.py").write_text(
            f"ERROR = {'the project' + chr(39) + 's own ' + package!r}\n")
    pytester.makepyfile(test_user=f"""
        import impl, oracles, spec

        def test_own_packages_are_the_projects():
            assert spec.ERROR == "the project's own spec" and oracles.ERROR.endswith("oracles")
            assert impl.ERROR.endswith("impl")

        def test_the_fixture_works_beside_them(stagecheck):
            result = stagecheck.assert_equivalent("legacy", "single-loop", examples=20,
                                                  seed=0{FAST})
            assert result.verdict() == "equivalent"
    """)
    result = _run(pytester, "-p", "pytester")
    result.assert_outcomes(passed=2)
    cli = pytester.run("stagecheck", "spec", "single-loop", "--examples", "20", "--no-kernel",
                       "--save-dir", str(pytester.path / "found"), timeout=300)
    assert cli.ret == 0, cli.stdout.str() + cli.stderr.str()
    assert "verdict: CONFORMS" in cli.stdout.str()


# ----------------------------------------------------------------- issue 23, item 14

def test_the_docs_fixture_run_example_runs_as_written(pytester):
    """docs/pytest.md's ``stagecheck.run(...)`` is the fixture's method: its example
    passes as written, and a bad option fails the test with one message, no chained
    traceback through the plugin."""
    page = (Path(__file__).resolve().parents[2] / "docs" / "pytest.md").read_text()
    block = next(b for b in re.findall(r"```python\n(.*?)```", page, re.S)
                 if "def test_what_the_refactor_changes" in b)
    pytester.makepyfile(test_docs_example=block + '''

def test_a_bad_option(stagecheck):
    stagecheck.run("legacy", "single-loop", examples=5, steps=0)

def test_an_unknown_option(stagecheck):
    stagecheck.run("legacy", "single-loop", examples=5, database=None)
''')
    result = _run(pytester)
    result.assert_outcomes(passed=1, failed=2)
    out = result.stdout.str()
    assert "During handling of the above exception" not in out
    assert "stagecheck: keyword steps: 0 is not a whole number >= 1" in out
    assert "stagecheck: unknown option(s) database=;" in out
    assert "pytest_plugin.py" not in out        # a message, not a traceback of the plugin


def test_the_reproduce_line_names_every_option_the_test_changed(pytester):
    pytester.makepyfile(test_user=f"""
        def test_buggy(stagecheck):
            stagecheck.assert_equivalent("legacy", {BUGGY!r}, examples=60, seed=3,
                                         timeout=2.5, steps=2, out_of_contract=False,
                                         max_capacity=6, engine="batched"{FAST})
    """)
    result = _run(pytester)
    result.assert_outcomes(failed=1)
    # the failure and pytest's short summary may both print it: one line, the same each time
    (line,) = {ln for ln in result.stdout.str().splitlines() if ln.startswith("reproduce: ")}
    argv = shlex.split(line[len("reproduce: "):])
    assert argv[:4] == ["stagecheck", "diff", "legacy", BUGGY]
    from stagecheck.oracles.cli import build_parser
    args = build_parser().parse_args(argv[1:])       # it parses: every flag is real
    assert (args.examples, args.seed, args.timeout, args.steps, args.max_capacity,
            args.out_of_contract, args.kernel) == ("60", "3", "2.5", "2", "6", False, "off")
    assert "this test also set" not in line          # every option had a flag


# ----------------------------------------------------------------- replay files, bad targets

def test_a_failing_function_target_is_saved_and_its_replay_line_runs_from_elsewhere(pytester):
    """A finding of the fixture is never lost: the error findings are saved under the
    root folder's .stagecheck/findings, and the printed replay line (the test module's
    function by its file) runs from another folder and still shows the bug."""
    pytester.makepyfile(test_user="""
        def short(ctx, scheduler_output, req_ids, num_reqs, requests, mamba_state_idx):
            bufs = (ctx.mamba_state_idx_buf, ctx.num_scheduled_tokens_buf,
                    ctx.num_computed_tokens_buf, ctx.num_draft_tokens_buf)
            for i, r in enumerate(req_ids[:max(num_reqs - 1, 0)]):
                bufs[0].np[i] = mamba_state_idx[r]
                bufs[1].np[i] = scheduler_output.num_scheduled_tokens[r]
                bufs[2].np[i] = requests[r].num_computed_tokens
                bufs[3].np[i] = len(scheduler_output.scheduled_spec_decode_tokens.get(r, []))
            for b in bufs:
                b.copy_to_gpu(num_reqs)

        def test_short(stagecheck):
            stagecheck.assert_equivalent("single-loop", short, examples=30)
    """)
    result = _run(pytester)
    result.assert_outcomes(failed=1)
    out = result.stdout.str()
    assert "saved under" in out and "it was not saved (--no-save)" not in out
    assert "test_user.py::short')" in out and "load_target('test_user:short')" not in out
    line = next(x for x in out.splitlines() if "replay: stagecheck replay" in x)
    words = shlex.split(line.split("replay: ", 1)[1])
    assert words[-1].endswith("test_user.py::short")
    assert Path(words[2]).is_file()
    done = subprocess.run([sys.executable, "-m", "stagecheck", *words[1:]], cwd="/",
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "still shows" in done.stdout


def test_the_replay_line_of_a_file_target_inside_the_root_runs_from_any_folder(pytester):
    """An audit: a file target inside the pytest root (no git repository) was printed as
    a bare ``stagecheck replay FILE``, refused from any other folder (the file lies
    outside that folder's trust boundary); the line names the targets it runs."""
    pytester.makepyfile(stager="""
        def short(ctx, scheduler_output, req_ids, num_reqs, requests, mamba_state_idx):
            bufs = (ctx.mamba_state_idx_buf, ctx.num_scheduled_tokens_buf,
                    ctx.num_computed_tokens_buf, ctx.num_draft_tokens_buf)
            for i, r in enumerate(req_ids[:max(num_reqs - 1, 0)]):
                bufs[0].np[i] = mamba_state_idx[r]
                bufs[1].np[i] = scheduler_output.num_scheduled_tokens[r]
                bufs[2].np[i] = requests[r].num_computed_tokens
                bufs[3].np[i] = len(scheduler_output.scheduled_spec_decode_tokens.get(r, []))
            for b in bufs:
                b.copy_to_gpu(num_reqs)
    """, test_file_target="""
        def test_short(stagecheck):
            stagecheck.assert_equivalent("single-loop", "stager.py::short", examples=30)
    """)
    result = _run(pytester)
    result.assert_outcomes(failed=1)
    line = next(x for x in result.stdout.str().splitlines() if "replay: stagecheck replay" in x)
    words = shlex.split(line.split("replay: ", 1)[1])
    assert "--candidate" in words and words[-1].endswith("stager.py::short"), words
    done = subprocess.run([sys.executable, "-m", "stagecheck", *words[1:]], cwd="/",
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 1, done.stdout + done.stderr


def test_a_class_or_a_module_as_target_fails_with_one_message(pytester):
    pytester.makepyfile(test_user="""
        import json

        class Stager:
            pass

        def test_class(stagecheck):
            stagecheck.assert_conforms(Stager)

        def test_module(stagecheck):
            stagecheck.assert_conforms(json)
    """)
    result = _run(pytester)
    result.assert_outcomes(failed=2)
    out = result.stdout.str()
    assert "'Stager' is not a staging target (it is a class)" in out
    assert "assert_protocol" in out
    assert "'json' is not a staging target (it is a module)" in out
    assert "Traceback" not in out and "pytest_plugin.py" not in out
