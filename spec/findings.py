"""The one report type every oracle returns: a list of ``Finding``; empty means clean."""

from __future__ import annotations

import dataclasses
import hashlib
import json
from dataclasses import dataclass
from typing import Any

ERROR = "error"
INFO = "info"


@dataclass(frozen=True)
class Finding:
    """One observed violation or difference.

    ``side`` says whose behaviour the finding is about: ``baseline`` or
    ``candidate`` for a spec violation, ``both`` for a difference between them.
    ``kernel_impact`` is True/False once the kernel oracle has run on the
    example, None when it has not (or could not). Findings are values: a stage
    that adds to one (its scenario, its kernel impact) makes a new one with
    ``dataclasses.replace``.
    """

    invariant: str
    severity: str
    message: str
    side: str = "both"
    field: str | None = None
    slot: int | None = None
    view: str | None = None          # "cpu" | "gpu" | None
    in_contract: bool = True
    baseline: Any = None
    candidate: Any = None
    expected: Any = None
    kernel_impact: bool | None = None
    scenario: dict | None = None
    examples_to_find: int | None = None
    extra: dict = dataclasses.field(default_factory=dict)

    @property
    def key(self) -> tuple:
        """Identity of the finding across examples (what counts as 'the same bug')."""
        return (self.invariant, self.severity, self.side, self.field, self.view,
                self.in_contract, self.extra.get("kind"))

    @property
    def id(self) -> str:
        digest = hashlib.sha1(repr(self.key).encode()).hexdigest()[:10]
        return f"{self.invariant}-{digest}"

    def to_dict(self) -> dict:
        data = dataclasses.asdict(self)
        data["id"] = self.id
        return json.loads(json.dumps(data, default=repr))

    @classmethod
    def from_dict(cls, data: dict) -> "Finding":
        names = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in names})


def context_label(f: Finding) -> str:
    """How a report introduces ``f.extra["context"]``: why an info finding is allowed, or
    why an error finding is one."""
    return "why allowed" if f.severity == INFO else "why an error"


def sort_key(f: Finding) -> tuple:
    """Report order: errors first, then by invariant, side and field."""
    return (f.severity != ERROR, f.invariant, f.side, str(f.field))


class FindingsResult:
    """Mixin for an oracle's result that holds ``findings``: errors, infos, verdict."""

    findings: list[Finding]

    @property
    def errors(self) -> list[Finding]:
        return [f for f in self.findings if f.severity == ERROR]

    @property
    def infos(self) -> list[Finding]:
        return [f for f in self.findings if f.severity == INFO]

    def verdict(self, strict: bool = False) -> str:
        """"different" on an error finding (or on any finding with ``strict``)."""
        return "different" if self.errors or (strict and self.infos) else "equivalent"
