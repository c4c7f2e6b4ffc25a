"""One call of a target on a fresh build of a scenario, under a time limit: what was seen.

``observe`` builds the call's inputs on a buffer backend (``build.py``), calls the
target (``options.steps`` times), and reads back the buffers, the copy log, the reads of
``req_ids`` and the inputs as an ``Observation``; a raised exception is part of it.
"""

from __future__ import annotations

import importlib.util
import os
import signal
import site
import sys
import threading
import time
import traceback
from contextlib import contextmanager, nullcontext

from stagecheck.oracles import messages
from stagecheck.oracles.errors import SchemaError, StagecheckError, TargetLoadError, UsageError
from stagecheck.oracles.guard import exits_refused, thread_waited
from stagecheck.oracles.observe.backends import make_backend, torch_module
from stagecheck.oracles.observe.build import Backend, build_inputs
from stagecheck.oracles.options import TIMEOUT_FLOOR, RunOptions
from stagecheck.oracles.targets import Target
from stagecheck.oracles.text import exception_text, type_name
from stagecheck.spec.observation import Observation
from stagecheck.spec.scenario import StagingScenario
from stagecheck.spec.schema_mistakes import SchemaCodeFailed, StandInUnsupported, ViewRebound

__all__ = ["CallTimedOut", "TIMEOUT_FLOOR", "UNREADABLE", "WALL_FACTOR", "call_limits",
           "fired_count", "keep_alarm_handler", "observe", "queue_gpu_work", "raise_if_fired",
           "require_device", "time_limit"]


class CallTimedOut(BaseException):
    """Raised inside a target that ran past its time limit (BaseException: not swallowed)."""


def _expire(signum, frame):
    global _FIRED
    if signum == _WALL_SIGNAL and _wall_left():
        return                  # the call waited for a CPU: its wall clock runs on
    _FIRED += 1
    raise CallTimedOut()


#: the wall-clock limit armed last: (when, seconds this process had waited for a CPU by
#: then, the limit in seconds; 0: none armed)
_WALL = [0.0, 0.0, 0.0]
_WALL_SIGNAL = getattr(signal, "SIGALRM", None)


def _arm_wall(seconds: float) -> None:
    """Note when a wall-clock limit of ``seconds`` starts and how long this process had
    waited for a CPU by then: read again only ``_WAITED_EVERY`` seconds after the last
    read (a protocol run arms a limit per operation; a figure that old errs by at most
    the waits of those seconds, in the call's favour)."""
    now = time.monotonic()
    if seconds and now - _WAITED_READ[0] > _WAITED_EVERY:
        _WAITED_READ[0], _WAITED_READ[1] = now, thread_waited()
    _WALL[0], _WALL[1], _WALL[2] = now, _WAITED_READ[1], seconds


#: (when, seconds waited) of the last read of the run-queue figure for arming
_WAITED_READ = [float("-inf"), 0.0]
_WAITED_EVERY = 0.05


def _wall_left() -> bool:
    """The wall-clock limit fired: the time the call waited for a CPU does not count (a
    busy machine slows a call down, it does not make it hang, as for the checker's own
    deadline); the timer is set again for what is left, if anything is."""
    started, waited, limit = _WALL
    if not limit:
        return False
    left = limit - (time.monotonic() - started - (thread_waited() - waited))
    if left <= 0.001:
        return False
    signal.setitimer(signal.ITIMER_REAL, left)
    return True


#: how many times a time limit fired in this process: a call during which it moved timed
#: out, whatever exception reached the call's end (inside C code the interruption may
#: surface as a SystemError or an exception of the code's own)
_FIRED = 0


def fired_count() -> int:
    """How many times a time limit fired in this process so far (``raise_if_fired``)."""
    return _FIRED


def raise_if_fired(before: int) -> None:
    """Raise ``CallTimedOut`` where a time limit fired since ``fired_count()`` was
    ``before``: code that caught the interruption (a bare ``except``, an ``except
    BaseException``, a ``__del__``, where Python only prints it) and then returned still
    ran past its limit, a hang, never a call that returned in time."""
    if _FIRED != before:
        raise CallTimedOut()


