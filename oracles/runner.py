"""Where the code under test runs: isolated worker processes, or (on request) here.

Every command runs targets through a ``Runner``. ``isolated_runner`` loads the
targets into a worker process (``oracles/worker.py``) and gives back targets for
the checker, which never calls them itself; ``InProcessRunner`` calls them in this
process (the in-process baseline of the isolation benchmark, and plain callables
that a worker cannot import, such as lambdas).
"""

from __future__ import annotations

from typing import Protocol

from stagecheck.oracles.options import RunOptions
from stagecheck.oracles.targets import Target
from stagecheck.spec.observation import Observation
from stagecheck.spec.scenario import StagingScenario

__all__ = ["InProcessRunner", "Runner", "isolated_runner", "runner_for"]


class Runner(Protocol):
    """Runs loaded targets on scenarios; one observation per side per scenario."""

    targets: list[Target]

    def observe(self, sides: list[int], batch: list[tuple[int, StagingScenario]],
                options: RunOptions, backend: str = "fast"
                ) -> list[tuple[int, list[Observation]]]: ...

    def close(self) -> None: ...


class InProcessRunner:
    """Calls the targets in this process (no isolation)."""

    def __init__(self, targets: list[Target]) -> None:
        self.targets = list(targets)

    def observe(self, sides, batch, options: RunOptions, backend: str = "fast"):
        from stagecheck.oracles.observe import observe
        out = []
        for index, scenario in batch:
            out.append((index, [observe(self.targets[side], scenario, options,
                                        _backend(backend, options)) for side in sides]))
        return out

    def close(self) -> None:
        pass

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _backend(kind: str, options: RunOptions):
    if kind == "fast" and options.device == "cpu" and not options.deferred_copies:
        from stagecheck.oracles.observe.fast import FastBackend
        return FastBackend()
    from stagecheck.oracles.observe.instrumented import InstrumentedBackend
    return InstrumentedBackend(options.device, options.deferred_copies)


class _IsolatedRunner:
    """A ``WorkerPool`` with its targets loaded."""

    def __init__(self, pool, targets: list[Target]) -> None:
        self.pool, self.targets = pool, targets

    def observe(self, sides, batch, options: RunOptions, backend: str = "fast"):
        kind = "fast" if (backend == "fast" and options.device == "cpu"
                          and not options.deferred_copies) else "instrumented"
        return self.pool.observe(sides, batch, options, kind)

    def close(self) -> None:
        self.pool.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def isolated_runner(targets: list[Target], memory_mib: int | None = None) -> _IsolatedRunner:
    """Load ``targets`` into a fresh worker; the runner holds the checker's copies."""
    from stagecheck.oracles.worker import DEFAULT_MEMORY_MIB, WorkerPool
    pool = WorkerPool(memory_mib or DEFAULT_MEMORY_MIB)
    schemas = {t.ref.schema: t.schema for t in targets if t.ref is not None}
    try:
        loaded = pool.load([t.ref for t in targets], schemas)
    except BaseException:
        pool.close()
        raise
    return _IsolatedRunner(pool, loaded)


def runner_for(targets: list[Target], isolated: bool = True,
               memory_mib: int | None = None) -> Runner:
    """An isolated runner when every target can be loaded in a worker (it has a
    ``ref``), else an in-process one."""
    if isolated and all(t.ref is not None for t in targets):
        return isolated_runner(targets, memory_mib)
    return InProcessRunner(targets)
