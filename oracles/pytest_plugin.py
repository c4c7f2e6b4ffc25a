"""pytest plugin: assert equivalence of two staging targets from a project's own suite.

Loaded through the ``pytest11`` entry point (or ``-p stagecheck``). It gives a
``stagecheck`` fixture::

    def test_refactor_is_equivalent(stagecheck):
        stagecheck.assert_equivalent("legacy", "path/to/mamba_utils.py::stage_postprocess_inputs_to_gpu")

and registers three hypothesis profiles, picked with ``--hypothesis-profile=NAME``.
Their names carry the ``stagecheck-`` prefix, so a project's own ``ci`` or ``dev``
profile (or hypothesis's) is never replaced by installing stagecheck:

- ``stagecheck-ci``: derandomized (fixed seed), 100 examples per stream, no database;
- ``stagecheck-dev``: 300 examples, random seed, the directory database;
- ``stagecheck-thorough``: 5000 examples, random seed, the directory database.

The fixture's defaults come from the active profile, so under pytest-xdist every
worker of a long campaign shares one directory database: a failing example found
by one worker is replayed first by every later run (see ``docs/pytest.md``).

This module is imported in every pytest session of an environment that has
stagecheck installed, so it imports only hypothesis (and stagecheck's errors and options,
and the fixture's helpers: ``fixture_targets.py``, its targets, and ``fixture_protocol.py``,
``assert_protocol``'s keywords; standard library only) at load time; torch and the oracles
are imported when the fixture is first used.
"""

from __future__ import annotations

import copy
import importlib.util
import os
import random
import shlex
import sys

import pytest
from hypothesis import HealthCheck, Phase, core, settings as _hsettings

from stagecheck.oracles import messages
from stagecheck.oracles.errors import StagecheckError, UsageError
from stagecheck.oracles.fixture_protocol import (builtin_protocols, protocol_config,
                                                 protocol_keyword_problems,
                                                 protocol_reproduce_hint)
# as_target: named in __all__ (a test builds its targets with it)
from stagecheck.oracles.fixture_targets import as_target, isolated_runner
from stagecheck.oracles.options import (DEFAULT_SAVE_DIR, CampaignConfig, RunOptions,
                                        fixture_options, flat, reproduce_flags)
from stagecheck.oracles.text import did_you_mean

__all__ = ["PROFILES", "StagecheckFixture", "as_target", "register_profiles"]

#: The profiles this plugin registers: name -> settings changes over the parent profile.
PROFILES = {
    "stagecheck-ci": dict(derandomize=True, max_examples=100, deadline=None, database=None,
                          print_blob=True),
    "stagecheck-dev": dict(max_examples=300),
    "stagecheck-thorough": dict(max_examples=5000),
}
# and "stagecheck-crosshair" (hypothesis's CrossHair backend) where hypothesis-crosshair is
# installed
_PARENTS = {"stagecheck-ci": "ci", "stagecheck-dev": "default",
            "stagecheck-thorough": "default"}


def register_profiles() -> None:
    """Register ``stagecheck-ci``, ``stagecheck-dev`` and ``stagecheck-thorough``.

    Runs when pytest imports this plugin, which is before ``conftest.py`` files are
    loaded and before hypothesis's own plugin reads ``--hypothesis-profile`` (in
    ``pytest_configure``): the option can name these profiles. ``stagecheck-ci``
    extends hypothesis's built-in ``ci`` profile; the others extend ``default``, never
    the profile active at import time. Every name is ours alone: no profile of
    hypothesis or of the project is replaced.
    """
    for name, changes in PROFILES.items():
        _hsettings.register_profile(name, _hsettings.get_profile(_PARENTS[name]), **changes)
    if importlib.util.find_spec("hypothesis_crosshair_provider") is not None:
        # every example is one CrossHair path; a symbolic failure is realized, not shrunk
        _hsettings.register_profile(
            "stagecheck-crosshair", _hsettings.get_profile("default"), backend="crosshair",
            max_examples=20, phases=(Phase.explicit, Phase.generate), deadline=None,
            database=None, derandomize=False, suppress_health_check=list(HealthCheck))


register_profiles()


# --------------------------------------------------------------------------- fixture

def profile_defaults() -> dict:
    """What the active hypothesis profile gives the fixture: examples, derandomize, database."""
    current = _hsettings.default
    derandomize = bool(current.derandomize)
    return {"examples": current.max_examples, "derandomize": derandomize,
            "database": None if derandomize else current.database,
            "profile": _hsettings.get_current_profile_name()}


