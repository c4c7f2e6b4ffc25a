"""Running every oracle on every mutant: the rows of the kill matrix.

``spec`` (the spec alone), ``differential`` (against the unmutated target),
``kernel`` (differential findings that reach the postprocess kernel), ``symbolic``
(the CrossHair oracle) and ``upstream`` (the example-based pair upstream wrote, the
baseline stagecheck is measured against). A mutant is killed by an oracle when the
oracle reports at least one error finding (upstream: a test fails).

A survivor is labeled equivalent only with a reason, given by the operator that
knows it (e.g. a blocking copy is invisible on the CPU). A mutant with a reason that
some oracle kills is not equivalent, and the report says the reason was withdrawn.
"""

from __future__ import annotations

import ast
import os
import time
from dataclasses import dataclass
from typing import Callable

from stagecheck.oracles import interrupt, messages
from stagecheck.oracles._preload import preload_project_modules
from stagecheck.oracles.campaign import run_campaign
from stagecheck.oracles.errors import StagecheckError, UsageError
from stagecheck.oracles.mutants.catalog import OPERATORS
from stagecheck.oracles.mutants.generate import Mutant, generate_mutants
from stagecheck.oracles.mutants.matrix import (ORACLES, MutantResult, MutationReport,
                                               OracleOutcome)
from stagecheck.oracles.mutants.upstream import UPSTREAM_TESTS
from stagecheck.oracles.options import CampaignConfig, RunOptions, seconds, whole
from stagecheck.oracles.targets import (Target, load_function_from_source, load_shims,
                                        load_target, target_source)

__all__ = ["DEFAULT_BUDGET", "DEFAULT_SYMBOLIC_TIMEOUT", "SYMBOLIC_MAX_CAPACITY",
           "MutantsConfig", "evaluate_mutant", "list_mutants", "parse_list", "run_mutants"]

DEFAULT_BUDGET = 300
DEFAULT_SYMBOLIC_TIMEOUT = 10.0
SYMBOLIC_MAX_CAPACITY = 4


def parse_list(text: str) -> list[str]:
    """``"spec,differential"`` or ``"spec differential"`` -> ``["spec", "differential"]``."""
    return [o.strip() for part in text.split(",") for o in part.split() if o.strip()]


@dataclass(frozen=True)
class MutantsConfig:
    """What ``stagecheck mutants`` runs: which oracles, how hard, which operators, how wide."""

    oracles: tuple[str, ...] = ORACLES
    budget: int = DEFAULT_BUDGET           # examples per stream of spec and differential
    symbolic_timeout: float = DEFAULT_SYMBOLIC_TIMEOUT   # seconds of search per mutant
    operators: tuple[str, ...] | None = None             # None: the whole catalog
    jobs: int = 1                          # worker processes
    control: bool = True                   # check the unmutated source, reloaded, first
    out_of_contract: bool = True           # the campaigns' out-of-contract stream
    shims: tuple[str, ...] = ()            # shim modules for file targets (--shim)

    def __post_init__(self) -> None:
        oracles = tuple(self.oracles)
        unknown = [o for o in oracles if o not in ORACLES]
        if unknown or not oracles:
            raise UsageError.of(messages.BAD_ORACLES, ", ".join(unknown) or "(empty)",
                                "oracles", choices=", ".join(ORACLES))
        object.__setattr__(self, "oracles", tuple(o for o in ORACLES if o in oracles))
        object.__setattr__(self, "budget", whole("budget", self.budget, 1, "300"))
        object.__setattr__(self, "symbolic_timeout",
                           seconds("symbolic_timeout", self.symbolic_timeout, "10"))
        object.__setattr__(self, "jobs", whole("jobs", self.jobs, 1, "2"))
        if self.operators is not None:
            operators = tuple(self.operators)
            wrong = [o for o in operators if o not in OPERATORS]
            if wrong or not operators:
                raise UsageError.of(messages.BAD_OPERATORS, ", ".join(wrong) or "(empty)",
                                    "operators", choices=", ".join(OPERATORS))
            object.__setattr__(self, "operators", operators)

    def campaign(self, kernel: bool = False, out_of_contract: bool | None = None
                 ) -> CampaignConfig:
        """A campaign of ``budget`` examples per stream; the kernel oracle only when asked."""
        return CampaignConfig(
            examples=self.budget,
            out_of_contract=self.out_of_contract if out_of_contract is None else out_of_contract,
            run=RunOptions(kernel="auto" if kernel else "off"))


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