#: a call may take this many times its time limit on the wall clock (a call that sleeps
#: or waits uses no CPU time: the wall clock ends it); a correct call on a machine whose
#: CPUs are busy takes longer on the wall clock only
WALL_FACTOR = 3.0


def call_limits(seconds: float) -> tuple[float, float]:
    """``(CPU seconds, wall-clock seconds)`` a call with time limit ``seconds`` may take:
    ``seconds`` of CPU time of its process (at least ``TIMEOUT_FLOOR``), and
    ``WALL_FACTOR`` times that on the wall clock."""
    cpu = max(float(seconds), TIMEOUT_FLOOR)
    return cpu, cpu * WALL_FACTOR


_TIMERS = ((signal.SIGPROF, signal.ITIMER_PROF), (signal.SIGALRM, signal.ITIMER_REAL)) \
    if hasattr(signal, "setitimer") else ()


def time_limit(seconds: float | None):
    """Interrupt the body when it has used ``call_limits(seconds)``: its CPU time (this
    process's, every thread's: ``ITIMER_PROF``) or its wall-clock time (``ITIMER_REAL``)
    less the time it waited for a CPU (``_wall_left``).
    Main thread on POSIX only; otherwise no limit.

    Where this process's handlers are ours already (a worker), only the timers are
    set (``_Armed``: a plain object, as cheap as a block can be, since a protocol run
    enters one per operation); elsewhere the previous handlers come back afterwards. The
    worker's parent enforces the same limits as well, from the kernel's count of the
    worker's CPU time, by killing the worker: nothing a target does to its signals can
    stop it.
    """
    if not seconds or not _TIMERS:
        return _NO_LIMIT
    if _KEEP_HANDLER:      # a worker: its handlers are installed once
        armed = _ARMED.get(seconds)
        if armed is None:
            armed = _ARMED[seconds] = _Armed(call_limits(seconds))
        if not _KEEP_HANDLER_SET:
            _install_kept_handler()
        return armed
    return _restoring_limit(call_limits(seconds))


class _NoLimit:
    """The block of ``time_limit(None)``: nothing to arm."""

    __slots__ = ()

    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc) -> bool:
        return False


_NO_LIMIT = _NoLimit()


class _Armed:
    """A worker's time limit: both timers set on entry and cleared on exit (the handlers
    are installed once, ``keep_alarm_handler``). One per limit, reused: entering it twice
    at once never happens (a protocol's operations and a staging call do not nest)."""

    __slots__ = ("cpu", "wall")

    def __init__(self, limits: tuple[float, float]) -> None:
        self.cpu, self.wall = limits

    def __enter__(self) -> None:
        _arm_wall(self.wall)
        signal.setitimer(signal.ITIMER_PROF, self.cpu)
        signal.setitimer(signal.ITIMER_REAL, self.wall)

    def __exit__(self, *exc) -> bool:
        signal.setitimer(signal.ITIMER_PROF, 0)
        signal.setitimer(signal.ITIMER_REAL, 0)
        _WALL[2] = 0.0
        return False


#: a worker's ``_Armed`` per time limit in seconds
_ARMED: dict = {}


