"""Exceptions for misuse of stagecheck. Findings are never exceptions."""


class StagecheckError(Exception):
    """Root of every error stagecheck raises for bad input; the CLI turns it into exit 2."""


class UsageError(StagecheckError):
    """A command-line argument or option is wrong."""


class TargetLoadError(StagecheckError):
    """A target specification cannot be resolved to a staging function."""


class ScenarioError(StagecheckError):
    """A scenario (e.g. from a replay file) is malformed."""
