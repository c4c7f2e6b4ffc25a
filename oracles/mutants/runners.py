"""Running every oracle on every mutant: the rows of the kill matrix.

``spec`` (the spec alone), ``differential`` (against the unmutated target),
``kernel`` (differential findings that reach the postprocess kernel), ``symbolic``
(the CrossHair oracle) and ``upstream`` (the example-based pair upstream wrote, the
baseline stagecheck is measured against). A mutant is killed by an oracle when the
oracle reports at least one error finding (upstream: a test fails).

A survivor is labeled equivalent only with a reason, given by the operator that
knows it (e.g. a blocking copy is invisible on the CPU). A mutant with a reason that
some oracle kills is not equivalent, and the report says the reason was withdrawn.

SIGINT/SIGTERM (``oracles/interrupt.py``) stop the run between mutants: the report
keeps the mutants finished before the signal, marked interrupted. With ``--jobs``, the
pool processes are stopped, and with them the worker processes they started.
"""

from __future__ import annotations

import ast
import concurrent.futures as cf
import multiprocessing
import os
import signal
import time
from dataclasses import dataclass, field, replace
from typing import Callable

from stagecheck.oracles import interrupt, messages
from stagecheck.oracles._preload import preload_project_modules
from stagecheck.oracles.campaign import run_campaign
from stagecheck.oracles.errors import StagecheckError, UsageError
from stagecheck.oracles.mutants.catalog import OPERATORS
from stagecheck.oracles.mutants.generate import Mutant, generate_mutants, require_mutants
from stagecheck.oracles.mutants.matrix import ORACLES, MutantResult, MutationReport, OracleOutcome
from stagecheck.oracles.mutants.upstream import UPSTREAM_TESTS
from stagecheck.oracles.options import OPTIONS, CampaignConfig, RunOptions, check_fields
from stagecheck.oracles.runner import load_isolated, side_of
from stagecheck.oracles.schemas import load_schema
from stagecheck.oracles.targets import Target, TargetRef, target_ref, target_source
from stagecheck.oracles.text import did_you_mean
from stagecheck.oracles.worker import WorkerEnded, WorkerPool, kill_all, target_arg

__all__ = ["DEFAULT_BUDGET", "DEFAULT_SYMBOLIC_PATHS", "DEFAULT_SYMBOLIC_TIMEOUT",
           "SYMBOLIC_MAX_CAPACITY", "MutantsConfig", "evaluate_mutant", "list_mutants", "parse_list", "run_mutants"]

DEFAULT_BUDGET = OPTIONS["budget"].default
DEFAULT_SYMBOLIC_TIMEOUT = OPTIONS["symbolic_timeout"].default
#: symbolic paths explored per mutant: a path budget, so that the kill matrix is the
#: same on any machine and under any load (a wall-clock budget is not); the slowest
#: kill of the seed function's catalog takes 138 paths
DEFAULT_SYMBOLIC_PATHS = OPTIONS["symbolic_paths"].default
SYMBOLIC_MAX_CAPACITY = 4
#: symbolic paths on a mutant the catalog shows equivalent (a control for false kills:
#: no search can kill it, so a full budget would only be spent)
EQUIVALENT_SYMBOLIC_PATHS = 20


def parse_list(text: str) -> list[str]:
    """``"spec,differential"`` or ``"spec differential"`` -> ``["spec", "differential"]``."""
    return [o.strip() for part in text.split(",") for o in part.split() if o.strip()]


