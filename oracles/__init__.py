"""The machinery of stagecheck: strategies, the instrumented buffer, target loading,
runners, comparisons, reports and the command line."""

from stagecheck.oracles.errors import ScenarioError, StagecheckError, TargetLoadError, UsageError

__all__ = ["ScenarioError", "StagecheckError", "TargetLoadError", "UsageError"]
