"""The run/observe stage: call one target on a fresh build of a scenario, see everything.

One ``observe`` serves every oracle. What differs is the buffer backend the inputs
are built on:

- ``instrumented`` (``observe/instrumented.py``): torch ``CpuGpuBuffer``s whose host
  writes and copies are logged, on CPU or CUDA (the fuzzer, replays, the kernel oracle);
- ``listmodel`` (``observe/listmodel.py``): pure-Python lists with numpy/torch element
  semantics, which CrossHair can reason about (the symbolic oracle, the contract models).

Both log the same ``spec.observation`` events, so one ``Observation`` comes out.
"""

from __future__ import annotations

import signal
import threading
from contextlib import contextmanager
from types import SimpleNamespace
from typing import Any, Callable, Protocol

from stagecheck.oracles.options import RunOptions
from stagecheck.oracles.targets import Target
from stagecheck.spec.observation import Observation
from stagecheck.spec.scenario import StagingScenario
from stagecheck.spec.schema import Call, StandInUnsupported, TargetProfile
from stagecheck.spec.space import initial_values

__all__ = ["Backend", "Builder", "CallTimedOut", "RecordingList", "build_inputs", "observe",
           "plain", "require_device"]


class CallTimedOut(BaseException):
    """Raised inside a target that ran past its time limit (BaseException: not swallowed)."""


def _expire(signum, frame):
    raise CallTimedOut()


