"""The kill matrix: each mutant's outcome under each oracle, and the mutation scores."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Iterable

from stagecheck.oracles.mutants.generate import Mutant

__all__ = ["ORACLES", "STAGECHECK_ORACLES", "MutantResult", "MutationReport", "OracleOutcome"]

#: Oracle names, in kill-matrix column order; ``upstream`` is the baseline.
ORACLES = ("spec", "differential", "kernel", "symbolic", "upstream")
STAGECHECK_ORACLES = ("spec", "differential", "kernel", "symbolic")


@dataclass
class OracleOutcome:
    status: str                      # killed | survived | n/a | inconclusive | error
    examples: int | None = None      # examples until the first error finding
    seconds: float = 0.0             # wall time of this oracle on this mutant
    kill_seconds: float | None = None   # symbolic: seconds to the first counterexample
    finding: str | None = None       # what killed it
    infos: list[str] = field(default_factory=list)   # info findings seen (survivors)
    note: str | None = None

    @property
    def killed(self) -> bool:
        return self.status == "killed"

    def cell(self) -> str:
        if self.status == "killed":
            if self.examples is not None:
                return f"✓ {self.examples}ex"
            if self.kill_seconds is not None:
                return f"✓ {self.kill_seconds:.1f}s"
            return f"✓ {self.note}" if self.note else "✓"
        return {"survived": "-", "n/a": "n/a", "inconclusive": "?", "error": "err"}[self.status]

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)


@dataclass
class MutantResult:
    mutant: Mutant
    outcomes: dict[str, OracleOutcome] = field(default_factory=dict)
    load_error: str | None = None

    def killed_by(self, oracles: Iterable[str]) -> list[str]:
        return [o for o in oracles if o in self.outcomes and self.outcomes[o].killed]

    @property
    def killed_by_stagecheck(self) -> bool:
        return bool(self.killed_by(STAGECHECK_ORACLES))

    @property
    def killed_by_any(self) -> bool:
        return bool(self.killed_by(ORACLES))

    @property
    def equivalent(self) -> bool:
        """Labeled equivalent (with a reason) and killed by no oracle."""
        return bool(self.mutant.equivalent_reason) and not self.killed_by_any

    @property
    def reason_withdrawn(self) -> bool:
        return bool(self.mutant.equivalent_reason) and self.killed_by_any

    def to_dict(self) -> dict:
        return {**self.mutant.to_dict(), "outcomes": {k: v.to_dict()
                                                      for k, v in self.outcomes.items()},
                "killed_by": self.killed_by(ORACLES), "equivalent": self.equivalent,
                "load_error": self.load_error}


@dataclass
class MutationReport:
    target: str
    filename: str
    function: str
    oracles: list[str]
    budget: int
    symbolic_timeout: float
    symbolic_paths: int | None = None
    results: list[MutantResult] = field(default_factory=list)
    unavailable: dict[str, str] = field(default_factory=dict)   # oracle -> why n/a
    control: dict[str, str] = field(default_factory=dict)       # oracle -> unmutated verdict
    seconds: float = 0.0
    interrupted: str | None = None   # the signal that stopped the run: the results are the
                                     # mutants finished before it (no verdict)

    @property
    def ran(self) -> list[str]:
        return [o for o in self.oracles if o not in self.unavailable]

    @property
    def non_equivalent(self) -> list[MutantResult]:
        return [r for r in self.results if not r.equivalent]

    def score(self, oracles: Iterable[str]) -> tuple[int, int]:
        """(killed by any of ``oracles``, non-equivalent mutants)."""
        oracles = [o for o in oracles if o in self.ran]
        pool = self.non_equivalent
        return sum(1 for r in pool if r.killed_by(oracles)), len(pool)

    @property
    def stagecheck_score(self) -> tuple[int, int]:
        return self.score(STAGECHECK_ORACLES)

    @property
    def upstream_score(self) -> tuple[int, int]:
        return self.score(["upstream"])

    @property
    def survivors(self) -> list[MutantResult]:
        return [r for r in self.results if not r.killed_by_stagecheck]

    def control_fails(self) -> list[str]:
        """The oracles that already fail on the unmutated source (a target that exits,
        crashes or breaks the spec): their kills prove nothing about the oracles."""
        return [oracle for oracle, verdict in self.control.items()
                if verdict not in ("clean", "passes")]

    def all_killed(self) -> bool:
        """Every mutant killed, by oracles that pass on the unmutated source."""
        if self.control_fails():
            return False
        killed, total = self.stagecheck_score
        return killed == total

    def to_dict(self) -> dict:
        def pct(pair):
            k, n = pair
            return {"killed": k, "total": n, "score": (k / n if n else 1.0)}
        return {
            "target": self.target, "filename": self.filename, "function": self.function,
            "oracles": self.oracles, "unavailable": self.unavailable, "budget": self.budget,
            "symbolic_timeout": self.symbolic_timeout, "symbolic_paths": self.symbolic_paths,
            "control": self.control, "control_fails": self.control_fails(),
            "seconds": round(self.seconds, 2), "mutants": len(self.results),
            "interrupted": self.interrupted,
            "equivalent": [r.mutant.id for r in self.results if r.equivalent],
            "scores": {**{o: pct(self.score([o])) for o in self.ran},
                       "stagecheck": pct(self.stagecheck_score),
                       "upstream_baseline": pct(self.upstream_score)},
            "results": [r.to_dict() for r in self.results],
        }
