"""How the campaign shrinks a stream's error findings (a mixin of the campaign's search).

A finding of calls that returned (or raised) is shrunk on its values and size, on the
fast buffers where they show it (``shrink_values``); a finding of a call that hung or
ended its process by size only, one candidate at a time under a shorter time limit
(``shrink_stopped``). The scenario shrinker itself is ``oracles/shrink.py``.
"""

from __future__ import annotations

import json
import time
from dataclasses import replace

from stagecheck.oracles import interrupt
from stagecheck.oracles.observe.call import WALL_FACTOR
from stagecheck.oracles.shrink import BATCH as SHRINK_BATCH, MAX_EVALUATIONS, SIZE_PASSES, shrink
from stagecheck.oracles.worker.deadlines import GRACE_SECONDS
from stagecheck.spec import ERROR, Finding, StagingScenario

__all__ = ["STOPPED_SHRINK_SECONDS", "STOPPED_SHRINK_TRIES", "STOPPED_TRY_FLOOR",
           "STOPPED_TRY_FRACTION", "Shrinking"]

#: seconds the shrinking of a call that hangs or ends its process may take, its tries
#: together (each try that still hangs costs its deadline): at least this, and at least
#: ``STOPPED_SHRINK_TRIES`` deadlines of one try
STOPPED_SHRINK_SECONDS = 10.0
STOPPED_SHRINK_TRIES = 4
#: the time limit of one such try, as a fraction of ``--timeout`` (at least
#: ``STOPPED_TRY_FLOOR`` seconds, at most ``--timeout``): a candidate of the shrinker is
#: smaller than the example that hung at the full limit, and a correct call takes
#: milliseconds. The scenario the shrinker settles on is run once more at the full limit
#: (where its try had a shorter one): a try's hang is not taken for one at the limit
STOPPED_TRY_FRACTION = 0.1
STOPPED_TRY_FLOOR = 0.5


class Shrinking:
    """The search's shrinking of error findings (``_Search`` in ``oracles/campaign.py``
    gives the runner, the judge and the collector)."""

    def shrink(self, s: StagingScenario, findings: list[Finding],
               engine: str = "random") -> None:
        """Shrink ``s`` for the error findings it showed: each kept at the smallest
        scenario that still shows it (a key the first shrunk scenario no longer shows
        is shrunk again from ``s``, on its own)."""
        with self.doing_now("shrink"):
            self._shrink(s, findings, engine)

    def _shrink(self, s: StagingScenario, findings: list[Finding], engine: str) -> None:
        started = time.perf_counter()
        try:
            keys = {f.key for f in findings if f.severity == ERROR}
            if any(f.extra.get("kind") in ("hang", "crash") for f in findings if f.key in keys):
                stalled = self.stalled
                self.shrink_stopped(s, findings, keys, engine)
                self.stalled = stalled + time.perf_counter() - started
            else:
                self.shrink_values(s, keys, engine)
        finally:
            self.result.shrink_seconds += time.perf_counter() - started

    def shrink_stopped(self, s: StagingScenario, findings: list[Finding], keys: set,
                       engine: str) -> None:
        """Shrink an example on which a call hung or ended its process, by size only
        (``SIZE_PASSES``: fewer requests and slots, its values as they were).

        Every try that still fails costs a deadline (or a new worker), so: each candidate
        runs once (no scenario twice, and the one settled on is not run again to judge
        it), one at a time, under a shorter time limit (``STOPPED_TRY_FRACTION``), within
        ``STOPPED_SHRINK_SECONDS`` in all; the scenario settled on is then run once at the
        full limit, where its try had a shorter one and hung, and kept only if it still
        shows the findings there (else ``s`` is, which showed them at the full limit).
        The sizes go smallest first (``SIZE_PASSES``): a call that fails on every input
        settles on the empty batch in one try. The tries run on the search's buffers."""
        full = self.config.run
        seconds = min(full.timeout, max(STOPPED_TRY_FLOOR, full.timeout * STOPPED_TRY_FRACTION))
        options = replace(self.fast, timeout=seconds)
        try_wall = seconds * full.steps * WALL_FACTOR + GRACE_SECONDS
        until = time.perf_counter() + max(STOPPED_SHRINK_SECONDS, STOPPED_SHRINK_TRIES * try_wall)
        tried: dict[str, list[Finding]] = {}
        shown: dict[str, list[Finding]] = {}     # candidates that still failed: findings
        # the buffers the search found it on: a call that stops stops on them, and each
        # try may cost a new worker (the instrumented ones load torch in it: seconds)
        backend = self.backend()

        def text(c: StagingScenario) -> str:
            return json.dumps(c.to_dict(), sort_keys=True, default=repr)

        def still_fails(candidates: list[StagingScenario]) -> int | None:
            for position, c in enumerate(candidates):
                key = text(c)
                if key not in tried:
                    tried[key] = self.evaluate(c, backend, options=options)
                if any(f.key in keys for f in tried[key]):
                    shown[key] = tried[key]
                    return position
            return None

        def stop() -> bool:
            return bool(interrupt.requested()) or time.perf_counter() > until

        smallest, _ = shrink(self.schema, s, still_fails, max_evaluations=MAX_EVALUATIONS,
                             stop=stop, batch_size=1, passes=SIZE_PASSES)
        final = [f for f in findings if f.key in keys]
        if smallest is not s:
            found = shown[text(smallest)]
            # once at the full limit, where the try's hang may be its shorter limit's (a
            # call that ended its process ended it at any limit: no new worker for that)
            if (seconds < full.timeout and not interrupt.requested()
                    and any(f.extra.get("kind") != "crash" for f in found if f.key in keys)):
                found = self.evaluate(smallest, backend)
            if any(f.key in keys for f in found):
                final = [f for f in found if f.key in keys]
            else:            # not at the full limit: the example that hung there stays
                smallest = s
        self.record(final, smallest, engine, final=True)

    def shrink_values(self, s: StagingScenario, keys: set, engine: str) -> None:
        """``shrink`` of findings of calls that returned (or raised)."""
        budget, batch = MAX_EVALUATIONS, SHRINK_BATCH
        while keys and not interrupt.requested():
            backend = self.shrink_backend(s, keys)

            def still_fails(candidates: list[StagingScenario], keys=frozenset(keys),
                            backend=backend) -> int | None:
                results = self.observe(list(enumerate(candidates)), backend)
                for position, observations in sorted(results, key=lambda r: r[0]):
                    found = self.judge(candidates[position], observations)
                    if any(f.key in keys for f in found):
                        return position
                return None

            # a signal stops the shrinking; the smallest failing scenario so far is kept
            smallest, _ = shrink(self.schema, s, still_fails, max_evaluations=budget,
                                 stop=interrupt.requested, batch_size=batch)
            final = [f for f in self.evaluate(smallest) if f.key in keys]
            self.record(final, smallest, engine, final=True)
            shown = {f.key for f in final}
            if not shown:         # the example no longer fails (a flaky target): done
                return
            keys -= shown

    def shrink_backend(self, s: StagingScenario, keys: set) -> str:
        """The buffers the shrinker's candidates run on: the fast ones where they show
        every finding being shrunk on ``s`` itself (the findings of the values; their
        large candidates cost a fraction), else the instrumented ones (the order of
        writes). The scenario it settles on is run instrumented either way."""
        if self.backend() != "fast":
            return "instrumented"
        ((_, observations),) = self.observe([(0, s)], "fast")
        shown = {f.key for f in self.judge(s, observations)}
        return "fast" if keys <= shown else "instrumented"
