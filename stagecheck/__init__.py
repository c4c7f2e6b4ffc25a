"""stagecheck: formal spec and differential testing of host-side staging code.

This is the public API; everything else under ``stagecheck.spec`` (the statement),
``stagecheck.impl`` (code under test) and ``stagecheck.oracles`` (the machinery) may
change between releases. Names are loaded on first use, so ``import stagecheck`` (and
the command line's start) costs no torch or hypothesis import.

    >>> import stagecheck
    >>> result = stagecheck.run_campaign("legacy", "single-loop")
    >>> result.verdict()
    'equivalent'

Targets are given as the command line takes them (a builtin name, ``module:function``,
``path/file.py::function``, ``git:REV:path/file.py::function``), as ``Target`` objects
(``load_target``) or as the staging function itself; options as a ``CampaignConfig``
(``CampaignConfig.from_options(examples=1000, timeout=2)``: the names and checks of
``stagecheck diff``'s options). Bad input raises one ``StagecheckError`` naming the
argument.
"""

import importlib as _importlib

__version__ = "0.1.0"

#: public name -> module that defines it (imported on first use)
_EXPORTS: dict[str, str] = {
    # targets
    "Target": "stagecheck.oracles.targets",
    "load_target": "stagecheck.oracles.targets",
    "target_from_callable": "stagecheck.oracles.targets",
    # scenarios
    "StagingScenario": "stagecheck.spec.scenario",
    "staging_scenarios": "stagecheck.oracles.generate",
    "out_of_contract_scenarios": "stagecheck.oracles.generate",
    # running
    "RunOptions": "stagecheck.oracles.options",
    "CampaignConfig": "stagecheck.oracles.options",
    "CampaignResult": "stagecheck.oracles.campaign",
    "run_campaign": "stagecheck.oracles.campaign",
    "Evaluation": "stagecheck.oracles.evaluate",
    "evaluate": "stagecheck.oracles.evaluate",
    # findings
    "Finding": "stagecheck.spec.findings",
    "ERROR": "stagecheck.spec.findings",
    "INFO": "stagecheck.spec.findings",
    # errors
    "StagecheckError": "stagecheck.oracles.errors",
    "UsageError": "stagecheck.oracles.errors",
    "ConfigError": "stagecheck.oracles.errors",
    "TargetLoadError": "stagecheck.oracles.errors",
    "ScenarioError": "stagecheck.oracles.errors",
    "SchemaError": "stagecheck.oracles.errors",
    # schemas
    "StagingSchema": "stagecheck.spec.schema",
    "load_schema": "stagecheck.oracles.schemas",
}

__all__ = ["__version__", *sorted(_EXPORTS)]


def __getattr__(name: str):
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'stagecheck' has no attribute {name!r}")
    value = getattr(_importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_EXPORTS))


def _check_exports() -> None:
    """``__all__`` is exactly what the facade offers: the lazily loaded names and the
    module's own public globals (checked at import, as hypothesis checks its own)."""
    public = {k for k in globals() if k.isidentifier() and not k.startswith("_")}
    public.add("__version__")
    offered = public | set(_EXPORTS)
    if set(__all__) != offered or len(__all__) != len(set(__all__)):
        raise ImportError(f"stagecheck.__all__ is out of step with what it offers: "
                          f"{sorted(set(__all__) ^ offered)}")


_check_exports()