@dataclass(frozen=True)
class MutantsConfig:
    """What ``stagecheck mutants`` runs: which oracles, how hard, which operators, how wide.

    Each field is checked by its option of ``mutants`` in ``options.TABLE``; ``run`` is
    how each example of the campaign oracles runs (the run options ``mutants`` shares
    with ``diff``; the kernel oracle's mode is the runner's)."""

    oracles: tuple[str, ...] = ORACLES
    budget: int = DEFAULT_BUDGET           # examples per stream of spec and differential
    symbolic_timeout: float = DEFAULT_SYMBOLIC_TIMEOUT   # seconds of search per mutant, at most
    symbolic_paths: int = DEFAULT_SYMBOLIC_PATHS         # paths of search per mutant
    operators: tuple[str, ...] | None = None             # None: the whole catalog
    jobs: int = 1                          # worker processes
    control: bool = True                   # check the unmutated source, reloaded, first
    out_of_contract: bool = True           # the campaigns' out-of-contract stream
    shims: tuple[str, ...] = ()            # shim modules for file targets (--shim)
    run: RunOptions = field(default_factory=RunOptions)

    def __post_init__(self) -> None:
        check_fields(self, "mutants")
        oracles = tuple(self.oracles)
        unknown = [o for o in oracles if o not in ORACLES]
        if unknown or not oracles:
            raise UsageError.of(messages.BAD_ORACLES, ", ".join(unknown) or "(empty)",
                                "oracles", choices=", ".join(ORACLES))
        object.__setattr__(self, "oracles", tuple(o for o in ORACLES if o in oracles))
        if self.operators is not None:
            operators = tuple(self.operators)
            wrong = [o for o in operators if o not in OPERATORS]
            if wrong or not operators:
                raise UsageError.of(messages.BAD_OPERATORS, ", ".join(wrong) or "(empty)",
                                    "operators", choices=", ".join(OPERATORS),
                                    hint=did_you_mean(wrong[0], OPERATORS) if wrong else "")
            object.__setattr__(self, "operators", operators)
        if not isinstance(self.run, RunOptions):
            raise TypeError(f"run must be RunOptions, got {type(self.run).__name__}")

    def campaign(self, kernel: bool = False, out_of_contract: bool | None = None
                 ) -> CampaignConfig:
        """A campaign of ``budget`` examples per stream; the kernel oracle only when asked."""
        return CampaignConfig(
            examples=self.budget,
            out_of_contract=self.out_of_contract if out_of_contract is None else out_of_contract,
            run=replace(self.run, kernel="auto" if kernel else "off"))


def _first_error(findings) -> str:
    f = findings[0]
    where = f"{f.field}" if f.field else ""
    return f"{f.invariant}{f' ({where})' if where else ''}: {f.message}"[:160]


def _difference_infos(findings) -> list[str]:
    """Info-level differences between the two sides (not either side's own spec infos),
    one per invariant, with why the difference is allowed."""
    seen: dict[str, str] = {}
    for f in findings:
        if f.severity != "error" and f.side == "both" and f.invariant not in seen:
            why = f.extra.get("context") or ""
            seen[f.invariant] = f"{f.invariant} ({why[:90]})" if why else f.invariant
    return [seen[k] for k in sorted(seen)]


def _from_campaign(result, started: float, only_kernel: bool = False) -> OracleOutcome:
    errors = result.errors
    if only_kernel:
        errors = [f for f in errors if f.kernel_impact is True]
    took = time.perf_counter() - started
    infos = _difference_infos(result.infos) if result.baseline is not None else []
    if not errors:
        return OracleOutcome("survived", seconds=took, infos=infos)
    counts = [f.examples_to_find for f in errors if f.examples_to_find is not None]
    return OracleOutcome("killed", examples=min(counts) if counts else None, seconds=took,
                         kill_seconds=None if counts else took, finding=_first_error(errors))


def _run_spec(original: Target, mutant: Target, config: MutantsConfig, runner) -> OracleOutcome:
    started = time.perf_counter()
    return _from_campaign(run_campaign(None, mutant, config.campaign(), runner=runner), started)


def _run_differential(original: Target, mutant: Target, config: MutantsConfig,
                      runner) -> OracleOutcome:
    started = time.perf_counter()
    return _from_campaign(run_campaign(original, mutant, config.campaign(), runner=runner),
                          started)


