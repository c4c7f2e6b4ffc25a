"""Progress of each command on stderr (``oracles/progress.py`` draws it): a started
``Progress`` unless ``--quiet``, and the adapters from each search's callback to it."""

from __future__ import annotations

from stagecheck.oracles import interrupt, messages
from stagecheck.oracles.options import CampaignConfig
from stagecheck.oracles.campaign import progress_plan
from stagecheck.oracles.progress import PartsCount, Progress

__all__ = ["CampaignProgress", "MutantProgress", "progress_of"]


def progress_of(values: dict, label: str, unit: str, total: int | None = None,
                counters: tuple[str, ...] = ()) -> Progress | None:
    """A started ``Progress`` on stderr, or None under ``--quiet``."""
    if values.get("quiet"):
        return None
    return Progress(label, unit, total, counters=counters, stopped=interrupt.requested).start()


#: what the progress line says while the campaign does work other than examples (no time
#: left then: the examples' rate says nothing of how long it takes)
DOING = {"shrink": messages.PROGRESS_SHRINKING,
         "kernel impact": "running the findings through the kernel:"}


class CampaignProgress:
    """``run_campaign``'s progress callback: the whole campaign as one count (both
    streams, then the edge cases; ``campaign.progress_plan``, ``progress.PartsCount``)."""

    def __init__(self, progress: Progress, config: CampaignConfig) -> None:
        self.progress, self.count = progress, PartsCount(progress_plan(config))
        progress.update(*self.count.totals())

    def __call__(self, stream: str, done: int, total: int, findings: int = 0,
                 phase: str = "random", stalled: float = 0.0, doing: str = "") -> None:
        label = DOING.get(doing, doing) if doing else "edge cases" if phase == "edge" else ""
        self.progress.update(*self.count.at(f"{phase} {stream}", done, total),
                             findings=findings, phase=label, stalled=stalled,
                             estimate=not doing)

    def close(self) -> None:
        self.progress.update(*self.count.finish(), phase="")
        self.progress.close()


class MutantProgress:
    """``run_mutants``' callback: one line per mutant (its row of the matrix) and the
    progress line (done/total, kills, ETA); ``--quiet``: nothing."""

    def __init__(self, progress: Progress | None) -> None:
        self.progress, self.killed, self.equivalent = progress, 0, 0

    def __call__(self, res, done: int, total: int) -> None:
        if self.progress is None:
            return
        self.killed += bool(res.killed_by_stagecheck)
        self.equivalent += bool(res.equivalent)
        cells = " ".join(f"{o}={out.cell()}" for o, out in res.outcomes.items())
        self.progress.print_above(f"[{done}/{total}] {res.mutant.id} {res.mutant.operator} "
                                  f"{res.mutant.location}: {cells}")
        self.progress.update(done, total, killed=self.killed, equivalent=self.equivalent,
                             survived=done - self.killed - self.equivalent)