@contextmanager
def time_limit(seconds: float | None):
    """Interrupt the body after ``seconds`` (main thread on POSIX only; otherwise no limit).

    Where this process's alarm handler is ours already (a worker), only the timer is
    set; elsewhere the previous handler comes back afterwards. The worker's parent
    enforces the limit as well, by killing the worker: nothing a target does to the
    alarm can stop it.
    """
    if _KEEP_HANDLER and seconds:      # a worker: its handler is installed once
        if not _KEEP_HANDLER_SET:
            _install_kept_handler()
        signal.setitimer(signal.ITIMER_REAL, seconds)
        try:
            yield
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
        return
    usable = (seconds and hasattr(signal, "setitimer")
              and threading.current_thread() is threading.main_thread())
    if not usable:
        yield
        return
    previous = signal.getsignal(signal.SIGALRM)
    if previous is not _expire:
        signal.signal(signal.SIGALRM, _expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        if previous is not _expire:
            signal.signal(signal.SIGALRM, previous)


#: a worker keeps its alarm handler installed between calls
_KEEP_HANDLER = False
_KEEP_HANDLER_SET = False


def _install_kept_handler() -> None:
    global _KEEP_HANDLER_SET
    signal.signal(signal.SIGALRM, _expire)
    _KEEP_HANDLER_SET = True


class Backend(Protocol):
    """How the buffers of one call are made, and which exceptions are not the target's."""

    def make_buffer(self, name: str, dtype: str, cpu: list, gpu: list, events: list): ...

    def passes_through(self, exc: BaseException) -> bool:
        """True for an exception that belongs to the machinery, not to the target."""


class RecordingList(list):
    """``req_ids`` that records which indices the staging code reads."""

    def __init__(self, items, reads: list[int]) -> None:
        super().__init__(items)
        self.reads = reads
        self.recording = True

    def __getitem__(self, key):
        if self.recording:
            if isinstance(key, slice):
                self.reads.extend(range(len(self))[key])
            elif isinstance(key, int):
                self.reads.append(key + len(self) if key < 0 else key)
        return super().__getitem__(key)

    def __iter__(self):
        for i in range(len(self)):
            if self.recording:
                self.reads.append(i)
            yield list.__getitem__(self, i)


_ATOMS = frozenset({int, str, bool, float, type(None)})


def plain(value: Any) -> Any:
    """Plain data of what a target left in an input (numpy scalars and arrays included)."""
    kind = type(value)
    if kind in _ATOMS:
        return value
    if kind is dict:
        return {k: v if type(v) in _ATOMS else plain(v) for k, v in value.items()}
    if kind is list or kind is tuple:
        return [v if type(v) in _ATOMS else plain(v) for v in value]
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    if isinstance(value, (set, frozenset)):
        return sorted(plain(v) for v in value)
    tolist = getattr(value, "tolist", None)
    if tolist is not None and kind.__module__.split(".")[0] == "numpy":
        return tolist()
    return value


class Builder:
    """Makes the objects of one call from a scenario (what a schema's ``build`` uses),
    and reads each one back after the call as plain data, by input name."""

    def __init__(self, scenario: StagingScenario, profile: TargetProfile, backend: "Backend"
                 ) -> None:
        self.scenario, self.profile, self.backend = scenario, profile, backend
        self.events: list = []
        self.reads: list[int] = []
        self.buffers: dict[str, Any] = {}
        self._readers: dict[str, Callable[[], Any]] = {}
        self._ids: RecordingList | None = None

    def req_ids(self) -> RecordingList:
        if self._ids is None:
            ids = self._ids = RecordingList(self.scenario.req_ids, self.reads)

            def read():
                ids.recording = False
                return plain(list(ids))
            self._readers["req_ids"] = read
        return self._ids

    def table(self, name: str) -> dict:
        made = {k: list(v) if isinstance(v, list) else v
                for k, v in self.scenario.inputs[name].items()}
        self._readers[name] = lambda: plain(made)
        return made

    def objects(self, **attributes: str) -> dict:
        """One object per request of the given per-request inputs (``attr=input name``),
        for every id that any of them holds."""
        tables = {attr: self.scenario.inputs[name] for attr, name in attributes.items()}
        ids = dict.fromkeys(r for table in tables.values() for r in table)
        made = {r: SimpleNamespace(**{attr: table[r] for attr, table in tables.items()
                                      if r in table}) for r in ids}
        for attr, name in attributes.items():
            self._readers[name] = (lambda a: lambda: {r: plain(getattr(o, a)) for r, o
                                                      in made.items() if hasattr(o, a)})(attr)
        return made

    def id_set(self, name: str) -> set:
        made = set(self.scenario.inputs[name])
        self._readers[name] = lambda: plain(made)
        return made

    def array(self, name: str, dtype: str):
        import numpy as np
        made = np.array(self.scenario.inputs[name], dtype=dtype)
        self._readers[name] = lambda: plain(made)
        return made

    def value(self, name: str) -> Any:
        return self.scenario.inputs[name]

    def buffer(self, name: str):
        made = self.buffers.get(name)
        if made is None:
            s, schema = self.scenario, self.profile.schema
            cpu, gpu = s.initial_cpu.get(name), s.initial_gpu.get(name)
            if cpu is None or gpu is None:
                cpu = initial_values(s, schema, name, "cpu")
                gpu = initial_values(s, schema, name, "gpu")
            declared = schema.field_of_buffer(name)
            if declared is None:
                raise ValueError(f"b.buffer({name!r}): no field declares buffer {name!r} "
                                 f"(the buffers are: "
                                 f"{', '.join(sorted(f.buffer for f in schema.fields))})")
            made = self.buffers[name] = self.backend.make_buffer(
                name, declared.dtype, cpu, gpu, self.events)
        return made

    def inputs_after(self) -> dict:
        return {name: read() for name, read in self._readers.items()}


def build_inputs(s: StagingScenario, profile: TargetProfile, backend: "Backend"
                 ) -> tuple[Builder, Call]:
    """Fresh arguments for one call of a target with ``profile`` on ``s``."""
    builder = Builder(s, profile, backend)
    return builder, profile.schema.build(builder, profile)


def queue_gpu_work(cycles: int) -> None:
    """Put device work ahead of the copies on the current stream, so they stay queued."""
    if cycles > 0:
        import torch
        if torch.cuda.is_available():
            torch.cuda._sleep(cycles)


def require_device(device: str) -> None:
    """Raise a ``UsageError`` when ``device`` is cuda and torch sees none."""
    if device == "cuda":
        import torch
        if not torch.cuda.is_available():
            from stagecheck.oracles import messages
            from stagecheck.oracles.errors import UsageError
            raise UsageError.of(messages.CUDA_UNAVAILABLE, "cuda", "device",
                                torch=torch.__version__)


def observe(target: Target, s: StagingScenario, options: RunOptions = RunOptions(),
            backend: Backend | None = None, *, sync_between_steps: bool = True,
            time_limited: bool = True, exits_are_observations: bool = False) -> Observation:
    """Call ``target`` on a fresh build of ``s``; return what was seen.

    ``options.steps`` > 1 stages the same inputs again on the same buffers, with or
    without waiting for the previous step's copies. The default backend is the
    instrumented torch buffer on ``options.device`` (``options.deferred_copies`` runs
    its CPU model of asynchronous copies; ``options.gpu_busy_cycles`` queues device
    work ahead of the copies on CUDA). ``time_limited=False`` drops the per-call
    limit (the symbolic oracle: CrossHair bounds its own paths). In a worker process,
    ``exits_are_observations``: a target that raises ``SystemExit`` (or
    ``KeyboardInterrupt``) is observed doing so, instead of ending the worker.
    """
    if backend is None:
        from stagecheck.oracles.observe.instrumented import InstrumentedBackend
        backend = InstrumentedBackend(options.device, options.deferred_copies)
    inputs, call = build_inputs(s, target.profile, backend)
    exc_type = exc_msg = None
    mro: tuple[str, ...] = ()
    timed_out = False
    last_step_start = 0
    try:
        with time_limit(options.timeout if time_limited else None):
            for step in range(options.steps):
                if step and sync_between_steps:
                    for buf in inputs.buffers.values():
                        buf.complete_copies()
                last_step_start = len(inputs.events)
                queue_gpu_work(options.gpu_busy_cycles)
                target.func(*call.args, **call.kwargs)
    except CallTimedOut:
        timed_out = True
        exc_type = "CallTimedOut"
    except SystemExit as exc:
        if not exits_are_observations:
            raise
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        return Observation.of_crash(f"exited the interpreter with code {code}")
    except KeyboardInterrupt:
        if not exits_are_observations:
            raise
        exc_type, exc_msg, mro = "KeyboardInterrupt", "", ("KeyboardInterrupt", "BaseException")
    except StandInUnsupported as exc:   # the schema's limit, not the target's behaviour
        from stagecheck.oracles import messages
        from stagecheck.oracles.errors import SchemaError
        raise SchemaError.of(messages.STAND_IN_UNSUPPORTED, target.spec,
                             stand_in=exc.stand_in, operation=exc.operation,
                             schema=target.profile.schema.name) from None
    except BaseException as exc:  # the target's own failure is an observation
        if backend.passes_through(exc) or (exits_are_observations and
                                           isinstance(exc, MemoryError)):
            raise                     # a worker ends itself: the checker says "exceeded"
        exc_type = printable(type(exc).__name__)
        exc_msg = exception_text(exc)
        mro = tuple(printable(k.__name__) for k in type(exc).__mro__)
    finally:
        for buf in inputs.buffers.values():
            buf.complete_copies()
            buf.release()
    try:
        cpu = {name: b.final_cpu() for name, b in inputs.buffers.items()}
        gpu = {name: b.final_gpu() for name, b in inputs.buffers.items()}
        after = inputs.inputs_after()
    except Exception as exc:   # the target left something stagecheck cannot read back
        return Observation.of_crash(UNREADABLE.format(error=exception_text(exc, type(exc))))
    return Observation(
        exception_type=exc_type, exception_message=exc_msg, cpu=cpu, gpu=gpu,
        events=list(inputs.events), req_ids_reads=list(inputs.reads),
        inputs_after=after, timed_out=timed_out, exception_mro=mro,
        last_step_start=last_step_start)


#: what a call whose buffers or inputs cannot be read back was seen to do
UNREADABLE = ("left its buffers or inputs in a state stagecheck cannot read back "
              "({error})")
#: longest exception text kept (a target may raise a message of any size)
MAX_EXCEPTION_TEXT = 2000


def printable(text: str, keep_layout: bool = True) -> str:
    """``text`` with every character ``str.isprintable`` refuses (C0 and C1 controls, DEL,
    line separators, bidi and other format characters, surrogates) written as an escape
    (``\\x1b``, ``\\u202e``; ``\\n``, ``\\t``, ``\\r``), so no text a target or a file
    chose can drive a terminal or break a report. ``keep_layout``: newline and tab stay.
    The one rule for echoed text: ``report/escape.py`` applies it to every report."""
    if text.isprintable():
        return text
    return "".join(ch if ch.isprintable() or (keep_layout and ch in "\n\t") else
                   _visible(ch) for ch in text)


def _visible(ch: str) -> str:
    code = ord(ch)
    return {9: "\\t", 10: "\\n", 13: "\\r"}.get(code) or (
        f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}")


def exception_text(exc: BaseException, kind: type | None = None) -> str:
    """``str(exc)`` as a report may show it: never raises (an ``__str__`` or a ``repr``
    that raises gives a note instead), at most ``MAX_EXCEPTION_TEXT`` characters, control
    characters escaped. ``kind``: also name the exception's type."""
    try:
        text = str(exc)
        if not isinstance(text, str):
            raise TypeError("__str__ returned a non-string")
    except BaseException as inner:     # noqa: BLE001 (whatever the target's __str__ does)
        try:
            name = type(inner).__name__
        except BaseException:       # noqa: BLE001
            name = "an exception"
        text = f"<str() of the exception raised {name}>"
    if len(text) > MAX_EXCEPTION_TEXT:
        text = text[:MAX_EXCEPTION_TEXT] + f"... ({len(text) - MAX_EXCEPTION_TEXT} more)"
    text = printable(text)
    return f"{printable(kind.__name__)}: {text}" if kind is not None else text