@contextmanager
def _restoring_limit(limits: tuple[float, float]):
    """``time_limit`` outside a worker: our handlers for the block, the previous ones back
    afterwards (in the main thread only; elsewhere no limit)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {signum: signal.getsignal(signum) for signum, _ in _TIMERS}
    for signum, _ in _TIMERS:
        if previous[signum] is not _expire:
            signal.signal(signum, _expire)
    _arm(limits)
    try:
        yield
    finally:
        _arm((0, 0))
        for signum, _ in _TIMERS:
            if previous[signum] is not _expire:
                signal.signal(signum, previous[signum])


def _arm(limits: tuple[float, float]) -> None:
    _arm_wall(limits[1])
    for (_, timer), seconds in zip(_TIMERS, limits):
        signal.setitimer(timer, seconds)


#: a worker keeps its alarm handlers installed between calls
_KEEP_HANDLER = False
_KEEP_HANDLER_SET = False


def keep_alarm_handler() -> None:
    """This process is a worker: install the alarm handlers once and keep them between calls."""
    global _KEEP_HANDLER
    _KEEP_HANDLER = True


def _install_kept_handler() -> None:
    global _KEEP_HANDLER_SET
    for signum, _ in _TIMERS:
        signal.signal(signum, _expire)
    _KEEP_HANDLER_SET = True


def queue_gpu_work(cycles: int) -> None:
    """Put device work ahead of the copies on the current stream, so they stay queued."""
    if cycles > 0:
        torch = torch_module()
        if torch.cuda.is_available():
            torch.cuda._sleep(cycles)


def require_device(device: str) -> None:
    """Raise a ``UsageError`` when ``device`` is cuda and torch sees none."""
    if device == "cuda":
        torch = torch_module()
        if not torch.cuda.is_available():
            raise UsageError.of(messages.CUDA_UNAVAILABLE, "cuda", "device",
                                torch=torch.__version__)


def _built(s: StagingScenario, target: Target, backend: Backend, in_worker: bool):
    """The call's inputs, made by the schema's adapter (``build``): schema code, so what
    it raises (past the builder's own refusals and a backend's signals) is the schema's
    mistake, exit 2 naming it, never an error of the target; in a worker, an
    ``os._exit`` it makes raises instead of ending the process (its end would read as
    the target's)."""
    what = f"schema {target.profile.schema.name!r}: build"
    try:
        with exits_refused(what) if in_worker else nullcontext():
            return build_inputs(s, target.profile, backend)
    except (StagecheckError, MemoryError):
        raise
    except Exception as exc:
        if backend.passes_through(exc):
            raise
        raise SchemaError.of(messages.SCHEMA_CODE_FAILED, what,      # with its file:line
                             error=SchemaCodeFailed(what, exc).error) from None


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
        backend = make_backend("instrumented", options)
    inputs, call = _built(s, target, backend, exits_are_observations)
    exc_type = exc_msg = None
    mro: tuple[str, ...] = ()
    timed_out = False
    last_step_start = 0
    fired = _FIRED
    try:
        with time_limit(options.timeout if time_limited else None):
            for step in range(options.steps):
                if step and sync_between_steps:
                    for buf in inputs.buffers.values():
                        buf.complete_copies()
                last_step_start = len(inputs.events)
                queue_gpu_work(options.gpu_busy_cycles)
                target.func(*call.args, **call.kwargs)
        raise_if_fired(fired)
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
    except ViewRebound as exc:          # stagecheck's limit: it observes its own views
        raise TargetLoadError.of(messages.VIEW_REBOUND, target.spec, view=exc.view,
                                 where=exc.where) from None
    except StandInUnsupported as exc:   # the schema's limit, not the target's behaviour
        raise SchemaError.of(messages.STAND_IN_UNSUPPORTED, target.spec,
                             stand_in=exc.stand_in, operation=exc.operation,
                             schema=target.profile.schema.name) from None
    except BaseException as exc:  # the target's own failure is an observation
        if backend.passes_through(exc) or (exits_are_observations and
                                           isinstance(exc, MemoryError)):
            raise                     # a worker ends itself: the checker says "exceeded"
        where = _absent_import(exc)
        if where is not None:         # an engine module imported in the call: a limit of
            raise TargetLoadError.of(messages.TARGET_IMPORTS_WHEN_CALLED, target.spec,
                                     module=exc.name, where=where) from None   # the loader
        tb = exc.__traceback__
        if type(exc) is TypeError and tb is not None and tb.tb_next is None:
            # raised by the call itself, before the function ran: the build's Call cannot
            # be bound to the function, which the schema's parameters said it takes
            raise SchemaError.of(messages.SCHEMA_CALL_UNBOUND, target.spec,
                                 schema=target.profile.schema.name, error=exception_text(exc),
                                 parameters=", ".join(target.profile.schema.parameters)
                                 ) from None
        where, pinning = _cuda_refused(exc)
        if where is not None:         # pinned memory, a stream or an event on a torch
            raise TargetLoadError.of(   # without an accelerator: a limit of the run
                messages.TARGET_PINS_WITHOUT_DEVICE if pinning else
                messages.TARGET_NEEDS_CUDA, target.spec, where=where,
                error=exception_text(exc), schema=target.profile.schema.name) from None
        if _FIRED != fired:           # the time limit, surfacing as another exception
            timed_out, exc_type = True, "CallTimedOut"
        else:
            exc_type = type_name(type(exc))     # a metaclass may make __name__ anything
            exc_msg = exception_text(exc)
            mro = tuple(type_name(k) for k in type(exc).__mro__)
    finally:
        for buf in inputs.buffers.values():
            buf.complete_copies()
            buf.release()
    for buf in inputs.buffers.values():
        view = buf.replaced_view()
        if view is not None:        # stagecheck's limit, as a rebound view is
            raise TargetLoadError.of(messages.VIEW_MEMORY_REPLACED, target.spec, view=view)
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


def _absent_import(exc: BaseException) -> str | None:
    """Where the call imported a module that cannot be imported here (``line N of
    FILE``, the innermost frame outside the import machinery), for a
    ``ModuleNotFoundError`` of such a module; None for any other exception."""
    if type(exc) is not ModuleNotFoundError or not isinstance(exc.name, str) or not exc.name:
        return None
    try:
        if importlib.util.find_spec(exc.name.partition(".")[0]) is not None:
            return None             # the package is there: the code's own failure
    except (ImportError, ValueError):
        pass
    return _user_line(exc, _INSTALLED)      # not importlib's, nor a package's


#: what torch without an accelerator raises for ``.pin_memory()`` and ``pin_memory=True``
#: (torch 2.x); the run's own device model, not the code, lacks pinned memory then
_NO_PINNED_MEMORY = ("Cannot access accelerator device when none is available",
                     "no pinned memory allocator is available")
#: what torch raises for CUDA's streams, events, synchronization or a "cuda" device where
#: it has no CUDA (a CPU build, no driver, no device)
_NO_CUDA = ("Torch not compiled with CUDA enabled", "Tried to instantiate dummy base class",
            "Found no NVIDIA driver", "No CUDA GPUs are available",
            "CUDA driver initialization failed")


def _cuda_refused(exc: BaseException) -> tuple[str | None, bool]:
    """Where the call used what this torch cannot do without an accelerator (pinned host
    memory, CUDA's streams and events, a "cuda" tensor): the innermost frame of the user's
    code, and whether it was pinning; None for any other exception (and where CUDA is
    there: it failed for another reason)."""
    text = str(exc) if type(exc) in (RuntimeError, AssertionError) else ""
    pinning = any(t in text for t in _NO_PINNED_MEMORY)
    if not pinning and not any(t in text for t in _NO_CUDA):
        return None, False
    torch = sys.modules.get("torch")
    if torch is None or torch.cuda.is_available():
        return None, False
    return _user_line(exc, _INSTALLED + (_OWN,)), pinning    # nor stagecheck's tensors


def _user_line(exc: BaseException, skipped: tuple) -> str:
    """``line N of FILE``: the innermost frame of ``exc``'s traceback outside Python's
    frozen modules and the folders ``skipped``; 'in its code' where there is none."""
    where = None
    for frame, line in traceback.walk_tb(exc.__traceback__):
        name = frame.f_code.co_filename
        if not name.startswith("<frozen") and not name.startswith(skipped):
            where = f"line {line} of {name}"
    return where or "in its code"


#: the checker's own modules (a frame there is stagecheck's, not the code's)
_OWN = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep


#: where the interpreter's own modules and installed packages live
_INSTALLED = tuple({os.path.dirname(os.__file__), sys.prefix, sys.base_prefix,
                    *site.getsitepackages()} - {""})


#: what a call whose buffers or inputs cannot be read back was seen to do
UNREADABLE = ("left its buffers or inputs in a state stagecheck cannot read back "
              "({error})")