def keyword_type_problem(strict=False, shims=()) -> str | None:
    """What is wrong with the type of the fixture's own ``strict`` and ``shims`` (None:
    nothing): a text for ``strict`` is no bool ("no" would be true), and one path given
    as a text for ``shims`` would be read letter by letter."""
    if not isinstance(strict, bool):
        return "stagecheck: " + messages.FIXTURE_STRICT_TYPE.format(value=strict)
    if isinstance(shims, (str, bytes)) or not isinstance(shims, (list, tuple)) or not all(
            isinstance(p, (str, os.PathLike)) for p in shims):
        return "stagecheck: " + messages.FIXTURE_SHIMS_TYPE.format(value=shims)
    return None


def _resolve_seed(seed, derandomize: bool):
    """The seed of a campaign: given, else ``--hypothesis-seed``, else 0 when
    derandomized (what ``stagecheck diff`` uses), else a fresh one (shown in the report)."""
    if seed is not None:
        return seed
    if core.global_force_seed is not None:
        return core.global_force_seed
    if derandomize:
        return 0
    return random.SystemRandom().randrange(2**32)


class StagecheckFixture:
    """What the ``stagecheck`` fixture returns. ``save_dir``: where a failing assertion
    saves its error findings as replay files (never lost; None: nowhere)."""

    def __init__(self, save_dir: str | None = None) -> None:
        self.save_dir = save_dir
        self._ran: tuple = (None, None, ())       # the last run's targets and shims

    def config(self, *, examples: int | None = None, device: str = "cpu",
               max_capacity: int | None = None, seed=None, **options):
        """The ``CampaignConfig`` a call with these arguments runs under.

        ``options`` are further campaign and run options (``timeout``,
        ``out_of_contract``, ``steps``, ``kernel``...), validated as the command line
        validates them: a bad value fails the test with the message the CLI gives.
        """
        known = fixture_options()
        unknown = sorted(set(options) - set(known))
        if unknown:     # one clean message, outside any except block (nothing chained)
            pytest.fail("stagecheck: " + str(UsageError.of(
                messages.FIXTURE_UNKNOWN_OPTIONS, ", ".join(f"{k}=" for k in unknown),
                known=", ".join(f"{k}=" for k in sorted({*known, "shims", "strict"})),
                hint=did_you_mean(unknown[0], known))), pytrace=False)
        defaults = profile_defaults()
        if examples is None:
            examples = defaults["examples"]
        seed = _resolve_seed(seed, defaults["derandomize"])
        options.setdefault("engine", "hypothesis")   # the profiles and the example database
        try:
            return CampaignConfig.from_options(
                examples=examples, seed=seed, device=device, max_capacity=max_capacity,
                database=defaults["database"], derandomize=defaults["derandomize"], **options)
        except UsageError as exc:
            if exc.where is None and exc.option:
                exc.located(f"keyword {exc.option}")
            failure = f"stagecheck: {exc}"
        pytest.fail(failure, pytrace=False)    # outside the except: no chained traceback

    def run(self, baseline, candidate, *, examples: int | None = None, device: str = "cpu",
            max_capacity: int | None = None, seed=None, shims=(), **options):
        """Run the campaign and return its ``CampaignResult`` without asserting anything.

        ``baseline`` None checks ``candidate`` against the spec alone. ``shims``: paths
        of shim modules whose names file targets may use (the CLI's ``--shim``).
        """
        problem = keyword_type_problem(shims=shims)
        if problem:
            pytest.fail(problem, pytrace=False)
        # the oracles load on the fixture's first use (see as_target)
        from stagecheck.oracles.campaign import run_campaign
        from stagecheck.oracles.observe import require_device
        config = self.config(examples=examples, device=device, max_capacity=max_capacity,
                             seed=seed, **options)
        try:
            require_device(config.run.device)
        except StagecheckError as exc:
            missing = str(exc)
        else:
            missing = None
        if missing:
            pytest.skip(missing)
        try:
            runner, failure = isolated_runner(baseline, candidate, shims), None
        except StagecheckError as exc:
            runner, failure = None, f"stagecheck: {exc}"
        if failure is not None:      # outside the handler: one message, no chained traceback
            pytest.fail(failure, pytrace=False)
        with runner:
            base = runner.targets[0] if baseline is not None else None
            self._ran = (base, runner.targets[-1], tuple(shims))
            return run_campaign(base, runner.targets[-1], config, runner=runner)

    def assert_equivalent(self, baseline, candidate, *, examples: int | None = None,
                          strict: bool = False, device: str = "cpu",
                          max_capacity: int | None = None, seed=None, **options):
        """Fail the test with the report when ``candidate`` differs from ``baseline``.

        Fails on error findings (spec violations, in-contract divergence); with
        ``strict`` on info findings too. Returns the ``CampaignResult`` otherwise.
        ``options``: further ``CampaignConfig`` fields (see ``config``).
        """
        if keyword_type_problem(strict):
            pytest.fail(keyword_type_problem(strict), pytrace=False)
        result = self.run(baseline, candidate, examples=examples, device=device,
                          max_capacity=max_capacity, seed=seed, **options)
        self._check(result, strict, (baseline, candidate), options)
        return result

    def assert_conforms(self, target, *, examples: int | None = None, strict: bool = False,
                        device: str = "cpu", max_capacity: int | None = None, seed=None,
                        **options):
        """Fail the test with the report when ``target`` violates the spec."""
        if keyword_type_problem(strict):
            pytest.fail(keyword_type_problem(strict), pytrace=False)
        result = self.run(None, target, examples=examples, device=device,
                          max_capacity=max_capacity, seed=seed, **options)
        self._check(result, strict, (None, target), options)
        return result

    def assert_protocol(self, target, protocol=None, *, baseline=None,
                        examples: int | None = None, seed=None, device: str = "cpu",
                        strict: bool = False, **options):
        """Fail the test with the protocol report when ``target`` (a component class or
        method, as a target spec) breaks ``protocol`` across step sequences, or differs
        from ``baseline`` on them. ``protocol``: a built-in name, 'single-call:SCHEMA',
        a protocol file or a ``Protocol``; None: the built-in one the target's name
        implies. ``options``: the options a protocol run reads (``timeout``,
        ``gpu_busy_cycles``, ``max_capacity`` for a ``single-call:`` protocol, ``shims``,
        ``jobs``: ``options.protocol_fixture_options()``), checked as the command line
        checks them: each bad keyword fails the test with its own line. Returns the
        ``ProtocolResult`` otherwise."""
        # the protocol machinery loads on first use (see as_target)
        from stagecheck.oracles.commands.protocol import chosen_protocol
        from stagecheck.oracles.observe import require_device
        from stagecheck.oracles.protocol import (load_protocol, protocol_spec,
                                                 run_protocol_campaign)
        from stagecheck.oracles.report.protocol_text import render_protocol
        failure = keyword_type_problem(strict, options.get("shims", ()))
        if failure:
            pytest.fail(failure, pytrace=False)
        try:
            if protocol is None:
                protocol = chosen_protocol({}, baseline, target)[0]
            if protocol is None:
                raise UsageError.of(messages.PROTOCOL_NONE_FOR, target, builtins=", ".join(
                    builtin_protocols()))
            if examples is None:
                examples = profile_defaults()["examples"]
            seed = _resolve_seed(seed, profile_defaults()["derandomize"])
            problems = protocol_keyword_problems(options, protocol)
            loaded = None
            if not problems:
                loaded = load_protocol(protocol)
                problems = protocol_keyword_problems(options, protocol, loaded)
            if problems:
                failure = "\n".join(f"stagecheck: {p}" for p in problems)
            else:
                config = protocol_config(examples, seed, device, options)
                require_device(config.device)
                result = run_protocol_campaign(baseline, target, loaded, config)
        except StagecheckError as exc:
            if isinstance(exc, UsageError) and exc.where is None and exc.option:
                exc.located(f"keyword {exc.option}")
            failure = f"stagecheck: {exc}"
        if failure:     # outside the except: one message, no chained traceback
            pytest.fail(failure, pytrace=False)
        if result.verdict(strict) == "equivalent":
            return result
        saved, note = self._save(result, strict, protocol_spec(loaded))
        message = render_protocol(result, strict=strict, saved=saved)
        hint = protocol_reproduce_hint(result, baseline, target, protocol)
        for line in (note, hint):
            if line:
                message += "\n" + line
        pytest.fail(message, pytrace=False)

    def _check(self, result, strict: bool, given: tuple, options: dict) -> None:
        from stagecheck.oracles.report import render_campaign  # see as_target
        if result.verdict(strict) == "equivalent":
            return
        saved, note = self._save(result, strict)
        shown = copy.copy(result)      # the pasted tests load a test module's function by file
        shown.baseline = _portable(result.baseline) if result.baseline else None
        shown.candidate = _portable(result.candidate)
        message = render_campaign(shown, strict, saved)
        hint = _reproduce_hint(result, given, options, strict)
        for line in (note, hint):
            if line:
                message += "\n" + line
        pytest.fail(message, pytrace=False)

    def _save(self, result, strict: bool, protocol: str | None = None) -> tuple[dict, str]:
        """Save the error findings of a failing run (as the command line does): finding
        id -> its ``replay`` arguments, and the line that says where (or why not)."""
        # the report layer loads on first use (see as_target)
        from stagecheck.oracles.commands.base import replay_flags
        from stagecheck.oracles.commands.protocol import protocol_replay_flags
        from stagecheck.oracles.report.protocol_replay import save_protocol_findings
        from stagecheck.oracles.report.replay import new_run_id, save_run
        if self.save_dir is None:
            return {}, ""
        base, cand, shims = self._ran
        if protocol is not None:
            write = lambda kept: save_protocol_findings(        # noqa: E731
                result, self.save_dir, protocol, tuple(result.config.shims), kept)
            targets = {"baseline": result.baseline, "candidate": result.candidate,
                       "protocol": protocol}
        else:
            write = None
            targets = {"baseline": base.record() if base else None,
                       "candidate": cand.record() if cand else None}
        try:
            saved, _ = save_run(result, self.save_dir, new_run_id(), "pytest", targets,
                                result.verdict(strict), base, cand, shims, write=write)
        except (OSError, StagecheckError) as exc:
            return {}, f"stagecheck: the findings could not be saved under {self.save_dir}: {exc}"
        if not saved:
            return {}, ""
        flags = ""
        if protocol is not None:          # the targets and protocol outside the repository
            flags = protocol_replay_flags(result.baseline, result.candidate,   # the line
                                          tuple(result.config.shims), protocol,  # runs from
                                          anywhere=True)                         # any folder
        elif cand is not None:
            flags = replay_flags(base, cand, shims, getattr(result, "schema_spec", None),
                                 anywhere=True)
            for target in (base, cand):     # a test module's function: by its file
                if target is not None and target.pinned != _portable(target.pinned):
                    flags = flags.replace(shlex.quote(target.pinned),
                                          shlex.quote(_portable(target.pinned)))
        return ({k: v + flags for k, v in saved.items()},
                messages.FIXTURE_SAVED.format(count=len(saved), path=self.save_dir))


