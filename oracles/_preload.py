"""Load every stagecheck module once, so that a seed gives the same examples however a
run starts (an import-order workaround for hypothesis; see ``preload_project_modules``)."""

from __future__ import annotations

import importlib
import pkgutil

__all__ = ["preload_project_modules"]

_PRELOADED = False
#: modules that pull in torch, triton or crosshair (seconds to import), or that only a
#: worker process runs: their constants stay out
_HEAVY = ("stagecheck.oracles.symbolic", "stagecheck.impl.postprocess",
          "stagecheck.impl.buffer", "stagecheck.oracles.kernel.",
          "stagecheck.oracles.worker")


def preload_project_modules() -> None:
    """Import the project's modules once, so that runs reproduce whichever way they start.

    Hypothesis draws part of its integers from a pool of constants it collects from
    every *local* module loaded at the time (test files excluded), and the pool grows
    as modules are imported; the same seed then gives other examples. Loading the
    project's modules first makes the pool the same for ``stagecheck diff``,
    ``stagecheck mutants``, worker processes and pytest.
    """
    global _PRELOADED
    if _PRELOADED:
        return
    _PRELOADED = True
    for name in ("stagecheck.spec", "stagecheck.impl", "stagecheck.oracles"):
        package = _try_import(name)
        if package is None:
            continue
        for info in _walk(package.__path__, name + "."):
            if not info.name.endswith(".__main__"):
                _try_import(info.name)


def _walk(path, prefix: str):
    """The modules ``pkgutil.walk_packages`` lists, except ``_HEAVY`` ones: it imports
    every package it enters, and the symbolic package's face would bring CrossHair (a
    second of every run, for constants ``_HEAVY`` keeps out anyway)."""
    for info in pkgutil.iter_modules(path, prefix):
        if info.name.startswith(_HEAVY):
            continue
        yield info
        if info.ispkg:
            package = _try_import(info.name)
            if package is not None:
                yield from _walk(getattr(package, "__path__", []), info.name + ".")


def _try_import(name: str):
    try:
        return importlib.import_module(name)
    except Exception:   # an optional dependency (triton, crosshair) missing: that one stays out
        return None
