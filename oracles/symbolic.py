"""Symbolic differential check of real staging code with CrossHair.

The staging functions are run unchanged, but on pure-Python *list models* of the
paired buffer instead of torch/numpy (CrossHair cannot reason about either): a
model offers ``.np``, ``.cpu`` and ``.gpu`` views over plain lists (int and slice
keys, ``len``, iteration, int32 or bool element semantics of numpy 2 and torch) and
``copy_to_gpu(n=None)``, and logs every host write and copy as the same
``spec.observation`` events the instrumented torch buffer logs. The inputs of one
call are built from CrossHair symbolic values: integers for capacity, batch size,
token counts, state indices and the previous contents of every view; symbolic
choices for which request ids repeat and which dict entries exist. Each path:

1. *symbolic phase* (traced): build the scenario, run both targets on fresh list
   models, and compare the two observations field by field. The comparisons fork
   the path, so CrossHair goes looking for inputs where the observations differ
   (the same criterion ``crosshair diffbehavior`` uses);
2. *concrete phase*: realize the path's scenario and replay it on the real torch
   buffers with the fuzzer's own code (``oracles.differential.evaluate``: the spec
   checks of each side plus ``compare``). Findings are taken from this replay only,
   so every finding is reproducible with ``oracles.run.observe``;
3. *fidelity check*: the realized model observations must equal the torch ones
   (outcome, buffers, copies, writes, inputs afterwards). A path where they do not
   (the target used a numpy/torch operation the model does not offer, or CrossHair
   could not handle a value) is *lost*, not explored.

``run_symbolic`` raises ``SymbolicInconclusive`` when no path was explored or any
path was lost, instead of reporting "equivalent" (``crosshair diffbehavior`` prints
"No differences found" in that situation).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any, Callable

from oracles.errors import StagecheckError
from oracles.targets import Target
from spec.findings import ERROR, Finding, FindingsResult
from spec.observation import Copy, HostWrite, Observation
from spec.scenario import StagingScenario
from spec.schema import FIELDS_BY_BUFFER, INT32_MAX, INT32_MIN

__all__ = ["ListBuffer", "ListView", "ModelUnsupported", "SymbolicInconclusive",
           "SymbolicResult", "build_model_inputs", "observe_model", "run_symbolic"]


class SymbolicInconclusive(StagecheckError):
    """The symbolic run cannot vouch for anything: no path explored, or paths lost."""

    def __init__(self, message: str, result: "SymbolicResult | None" = None) -> None:
        super().__init__(message)
        self.result = result


class ModelUnsupported(BaseException):
    """The staging code used buffer surface the list model does not offer.

    A BaseException so that a target's ``except Exception`` cannot swallow it; the
    path it happens on is counted as lost, never as a behaviour of the target.
    """


# --------------------------------------------------------------------------------------
# The list model of CpuGpuBuffer
# --------------------------------------------------------------------------------------

_VIA_LABEL = {"np": "numpy array", "cpu": "torch tensor", "gpu": "device tensor"}


def _is_numpy_value(value: Any) -> bool:
    return type(value).__module__.split(".")[0] == "numpy"


def _is_torch_value(value: Any) -> bool:
    return type(value).__module__.split(".")[0] == "torch"


class ListView:
    """One view (``.np``, ``.cpu`` or ``.gpu``) of a ``ListBuffer``: a window of its list.

    Slicing returns another view of the same storage (writes go through, as with
    numpy and torch); an int key reads or writes one element.
    """

    __slots__ = ("_owner", "_via", "_slots")

    def __init__(self, owner: "ListBuffer", via: str, slots: range) -> None:
        self._owner, self._via, self._slots = owner, via, slots

    # -- reading ----------------------------------------------------------------
    def __len__(self) -> int:
        return len(self._slots)

    def _storage(self) -> list:
        return self._owner._gpu if self._via == "gpu" else self._owner._cpu

    def __iter__(self):
        storage = self._storage()
        for i in self._slots:
            yield storage[i]

    def _index(self, key) -> int:
        if isinstance(key, bool) or not (isinstance(key, int) or _is_numpy_value(key)
                                         and hasattr(key, "__index__")):
            raise ModelUnsupported(f"index {key!r} of type {type(key).__name__} on the list "
                                   f"model of a {_VIA_LABEL[self._via]}")
        k = int(key)
        n = len(self._slots)
        if not -n <= k < n:
            axis = "axis" if self._via == "np" else "dimension"
            raise IndexError(f"index {k} is out of bounds for {axis} 0 with size {n}")
        return self._slots[k]

    def __getitem__(self, key):
        if isinstance(key, slice):
            return ListView(self._owner, self._via, self._slots[key])
        return self._storage()[self._index(key)]

    def tolist(self) -> list:
        return list(self)

    def __array__(self, dtype=None, copy=None):
        self._owner.note_concretized(f"numpy read the {_VIA_LABEL[self._via]} model")
        import numpy as np
        from crosshair.core import deep_realize
        return np.array(deep_realize(list(self)), dtype=dtype or self._owner.dtype)

    def __repr__(self) -> str:
        return f"ListView({self._owner.name}.{self._via}{list(self._slots)})"

    def __getattr__(self, name: str):
        if name.startswith("__"):   # protocol probes (numpy, copy, pickle): "not here"
            raise AttributeError(name)
        raise ModelUnsupported(f".{name} of a {_VIA_LABEL[self._via]} is not offered by the "
                               "list model of CpuGpuBuffer")

    # -- writing ----------------------------------------------------------------
    def __setitem__(self, key, value) -> None:
        if self._via == "gpu":
            raise ModelUnsupported("a host write into .gpu is not offered by the list model")
        if isinstance(key, slice):
            slots = self._slots[key]
            values = self._broadcast(value, len(slots))
        else:
            slots = range(self._index(key), self._index(key) + 1)
            values = [self._owner.convert_scalar(value, self._via)]
        storage = self._owner._cpu
        for i, v in zip(slots, values):
            storage[i] = v
        self._owner.events.append(HostWrite(self._owner.name, tuple(slots), self._via))

    def _broadcast(self, value, n: int) -> list:
        owner = self._owner
        if isinstance(value, ListView):
            if self._via == "cpu":
                raise ModelUnsupported("assigning a view of the list model into .cpu")
            value = list(value)
        if _is_numpy_value(value) and getattr(value, "ndim", 0) >= 1:
            # array-to-array assignment casts unsafely (wraps), as numpy does
            owner.note_concretized("a numpy array was written into the model")
            items = [owner.convert_array_item(v) for v in value.tolist()]
        elif _is_torch_value(value):
            raise ModelUnsupported("writing a torch tensor into the list model")
        elif isinstance(value, (list, tuple)):
            if self._via == "cpu":   # torch takes tensors or scalars there, not sequences
                kind = "BoolTensor" if owner.dtype == "bool" else "IntTensor"
                raise TypeError(f"can't assign a {type(value).__name__} to a torch.{kind}")
            items = [owner.convert_scalar(v, self._via) for v in value]
        else:
            return [owner.convert_scalar(value, self._via)] * n
        if len(items) == 1:
            return items * n
        if len(items) != n:
            if self._via == "np":
                raise ValueError(f"could not broadcast input array from shape ({len(items)},) "
                                 f"into shape ({n},)")
            raise RuntimeError(f"The expanded size of the tensor ({n}) must match the existing "
                               f"size ({len(items)}) at non-singleton dimension 0.  Target "
                               f"sizes: [{n}].  Tensor sizes: [{len(items)}]")
        return items


class ListBuffer:
    """A ``CpuGpuBuffer`` over two plain lists, logging host writes and copies."""

    def __init__(self, name: str, dtype: str, initial_cpu: list, initial_gpu: list,
                 events: list, on_concretized: Callable[[str], None] | None = None) -> None:
        self.name, self.dtype, self.events = name, dtype, events
        self._cpu, self._gpu = list(initial_cpu), list(initial_gpu)
        self._on_concretized = on_concretized
        size = len(self._cpu)
        self.np = ListView(self, "np", range(size))
        self.cpu = ListView(self, "cpu", range(size))
        self.gpu = ListView(self, "gpu", range(size))

    def note_concretized(self, why: str) -> None:
        if self._on_concretized is not None:
            self._on_concretized(why)

    def convert_scalar(self, value, via: str):
        """The element a scalar write stores, or the exception numpy 2 / torch raise."""
        if _is_torch_value(value):
            raise ModelUnsupported("writing a torch tensor into the list model")
        if _is_numpy_value(value):
            value = self._from_numpy_scalar(value)
        if self.dtype == "bool":
            if isinstance(value, bool):
                return value
            if isinstance(value, (int, float)):
                return value != 0
            raise ModelUnsupported(f"writing a {type(value).__name__} into a bool model")
        if isinstance(value, bool):
            return 1 if value else 0
        if isinstance(value, int):
            if not INT32_MIN <= value <= INT32_MAX:
                if via == "cpu":
                    raise RuntimeError("value cannot be converted to type int without overflow")
                raise OverflowError(f"Python integer {value} out of bounds for int32")
            return value
        if isinstance(value, float):
            if value != value or value in (float("inf"), float("-inf")):
                raise ModelUnsupported("writing a non-finite float into the int32 model")
            as_int = int(value)
            if not INT32_MIN <= as_int <= INT32_MAX:
                raise ModelUnsupported("writing an out-of-range float into the int32 model")
            return as_int
        raise ModelUnsupported(f"writing a {type(value).__name__} into the int32 list model")

    def _from_numpy_scalar(self, value):
        import numpy as np
        self.note_concretized("a numpy scalar was written into the model")
        if isinstance(value, np.ndarray) and value.ndim == 0:
            value = value[()]
        if isinstance(value, np.bool_):
            return bool(value)
        if isinstance(value, np.integer):
            return int(value)
        if isinstance(value, np.floating):
            return float(value)
        raise ModelUnsupported(f"writing a numpy {type(value).__name__} into the list model")

    def convert_array_item(self, value):
        """One element of a numpy array written into the model: unsafe cast (wraps)."""
        if self.dtype == "bool":
            return bool(value)
        value = int(value)
        return (value + 2**31) % 2**32 - 2**31

    def copy_to_gpu(self, n: int | None = None) -> ListView:
        size = len(self._cpu)
        stop = size if n is None else len(range(size)[:n])
        self.events.append(Copy(self.name, 0, stop, n))
        for i in range(stop):
            self._gpu[i] = self._cpu[i]
        return self.gpu[:stop]

    def final_cpu(self) -> list:
        return list(self._cpu)

    def final_gpu(self) -> list:
        return list(self._gpu)


def build_model_inputs(s: StagingScenario, target: Target,
                       on_concretized: Callable[[str], None] | None = None) -> SimpleNamespace:
    """Fresh inputs of one call on list-model buffers (``oracles.run.build_inputs``)."""
    from oracles.run import build_inputs

    def make_buffer(name, dtype, cpu, gpu, events):
        return ListBuffer(name, dtype, cpu, gpu, events, on_concretized)

    return build_inputs(s, target, make_buffer=make_buffer)


def _crosshair_control(exc: BaseException) -> bool:
    """True for exceptions that belong to CrossHair's machinery, not to the target."""
    from crosshair.util import ControlFlowException, NotDeterministic
    from crosshair import smt
    return isinstance(exc, (ControlFlowException, NotDeterministic, smt.Z3Exception))