def _run_spec(original: Target, mutant: Target, config: MutantsConfig) -> OracleOutcome:
    started = time.perf_counter()
    return _from_campaign(run_campaign(None, mutant, config.campaign()), started)


def _run_differential(original: Target, mutant: Target, config: MutantsConfig) -> OracleOutcome:
    started = time.perf_counter()
    return _from_campaign(run_campaign(original, mutant, config.campaign()), started)


def _run_kernel(original: Target, mutant: Target, config: MutantsConfig) -> OracleOutcome:
    """Differential findings that reach the postprocess kernel (in-contract stream only:
    the kernel's verdict matters where the staging contract holds)."""
    started = time.perf_counter()
    result = run_campaign(original, mutant, config.campaign(kernel=True, out_of_contract=False))
    return _from_campaign(result, started, only_kernel=True)


def _run_symbolic(original: Target, mutant: Target, config: MutantsConfig) -> OracleOutcome:
    from stagecheck.oracles.symbolic import SymbolicInconclusive, run_symbolic
    started = time.perf_counter()
    note = None
    try:
        result = run_symbolic(original, mutant, timeout=config.symbolic_timeout,
                              max_capacity=SYMBOLIC_MAX_CAPACITY, stop_at_first_error=True)
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


def _run_upstream(original: Target, mutant: Target, config: MutantsConfig) -> OracleOutcome:
    from stagecheck.oracles.observe import CallTimedOut, time_limit
    started = time.perf_counter()
    takes_flag = mutant.profile.takes_flag
    for label, test in UPSTREAM_TESTS:
        try:
            with time_limit(5.0):
                test(mutant.func, takes_flag)
        except (KeyboardInterrupt, SystemExit):
            raise
        except BaseException as exc:   # a failing test, a crash, or a hang (CallTimedOut)
            what = "hang" if isinstance(exc, CallTimedOut) else f"{type(exc).__name__}: {exc}"
            return OracleOutcome("killed", seconds=time.perf_counter() - started, note=label,
                                 finding=f"test {label} fails: {what}"[:160])
    return OracleOutcome("survived", seconds=time.perf_counter() - started)


_RUNNERS: dict[str, Callable[[Target, Target, MutantsConfig], OracleOutcome]] = {
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


def evaluate_mutant(original: Target, mutant: Mutant, config: MutantsConfig,
                    unavailable: dict[str, str] | None = None) -> MutantResult:
    """Run every chosen oracle on one mutant."""
    unavailable = unavailable or {}
    result = MutantResult(mutant)
    try:
        func = mutant.load(load_shims(config.shims))
    except StagecheckError as exc:
        result.load_error = str(exc)
        for o in config.oracles:
            result.outcomes[o] = OracleOutcome("error", note=f"mutant does not load: {exc}")
        return result
    target = Target(f"{original.spec}@{mutant.id}", func, original.profile,
                    f"mutant {mutant.id} ({mutant.operator}) of {original.origin}")
    for oracle in config.oracles:
        if oracle in unavailable:
            result.outcomes[oracle] = OracleOutcome("n/a", note=unavailable[oracle])
        elif oracle == "upstream":
            result.outcomes[oracle] = _run_upstream(original, target, config)
        else:
            result.outcomes[oracle] = _guard(_RUNNERS[oracle], original, target, config)
    return result


_WORKER_TARGETS: dict[str, Target] = {}


def _ignore_interrupts() -> None:
    """Worker processes leave SIGINT/SIGTERM to the parent, which stops them."""
    import signal
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)


def _worker(payload) -> MutantResult:
    """Process-pool entry point: one mutant, everything else from the payload."""
    spec, mutant, config, unavailable = payload
    preload_project_modules()
    if spec not in _WORKER_TARGETS:
        _WORKER_TARGETS[spec] = load_target(spec, config.shims)
    return evaluate_mutant(_WORKER_TARGETS[spec], mutant, config, unavailable)


