"""Everything the symbolic oracle takes from CrossHair's internals, in one place.

CrossHair's public surface (``crosshair check``, ``diffbehavior``) does not let a
caller drive its own exploration loop with its own path function, so stagecheck uses
a few internal names. They are imported here and nowhere else, behind a version
check: when an upgrade moves one, this module is the one to fix.
"""

from __future__ import annotations

from importlib import metadata
from typing import Any, Callable

from stagecheck.oracles import messages
from stagecheck.oracles.errors import StagecheckError

#: The oldest crosshair-tool whose internals this module has been run against
#: (pyproject's lower bound; docs/symbolic.md says how it was checked).
MIN_VERSION = (0, 0, 111)


def _version_tuple(text: str) -> tuple[int, ...]:
    parts = []
    for part in text.split("."):
        digits = "".join(ch for ch in part if ch.isdigit())
        if not digits:
            break
        parts.append(int(digits))
    return tuple(parts)


def check_version() -> str:
    """The installed crosshair-tool version; a ``StagecheckError`` when it is too old."""
    try:
        found = metadata.version("crosshair-tool")
    except metadata.PackageNotFoundError:
        raise StagecheckError(*_fmt(messages.CROSSHAIR_TOO_OLD, found="no version",
                                    needed=_needed())) from None
    if _version_tuple(found) < MIN_VERSION:
        raise StagecheckError(*_fmt(messages.CROSSHAIR_TOO_OLD, found=found, needed=_needed()))
    return found


def _needed() -> str:
    return ".".join(map(str, MIN_VERSION))


def _fmt(template: tuple[str, str], **fields) -> tuple[str, str]:
    return template[0].format(**fields), template[1].format(**fields)


check_version()

import crosshair.core_and_libs  # noqa: E402,F401  (registers CrossHair's symbolic types)
import z3  # noqa: E402
from crosshair.core import (PathOutcome, deep_realize, explore_loop,  # noqa: E402
                            proxy_for_type, suspected_proxy_intolerance_exception)
from crosshair.options import DEFAULT_OPTIONS, AnalysisOptionSet  # noqa: E402
from crosshair.statespace import (CallAnalysis, RootNode, VerificationStatus,  # noqa: E402
                                  model_value_to_python)
from crosshair.tracers import NoTracing, ResumedTracing  # noqa: E402
from crosshair.util import (ControlFlowException, CrosshairUnsupported,  # noqa: E402
                            IgnoreAttempt, NotDeterministic, PathTimeout, UnexploredPath)

# z3 catches SIGINT itself while a solver check runs (its "ctrl_c" parameter) and cancels
# the check instead: a Ctrl-C would be eaten and the exploration go on. stagecheck's own
# handler (oracles/interrupt.py) must see every signal, so z3 leaves them alone.
z3.set_param("ctrl_c", False)

__all__ = ["CallAnalysis", "CrosshairUnsupported", "IgnoreAttempt", "NotDeterministic",
           "PathOutcome", "PathTimeout", "ResumedTracing", "UnexploredPath", "VerificationStatus",
           "assume", "explore", "fork", "is_machinery", "realizer", "suspected_intolerance",
           "symbolic_bool", "symbolic_int"]


def symbolic_int(space, name: str):
    """A fresh symbolic int of the path."""
    with NoTracing():
        return proxy_for_type(int, name + space.uniq())


def symbolic_bool(space, name: str):
    with NoTracing():
        return proxy_for_type(bool, name + space.uniq())


def assume(space, condition) -> None:
    """Constrain the path without forking (``condition`` is a symbolic bool)."""
    with NoTracing():
        if type(condition) is bool:
            if not condition:
                raise IgnoreAttempt("assumption does not hold")
            return
        space.add(condition)


def fork(space, desc: str, probability_true: float) -> bool:
    """A fresh binary choice of the path (no value behind it)."""
    with NoTracing():
        return space.smt_fork(desc=desc, probability_true=probability_true)


def is_machinery(exc: BaseException) -> bool:
    """True for exceptions that belong to CrossHair's machinery, not to the target."""
    return isinstance(exc, (ControlFlowException, NotDeterministic, z3.Z3Exception))


def suspected_intolerance(exc: BaseException) -> bool:
    """True when ``exc`` looks like code that cannot take a symbolic value."""
    return isinstance(exc, Exception) and suspected_proxy_intolerance_exception(exc)


def detach(space) -> None:
    space.detach_path()


def explore(run_path: Callable[[Any], PathOutcome], timeout: float,
            per_path_timeout: float, max_iterations: int | None = None) -> bool:
    """Run CrossHair's exploration loop with ``run_path`` on each path; True if exhausted.

    ``max_iterations`` stops after that many paths (attempted, whatever their outcome):
    a path budget. CrossHair's path choices come from a ``random.Random`` with a fixed
    seed (``statespace.newrandom``) and z3 runs with fixed seeds, so with the same
    budget two runs take the same paths, unless a per-path or solver time limit cuts a
    path on one machine and not on the other.
    """
    options = DEFAULT_OPTIONS.overlay(AnalysisOptionSet(
        per_condition_timeout=timeout, per_path_timeout=per_path_timeout,
        max_iterations=max_iterations))
    return bool(explore_loop(options, RootNode(), run_path).exhausted)


def outcome(status: str = "unknown", breakout: bool = False) -> PathOutcome:
    """A path's outcome: ``confirmed`` (explored), ``unknown`` (lost) or ``none`` (stop)."""
    if status == "none":
        return PathOutcome(CallAnalysis(), breakout=breakout)
    verification = (VerificationStatus.CONFIRMED if status == "confirmed"
                    else VerificationStatus.UNKNOWN)
    return PathOutcome(CallAnalysis(verification), breakout=breakout)


_NOT_ATOMIC = object()


class realizer:
    """Concrete values for a finished (detached) path, from one solver model.

    ``deep_realize`` asks the solver twice per value, to record the alternative as an
    unexplored branch; on a detached path there is nothing left to branch, so atomic
    values (ints and bools) are read from one model instead. Other symbolic objects
    (draft lists, lazy strings) fall back to ``deep_realize``. Dataclasses are rebuilt
    field by field.
    """

    def __init__(self, space) -> None:
        self.space = space

    def __call__(self, value):
        with NoTracing():
            return self._walk(value)

    def _atomic(self, value):
        var = getattr(value, "var", None)
        if not isinstance(var, z3.ExprRef) or not (z3.is_int(var) or z3.is_bool(var)):
            return _NOT_ATOMIC
        model = self.space.witness()
        if model is None:
            return _NOT_ATOMIC
        out = model_value_to_python(model.eval(var, model_completion=True))
        return bool(out) if z3.is_bool(var) else int(out)

    def _walk(self, value):
        kind = type(value)
        if kind in (int, bool, str, float, type(None)):
            return value
        if kind is dict:
            return {self._walk(k): self._walk(v) for k, v in value.items()}
        if kind in (list, tuple):
            return kind(self._walk(v) for v in value)
        fields = getattr(kind, "__dataclass_fields__", None)
        if fields is not None:
            return kind(**{f: self._walk(getattr(value, f)) for f in fields})
        if hasattr(kind, "__ch_realize__"):
            atomic = self._atomic(value)
            if atomic is not _NOT_ATOMIC:
                return atomic
            return self._walk(deep_realize(value))
        return value


def realize_values(values):
    """``deep_realize`` (for numpy reading a list model)."""
    return deep_realize(values)
