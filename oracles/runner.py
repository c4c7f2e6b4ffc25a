"""Where the code under test runs: isolated worker processes, or (on request) here.

Every command runs targets through a ``Runner``. ``isolated_runner`` loads the
targets into a worker process (``oracles/worker/``) and gives back targets for
the checker, which never calls them itself; ``InProcessRunner`` calls them in this
process (the in-process baseline of the isolation benchmark, and plain callables
that a worker cannot import, such as lambdas).
"""

from __future__ import annotations

import importlib
from dataclasses import replace
from typing import Protocol

from stagecheck.oracles import messages
from stagecheck.oracles.errors import SchemaError
from stagecheck.oracles.observe import observe
from stagecheck.oracles.observe.call import WALL_FACTOR
from stagecheck.oracles.observe.backends import backend_kind, make_backend
from stagecheck.oracles.options import RunOptions
from stagecheck.oracles.schemas import load_schema
from stagecheck.oracles.stdio import note
from stagecheck.oracles.targets import Target
from stagecheck.oracles.worker import WorkerEnded, WorkerPool, stream_batches
from stagecheck.oracles.worker.blame import WorkerDied
from stagecheck.oracles.worker.deadlines import probe_seconds
from stagecheck.oracles.worker.protocol import held_targets
from stagecheck.spec.observation import Observation
from stagecheck.spec.scenario import StagingScenario

__all__ = ["InProcessRunner", "Runner", "SCHEMA_SECONDS", "close_after_campaign",
           "isolated_runner", "load_isolated", "load_schema_isolated", "runner_for", "side_of"]

#: CPU seconds a worker may take to load a schema file and dry-run it (``WALL_FACTOR``
#: times that on the wall clock; ``STAGECHECK_LOAD_SECONDS`` lowers it): a schema's code
#: returns in milliseconds
SCHEMA_SECONDS = 5.0


class Runner(Protocol):
    """Runs loaded targets on scenarios; one observation per side per scenario."""

    targets: list[Target]

    def observe(self, sides: list[int], batch: list[tuple[int, StagingScenario]],
                options: RunOptions, backend: str = "fast"
                ) -> list[tuple[int, list[Observation]]]: ...

    def stream(self, sides: list[int], batches, options: RunOptions, backend: str = "fast",
               sample_every: int = 0, jobs: int = 1): ...

    def call(self, module: str, name: str, *args, deadline: float | None = None,
             steps: int | None = None): ...

    def close(self) -> None: ...


class InProcessRunner:
    """Calls the targets in this process (no isolation)."""

    def __init__(self, targets: list[Target]) -> None:
        self.targets = list(targets)
        self._fast = None

    def observe(self, sides, batch, options: RunOptions, backend: str = "fast",
                sample_every: int = 0):

        kind = backend_kind(backend, options)
        fast = self._fast if kind == "fast" and self._fast is not None \
            else make_backend(kind, options)
        if kind == "fast" and options.device == "cuda":
            self._fast = fast              # its pinned buffers are kept
        instrumented = make_backend("instrumented", options)
        quick = replace(options, gpu_busy_cycles=0) if kind == "fast" else options
        out = []
        for index, scenario in batch:
            sampled = sample_every and index % sample_every == 0
            out.append((index, [observe(self.targets[side], scenario,
                                        options if sampled else quick,
                                        instrumented if sampled else fast)
                                for side in sides]))
        return out

    def stream(self, sides, batches, options: RunOptions, backend: str = "fast",
               sample_every: int = 0, jobs: int = 1):
        """One answer per batch, in order (``jobs`` is ignored: one process)."""
        for batch in batches:
            yield self.observe(sides, batch, options, backend, sample_every)

    def call(self, module: str, name: str, *args, deadline: float | None = None,
             steps: int | None = None):
        """``module.name(*args)`` here; ``target_arg(i)`` stands for target ``i``."""

        args = held_targets(args, self.targets)
        return getattr(importlib.import_module(module), name)(*args)

    def close(self) -> None:
        pass

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class _IsolatedRunner:
    """A ``WorkerPool`` with its targets loaded."""

    def __init__(self, pool, targets: list[Target]) -> None:
        self.pool, self.targets = pool, targets
        self._more: list = []          # further pools for ``stream`` with jobs > 1

    def observe(self, sides, batch, options: RunOptions, backend: str = "fast",
                sample_every: int = 0):
        return self.pool.observe(sides, batch, options, backend_kind(backend, options),
                                 sample_every)

    def stream(self, sides, batches, options: RunOptions, backend: str = "fast",
               sample_every: int = 0, jobs: int = 1):
        """One answer per batch, in order, the batches spread over ``jobs`` workers that
        run ahead of the checker (``worker.stream_batches``)."""
        while len(self._more) < jobs - 1:
            self._more.append(self.pool.clone())
        pools = [self.pool] + self._more[: jobs - 1]
        return stream_batches(pools, sides, batches, options, backend_kind(backend, options),
                              sample_every)

    def call(self, module: str, name: str, *args, deadline: float | None = None,
             steps: int | None = None):
        """``module.name(*args)`` in the worker; ``target_arg(i)`` stands for target ``i``.
        A worker that ends or passes ``deadline`` (with ``steps``: per unit the call
        marks, ``WorkerPool.call``) raises ``WorkerEnded``."""
        return self.pool.call(module, name, *args, deadline=deadline, steps=steps)

    def close(self) -> None:
        """Close every pool, then raise the first one's ``WorkerDied`` (if any)."""
        died = None
        for pool in [*self._more, self.pool]:
            try:
                pool.close()
            except WorkerDied as exc:
                died = died or exc
        if died is not None:
            raise died

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def close_after_campaign(runner: Runner, found_errors: bool) -> None:
    """Close the runner of a campaign that finished. A worker that, at its close, had ended
    or held what could end it later (``WorkerDied``: after every call the run made) leaves
    a run that found no error without a verdict (it would have passed); where the run found
    errors, they stand (each was seen in a call that returned or ended before it: exit 1),
    and a line on stderr says what the worker held."""
    try:
        runner.close()
    except WorkerDied as died:
        if not found_errors:
            raise
        note(messages.WORKER_DIED_AFTER_ERRORS.format(error=died))