def _run_kernel(original: Target, mutant: Target, config: MutantsConfig,
                runner) -> OracleOutcome:
    """Differential findings that reach the postprocess kernel (in-contract stream only:
    the kernel's verdict matters where the staging contract holds)."""
    started = time.perf_counter()
    result = run_campaign(original, mutant, config.campaign(kernel=True, out_of_contract=False),
                          runner=runner)
    return _from_campaign(result, started, only_kernel=True)


def _run_symbolic(original: Target, mutant: Target, config: MutantsConfig,
                  runner) -> OracleOutcome:
    from stagecheck.oracles.symbolic import SymbolicInconclusive, run_symbolic  # crosshair
    started = time.perf_counter()
    note = None
    try:
        result = run_symbolic(original, mutant, timeout=config.symbolic_timeout,
                              max_paths=config.symbolic_paths,
                              max_capacity=SYMBOLIC_MAX_CAPACITY, stop_at_first_error=True,
                              runner=runner, shrink=False)
    except SymbolicInconclusive as exc:
        result = exc.result
        note = str(exc)[:200]
        if result is None or not result.errors:
            return OracleOutcome("inconclusive", seconds=time.perf_counter() - started,
                                 note=note)
    took = time.perf_counter() - started
    infos = _difference_infos(result.findings)
    if not result.errors:
        return OracleOutcome("survived", seconds=took, infos=infos, note=note)
    first = result.first_counterexample_seconds
    return OracleOutcome("killed", seconds=took, kill_seconds=first if first is not None else took,
                         finding=_first_error(result.errors), note=note)


#: CPU seconds the upstream-style tests may take on one mutant in its worker, and
#: ``WALL_FACTOR`` times that on the wall clock (a hang is a kill): the kernel counts the
#: worker's CPU time, so a machine whose CPUs are busy does not turn a pass into a kill
UPSTREAM_SECONDS = 5.0


def _run_upstream(original: Target, mutant: Target, config: MutantsConfig,
                  runner) -> OracleOutcome:
    """The upstream-style example tests, in the worker that holds the mutant."""
    started = time.perf_counter()
    if mutant.schema.name not in UPSTREAM_TESTS:
        return OracleOutcome("n/a", note=f"no upstream tests for schema {mutant.schema.name!r}")
    try:
        failure = runner.call("stagecheck.oracles.mutants.upstream", "run_upstream_tests",
                              target_arg(side_of(runner, mutant)),
                              deadline=UPSTREAM_SECONDS)
    except WorkerEnded as ended:
        failure = ("example", "hang" if ended.hung else ended.what)
    if failure is None:
        return OracleOutcome("survived", seconds=time.perf_counter() - started)
    label, what = failure
    return OracleOutcome("killed", seconds=time.perf_counter() - started, note=label,
                         finding=f"test {label} fails: {what}"[:160])


_RUNNERS: dict[str, Callable[..., OracleOutcome]] = {
    "spec": _run_spec, "differential": _run_differential, "kernel": _run_kernel,
    "symbolic": _run_symbolic, "upstream": _run_upstream,
}


def _guard(run, *args) -> OracleOutcome:
    started = time.perf_counter()
    try:
        return run(*args)
    except (KeyboardInterrupt, SystemExit):
        raise
    except Exception as exc:
        return OracleOutcome("error", seconds=time.perf_counter() - started,
                             note=f"{type(exc).__name__}: {exc}"[:200])