def _reproduce_hint(result, given: tuple, options: dict, strict: bool = False) -> str:
    """The CLI command that re-runs this campaign, when both targets were given as specs:
    the flags of ``options.TABLE`` for every value that is not the command line's default
    (examples and seed always, ``--strict`` where the test asked for it); a value the
    command line has no flag for is named after."""
    baseline, candidate = given
    if not isinstance(candidate, str) or not (baseline is None or isinstance(baseline, str)):
        return ""
    command = "diff" if baseline is not None else "spec"
    c = result.config
    values = {**flat(c), "shims": tuple(options.get("shims") or ()), "strict": strict}
    # the command line's defaults; the busy cycles default differs per device
    defaults = {**flat(CampaignConfig()), "shims": (), "strict": False,
                "gpu_busy_cycles": RunOptions(device=c.run.device).gpu_busy_cycles}
    defaults.update({k: values[k] for k in ("database", "derandomize", "engine")
                     if k not in options})     # the fixture's own choices, not the test's
    words, left = reproduce_flags(command, values, defaults)
    targets = " ".join(shlex.quote(t) for t in (baseline, candidate) if t is not None)
    hint = f"reproduce: stagecheck {command} {targets} " + " ".join(
        shlex.quote(w) for w in words)
    if left:
        hint += " (this test also set " + ", ".join(f"{k}={v!r}" for k, v in left.items()) + ")"
    if c.engine == "hypothesis" and "engine" not in options:
        hint += messages.FIXTURE_REPRODUCE_ENGINE
    return hint


