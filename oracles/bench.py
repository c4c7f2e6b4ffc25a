"""Per-call cost of two staging targets, measured side by side.

``run_bench`` times both targets for several batch sizes (``num_reqs``) in one run,
interleaved round by round, and reports the cost of the candidate as a ratio to the
baseline with its spread, so a refactor's speed claim is checked next to its
equivalence (``stagecheck bench BASELINE CANDIDATE``).

What is measured is the staging code itself: the buffers are plain
``impl.buffer.CpuGpuBuffer`` objects (pinned host memory and device tensors on CUDA),
not the instrumented ones of the differential oracles. Inputs are in contract, every
live request has a state index, capacity equals ``num_reqs``; each side gets its own
copy of the same inputs, built once per size and reused by every call.

First, each size's input runs once on both sides on instrumented buffers and the two are
compared (``refuse_different``): a candidate that does not stage what the baseline stages
is not timed (``BENCH_NOT_EQUIVALENT``, exit 2), since doing less is faster.

Method, per size: a few warm-up calls per side (also checking that neither raises);
a calibration that picks ``calls`` per batch so the slower side's batch lasts about
``min_time / (2 * repeats)``, but at most 1 ms (one call when a call takes longer):
short batches are rarely hit by a preemption, and many rounds make the median
robust to those that are; then rounds of one batch per side, the order alternating
each round (AB, BA, ...) so that drift (frequency scaling, a noisy neighbour) hits
both sides alike. Every warm-up call and every batch has the time limit of one call
(``--timeout``, as ``diff`` has: its CPU time, 3 times that on the wall clock), which the
worker's pool enforces: the worker marks each one (``next_position``) and the clock
starts again at each mark, so a target that hangs is reported after one limit
(``messages.BENCH_HUNG``, naming the side), not after the whole bench's. Rounds continue
until there are at least ``repeats`` of them and ``min_time`` has elapsed (at most
10000). Batches are timed with ``time.perf_counter_ns`` with the garbage collector off;
on CUDA the stream is synchronized at the end of each batch (the copies are
non-blocking). Per round the ratio is candidate / baseline per-call time.

Two ratios come out of that, and the report labels both:

- ``ratio_of_medians`` = median candidate per-call time / median baseline per-call
  time: the two medians the table shows, divided, so the ratio column always agrees
  with the numbers beside it (the table's "ratio" column);
- ``ratio`` = the median of the per-round ratios, with their interquartile range
  (``ratio_q1``..``ratio_q3``) as the spread: each round pairs the two sides in time, so
  this one cancels drift between rounds; it can differ from the ratio of medians (a
  side's slow rounds and fast rounds need not be the same rounds), which is why the
  table shows it in its own, labelled column rather than beside the medians.
"""

from __future__ import annotations

import gc
import statistics
import time
from dataclasses import asdict, dataclass, field
from types import SimpleNamespace

from stagecheck.oracles import interrupt, messages
from stagecheck.oracles.errors import StagecheckError
from stagecheck.oracles.evaluate import judge
from stagecheck.oracles.observe import build_inputs, require_device
from stagecheck.oracles.observe.backends import torch_module
from stagecheck.oracles.options import DEVICES, RunOptions, choice
from stagecheck.oracles.results import TargetPair
from stagecheck.oracles.runner import runner_for, side_of
from stagecheck.oracles.targets import Target
from stagecheck.oracles.text import exception_text, type_name
from stagecheck.oracles.worker import WorkerEnded, target_arg
from stagecheck.oracles.worker.protocol import BUSY, next_position

__all__ = ["DEFAULT_SIZES", "BenchResult", "BenchRow", "build_bench_inputs", "require_bench_scenario",
           "run_bench"]

DEFAULT_SIZES = (1, 8, 64, 256, 1024)
_WARMUP_CALLS = 3
_MAX_BATCH_NS = 1_000_000
_MAX_ROUNDS = 10_000
_SIDES = ("baseline", "candidate")
#: the units of one size the worker marks (``next_position``), in this order: each side's
#: warm-up calls, each side's calibration batch, then two batches per round
_UNITS = 2 * _WARMUP_CALLS + 2 + 2 * _MAX_ROUNDS


