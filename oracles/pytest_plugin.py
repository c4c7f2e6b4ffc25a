"""pytest plugin: assert equivalence of two staging targets from a project's own suite.

Loaded through the ``pytest11`` entry point (or ``-p oracles.pytest_plugin``). It
gives a ``stagecheck`` fixture::

    def test_refactor_is_equivalent(stagecheck):
        stagecheck.assert_equivalent("legacy", "path/to/mamba_utils.py::stage_postprocess_inputs_to_gpu")

and registers three hypothesis profiles, picked with ``--hypothesis-profile=NAME``:

- ``ci``: derandomized (fixed seed), 100 examples per stream, no example database;
- ``dev``: 300 examples, random seed, the directory database (``.hypothesis/examples``);
- ``thorough``: 5000 examples, random seed, the directory database.

The fixture's defaults come from the active profile, so under pytest-xdist every
worker of a long campaign shares one directory database: a failing example found
by one worker is replayed first by every later run (see ``docs/pytest.md``).

This module is imported in every pytest session of an environment that has
stagecheck installed, so it imports only hypothesis at load time; torch and the
oracles are imported when the fixture is first used.
"""

from __future__ import annotations

import random

import pytest
from hypothesis import settings as _hsettings

__all__ = ["PROFILES", "StagecheckFixture", "as_target", "register_profiles",
           "target_from_callable"]

#: The profiles this plugin registers: name -> settings changes over the parent profile.
PROFILES = {
    "ci": dict(derandomize=True, max_examples=100, deadline=None, database=None,
               print_blob=True),
    "dev": dict(max_examples=300),
    "thorough": dict(max_examples=5000),
}
# and "crosshair" (hypothesis's CrossHair backend) where hypothesis-crosshair is installed
_PARENTS = {"ci": "ci", "dev": "default", "thorough": "default"}


def register_profiles() -> None:
    """Register ``ci``, ``dev`` and ``thorough`` with hypothesis.

    Runs when pytest imports this plugin, which is before ``conftest.py`` files are
    loaded and before hypothesis's own plugin reads ``--hypothesis-profile`` (in
    ``pytest_configure``): the option can name these profiles, and a project's
    conftest can still register its own profile under the same name to replace one.
    ``ci`` extends hypothesis's built-in ``ci`` profile; ``dev`` and ``thorough``
    extend ``default``, never the profile active at import time.
    """
    for name, changes in PROFILES.items():
        _hsettings.register_profile(name, _hsettings.get_profile(_PARENTS[name]), **changes)
    import importlib.util
    if importlib.util.find_spec("hypothesis_crosshair_provider") is not None:
        from hypothesis import HealthCheck, Phase
        # every example is one CrossHair path; a symbolic failure is realized, not shrunk
        _hsettings.register_profile(
            "crosshair", _hsettings.get_profile("default"), backend="crosshair",
            max_examples=20, phases=(Phase.explicit, Phase.generate), deadline=None,
            database=None, derandomize=False, suppress_health_check=list(HealthCheck))


register_profiles()


# --------------------------------------------------------------------------- targets

def target_from_callable(func, name: str | None = None, arg: str = "TARGET"):
    """Wrap a plain staging function into a ``Target`` (same signature checks as files).

    ``name`` becomes the target's spec (shown in reports, and part of the example
    database key); by default ``module:qualname`` of the function.
    """
    from oracles.targets import _finish
    if name is None:
        module = getattr(func, "__module__", None) or "<callable>"
        name = f"{module}:{getattr(func, '__qualname__', type(func).__name__)}"
    return _finish(name, func, f"callable {name}", arg)


def as_target(obj, arg: str = "TARGET"):
    """A ``Target`` from a target spec string, a ``Target``, or a plain callable."""
    from oracles.targets import Target, load_target
    if isinstance(obj, Target):
        return obj
    if isinstance(obj, str):
        return load_target(obj, arg)
    if callable(obj):
        return target_from_callable(obj, arg=arg)
    raise TypeError(f"{arg}: expected a target spec string, a Target or a staging function, "
                    f"got {type(obj).__name__}")


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
    from hypothesis import core
    if core.global_force_seed is not None:
        return core.global_force_seed
    if derandomize:
        return 0
    return random.SystemRandom().randrange(2**32)