def observe_model(target: Target, s: StagingScenario,
                  on_concretized: Callable[[str], None] | None = None) -> Observation:
    """Run ``target`` on list models built from ``s``; the observation ``observe`` would make.

    Raises ``ModelUnsupported`` when the target steps outside the model, and lets
    CrossHair's own control-flow exceptions through.
    """
    from oracles.run import _inputs_after, call_target

    inputs = build_model_inputs(s, target, on_concretized)
    exc_type = exc_msg = None
    mro: tuple[str, ...] = ()
    try:
        call_target(target, inputs, s.run_prefix_state_migration)
    except ModelUnsupported:
        raise
    except BaseException as exc:  # the target's own failure is an observation
        if _crosshair_control(exc) or isinstance(exc, (KeyboardInterrupt, SystemExit)):
            raise
        from crosshair.core import suspected_proxy_intolerance_exception
        if isinstance(exc, Exception) and suspected_proxy_intolerance_exception(exc):
            raise ModelUnsupported(f"CrossHair value not tolerated: {type(exc).__name__}: "
                                   f"{exc}") from exc
        exc_type = type(exc).__name__
        exc_msg = str(exc)
        mro = tuple(k.__name__ for k in type(exc).__mro__)
    return Observation(
        exception_type=exc_type, exception_message=exc_msg,
        cpu={name: b.final_cpu() for name, b in inputs.buffers.items()},
        gpu={name: b.final_gpu() for name, b in inputs.buffers.items()},
        events=list(inputs.events), req_ids_reads=list(inputs.reads),
        inputs_after=_inputs_after(inputs), timed_out=False, exception_mro=mro)