@dataclass
class BenchRow:
    """One batch size: per-call medians of both sides and the ratio with its spread."""

    num_reqs: int
    baseline_s: float          # median per-call seconds over the rounds
    candidate_s: float
    ratio: float               # median of the per-round ratios candidate / baseline
    ratio_q1: float            # first and third quartiles of the per-round ratios
    ratio_q3: float
    rounds: int
    calls_per_round: int       # calls per side in each round's batch

    @property
    def ratio_of_medians(self) -> float:
        """Median candidate per-call time over median baseline per-call time: the ratio of
        the two medians shown beside it."""
        return self.candidate_s / self.baseline_s if self.baseline_s > 0 else float("inf")

    @property
    def spread(self) -> float:
        """Interquartile range of the per-round ratios."""
        return self.ratio_q3 - self.ratio_q1

    def to_dict(self) -> dict:
        data = asdict(self)
        data["spread"] = self.spread
        data["ratio_of_medians"] = self.ratio_of_medians
        return data


@dataclass
class BenchResult(TargetPair):
    device: str
    rows: list[BenchRow] = field(default_factory=list)
    seconds: float = 0.0
    repeats: int = 0
    min_time: float = 0.0

    def row(self, num_reqs: int) -> BenchRow:
        for r in self.rows:
            if r.num_reqs == num_reqs:
                return r
        raise KeyError(num_reqs)

    def to_dict(self) -> dict:
        return {"baseline": self.baseline, "candidate": self.candidate, "device": self.device,
                "seconds": round(self.seconds, 3), "repeats": self.repeats,
                "min_time": self.min_time, "unit": "seconds per call",
                "ratio": "candidate / baseline: ratio_of_medians = median candidate time / "
                "median baseline time; ratio = median of the per-round ratios (q1..q3: "
                "their interquartile range)",
                "rows": [r.to_dict() for r in self.rows]}


def require_bench_scenario(targets) -> None:
    """``StagecheckError`` (``BENCH_NO_SCENARIO``, its ``target_index`` set) for the first
    of ``targets`` whose schema declares no ``bench`` scenario: checked before any timing,
    never reported as an exception of the target's own."""
    for index, target in enumerate(targets):
        if target.schema.bench is None:
            error = StagecheckError.of(messages.BENCH_NO_SCENARIO, target.spec,
                                       schema=target.schema.name)
            error.target_index = index
            raise error


def build_bench_inputs(target: Target, num_reqs: int, device: str = "cpu") -> SimpleNamespace:
    """In-contract arguments for one staging call with ``num_reqs`` live requests.

    The scenario is the schema's ``bench`` one (deterministic, in contract, capacity
    ``num_reqs``); the buffers are plain ``CpuGpuBuffer`` objects on ``device``, not the
    instrumented ones, so what is timed is the staging code itself.
    """
    from stagecheck.oracles.observe.bare import BareBackend  # torch: timing runs in a worker
    schema = target.schema
    if schema.bench is None:
        raise StagecheckError(f"schema {schema.name!r} declares no bench scenario",
                              "add a bench= function to the schema", value=schema.name)
    _, call = build_inputs(schema.bench(num_reqs), target.profile, BareBackend(device))
    return SimpleNamespace(args=call.args, kwargs=call.kwargs)


def _caller(target: Target, inputs: SimpleNamespace):
    func, args, kwargs = target.func, inputs.args, inputs.kwargs
    if kwargs:
        return lambda: func(*args, **kwargs)
    return lambda: func(*args)


