"""Run one target on a fresh build of a scenario and observe everything it did."""

from __future__ import annotations

import signal
import threading
from contextlib import contextmanager
from types import SimpleNamespace

import torch

from oracles.instrumented import InstrumentedBuffer, RecordingList
from oracles.targets import Target
from spec.observation import Observation
from spec.scenario import StagingScenario, initial_values
from spec.schema import FIELDS_BY_BUFFER, FLAG, STATE_IDX

_TORCH_DTYPES = {"int32": torch.int32, "bool": torch.bool}


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


class StagingInputs(SimpleNamespace):
    """The objects one staging call receives, built from a scenario, plus their recorders."""


def build_inputs(s: StagingScenario, target: Target, device: str = "cpu",
                 deferred: bool = False, make_buffer=None) -> StagingInputs:
    """Fresh ctx, scheduler output, requests, ids and state indices for one call.

    ``make_buffer(name, dtype, initial_cpu, initial_gpu, events)`` builds each buffer;
    the default is the instrumented torch buffer (the symbolic oracle passes list models).
    """
    if make_buffer is None:
        def make_buffer(name, dtype, cpu, gpu, events):
            return InstrumentedBuffer(name, cpu, gpu, _TORCH_DTYPES[dtype], device, events,
                                      deferred)
    events: list = []
    reads: list[int] = []
    buffers = {}
    ctx = SimpleNamespace()
    for buffer in target.profile.buffers():
        f = FIELDS_BY_BUFFER[buffer]
        if (f is STATE_IDX and target.profile.takes_flag and not s.run_prefix_state_migration
                and s.omit_state_idx_buf):
            setattr(ctx, buffer, None)
            continue
        buf = make_buffer(buffer, f.dtype, initial_values(s, buffer, "cpu"),
                          initial_values(s, buffer, "gpu"), events)
        buffers[buffer] = buf
        setattr(ctx, buffer, buf)
    scheduler_output = SimpleNamespace(
        num_scheduled_tokens=dict(s.num_scheduled_tokens),
        scheduled_spec_decode_tokens={k: list(v) for k, v in s.spec_decode_tokens.items()})
    requests = {r: SimpleNamespace(num_computed_tokens=c, num_prompt_tokens=s.num_prompt_tokens.get(r))
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


def _inputs_after(inputs: StagingInputs) -> dict:
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
    if cycles > 0 and torch.cuda.is_available():
        torch.cuda._sleep(cycles)


def observe(target: Target, s: StagingScenario, device: str = "cpu",
            timeout: float | None = 5.0, deferred: bool = False, gpu_busy_cycles: int = 0,
            steps: int = 1, sync_between_steps: bool = True
            ) -> tuple[Observation, StagingInputs]:
    """Call ``target`` on a fresh build of ``s``; return what was seen and the live inputs.

    ``deferred`` runs the CPU model of asynchronous copies; ``gpu_busy_cycles`` queues
    device work ahead of the copies on CUDA; ``steps`` > 1 stages the same inputs again
    on the same buffers, with or without waiting for the previous step's copies.
    """
    inputs = build_inputs(s, target, device, deferred)
    exc_type = exc_msg = None
    mro: tuple[str, ...] = ()
    timed_out = False
    last_step_start = 0
    try:
        with time_limit(timeout):
            for step in range(steps):
                if step and sync_between_steps:
                    for buf in inputs.buffers.values():
                        buf.complete_copies()
                last_step_start = len(inputs.events)
                queue_gpu_work(gpu_busy_cycles)
                call_target(target, inputs, s.run_prefix_state_migration)
    except CallTimedOut:
        timed_out = True
        exc_type = "CallTimedOut"
    except (KeyboardInterrupt, SystemExit):
        raise
    except BaseException as exc:  # the target's own failure is an observation
        exc_type = type(exc).__name__
        exc_msg = str(exc)
        mro = tuple(k.__name__ for k in type(exc).__mro__)
    finally:
        for buf in inputs.buffers.values():
            buf.complete_copies()
            buf.release()
    obs = Observation(
        exception_type=exc_type, exception_message=exc_msg,
        cpu={name: b.final_cpu() for name, b in inputs.buffers.items()},
        gpu={name: b.final_gpu() for name, b in inputs.buffers.items()},
        events=list(inputs.events), req_ids_reads=list(inputs.reads),
        inputs_after=_inputs_after(inputs), timed_out=timed_out, exception_mro=mro,
        last_step_start=last_step_start)
    return obs, inputs
