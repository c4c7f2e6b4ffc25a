"""The pytest fixture's targets: what a test gives (a target spec, a ``Target``, a staging
function) as targets loaded in a worker process only, never in the test's process, as
the command line loads them; what no worker can load is refused with a message.

The oracles load on the fixture's first use: every pytest session imports the plugin
(``oracles/pytest_plugin.py``), and with it this module.
"""

from __future__ import annotations

import importlib.util
import inspect
import os
import sys

from stagecheck.oracles import messages
from stagecheck.oracles.errors import ShimError, StagecheckError, TargetLoadError, UsageError
from stagecheck.oracles.text import short_text

__all__ = ["as_target", "callable_ref", "isolated_runner", "refuse_non_function"]


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
        refuse_non_function(obj)
        return target_from_callable(obj)
    except StagecheckError as exc:
        raise exc.located(where) from None


def refuse_non_function(obj) -> None:
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


def isolated_runner(baseline, candidate, shims=()):
    """A runner holding the two targets, loaded in a worker process only, never in the
    test's process, as the command line loads them: spec strings are read here (a
    revision resolved to its commit once) and loaded there; a plain function is loaded
    there by its module's name, or by its file and name (``callable_ref``); what a worker
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
                        else callable_ref(x, name, shims))
        except StagecheckError as exc:
            raise exc.located(name) from None
    try:
        return load_isolated(refs)
    except StagecheckError as exc:     # a shim that cannot be read or imported: shims=
        index = getattr(exc, "target_index", 0)
        raise exc.located("shims" if isinstance(exc, ShimError) else items[index][1]) from None


def callable_ref(obj, where: str, shims=()):
    """How a worker loads ``obj`` (a function, or a ``Target``): by ``module:name`` when the
    worker can import that module by name and finds this very function there, else as a
    file target ``path.py::name``; a ``TargetLoadError`` for what no worker can load."""
    # the oracles load on the fixture's first use (see as_target)
    from stagecheck.oracles.targets import Target, target_ref
    if isinstance(obj, Target):
        if obj.ref is not None:
            return obj.ref
        obj = obj.func
    refuse_non_function(obj)
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
