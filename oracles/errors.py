"""Exceptions for misuse of stagecheck, rooted in one ``StagecheckError``.

Findings are never exceptions. Each error keeps its data (the value, the problem,
the fix) and owns its message; where the value came from (``argument BASELINE``,
``option --examples``, ``[tool.stagecheck] examples``, ``baseline=`` of the
fixture) is added by the front end that knows it, through ``located``.
"""

from __future__ import annotations

from typing import Any

__all__ = ["ConfigError", "ScenarioError", "SchemaError", "ShimError", "StagecheckError",
           "TargetLoadError", "UsageError"]


class StagecheckError(Exception):
    """Root of every error stagecheck raises for bad input; the CLI turns it into exit 2.

    ``problem`` says what is wrong with ``value`` (already in the sentence),
    ``fix`` what to do instead. ``where`` names the argument or option the value
    came from; only front ends (CLI, fixture, configuration) set it.
    """

    def __init__(self, problem: str, fix: str = "", *, value: Any = None,
                 where: str | None = None) -> None:
        super().__init__(problem)
        self.problem, self.fix, self.value, self.where = problem, fix, value, where

    @classmethod
    def of(cls, template: tuple[str, str], value: Any = None, **fields: Any):
        """Build from a ``(problem, fix)`` pair of ``messages`` and its fields."""
        problem, fix = template
        fields.setdefault("value", value)
        return cls(problem.format(**fields), fix.format(**fields), value=value)

    def located(self, where: str) -> "StagecheckError":
        """The same error, said of ``where`` (e.g. ``argument BASELINE``); returns self."""
        if self.where is None:
            self.where = where
        return self

    def __str__(self) -> str:
        text = self.problem + (f"; {self.fix}" if self.fix else "")
        return f"{self.where}: {text}" if self.where else text


class UsageError(StagecheckError):
    """A command-line argument or option value is wrong.

    ``option`` is the option's canonical name (``examples``); each front end
    spells it its own way (``--examples``, ``examples=``).
    """

    def __init__(self, problem: str, fix: str = "", *, value: Any = None,
                 option: str | None = None, where: str | None = None) -> None:
        super().__init__(problem, fix, value=value, where=where)
        self.option = option

    @classmethod
    def of(cls, template: tuple[str, str], value: Any = None, option: str | None = None,
           **fields: Any):
        error = super().of(template, value, **fields)
        error.option = option
        return error


class ConfigError(UsageError):
    """A ``[tool.stagecheck]`` table in pyproject.toml is wrong."""


class TargetLoadError(StagecheckError):
    """A target specification cannot be resolved to a staging function."""


class ShimError(TargetLoadError):
    """A shim file (``--shim``) cannot be read or imported: the front end says it of the
    shim option, not of the target that was loading it."""


class SchemaError(StagecheckError):
    """A staging schema cannot be found, imported, or is not right."""


class ScenarioError(StagecheckError):
    """A scenario (e.g. from a replay file) is malformed or cannot be built."""