def _guard_both(original: Target, mutant: Target, config: MutantsConfig, runner
                ) -> tuple[OracleOutcome, OracleOutcome]:
    """The differential and kernel columns from one campaign: the kernel column is the
    differential's error findings that reach the kernel (its in-contract search is the
    differential's own, the same seed and examples; the kernel oracle runs on each kept
    finding after the search)."""
    started = time.perf_counter()
    try:
        result = run_campaign(original, mutant, config.campaign(kernel=True), runner=runner)
    except (KeyboardInterrupt, SystemExit):
        raise
    except Exception as exc:
        failed = OracleOutcome("error", seconds=time.perf_counter() - started,
                               note=f"{type(exc).__name__}: {exc}"[:200])
        return failed, failed
    kernel = _from_campaign(result, started, only_kernel=True)
    infos = _difference_infos([f for f in result.infos if f.in_contract])
    return _from_campaign(result, started), replace(
        kernel, seconds=0.0, infos=infos if not kernel.killed else kernel.infos,
        note="from the differential campaign")


def _shims_of(original: Target) -> tuple[str, ...]:
    return original.ref.shims if original.ref is not None else ()


def mutant_target(original: Target, mutant: Mutant) -> Target:
    """The mutant as a target for the checker: loaded only in a worker, from its source,
    with the original's shims."""
    spec = f"{original.spec}@{mutant.id}"
    ref = TargetRef(spec, original.ref.schema if original.ref else None, mutant.source,
                    mutant.load_name, mutant.function, shims=_shims_of(original))
    return Target(spec, None, original.profile,
                  f"mutant {mutant.id} ({mutant.operator}) of {original.origin}", ref)


def evaluate_mutant(original: Target, mutant: Mutant, config: MutantsConfig,
                    unavailable: dict[str, str] | None = None, pool=None) -> MutantResult:
    """Run every chosen oracle on one mutant, the mutant in a worker (``pool``: reuse it)."""
    unavailable = unavailable or {}
    result = MutantResult(mutant)
    candidate = mutant_target(original, mutant)
    schemas = {original.ref.schema if original.ref else None: original.schema}
    try:
        runner = load_isolated([original.ref, candidate.ref], schemas, pool=pool)
    except StagecheckError as exc:
        result.load_error = str(exc)
        for o in config.oracles:
            result.outcomes[o] = OracleOutcome("error", note=f"mutant does not load: {exc}")
        return result
    base, mut = runner.targets
    if mutant.equivalent_reason is not None:
        config = replace(config, symbolic_paths=min(config.symbolic_paths,
                                                    EQUIVALENT_SYMBOLIC_PATHS))
    shared = "differential" in config.oracles and "kernel" in config.oracles \
        and "kernel" not in unavailable
    try:
        for oracle in config.oracles:
            if oracle in unavailable:
                result.outcomes[oracle] = OracleOutcome("n/a", note=unavailable[oracle])
            elif shared and oracle == "differential":
                result.outcomes["differential"], result.outcomes["kernel"] = _guard_both(
                    base, mut, config, runner)
            elif shared and oracle == "kernel":
                continue
            else:
                result.outcomes[oracle] = _guard(_RUNNERS[oracle], base, mut, config, runner)
    finally:
        if pool is None:
            runner.close()
    return result


_WORKER_TARGETS: dict[TargetRef, Target] = {}
_WORKER_POOL = None


def _load_ref(ref: TargetRef) -> Target:
    """The original target for the checker (loaded in a worker, never here)."""
    schema = load_schema(ref.schema) if ref.schema else None
    runner = load_isolated([ref], {ref.schema: schema})
    try:
        return runner.targets[0]
    finally:
        runner.close()


def _load(target_spec: str, schema_spec: str | None, shims=()) -> Target:
    """The original target: a file or revision read here once (a ``git:REV`` resolved to
    its commit), loaded in a worker with ``shims``."""
    return _load_ref(target_ref(target_spec, schema_spec, shims))


def _source(original: Target, target_spec: str) -> tuple[str, str, str]:
    """``(source, filename, function)`` the mutants are made from: the very text the
    original was loaded from (a revision at the commit it was resolved to once)."""
    ref = original.ref
    if ref is not None and ref.source is not None:
        return ref.source, ref.filename, ref.function
    return target_source(target_spec)