def _observations_differ(a: Observation, b: Observation) -> bool:
    """Field-by-field inequality; on symbolic values every comparison forks the path."""
    if a.exception_type != b.exception_type:
        return True
    if a.exception_message != b.exception_message:
        return True
    for buffer in sorted(set(a.cpu) & set(b.cpu)):
        if a.cpu[buffer] != b.cpu[buffer] or a.gpu[buffer] != b.gpu[buffer]:
            return True
        if ([(c.start, c.stop) for c in a.copies(buffer)]
                != [(c.start, c.stop) for c in b.copies(buffer)]):
            return True
    return a.inputs_after != b.inputs_after


def _short(value, limit: int = 120) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[:limit - 3] + "..."


def _fidelity_gaps(model: Observation, real: Observation) -> list[str]:
    """Where the realized list-model observation differs from the torch run.

    Exception messages are not compared: findings come from the torch run, and the
    model's messages only steer the search.
    """
    gaps = []
    if model.exception_type != real.exception_type:
        gaps.append(f"the list model {_outcome(model)}, the torch run {_outcome(real)}")
    for name, m, r in (("cpu", model.cpu, real.cpu), ("gpu", model.gpu, real.gpu)):
        for buffer in sorted(set(m) | set(r)):
            if m.get(buffer) != r.get(buffer):
                gaps.append(f"{name} {buffer}: list model {_short(m.get(buffer))}, torch run "
                            f"{_short(r.get(buffer))}")
    if model.events != real.events:
        gaps.append(f"events: list model {_short(model.events)}, torch run {_short(real.events)}")
    if model.inputs_after != real.inputs_after:
        gaps.append("the inputs after the call differ")
    if model.req_ids_reads != real.req_ids_reads:
        gaps.append("the reads of req_ids differ")
    return gaps