def _portable(spec: str) -> str:
    """``module:function`` of a module the test session imported (often a test module,
    which the command line cannot import by name) as ``file.py::function``, which the
    command line loads from any folder; any other spec as it is."""
    module, sep, name = spec.partition(":")
    if not sep or name.startswith(":") or "/" in module or module == "git":
        return spec
    file = getattr(sys.modules.get(module), "__file__", None)
    if not isinstance(file, str) or not file.endswith(".py") or not os.path.isfile(file):
        return spec
    parts = os.path.abspath(file).split(os.sep)
    if "site-packages" in parts or "dist-packages" in parts:
        return spec                 # an installed module: the command line imports it too
    return f"{os.path.abspath(file)}::{name}"


@pytest.fixture
def stagecheck(request) -> StagecheckFixture:
    """Assert equivalence of two staging targets (``assert_equivalent``), conformance of
    one to the spec (``assert_conforms``), or a component's staging protocol across engine
    steps (``assert_protocol``); findings become the failure message, and the error
    findings are saved as replay files under the root folder's ``.stagecheck/findings``."""
    return StagecheckFixture(os.path.join(str(request.config.rootpath), DEFAULT_SAVE_DIR))


def pytest_report_header(config):
    if config.option.verbose < 1:
        return None
    d = profile_defaults()
    return (f"stagecheck: hypothesis profile {d['profile']!r}: {d['examples']} examples per "
            f"stream, derandomize={d['derandomize']}, database={d['database']!r}")