def _pool_process_started() -> None:
    """A process of the ``--jobs`` pool: SIGINT is the parent's (it stops the pool);
    SIGTERM (how the parent stops it) ends this process and the workers it started,
    which run in sessions of their own and would not get the signal."""

    end = os._exit      # taken now: a schema's guarded call replaces it while it runs

    def stop(signum, frame) -> None:
        kill_all()
        end(128 + signum)

    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, stop)
    from stagecheck.oracles.worker.process import watch_parent   # a pool process run alone
    watch_parent()        # the parent killed (kill -9): this process and its workers end


def _worker(payload) -> MutantResult:
    """Process-pool entry point: one mutant, everything else from the payload (the
    original's ``TargetRef``, with its source read once by the parent)."""
    global _WORKER_POOL
    ref, mutant, config, unavailable = payload
    preload_project_modules()
    if ref not in _WORKER_TARGETS:
        _WORKER_TARGETS[ref] = _load_ref(ref)
    if _WORKER_POOL is None:
        _WORKER_POOL = WorkerPool()
    return evaluate_mutant(_WORKER_TARGETS[ref], mutant, config, unavailable, _WORKER_POOL)


def _unavailable(config: MutantsConfig, target: Target) -> dict[str, str]:
    """Oracles that cannot run here, and why (the symbolic one needs crosshair; the
    upstream baseline exists for the schemas upstream wrote tests for; the kernel column
    needs a schema with a consumer)."""
    out = {}
    if "upstream" in config.oracles and target.schema.name not in UPSTREAM_TESTS:
        out["upstream"] = f"no upstream tests for schema {target.schema.name!r}"
    if "kernel" in config.oracles and target.schema.consumer is None:
        out["kernel"] = f"schema {target.schema.name!r} declares no consumer kernel"
    if "symbolic" in config.oracles:
        try:
            import stagecheck.oracles.symbolic  # noqa: F401  (does crosshair load? the question)
        except (ImportError, StagecheckError) as exc:
            out["symbolic"] = f"the symbolic oracle cannot load: {exc}"
    return out


def _control(original: Target, source: str, filename: str, function: str,
             config: MutantsConfig, report: MutationReport) -> None:
    """Check the unmutated source, reloaded the way mutants are, so a kill is never an
    artefact of the reloading."""
    unparsed = ast.unparse(ast.parse(source))
    ref = TargetRef(f"{original.spec}@unmutated", original.ref.schema if original.ref else None,
                    unparsed, f"<stagecheck unmutated {filename}>", function,
                    shims=_shims_of(original))
    with load_isolated([original.ref, ref], {ref.schema: original.schema}) as runner:
        base, reloaded = runner.targets
        if "spec" in config.oracles:
            r = run_campaign(None, reloaded, config.campaign(), runner=runner)
            report.control["spec"] = f"{len(r.errors)} error finding(s)" if r.errors else "clean"
        if "differential" in config.oracles and not interrupt.requested():
            r = run_campaign(base, reloaded, config.campaign(), runner=runner)
            report.control["differential"] = (f"{len(r.errors)} error finding(s)" if r.errors
                                              else "clean")
        if "upstream" in config.oracles and "upstream" not in report.unavailable \
                and not interrupt.requested():
            u = _run_upstream(base, reloaded, config, runner)
            report.control["upstream"] = "passes" if not u.killed else f"FAILS: {u.finding}"


def list_mutants(target_spec: str, operators=None, schema: str | None = None,
                 shims=()) -> list[Mutant]:
    """The mutants of ``target_spec`` without running anything (``--list``); ``schema``
    is a schema spec (built-in name or path), None to choose by the function's name;
    ``shims``: shim modules for a file target's global names."""
    original = _load(target_spec, schema, shims)
    source, filename, function = _source(original, target_spec)
    return generate_mutants(source, filename, function, original.profile, operators)