def _outcome(o: Observation) -> str:
    if o.exception_type is None:
        return "returned"
    return f"raised {o.exception_type}: {_short(o.exception_message, 80)}"


# --------------------------------------------------------------------------------------
# Symbolic scenario
# --------------------------------------------------------------------------------------

_MAX_DRAFTS = 3


class _Symbols:
    """The symbolic values of one path, created before tracing resumes."""

    def __init__(self, space, max_capacity: int, buffers: tuple[str, ...], flagged: bool):
        from crosshair.core import proxy_for_type

        def sym_int(name: str):
            return proxy_for_type(int, name + space.uniq())

        m = max_capacity
        self.sched = [sym_int(f"scheduled_{k}") for k in range(m)]
        self.computed = [sym_int(f"computed_{k}") for k in range(m)]
        self.prompt = [sym_int(f"prompt_{k}") for k in range(m)]
        self.state = [sym_int(f"state_idx_{k}") for k in range(m)]
        self.draft_tokens = [[sym_int(f"draft_{k}_{t}") for t in range(_MAX_DRAFTS)]
                             for k in range(m)]
        self.initial: dict[tuple[str, str], list] = {}
        for buffer in buffers:
            is_bool = FIELDS_BY_BUFFER[buffer].dtype == "bool"
            for view in ("cpu", "gpu"):
                self.initial[buffer, view] = [
                    proxy_for_type(bool, f"{buffer}_{view}_{j}" + space.uniq()) if is_bool
                    else sym_int(f"{buffer}_{view}_{j}") for j in range(m)]
        self.flagged = flagged


def _assume(space, condition) -> None:
    """Constrain the path without forking (``condition`` is a symbolic bool)."""
    from crosshair.tracers import NoTracing
    with NoTracing():
        if type(condition) is bool:
            if not condition:
                from crosshair.util import IgnoreAttempt
                raise IgnoreAttempt("assumption does not hold")
            return
        space.add(condition)