def _side_at(unit: int) -> str | None:
    """The side whose calls ran in ``unit`` (1 for the first one marked; ``_UNITS``), or
    None before the first: the order ``_bench_size`` marks them in."""
    if unit < 1:
        return None
    if unit <= 2 * _WARMUP_CALLS:
        return _SIDES[(unit - 1) // _WARMUP_CALLS]
    if unit <= 2 * _WARMUP_CALLS + 2:
        return _SIDES[unit - 2 * _WARMUP_CALLS - 1]
    rounds, second = divmod(unit - 2 * _WARMUP_CALLS - 3, 2)
    return _SIDES[second ^ (rounds % 2)]      # AB, BA, ... (``_bench_size``)


def _time_batch(call, calls: int, sync) -> int:
    """Nanoseconds for ``calls`` calls (and the device synchronization after them); one
    unit of the call's time limit (marked before the clock starts)."""
    next_position()
    start = time.perf_counter_ns()
    for _ in range(calls):
        call()
    if sync is not None:
        sync()
    return time.perf_counter_ns() - start


def _quartiles(values: list[float]) -> tuple[float, float]:
    if len(values) < 2:
        return values[0], values[0]
    q1, _, q3 = statistics.quantiles(values, n=4, method="inclusive")
    return q1, q3


def _raised(side: str, target: Target, num_reqs: int, exc: BaseException) -> StagecheckError:
    """The error of a bench whose ``side`` raised ``exc`` (any exception of its own, a
    ``BaseException`` subclass too): it cannot be timed, exit 2."""
    return StagecheckError(
        f"the {side} {target.spec!r} raised {type_name(type(exc))}: {exception_text(exc)} "
        f"on an in-contract input with num_reqs={num_reqs}, so it cannot be timed",
        "run 'stagecheck diff' to see why", value=target.spec)


def _bench_size(baseline: Target, candidate: Target, num_reqs: int, device: str,
                repeats: int, min_time: float, sync) -> BenchRow:
    calls = {}
    targets = {"baseline": baseline, "candidate": candidate}
    side = "baseline"           # the side whose calls run (named when one raises)
    try:
        for side, target in targets.items():
            call = _caller(target, build_bench_inputs(target, num_reqs, device))
            for _ in range(_WARMUP_CALLS):
                next_position()         # each warm-up call has the limit of one call
                call()
            if sync is not None:
                sync()
            calls[side] = call
        # calibration: a batch of the slower side lasts min_time / (2 * repeats), at most 1 ms
        per_call = 0.0
        for side in calls:
            per_call = max(per_call, _time_batch(calls[side], _WARMUP_CALLS, sync)
                           / _WARMUP_CALLS)
    except (SystemExit, KeyboardInterrupt):
        raise                   # the worker ends: "a target ended the bench's worker"
    except BaseException as exc:    # its own BaseException subclass too
        raise _raised(side, targets[side], num_reqs, exc) from None
    target_batch_ns = min(min_time * 1e9 / (2 * repeats), _MAX_BATCH_NS)
    n = max(1, int(target_batch_ns // max(per_call, 1.0)))

    base_ns: list[float] = []
    cand_ns: list[float] = []
    ratios: list[float] = []
    started = time.perf_counter()
    rounds = 0
    gc_was_enabled = gc.isenabled()
    gc.disable()
    try:
        while rounds < repeats or (time.perf_counter() - started < min_time
                                   and rounds < _MAX_ROUNDS):
            order = ("baseline", "candidate") if rounds % 2 == 0 else ("candidate", "baseline")
            took = {}
            for side in order:
                took[side] = _time_batch(calls[side], n, sync)
            base_ns.append(took["baseline"] / n)
            cand_ns.append(took["candidate"] / n)
            ratios.append(took["candidate"] / max(took["baseline"], 1))
            rounds += 1
    except (SystemExit, KeyboardInterrupt):
        raise
    except BaseException as exc:    # a target that raises only after its first calls
        raise _raised(side, targets[side], num_reqs, exc) from None
    finally:
        if gc_was_enabled:
            gc.enable()
    q1, q3 = _quartiles(ratios)
    return BenchRow(num_reqs=num_reqs, baseline_s=statistics.median(base_ns) / 1e9,
                    candidate_s=statistics.median(cand_ns) / 1e9,
                    ratio=statistics.median(ratios), ratio_q1=q1, ratio_q3=q3,
                    rounds=rounds, calls_per_round=n)


def run_bench(baseline: Target, candidate: Target, device: str = "cpu",
              sizes=DEFAULT_SIZES, repeats: int = 20, min_time: float = 0.5,
              runner=None, timeout: float = RunOptions.timeout) -> BenchResult:
    """Per-call cost of both targets for each ``num_reqs`` in ``sizes``.

    ``repeats`` is the least number of rounds per size, ``min_time`` the least
    seconds spent per size (both sides together). The timing runs in the worker that
    holds the targets (``runner``; by default a fresh one), never in the checker's
    process. Raises ``StagecheckError`` when a target raises on the in-contract
    inputs or hangs (a warm-up call or a batch past ``timeout``), or when CUDA is asked
    for and absent.
    """
    if repeats < 1 or not min_time > 0:
        raise ValueError("run_bench: repeats must be >= 1 and min_time > 0")
    sizes = tuple(sizes)
    if not sizes or any(not isinstance(s, int) or s < 1 for s in sizes):
        raise ValueError(f"run_bench: sizes must be whole numbers >= 1, got {sizes!r}")
    choice("device", device, DEVICES)
    require_bench_scenario((baseline, candidate))
    require_device(device)
    own = runner is None
    if own:
        runner = runner_for([baseline, candidate])
    rows: list[BenchRow] = []
    seconds = 0.0
    try:
        sides = [side_of(runner, t) for t in (baseline, candidate)]
        refuse_different(runner, sides, baseline, candidate, sizes, device, timeout)
        for num_reqs in sizes:
            # one size per call to the worker: a signal stops the bench between sizes
            interrupt.check()
            try:
                more, took = runner.call("stagecheck.oracles.bench", "bench_here",
                                         target_arg(sides[0]), target_arg(sides[1]), device,
                                         (num_reqs,), repeats, min_time, deadline=timeout,
                                         steps=_UNITS)
            except WorkerEnded as ended:
                if ended.hung:
                    side = _side_at(ended.position - BUSY)
                    target = {"baseline": baseline, "candidate": candidate}.get(side)
                    raise StagecheckError.of(
                        messages.BENCH_HUNG, target.spec if target else candidate.spec,
                        side=f"the {side} {target.spec!r}" if target else "a target",
                        num_reqs=num_reqs, timeout=f"{timeout:g}") from None
                raise StagecheckError(f"a target ended the bench's worker ({ended.what})",
                                      "run 'stagecheck diff' on the two targets to see where",
                                      value=candidate.spec) from None
            rows += more
            seconds += took
    finally:
        if own:
            runner.close()
    result = BenchResult(baseline.spec, candidate.spec, device, repeats=repeats,
                         min_time=min_time, rows=rows, seconds=seconds)
    return result


def refuse_different(runner, sides: list[int], baseline: Target, candidate: Target, sizes,
                     device: str, timeout: float) -> None:
    """Bench times two targets that do the same thing: before any timing, each size's
    bench input runs once on both sides (instrumented buffers, as ``diff`` runs them) and
    the two are compared. A difference is ``BENCH_NOT_EQUIVALENT`` (exit 2, nothing
    timed): a candidate that does less, such as one that stages nothing or returns a
    generator it never runs, is faster for it, and its ratio would read as a speedup. A
    call that raised, hung or ended its worker is left to the timing, which says so of
    its side (``_raised``, ``BENCH_HUNG``): the sizes run one by one, up to the first such
    call (a worker that ends at every call is recovered from once, not once per size)."""
    for num_reqs in sizes:
        scenario = baseline.schema.bench(num_reqs)
        ((_, (a, b)),) = runner.observe(sides, [(0, scenario)],
                                        RunOptions(device=device, timeout=timeout),
                                        "instrumented")
        if not (_returned(a) and _returned(b)):
            return          # the timing says it as before: raised, hung, ended its worker
        differences = [f for f in judge(scenario, baseline, candidate, a, b,
                                        in_contract=True)
                       if f.severity == "error" and f.side == "both"]
        if differences:
            first = differences[0]
            where = ", ".join(f"{name} {value}" for name, value in (
                ("field", first.field), ("slot", first.slot), ("view", first.view))
                if value is not None)
            raise StagecheckError.of(
                messages.BENCH_NOT_EQUIVALENT, candidate.spec, baseline=baseline.spec,
                candidate=candidate.spec, num_reqs=num_reqs, count=len(differences),
                finding=f"{first.invariant}{f' ({where})' if where else ''}: "
                        f"{first.message}"[:300])


def _returned(o) -> bool:
    """Whether the call seen in ``o`` returned (no exception, no hang, its worker alive)."""
    return o.crashed is None and not o.timed_out and o.exception_type is None


def bench_here(baseline: Target, candidate: Target, device: str, sizes, repeats: int,
               min_time: float) -> tuple[list[BenchRow], float]:
    """The timing itself, in the process that holds the targets (a worker)."""
    torch = torch_module()
    sync = torch.cuda.synchronize if device == "cuda" else None
    started = time.perf_counter()
    rows = [_bench_size(baseline, candidate, num_reqs, device, repeats, min_time, sync)
            for num_reqs in sizes]
    return rows, time.perf_counter() - started