def _unavailable(config: MutantsConfig) -> dict[str, str]:
    """Oracles that cannot run here, and why (the symbolic one needs crosshair)."""
    out = {}
    if "symbolic" in config.oracles:
        try:
            import stagecheck.oracles.symbolic  # noqa: F401
        except (ImportError, StagecheckError) as exc:
            out["symbolic"] = f"the symbolic oracle cannot load: {exc}"
    return out


def _control(original: Target, source: str, filename: str, function: str,
             config: MutantsConfig, report: MutationReport) -> None:
    """Check the unmutated source, reloaded the way mutants are, so a kill is never an
    artefact of the reloading."""
    unparsed = ast.unparse(ast.parse(source))
    func = load_function_from_source(unparsed, f"<stagecheck unmutated {filename}>", function,
                                     shims=load_shims(config.shims))
    reloaded = Target(f"{original.spec}@unmutated", func, original.profile, "unmutated")
    if "spec" in config.oracles:
        r = run_campaign(None, reloaded, config.campaign())
        report.control["spec"] = f"{len(r.errors)} error finding(s)" if r.errors else "clean"
    if "differential" in config.oracles:
        r = run_campaign(original, reloaded, config.campaign())
        report.control["differential"] = (f"{len(r.errors)} error finding(s)" if r.errors
                                          else "clean")
    if "upstream" in config.oracles:
        u = _run_upstream(original, reloaded, config)
        report.control["upstream"] = "passes" if not u.killed else f"FAILS: {u.finding}"


def list_mutants(target_spec: str, operators=None, shims=()) -> list[Mutant]:
    """The mutants of ``target_spec`` without running anything (``--list``)."""
    original = load_target(target_spec, shims)
    source, filename, function = target_source(original.pinned)
    return generate_mutants(source, filename, function, original.profile.takes_flag, operators)


def run_mutants(target_spec: str, config: MutantsConfig = MutantsConfig(),
                progress: Callable[[MutantResult, int, int], None] | None = None
                ) -> MutationReport:
    """Apply every operator to ``target_spec`` and run each oracle on each mutant.

    With ``config.jobs`` > 1 mutants run in that many worker processes.
    ``config.out_of_contract=False`` skips the campaigns' stream of inputs that should
    not happen: it can only give info findings, so kills are the same, but survivors
    then show no info differences.
    """
    started = time.perf_counter()
    preload_project_modules()
    original = load_target(target_spec, config.shims)
    # the pinned spec from here on: a git revision is resolved to its commit once
    source, filename, function = target_source(original.pinned)
    mutants = generate_mutants(source, filename, function, original.profile.takes_flag,
                               config.operators)
    report = MutationReport(target_spec, filename, function, list(config.oracles),
                            config.budget, config.symbolic_timeout)
    report.unavailable.update(_unavailable(config))
    if config.control:
        _control(original, source, filename, function, config, report)
    total = len(mutants)
    jobs = min(config.jobs, total, os.cpu_count() or 1)
    if interrupt.requested():
        pass
    elif jobs > 1:
        _run_parallel(original.pinned, mutants, config, report, jobs, progress)
    else:
        for k, m in enumerate(mutants, 1):
            res = evaluate_mutant(original, m, config, report.unavailable)
            if interrupt.requested():   # this mutant's campaigns were cut short: drop it
                break
            report.results.append(res)
            if progress:
                progress(res, k, total)
    if interrupt.requested():
        report.interrupted = interrupt.signal_name(interrupt.requested())
    report.seconds = time.perf_counter() - started
    return report


def _run_parallel(target_spec: str, mutants: list[Mutant], config: MutantsConfig,
                  report: MutationReport, jobs: int, progress) -> None:
    """Mutants in ``jobs`` worker processes; a signal to the parent stops them all."""
    import concurrent.futures as cf
    import multiprocessing
    ctx = multiprocessing.get_context("spawn")
    total = len(mutants)
    pool = cf.ProcessPoolExecutor(max_workers=jobs, mp_context=ctx,
                                  initializer=_ignore_interrupts)
    futures = [pool.submit(_worker, (target_spec, m, config, report.unavailable))
               for m in mutants]
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
    except interrupt.Interrupted:
        for process in list(getattr(pool, "_processes", {}).values()):
            process.terminate()
        pool.shutdown(wait=False, cancel_futures=True)
    else:
        pool.shutdown()