def _fork(space, desc: str, probability_true: float) -> bool:
    """A fresh binary choice of the path (no value behind it)."""
    from crosshair.tracers import NoTracing
    with NoTracing():
        return space.smt_fork(desc=desc, probability_true=probability_true)


def _pick(space, desc: str, weighted: list[tuple[int, float]]) -> int:
    """Choose one of ``weighted`` (value, weight) by a chain of forks.

    The weights steer CrossHair's random descent of the path tree (the shapes that
    matter most are tried first); every option stays reachable.
    """
    options = [(v, w) for v, w in weighted if w > 0]
    seen: set = set()
    options = [(v, w) for v, w in options if not (v in seen or seen.add(v))]
    for i, (value, weight) in enumerate(options[:-1]):
        rest = sum(w for _, w in options[i:])
        if _fork(space, f"{desc}={value}", weight / rest):
            return value
    return options[-1][0]


def _symbolic_scenario(space, sym: _Symbols, max_capacity: int) -> StagingScenario:
    """Build (under tracing) a scenario from the path's symbols; forks on its shape.

    Shape (capacity, length of ``req_ids``, ``num_reqs``, repeated ids, which dict
    entries exist, the flag) is chosen by forks; every value (token counts, state
    indices, draft lists, the previous contents of every view) stays symbolic.
    """
    m = max_capacity
    capacity = _pick(space, "capacity", [(m, 3.0)] + [(c, 1.0) for c in range(m - 1, 0, -1)])
    length = _pick(space, "len_req_ids", [(capacity, 2.0), (capacity - 1, 2.0)]
                   + [(n, 1.0) for n in range(capacity - 2, -1, -1)])
    num_reqs = _pick(space, "num_reqs", [(max(length - 1, 0), 3.0), (length, 3.0), (0, 1.0)]
                     + [(n, 1.0) for n in range(1, length)]
                     + [(n, 0.5) for n in range(length + 1, capacity + 2)])  # out of contract

    req_ids: list[str] = []
    for j in range(length):
        if j == 0 or _fork(space, f"fresh_id_{j}", 0.9):
            req_ids.append(f"r{j}")
        else:  # repeats an earlier id (out of contract among the live slots)
            req_ids.append(req_ids[_pick(space, f"alias_{j}", [(k, 1.0) for k in range(j)])])
    # Values beyond int32 are out of contract (numpy raises at the first such write):
    # one fork decides whether this path may hold any, instead of a fork at every write.
    if _fork(space, "values_fit_int32", 0.85):
        for values in (sym.sched, sym.computed, sym.prompt, sym.state):
            for v in values[:len(req_ids)]:
                _assume(space, v >= INT32_MIN)
                _assume(space, v <= INT32_MAX)
    scheduled, spec_tokens, computed, prompt, state_idx = {}, {}, {}, {}, {}
    live = set(req_ids[:num_reqs])
    # Padded ids: one choice for all of them, stale entries everywhere or none at all.
    stale = _fork(space, "padded_ids_stale", 0.5)
    for k, r in enumerate(dict.fromkeys(req_ids)):
        if r in live:
            has_scheduled = has_request = True
            if not _fork(space, f"entries_complete_{k}", 0.9):   # out of contract
                if _fork(space, f"missing_scheduled_{k}", 0.5):
                    has_scheduled = False
                else:
                    has_request = False
            has_state_idx = _fork(space, f"state_idx_has_{k}", 0.85)
            has_drafts = _fork(space, f"drafts_has_{k}", 0.6)
        else:
            has_scheduled = has_request = has_state_idx = has_drafts = stale
        if has_scheduled:
            scheduled[r] = sym.sched[k]
        if has_request:
            computed[r] = sym.computed[k]
            prompt[r] = sym.prompt[k]
        if has_drafts:
            # The number of drafts is a list length, which every copy of the list would
            # realize anyway: chosen here, with an empty list (same as absent) least likely.
            count = _pick(space, f"num_drafts_{k}", [(1, 3.0), (2, 1.0), (3, 1.0), (0, 1.0)])
            spec_tokens[r] = sym.draft_tokens[k][:count]
        if has_state_idx:
            state_idx[r] = sym.state[k]
    initial_cpu, initial_gpu = {}, {}
    for (buffer, view), values in sym.initial.items():
        values = values[:capacity]
        if FIELDS_BY_BUFFER[buffer].dtype != "bool":
            for v in values:
                _assume(space, v >= INT32_MIN)
                _assume(space, v <= INT32_MAX)
        (initial_cpu if view == "cpu" else initial_gpu)[buffer] = values
    flag, omit = True, False
    if sym.flagged:
        flag = _fork(space, "run_prefix_state_migration", 0.6)
        omit = (not flag) and _fork(space, "omit_state_idx_buf", 0.3)
    return StagingScenario(capacity, num_reqs, req_ids, scheduled, spec_tokens, computed,
                           prompt, state_idx, initial_cpu, initial_gpu, flag, omit)


