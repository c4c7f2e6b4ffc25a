"""What a symbolic run found and how much it explored."""

from __future__ import annotations

from dataclasses import dataclass, field

from stagecheck.oracles import messages
from stagecheck.oracles.errors import StagecheckError
from stagecheck.oracles.results import TargetPair
from stagecheck.spec.findings import Finding, FindingsResult

__all__ = ["LostPath", "SymbolicInconclusive", "SymbolicResult", "raise_if_inconclusive"]


class SymbolicInconclusive(StagecheckError):
    """The symbolic run cannot vouch for anything: no path explored, or paths lost.

    The result rides on the exception, so its findings are not lost.
    """

    def __init__(self, problem: str, fix: str, result: "SymbolicResult | None" = None) -> None:
        super().__init__(problem, fix)
        self.result = result


@dataclass
class LostPath:
    """A path that did not count as explored, and why."""

    kind: str            # "unsupported" | "model-mismatch" | "crosshair" | "timeout"
    reason: str
    scenario: dict | None = None


@dataclass
class SymbolicResult(TargetPair, FindingsResult):
    findings: list[Finding] = field(default_factory=list)
    paths_explored: int = 0
    paths_unsupported: int = 0
    paths_timed_out: int = 0
    paths_ignored: int = 0
    paths_concretized: int = 0
    paths_with_difference: int = 0
    seconds: float = 0.0
    first_counterexample_seconds: float | None = None
    exhausted: bool = False
    lost: list[LostPath] = field(default_factory=list)
    max_capacity: int = 4
    timeout: float = 30.0
    max_paths: int | None = None     # the path budget, when one was given
    paths_attempted: int = 0         # paths started (explored, lost, pruned, timed out)
    interrupted: str | None = None   # the signal that stopped the run early (no verdict)

    def verdict(self, strict: bool = False) -> str:
        """"different" on an error finding (with ``strict``, on any finding); else
        "undecided" when values became concrete on an explored path (on those paths
        value-level differences were sampled, not searched, so EQUIVALENT would claim
        more than was shown); else "equivalent"."""
        verdict = super().verdict(strict)
        if verdict == "equivalent" and self.paths_concretized:
            return "undecided"
        return verdict

    def to_dict(self) -> dict:
        return {
            "baseline": self.baseline, "candidate": self.candidate,
            "verdict": "interrupted" if self.interrupted else self.verdict(),
            "interrupted": self.interrupted,
            "findings": [f.to_dict() for f in self.findings],
            "paths_attempted": self.paths_attempted, "max_paths": self.max_paths,
            "paths_explored": self.paths_explored, "paths_unsupported": self.paths_unsupported,
            "paths_timed_out": self.paths_timed_out, "paths_ignored": self.paths_ignored,
            "paths_concretized": self.paths_concretized,
            "paths_with_difference": self.paths_with_difference,
            "seconds": self.seconds,
            "first_counterexample_seconds": self.first_counterexample_seconds,
            "exhausted": self.exhausted,
            "lost": [vars(p) for p in self.lost[:20]],
            "max_capacity": self.max_capacity, "timeout": self.timeout,
        }


def raise_if_inconclusive(result: SymbolicResult) -> None:
    """Raise ``SymbolicInconclusive`` unless the run can vouch for its verdict."""
    if result.paths_explored == 0:
        why = "; ".join(sorted({p.reason for p in result.lost})[:3]) or "none completed"
        problem, fix = messages.SYMBOLIC_NO_PATH
        raise SymbolicInconclusive(problem.format(
            seconds=result.seconds, unsupported=result.paths_unsupported,
            timed_out=result.paths_timed_out, pruned=result.paths_ignored, why=why), fix, result)
    if result.paths_unsupported:
        reasons = sorted({p.reason for p in result.lost if p.kind != "timeout"})
        problem, fix = messages.SYMBOLIC_LOST
        raise SymbolicInconclusive(problem.format(
            lost=result.paths_unsupported,
            total=result.paths_explored + result.paths_unsupported, first=reasons[0]),
            fix, result)
