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
from typing import Protocol

from stagecheck.oracles.options import RunOptions
from stagecheck.oracles.targets import Target
from stagecheck.spec.observation import Observation
from stagecheck.spec.scenario import StagingScenario, initial_values
from stagecheck.spec.schema import FIELDS_BY_BUFFER, FLAG, STATE_IDX, TargetProfile

__all__ = ["Backend", "CallTimedOut", "RecordingList", "StagingInputs", "build_inputs",
           "call_target", "observe", "require_device"]


class CallTimedOut(BaseException):
    """Raised inside a target that ran past its time limit (BaseException: not swallowed)."""


@contextmanager
def time_limit(seconds: float | None):
    """Interrupt the body after ``seconds`` (main thread on POSIX only; otherwise no limit)."""
    usable = (seconds and hasattr(signal, "setitimer")
              and threading.current_thread() is threading.main_thread())
    if not usable:
        yield
        return

    def _expire(signum, frame):
        raise CallTimedOut()

    previous = signal.signal(signal.SIGALRM, _expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


class Backend(Protocol):
    """How the buffers of one call are made, and which exceptions are not the target's."""

    def make_buffer(self, name: str, dtype: str, cpu: list, gpu: list, events: list): ...

    def passes_through(self, exc: BaseException) -> bool:
        """True for an exception that belongs to the machinery, not to the target."""


class StagingInputs(SimpleNamespace):
    """The objects one staging call receives, built from a scenario, plus their recorders."""


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



def build_inputs(s: StagingScenario, profile: TargetProfile, backend: Backend) -> StagingInputs:
    """Fresh ctx, scheduler output, requests, ids and state indices for one call."""
    events: list = []
    reads: list[int] = []
    buffers = {}
    ctx = SimpleNamespace()
    for buffer in profile.buffers():
        f = FIELDS_BY_BUFFER[buffer]
        if (f is STATE_IDX and profile.takes_flag and not s.run_prefix_state_migration
                and s.omit_state_idx_buf):
            setattr(ctx, buffer, None)
            continue
        buf = backend.make_buffer(buffer, f.dtype, initial_values(s, buffer, "cpu"),
                                  initial_values(s, buffer, "gpu"), events)
        buffers[buffer] = buf
        setattr(ctx, buffer, buf)
    scheduler_output = SimpleNamespace(
        num_scheduled_tokens=dict(s.num_scheduled_tokens),
        scheduled_spec_decode_tokens={k: list(v) for k, v in s.spec_decode_tokens.items()})
    requests = {r: SimpleNamespace(num_computed_tokens=c,
                                   num_prompt_tokens=s.num_prompt_tokens.get(r))
                for r, c in s.num_computed_tokens.items()}
    return StagingInputs(ctx=ctx, scheduler_output=scheduler_output,
                         req_ids=RecordingList(s.req_ids, reads), num_reqs=s.num_reqs,
                         requests=requests, mamba_state_idx=dict(s.mamba_state_idx),
                         buffers=buffers, events=events, reads=reads)


def _plain(value):
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, SimpleNamespace):
        return [_plain(getattr(value, "num_computed_tokens", None)),
                _plain(getattr(value, "num_prompt_tokens", None))]
    return value


def inputs_after(inputs: StagingInputs) -> dict:
    """The inputs as plain data after the call (``spec.inputs_snapshot``'s shape)."""
    inputs.req_ids.recording = False
    so = inputs.scheduler_output
    return {
        "req_ids": list(inputs.req_ids),
        "num_scheduled_tokens": _plain(getattr(so, "num_scheduled_tokens", None)),
        "scheduled_spec_decode_tokens": _plain(getattr(so, "scheduled_spec_decode_tokens", None)),
        "requests": _plain(inputs.requests),
        "mamba_state_idx": _plain(inputs.mamba_state_idx),
    }


def call_target(target: Target, inputs: StagingInputs, flag: bool):
    kwargs = {FLAG: flag} if target.profile.takes_flag else {}
    return target.func(inputs.ctx, inputs.scheduler_output, inputs.req_ids, inputs.num_reqs,
                       inputs.requests, inputs.mamba_state_idx, **kwargs)


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
            time_limited: bool = True) -> Observation:
    """Call ``target`` on a fresh build of ``s``; return what was seen.

    ``options.steps`` > 1 stages the same inputs again on the same buffers, with or
    without waiting for the previous step's copies. The default backend is the
    instrumented torch buffer on ``options.device`` (``options.deferred_copies`` runs
    its CPU model of asynchronous copies; ``options.gpu_busy_cycles`` queues device
    work ahead of the copies on CUDA). ``time_limited=False`` drops the per-call
    limit (the symbolic oracle: CrossHair bounds its own paths).
    """
    if backend is None:
        from stagecheck.oracles.observe.instrumented import InstrumentedBackend
        backend = InstrumentedBackend(options.device, options.deferred_copies)
    inputs = build_inputs(s, target.profile, backend)
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
                call_target(target, inputs, s.run_prefix_state_migration)
    except CallTimedOut:
        timed_out = True
        exc_type = "CallTimedOut"
    except (KeyboardInterrupt, SystemExit):
        raise
    except BaseException as exc:  # the target's own failure is an observation
        if backend.passes_through(exc):
            raise
        exc_type = type(exc).__name__
        exc_msg = str(exc)
        mro = tuple(k.__name__ for k in type(exc).__mro__)
    finally:
        for buf in inputs.buffers.values():
            buf.complete_copies()
            buf.release()
    return Observation(
        exception_type=exc_type, exception_message=exc_msg,
        cpu={name: b.final_cpu() for name, b in inputs.buffers.items()},
        gpu={name: b.final_gpu() for name, b in inputs.buffers.items()},
        events=list(inputs.events), req_ids_reads=list(inputs.reads),
        inputs_after=inputs_after(inputs), timed_out=timed_out, exception_mro=mro,
        last_step_start=last_step_start)