def run_mutants(target_spec: str, config: MutantsConfig = MutantsConfig(),
                progress: Callable[[MutantResult, int, int], None] | None = None,
                schema: str | None = None, original: Target | None = None
                ) -> MutationReport:
    """Apply every operator to ``target_spec`` and run each oracle on each mutant.

    With ``config.jobs`` > 1 mutants run in that many worker processes.
    ``config.out_of_contract=False`` skips the campaigns' stream of inputs that should
    not happen: it can only give info findings, so kills are the same, but survivors
    then show no info differences. ``original``: ``target_spec`` already loaded (by the
    CLI, which checked it), so a revision is not resolved a second time.
    """
    started = time.perf_counter()
    preload_project_modules()
    if original is None:
        original = _load(target_spec, schema, config.shims)
    # the text read once from here on: a git revision is resolved to its commit once
    source, filename, function = _source(original, target_spec)
    mutants = generate_mutants(source, filename, function, original.profile, config.operators)
    require_mutants(mutants, target_spec, config.operators,
                    lambda: generate_mutants(source, filename, function, original.profile))
    report = MutationReport(target_spec, filename, function, list(config.oracles),
                            config.budget, config.symbolic_timeout, config.symbolic_paths)
    report.unavailable.update(_unavailable(config, original))
    if config.control and not interrupt.requested():
        _control(original, source, filename, function, config, report)
    total = len(mutants)
    jobs = min(config.jobs, total, os.cpu_count() or 1)
    if interrupt.requested():
        pass
    elif jobs > 1:
        _run_parallel(original.ref, mutants, config, report, jobs, progress)
    else:
        with WorkerPool() as pool:      # one worker, the mutants loaded into it in turn
            for k, m in enumerate(mutants, 1):
                try:
                    res = evaluate_mutant(original, m, config, report.unavailable, pool)
                except interrupt.Interrupted:     # a wait on the worker cut short
                    break
                if interrupt.requested():   # this mutant's campaigns were cut short: drop it
                    break
                report.results.append(res)
                if progress:
                    progress(res, k, total)
    if interrupt.requested():
        report.interrupted = interrupt.signal_name(interrupt.requested())
    report.seconds = time.perf_counter() - started
    return report


def _run_parallel(ref: TargetRef, mutants: list[Mutant], config: MutantsConfig,
                  report: MutationReport, jobs: int, progress) -> None:
    """Mutants in ``jobs`` pool processes; a signal to the parent stops them all, and
    the worker processes each of them started (see ``_pool_process_started``)."""
    ctx = multiprocessing.get_context("spawn")
    total = len(mutants)
    pool = cf.ProcessPoolExecutor(max_workers=jobs, mp_context=ctx,
                                  initializer=_pool_process_started)
    futures = [pool.submit(_worker, (ref, m, config, report.unavailable)) for m in mutants]
    try:
        for k, future in enumerate(futures, 1):
            while True:   # wake up now and then to look at the flag
                try:
                    res = future.result(timeout=0.2)
                    break
                except cf.TimeoutError:
                    interrupt.check()
            report.results.append(res)
            if progress:
                progress(res, k, total)
            interrupt.check()
    except (interrupt.Interrupted, cf.BrokenExecutor) as stopped:
        # the pool broke: a signal to the whole process group, or one killed from outside
        ended = not isinstance(stopped, interrupt.Interrupted) and not interrupt.awaited(1.0)
        processes = list((getattr(pool, "_processes", None) or {}).values())
        for process in processes:
            process.terminate()        # SIGTERM: the process stops its workers, then exits
        pool.shutdown(wait=False, cancel_futures=True)
        for process in processes:
            process.join(timeout=10)
            if process.is_alive():
                process.kill()
                process.join(timeout=5)
        if ended:
            raise StagecheckError.of(messages.MUTANTS_POOL_ENDED, jobs=jobs) from None
    else:
        pool.shutdown()