# --------------------------------------------------------------------------------------
# The exploration
# --------------------------------------------------------------------------------------

@dataclass
class LostPath:
    """A path that did not count as explored, and why."""

    kind: str            # "unsupported" | "model-mismatch" | "crosshair" | "timeout"
    reason: str
    scenario: dict | None = None


@dataclass
class SymbolicResult(FindingsResult):
    baseline: str
    candidate: str
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

    def summary(self) -> str:
        lines = [f"symbolic diff {self.baseline} -> {self.candidate}: "
                 f"{self.paths_explored} path(s) explored, {self.paths_unsupported} lost to "
                 f"unsupported operations, {self.paths_timed_out} timed out, "
                 f"{self.paths_ignored} pruned; {self.seconds:.1f} s"
                 + (" (path tree exhausted)" if self.exhausted else "")]
        if self.paths_concretized:
            lines.append(f"{self.paths_concretized} explored path(s) passed symbolic values "
                         "through numpy, which made them concrete: on those paths value-level "
                         "differences were sampled, not searched")
        if self.first_counterexample_seconds is not None:
            lines.append(f"first counterexample after {self.first_counterexample_seconds:.1f} s")
        return "\n".join(lines)

    def to_dict(self) -> dict:
        return {
            "baseline": self.baseline, "candidate": self.candidate,
            "verdict": self.verdict(), "findings": [f.to_dict() for f in self.findings],
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


def _size(s: StagingScenario) -> tuple:
    return (s.capacity, s.num_reqs, len(s.req_ids), len(s.to_json()))


class _Realizer:
    """Concrete values for a finished (detached) path, from one solver model.

    ``crosshair.core.deep_realize`` asks the solver twice per value, to record the
    alternative as an unexplored branch; on a detached path there is nothing left
    to branch, so atomic values (ints and bools) are read from one model instead.
    Other symbolic objects (draft lists, lazy strings) fall back to ``deep_realize``.
    """

    def __init__(self, space) -> None:
        self.space = space

    def __call__(self, value):
        from crosshair.tracers import NoTracing
        with NoTracing():
            return self._walk(value)

    def _atomic(self, value):
        import z3
        from crosshair.statespace import model_value_to_python
        var = getattr(value, "var", None)
        if not isinstance(var, z3.ExprRef) or not (z3.is_int(var) or z3.is_bool(var)):
            return _NOT_ATOMIC
        model = self.space.witness()
        if model is None:
            return _NOT_ATOMIC
        out = model_value_to_python(model.eval(var, model_completion=True))
        return bool(out) if z3.is_bool(var) else int(out)

    def _walk(self, value):
        from crosshair.core import deep_realize
        kind = type(value)
        if kind in (int, bool, str, float, type(None)):
            return value
        if kind is dict:
            return {self._walk(k): self._walk(v) for k, v in value.items()}
        if kind in (list, tuple):
            return kind(self._walk(v) for v in value)
        if kind in (HostWrite, Copy):
            return kind(*(self._walk(getattr(value, f)) for f in value.__dataclass_fields__))
        if kind is StagingScenario or kind is Observation:
            return kind(**{f: self._walk(getattr(value, f)) for f in value.__dataclass_fields__})
        if hasattr(kind, "__ch_realize__"):
            atomic = self._atomic(value)
            if atomic is not _NOT_ATOMIC:
                return atomic
        return self._walk(deep_realize(value)) if hasattr(kind, "__ch_realize__") else value


_NOT_ATOMIC = object()


def run_symbolic(baseline: Target, candidate: Target, timeout: float = 30.0,
                 max_capacity: int = 4, *, stop_at_first_error: bool = False,
                 per_path_timeout: float | None = None, replay_timeout: float = 5.0,
                 strict: bool = True, progress: Callable[[SymbolicResult], None] | None = None
                 ) -> SymbolicResult:
    """Explore both targets symbolically for ``timeout`` seconds (wall clock).

    Returns the distinct findings (the fuzzer's findings, from a concrete torch replay
    of each path; the smallest scenario kept for each) and path counts. With
    ``strict`` (the default) raises ``SymbolicInconclusive`` when no path was explored
    or any path was lost to unsupported operations; the result rides on the exception.
    """
    import crosshair.core_and_libs  # noqa: F401  (registers CrossHair's symbolic types)
    from crosshair.core import PathOutcome, explore_loop
    from crosshair.options import DEFAULT_OPTIONS, AnalysisOptionSet
    from crosshair.statespace import CallAnalysis, RootNode, VerificationStatus
    from crosshair.tracers import ResumedTracing
    from crosshair.util import (CrosshairUnsupported, IgnoreAttempt, NotDeterministic,
                                PathTimeout, UnexploredPath)

    if max_capacity < 1:
        raise StagecheckError(f"max_capacity must be >= 1, got {max_capacity}")
    if not timeout > 0:
        raise StagecheckError(f"timeout must be > 0 seconds, got {timeout}")
    result = SymbolicResult(baseline.spec, candidate.spec, max_capacity=max_capacity,
                            timeout=timeout)
    buffers = tuple(dict.fromkeys(baseline.profile.buffers() + candidate.profile.buffers()))
    flagged = baseline.profile.takes_flag or candidate.profile.takes_flag
    kept: dict[tuple, tuple[tuple, Finding]] = {}
    started = time.monotonic()
    deadline = started + timeout
    stop = [False]
    stopped_early = [False]
    path_no = [0]

    def lose(kind: str, reason: str, scenario: dict | None = None) -> None:
        if kind == "timeout":
            result.paths_timed_out += 1
        else:
            result.paths_unsupported += 1
        result.lost.append(LostPath(kind, reason, scenario))

    def run_path(space) -> PathOutcome:
        if time.monotonic() > deadline or stop[0]:
            stopped_early[0] = True
            return PathOutcome(CallAnalysis(), breakout=True)
        path_no[0] += 1
        concretized: list[str] = []
        sym = _Symbols(space, max_capacity, buffers, flagged)
        s = None
        try:
            with ResumedTracing():
                s = _symbolic_scenario(space, sym, max_capacity)
                obs_a = observe_model(baseline, s, concretized.append)
                obs_b = observe_model(candidate, s, concretized.append)
                differ = _observations_differ(obs_a, obs_b)
                space.detach_path()
        except IgnoreAttempt:
            result.paths_ignored += 1
            raise
        except ModelUnsupported as exc:
            with ResumedTracing():
                space.detach_path()
            lose("unsupported", str(exc), _Realizer(space)(s).to_dict() if s is not None else None)
            return PathOutcome(CallAnalysis(VerificationStatus.UNKNOWN))
        except PathTimeout:
            lose("timeout", "CrossHair's per-path time limit ran out")
            raise
        except CrosshairUnsupported as exc:
            lose("crosshair", f"CrossHair does not support an operation: {exc}")
            raise
        except UnexploredPath as exc:
            lose("crosshair", f"CrossHair could not decide the path ({type(exc).__name__})")
            raise
        except NotDeterministic:
            lose("crosshair", "the path did not replay deterministically")
            return PathOutcome(CallAnalysis(VerificationStatus.UNKNOWN))
        # concrete phase (not traced)
        realize = _Realizer(space)
        concrete = realize(s)
        model_a, model_b = realize(obs_a), realize(obs_b)
        findings, real_a, real_b = _evaluate(baseline, candidate, concrete, replay_timeout,
                                             kernel="off")
        gaps = ([f"baseline {g}" for g in _fidelity_gaps(model_a, real_a)]
                + [f"candidate {g}" for g in _fidelity_gaps(model_b, real_b)])
        if gaps:
            lose("model-mismatch", "; ".join(gaps[:3]), concrete.to_dict())
            return PathOutcome(CallAnalysis(VerificationStatus.UNKNOWN))
        result.paths_explored += 1
        if concretized:
            result.paths_concretized += 1
        if differ:
            result.paths_with_difference += 1
        size = _size(concrete)
        now = time.monotonic() - started
        for f in findings:
            f.scenario = concrete.to_dict()
            # every finding comes from the torch replay of the path's concrete input
            f.extra = {**f.extra, "oracle": "symbolic", "symbolic_path": path_no[0],
                       "found_after_s": round(now, 3), "replayed_on": "torch (cpu)"}
            if f.key not in kept:
                f.examples_to_find = path_no[0]
                kept[f.key] = (size, f)
            elif size < kept[f.key][0]:
                f.examples_to_find = kept[f.key][1].examples_to_find
                f.extra["found_after_s"] = kept[f.key][1].extra["found_after_s"]
                kept[f.key] = (size, f)
            if f.severity == ERROR and result.first_counterexample_seconds is None:
                result.first_counterexample_seconds = now
                if stop_at_first_error:
                    stop[0] = True
        if progress is not None:
            progress(result)
        return PathOutcome(CallAnalysis(VerificationStatus.CONFIRMED), breakout=stop[0])

    options = DEFAULT_OPTIONS.overlay(AnalysisOptionSet(
        per_condition_timeout=timeout,
        per_path_timeout=per_path_timeout or max(2.0, min(10.0, timeout ** 0.5)),
    ))
    root = RootNode()
    exploration = explore_loop(options, root, run_path)
    result.exhausted = bool(exploration.exhausted) and not stopped_early[0]
    result.seconds = time.monotonic() - started
    _annotate_kernel_impact(baseline, candidate, kept, replay_timeout)
    result.findings = sorted((f for _, f in kept.values()),
                             key=lambda f: (f.severity != ERROR, f.invariant, f.side,
                                            str(f.field)))
    if strict:
        raise_if_inconclusive(result)
    return result


def _evaluate(baseline: Target, candidate: Target, s: StagingScenario, timeout: float,
              kernel: str) -> tuple[list[Finding], Observation, Observation]:
    """The fuzzer's evaluation of one scenario (``oracles.differential.evaluate``)."""
    import inspect

    from oracles.differential import evaluate
    kwargs = {"kernel": kernel} if "kernel" in inspect.signature(evaluate).parameters else {}
    return evaluate(baseline, candidate, s, device="cpu", timeout=timeout, **kwargs)


def _annotate_kernel_impact(baseline: Target, candidate: Target, kept: dict,
                            timeout: float) -> None:
    """Replay each kept finding's scenario once with the kernel oracle on (as the fuzzer
    does), to fill ``kernel_impact``. Exploration replays run with it off: per path it
    would cost more than the path itself."""
    for key, (_, finding) in kept.items():
        if finding.kernel_impact is not None:
            continue
        try:
            again, _, _ = _evaluate(baseline, candidate,
                                    StagingScenario.from_dict(finding.scenario), timeout, "auto")
        except Exception:   # the annotation is optional; the finding stands without it
            continue
        for f in again:
            if f.key == key and f.kernel_impact is not None:
                finding.kernel_impact = f.kernel_impact
                break


def raise_if_inconclusive(result: SymbolicResult) -> None:
    """Raise ``SymbolicInconclusive`` unless the run can vouch for its verdict."""
    if result.paths_explored == 0:
        why = "; ".join(sorted({p.reason for p in result.lost})[:3]) or "none completed"
        raise SymbolicInconclusive(
            f"symbolic diff explored no path in {result.seconds:.1f} s "
            f"({result.paths_unsupported} lost to unsupported operations, "
            f"{result.paths_timed_out} timed out, {result.paths_ignored} pruned): {why}. "
            "Nothing was checked; give a longer --timeout, or use the fuzzer "
            "('stagecheck diff') for this target.", result)
    if result.paths_unsupported:
        reasons = sorted({p.reason for p in result.lost if p.kind != "timeout"})
        raise SymbolicInconclusive(
            f"symbolic diff lost {result.paths_unsupported} of "
            f"{result.paths_explored + result.paths_unsupported} path(s) to operations the "
            f"list model or CrossHair does not support (first: {reasons[0]}). A verdict "
            "from the remaining paths would hide what happens on those; use the fuzzer "
            "('stagecheck diff') for this target.", result)
