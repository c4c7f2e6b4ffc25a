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
standard library only) at load time; torch and the oracles are imported when the
fixture is first used.
"""

from __future__ import annotations

import copy
import importlib.util
import inspect
import os
import random
import shlex
import sys
from dataclasses import replace

import pytest
from hypothesis import HealthCheck, Phase, core, settings as _hsettings

from stagecheck.oracles import messages
from stagecheck.oracles.errors import ShimError, StagecheckError, TargetLoadError, UsageError
from stagecheck.oracles.text import short_text
from stagecheck.oracles.options import (DEFAULT_SAVE_DIR, PROTOCOL_LIBRARY_FIELDS,
                                        CampaignConfig, ProtocolConfig, RunOptions,
                                        fixture_options, flat, option_for,
                                        protocol_fixture_options, reproduce_flags, validated)

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


# --------------------------------------------------------------------------- targets

def as_target(obj, where: str = "target", shims=()):
    """A ``Target`` from a target spec string, a ``Target``, or a plain callable.

    ``shims``: paths of shim modules for file targets (``--shim`` of the CLI)."""
    # the oracles load on the fixture's first use (every pytest session imports this plugin)
    from stagecheck.oracles.targets import Target, load_target, target_from_callable
    if isinstance(obj, Target):
        return obj
    try:
        if isinstance(obj, str):
            return load_target(obj, shims=tuple(shims))
        _refuse_non_function(obj)
        return target_from_callable(obj)
    except StagecheckError as exc:
        raise exc.located(where) from None


def _refuse_non_function(obj) -> None:
    """A ``UsageError`` for what is no staging function: a module, a class (its instances
    are components: ``assert_protocol`` drives them), any other object."""
    if inspect.isfunction(obj) or inspect.ismethod(obj) or \
            (callable(obj) and not inspect.isclass(obj) and not inspect.ismodule(obj)):
        return
    kind = ("a module" if inspect.ismodule(obj) else "a class" if inspect.isclass(obj)
            else f"of type {type(obj).__name__}")
    name = getattr(obj, "__name__", None)
    more = (" (a component class is driven step after step by assert_protocol)"
            if kind == "a class" else
            f" (e.g. {name}.stage_postprocess_inputs_to_gpu)" if kind == "a module" else "")
    shown = repr(name) if isinstance(name, str) else short_text(obj, 60)
    raise UsageError.of(messages.FIXTURE_NOT_A_TARGET, shown, kind=kind, more=more)


def _runner(baseline, candidate, shims=()):
    """A runner holding the two targets, loaded in a worker process only, never in the
    test's process, as the command line loads them: spec strings are read here (a
    revision resolved to its commit once) and loaded there; a plain function is loaded
    there by its module's name, or by its file and name (``_callable_ref``); what a worker
    cannot load (a lambda, a function defined inside another) is refused with a message.
    ``shims``: see ``as_target``."""
    # the oracles load on the fixture's first use (see as_target)
    from stagecheck.oracles.runner import load_isolated
    from stagecheck.oracles.targets import target_ref
    items = [(x, name) for x, name in ((baseline, "baseline"), (candidate, "candidate"))
             if x is not None]
    if len(items) == 1:
        items = [(candidate, "target")]
    refs = []
    for x, name in items:
        try:
            refs.append(target_ref(x, None, tuple(shims)) if isinstance(x, str)
                        else _callable_ref(x, name, shims))
        except StagecheckError as exc:
            raise exc.located(name) from None
    try:
        return load_isolated(refs)
    except StagecheckError as exc:     # a shim that cannot be read or imported: shims=
        index = getattr(exc, "target_index", 0)
        raise exc.located("shims" if isinstance(exc, ShimError) else items[index][1]) from None


def _callable_ref(obj, where: str, shims=()):
    """How a worker loads ``obj`` (a function, or a ``Target``): by ``module:name`` when the
    worker can import that module by name and finds this very function there, else as a
    file target ``path.py::name``; a ``TargetLoadError`` for what no worker can load."""
    # the oracles load on the fixture's first use (see as_target)
    from stagecheck.oracles.targets import Target, target_ref
    if isinstance(obj, Target):
        if obj.ref is not None:
            return obj.ref
        obj = obj.func
    _refuse_non_function(obj)
    module = getattr(obj, "__module__", None)
    qualname = getattr(obj, "__qualname__", None) or type(obj).__name__
    if not isinstance(qualname, str) or "<" in qualname:
        raise TargetLoadError.of(messages.FIXTURE_NOT_ISOLABLE, qualname)
    loaded = sys.modules.get(module) if isinstance(module, str) else None
    if loaded is not None and module != "__main__" and "." not in qualname and \
            getattr(loaded, qualname, None) is obj:
        try:
            found = importlib.util.find_spec(module)
        except (ImportError, ValueError):
            found = None
        file = getattr(loaded, "__file__", None)
        if found is not None and file and found.origin and \
                os.path.realpath(found.origin) == os.path.realpath(file):
            return target_ref(f"{module}:{qualname}", None, tuple(shims))
    try:
        path = inspect.getsourcefile(obj)
    except TypeError:
        path = None
    if not path or not os.path.isfile(path):
        raise TargetLoadError.of(messages.FIXTURE_NOT_ISOLABLE, qualname)
    return target_ref(f"{path}::{qualname}", None, tuple(shims))


# --------------------------------------------------------------------------- fixture

def profile_defaults() -> dict:
    """What the active hypothesis profile gives the fixture: examples, derandomize, database."""
    current = _hsettings.default
    derandomize = bool(current.derandomize)
    return {"examples": current.max_examples, "derandomize": derandomize,
            "database": None if derandomize else current.database,
            "profile": _hsettings.get_current_profile_name()}


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
                known=", ".join(f"{k}=" for k in known))), pytrace=False)
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
            runner, failure = _runner(baseline, candidate, shims), None
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
        result = self.run(baseline, candidate, examples=examples, device=device,
                          max_capacity=max_capacity, seed=seed, **options)
        self._check(result, strict, (baseline, candidate), options)
        return result

    def assert_conforms(self, target, *, examples: int | None = None, strict: bool = False,
                        device: str = "cpu", max_capacity: int | None = None, seed=None,
                        **options):
        """Fail the test with the report when ``target`` violates the spec."""
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
        failure = None
        try:
            if protocol is None:
                protocol = chosen_protocol({}, baseline, target)[0]
            if protocol is None:
                raise UsageError.of(messages.PROTOCOL_NONE_FOR, target, builtins=", ".join(
                    _builtin_protocols()))
            if examples is None:
                examples = profile_defaults()["examples"]
            seed = _resolve_seed(seed, profile_defaults()["derandomize"])
            problems = _protocol_keyword_problems(options, protocol)
            loaded = None
            if not problems:
                loaded = load_protocol(protocol)
                problems = _protocol_keyword_problems(options, protocol, loaded)
            if problems:
                failure = "\n".join(f"stagecheck: {p}" for p in problems)
            else:
                config = _protocol_config(examples, seed, device, options)
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
        hint = _protocol_reproduce_hint(result, baseline, target, protocol)
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
        hint = _reproduce_hint(result, given, options)
        for line in (note, hint):
            if line:
                message += "\n" + line
        pytest.fail(message, pytrace=False)

    def _save(self, result, strict: bool, protocol: str | None = None) -> tuple[dict, str]:
        """Save the error findings of a failing run (as the command line does): finding
        id -> its ``replay`` arguments, and the line that says where (or why not)."""
        # the report layer loads on first use (see as_target)
        from stagecheck.oracles.commands.base import replay_flags
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
        if protocol is None and cand is not None:
            flags = replay_flags(base, cand, shims, getattr(result, "schema_spec", None))
            for target in (base, cand):     # a test module's function: by its file
                if target is not None and target.pinned != _portable(target.pinned):
                    flags = flags.replace(shlex.quote(target.pinned),
                                          shlex.quote(_portable(target.pinned)))
        return ({k: v + flags for k, v in saved.items()},
                messages.FIXTURE_SAVED.format(count=len(saved), path=self.save_dir))


def _reproduce_hint(result, given: tuple, options: dict) -> str:
    """The CLI command that re-runs this campaign, when both targets were given as specs:
    the flags of ``options.TABLE`` for every value that is not the command line's default
    (examples and seed always); a value the command line has no flag for is named after."""
    baseline, candidate = given
    if not isinstance(candidate, str) or not (baseline is None or isinstance(baseline, str)):
        return ""
    command = "diff" if baseline is not None else "spec"
    c = result.config
    values = {**flat(c), "shims": tuple(options.get("shims") or ())}
    # the command line's defaults; the busy cycles default differs per device
    defaults = {**flat(CampaignConfig()), "shims": (),
                "gpu_busy_cycles": RunOptions(device=c.run.device).gpu_busy_cycles}
    defaults.update({k: values[k] for k in ("database", "derandomize", "engine")
                     if k not in options})     # the fixture's own choices, not the test's
    words, left = reproduce_flags(command, values, defaults)
    targets = " ".join(shlex.quote(t) for t in (baseline, candidate) if t is not None)
    hint = f"reproduce: stagecheck {command} {targets} " + " ".join(
        shlex.quote(w) for w in words)
    if left:
        hint += " (this test also set " + ", ".join(f"{k}={v!r}" for k, v in left.items()) + ")"
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


def _protocol_keyword_problems(options: dict, protocol, loaded=None) -> list[str]:
    """One line per bad keyword of ``assert_protocol``, as the command line refuses a
    protocol run's options: an unknown keyword; a campaign keyword a protocol run does
    not read (``kernel=``, ``steps=``...); a bad value; and, once the protocol is
    ``loaded``, ``max_capacity=`` of a protocol that draws its own capacities."""
    known = protocol_fixture_options()
    shown_known = ", ".join(f"{k}=" for k in known)
    name = getattr(protocol, "name", protocol)
    problems: list[str] = []
    if loaded is not None:
        if options.get("max_capacity") is not None and not loaded.staging:
            low, high = loaded.space.capacity
            problems.append(str(UsageError.of(
                messages.FIXTURE_PROTOCOL_CAPACITY_UNUSED, options["max_capacity"],
                protocol=loaded.name, low=low, high=high).located("keyword max_capacity")))
        return problems
    campaign = set(fixture_options())
    for key in sorted(options):
        value = options[key]
        if key in known:
            try:
                validated("diff", {key: tuple(value) if key == "shims" and isinstance(
                    value, list) else value})
            except UsageError as exc:
                problems.append(str(exc.located(f"keyword {exc.option or key}")))
            continue
        if key in campaign:
            option = option_for("diff", key)
            problems.append(str(UsageError.of(
                messages.FIXTURE_PROTOCOL_OPTION_UNUSED, value, keyword=key,
                protocol=name, flag=option.flag if option and option.flag else f"{key}=",
                known=shown_known).located(f"keyword {key}")))
        else:
            problems.append(str(UsageError.of(messages.FIXTURE_PROTOCOL_UNKNOWN, key,
                                              known=shown_known).located(f"keyword {key}")))
    return problems


def _protocol_config(examples, seed, device, options: dict):
    """The ``ProtocolConfig`` of ``assert_protocol``, built from the keywords as the
    command line builds it from its options (``ProtocolConfig.from_values``)."""
    values = {"examples": examples, "seed": seed, "device": device,
              **{k: tuple(v) if k == "shims" else v for k, v in options.items()
                 if k not in PROTOCOL_LIBRARY_FIELDS}}
    values.update(validated("diff", values))
    config = ProtocolConfig.from_values(values)
    library = {k: v for k, v in options.items() if k in PROTOCOL_LIBRARY_FIELDS}
    return replace(config, **library) if library else config


def _builtin_protocols() -> list[str]:
    from stagecheck.spec.protocols import BUILTIN_PROTOCOLS  # loads on first use (as_target)
    return list(BUILTIN_PROTOCOLS)


def _protocol_reproduce_hint(result, baseline, target, protocol) -> str:
    """The ``stagecheck diff|spec ... --protocol`` line that re-runs a protocol campaign,
    when the targets and the protocol are given as text."""
    if not isinstance(target, str) or not (baseline is None or isinstance(baseline, str)) \
            or not isinstance(protocol, str):
        return ""
    c = result.config
    command = "diff" if baseline is not None else "spec"
    words = [t for t in (baseline, target) if t is not None] + [
        "--protocol", protocol, "--examples", str(c.sequences), "--seed", str(c.seed)]
    if c.device != "cpu":
        words += ["--device", c.device]
    for shim in c.shims:
        words += ["--shim", shim]
    return messages.FIXTURE_PROTOCOL_REPRODUCE.format(
        command=f"stagecheck {command} " + " ".join(shlex.quote(w) for w in words))


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