class StagecheckFixture:
    """What the ``stagecheck`` fixture returns."""

    def config(self, *, examples: int | None = None, device: str = "cpu",
               max_capacity: int = 8, seed=None, **options):
        """The ``CampaignConfig`` a call with these arguments runs under.

        ``options`` are further ``CampaignConfig`` fields (``timeout``,
        ``out_of_contract``, ...), passed through as given.
        """
        import dataclasses

        from oracles.differential import CampaignConfig
        known = {f.name for f in dataclasses.fields(CampaignConfig)}
        reserved = {"examples", "seed", "device", "max_capacity", "database", "derandomize"}
        wrong = sorted(set(options) - (known - reserved))
        if wrong:
            raise TypeError(f"stagecheck: unknown option(s) {', '.join(wrong)}; campaign "
                            f"options are {', '.join(sorted(known - reserved))} (the example "
                            "database and derandomize come from the hypothesis profile)")
        defaults = profile_defaults()
        if examples is None:
            examples = defaults["examples"]
        if not isinstance(examples, int) or isinstance(examples, bool) or examples < 1:
            raise ValueError(f"examples: {examples!r} is not a whole number >= 1")
        if not isinstance(max_capacity, int) or max_capacity < 1:
            raise ValueError(f"max_capacity: {max_capacity!r} is not a whole number >= 1")
        if device not in ("cpu", "cuda"):
            from oracles import messages
            raise ValueError(messages.BAD_DEVICE.format(value=device))
        seed = _resolve_seed(seed, defaults["derandomize"])
        return CampaignConfig(examples=examples, seed=seed, device=device,
                              max_capacity=max_capacity,
                              database=defaults["database"],
                              derandomize=defaults["derandomize"], **options)

    def run(self, baseline, candidate, *, examples: int | None = None, device: str = "cpu",
            max_capacity: int = 8, seed=None, **options):
        """Run the campaign and return its ``CampaignResult`` without asserting anything.

        ``baseline`` None checks ``candidate`` against the spec alone.
        """
        from oracles.differential import run_campaign
        from oracles.errors import TargetLoadError
        if device == "cuda":
            import torch
            if not torch.cuda.is_available():
                from oracles import messages
                pytest.skip(messages.CUDA_UNAVAILABLE.format(torch=torch.__version__))
        config = self.config(examples=examples, device=device, max_capacity=max_capacity,
                             seed=seed, **options)
        try:
            base = as_target(baseline, "baseline") if baseline is not None else None
            cand = as_target(candidate, "candidate" if baseline is not None else "target")
        except TargetLoadError as exc:
            pytest.fail(f"stagecheck: {exc}", pytrace=False)
        return run_campaign(base, cand, config)

    def assert_equivalent(self, baseline, candidate, *, examples: int | None = None,
                          strict: bool = False, device: str = "cpu", max_capacity: int = 8,
                          seed=None, **options):
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
                        device: str = "cpu", max_capacity: int = 8, seed=None, **options):
        """Fail the test with the report when ``target`` violates the spec."""
        result = self.run(None, target, examples=examples, device=device,
                          max_capacity=max_capacity, seed=seed, **options)
        self._check(result, strict, (None, target), options)
        return result

    @staticmethod
    def _check(result, strict: bool, given: tuple, options: dict) -> None:
        from oracles.report import text_report
        if result.verdict(strict) == "equivalent":
            return
        message = text_report(result, strict)
        hint = _reproduce_hint(result, given, options)
        if hint:
            message += "\n" + hint
        pytest.fail(message, pytrace=False)


def _reproduce_hint(result, given: tuple, options: dict) -> str:
    """The CLI command that re-runs this campaign, when both targets were given as specs."""
    baseline, candidate = given
    if not isinstance(candidate, str) or not (baseline is None or isinstance(baseline, str)):
        return ""
    c = result.config
    command = (f"stagecheck diff {baseline} {candidate}" if baseline is not None
               else f"stagecheck spec {candidate}")
    hint = (f"reproduce: {command} --examples {c.examples} --seed {c.seed} "
            f"--max-capacity {c.max_capacity} --device {c.device}")
    options = dict(options)
    if "timeout" in options:
        hint += f" --timeout {options.pop('timeout')}"
    if options.get("out_of_contract", True) is False:
        options.pop("out_of_contract")
        hint += " --no-out-of-contract"
    if options:
        hint += " (this test also set " + ", ".join(f"{k}={v!r}" for k, v in options.items()) + ")"
    return hint


@pytest.fixture
def stagecheck() -> StagecheckFixture:
    """Assert equivalence of two staging targets (``assert_equivalent``) or conformance
    of one to the spec (``assert_conforms``); findings become the failure message."""
    return StagecheckFixture()


def pytest_report_header(config):
    if config.option.verbose < 1:
        return None
    d = profile_defaults()
    return (f"stagecheck: hypothesis profile {d['profile']!r}: {d['examples']} examples per "
            f"stream, derandomize={d['derandomize']}, database={d['database']!r}")