def isolated_runner(targets: list[Target], memory_mib: int | None = None) -> _IsolatedRunner:
    """Load ``targets`` into a fresh worker; the runner holds the checker's copies."""
    schemas = {t.ref.schema: t.schema for t in targets if t.ref is not None}
    return load_isolated([t.ref for t in targets], schemas, memory_mib)


def load_isolated(refs: list, schemas: dict | None = None, memory_mib: int | None = None,
                  pool=None) -> _IsolatedRunner:
    """Load targets by reference into a worker, never into this process: a loading
    error names the target (``target_index``). ``pool``: reuse that worker pool."""
    own = pool is None
    pool = pool or WorkerPool(memory_mib)
    try:
        loaded = pool.load(list(refs), schemas, fresh=own)
    except BaseException:
        if own:
            pool.close()
        raise
    return _IsolatedRunner(pool, loaded)


def side_of(runner: Runner, target: Target) -> int:
    """Where ``target`` is among the runner's targets (the same object, else the same spec)."""
    for i, held in enumerate(runner.targets):
        if held is target:
            return i
    for i, held in enumerate(runner.targets):
        if held.spec == target.spec and held.ref == target.ref:
            return i
    raise ValueError(f"the runner does not hold target {target.spec!r}")


def runner_for(targets: list[Target], isolated: bool = True,
               memory_mib: int | None = None) -> Runner:
    """An isolated runner when every target can be loaded in a worker (it has a
    ``ref``), else an in-process one."""
    if isolated and all(t.ref is not None for t in targets):
        return isolated_runner(targets, memory_mib)
    return InProcessRunner(targets)


def load_schema_isolated(spec: str, checked: bool = True):
    """The schema ``spec`` names, for the checker. A schema file is code: it is loaded and
    dry-run in a worker first (``schemas.probe_schema``), where an exit or a hang ends the
    worker and is a ``SchemaError`` here; then loaded in this process under
    ``oracles/guard.py`` (each call of its code under a deadline, an exit an error, and a
    file that patches stagecheck refused)."""
    if not isinstance(spec, str) or not spec.endswith(".py") and ".py:" not in spec:
        return load_schema(spec, checked)        # a built-in (or a misspelt) name: no code
    seconds = probe_seconds(SCHEMA_SECONDS)
    with WorkerPool() as pool:
        try:
            pool.call("stagecheck.oracles.schemas", "probe_schema", spec, deadline=seconds)
        except WorkerEnded as ended:
            if ended.hung:
                raise SchemaError.of(messages.SCHEMA_HUNG, spec, seconds=seconds,
                                     wall=seconds * WALL_FACTOR) from None
            raise SchemaError.of(messages.SCHEMA_ENDED, spec, what=ended.what) from None
    return load_schema(spec, checked, guarded=True)
