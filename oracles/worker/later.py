"""What code under test left in its worker that could end the worker later (the worker's
side of ``stop``).

A call may return and leave behind what ends its worker after it: a thread or a
``threading.Timer`` that calls ``os._exit``, ``faulthandler.dump_traceback_later(...,
exit=True)``. Where that end comes before the run's last request the pool sees a worker
that ended between calls (``blame.py``: ``WorkerDied``, no verdict); where it would come
after, the run used to end first and exit 0. So the pool's last request, ``stop``, asks the
worker what is still there (``left_behind``), and the checker treats it as it treats such
an end: the verdict no longer depends on whether the run or the timer ends first.

``watch_faulthandler`` (at the worker's start, before any target code runs) wraps
``faulthandler.dump_traceback_later`` and ``cancel_dump_traceback_later`` so the worker
knows whether a later dump that exits is armed (faulthandler does not say). Threads are
those alive at ``stop`` and not there when the worker started, except stagecheck's own
(named ``stagecheck-...``), those of torch and triton (their classes or functions), and
the idle workers of a ``concurrent.futures.ThreadPoolExecutor`` (``idle_pool_worker``: a
pool kept for the process's life, as engines keep one, runs only what is submitted to it).
"""

from __future__ import annotations

import faulthandler
import queue
import resource
import sys
import threading

from stagecheck.oracles.text import printable

__all__ = ["idle_pool_worker", "left_behind", "still_running", "watch_faulthandler"]

#: faulthandler's own functions (the wrappers call them)
_REAL_LATER = faulthandler.dump_traceback_later
_REAL_CANCEL = faulthandler.cancel_dump_traceback_later
#: ``[timeout]`` while a later dump that exits the process is armed (else empty)
_ARMED: list[float] = []
#: the threads alive when the worker started (its own), by identity
_KNOWN: set[int] = set()
#: the top-level packages whose threads are never the code under test's (stagecheck's
#: own are told by their names: the function a target's thread runs may be stagecheck's,
#: such as the worker's guard around ``os._exit``)
_LIBRARIES = ("torch", "triton")
#: the kinds of thread ``left_behind`` names (the rest are counted)
_SHOWN = 5


#: the worker's CPU-time limit when it started (a lower one later: the code under test's)
_CPU_LIMIT: list[tuple[int, int]] = []


def _cpu_limit_lowered() -> str | None:
    """``RLIMIT_CPU`` lowered since the worker started, in words (the kernel ends the
    worker once its CPU time reaches it: later, in whatever call runs then), else None."""
    if not _CPU_LIMIT:
        return None
    try:
        now = resource.getrlimit(resource.RLIMIT_CPU)
    except (ValueError, OSError):
        return None

    def below(value: int, was: int) -> bool:
        return value != resource.RLIM_INFINITY and (was == resource.RLIM_INFINITY
                                                    or value < was)

    (soft, hard), (was_soft, was_hard) = now, _CPU_LIMIT[0]
    if not (below(soft, was_soft) or below(hard, was_hard)):
        return None
    shown = ["unlimited" if v == resource.RLIM_INFINITY else f"{v} s" for v in now]
    return f"the CPU-time limit (RLIMIT_CPU) lowered to {shown[0]} (hard {shown[1]})"


def watch_faulthandler() -> None:
    """Note the worker's own threads and CPU-time limit, and wrap faulthandler's later
    dump (once)."""
    _KNOWN.update(t.ident for t in threading.enumerate() if t.ident is not None)
    if not _CPU_LIMIT:
        try:
            _CPU_LIMIT.append(resource.getrlimit(resource.RLIMIT_CPU))
        except (ValueError, OSError):
            pass
    if faulthandler.dump_traceback_later is not _REAL_LATER:
        return

    def dump_traceback_later(timeout, repeat=False, file=None, exit=False):
        _REAL_LATER(timeout, repeat=repeat, file=file, exit=exit)
        # a later dump replaces the one armed before (faulthandler keeps one)
        _ARMED[:] = [float(timeout)] if exit else []

    def cancel_dump_traceback_later():
        _REAL_CANCEL()
        _ARMED.clear()

    dump_traceback_later.__doc__ = _REAL_LATER.__doc__
    cancel_dump_traceback_later.__doc__ = _REAL_CANCEL.__doc__
    faulthandler.dump_traceback_later = dump_traceback_later
    faulthandler.cancel_dump_traceback_later = cancel_dump_traceback_later


def _library(thread: threading.Thread) -> bool:
    """Whether ``thread`` is stagecheck's or a library's it runs on (by name, class or
    function)."""
    if thread.name.startswith("stagecheck-"):
        return True
    run = getattr(thread, "_target", None) or getattr(thread, "function", None)
    modules = (type(thread).__module__, getattr(run, "__module__", None) or "")
    return any(isinstance(m, str) and m.split(".")[0] in _LIBRARIES for m in modules)


def idle_pool_worker(thread: threading.Thread) -> bool:
    """Whether ``thread`` is a ``ThreadPoolExecutor``'s worker waiting for work, none
    queued: its own loop is what it runs now (no submitted work is running), and its work
    queue is empty. Once the calls returned, such a thread runs nothing more, and cannot
    end its worker; one still running or holding submitted work is counted. A pool
    whose executor is gone ends its workers: they are given a second to end."""
    run = getattr(thread, "_target", None)
    if getattr(run, "__module__", None) != "concurrent.futures.thread" \
            or getattr(run, "__name__", "") != "_worker":
        return False
    args = getattr(thread, "_args", ()) or ()
    executor = args[0]() if args and callable(args[0]) else None
    if executor is None:            # collected: its workers are told to end
        thread.join(1.0)
        return not thread.is_alive()
    queues = [a for a in args if isinstance(a, queue.SimpleQueue)]
    frame = sys._current_frames().get(thread.ident)
    return bool(queues) and all(q.empty() for q in queues) and frame is not None \
        and frame.f_code is getattr(run, "__code__", None)


def _function(run) -> str:
    """The name of the function a thread runs; ``os._exit`` for the guard stagecheck's
    worker puts in its place (``guard._exit_refused``: the real one, where no schema code
    runs)."""
    name = getattr(run, "__qualname__", None) or type(run).__name__
    if name == "_exit_refused" and getattr(run, "__module__", "") == "stagecheck.oracles.guard":
        return "os._exit"
    return name


def _kind(thread: threading.Thread) -> tuple[str, str]:
    """What ``thread`` is, in words, singular and plural (grouped by what it runs)."""
    if isinstance(thread, threading.Timer):
        name = _function(getattr(thread, "function", None))
        return (f"a threading.Timer that will call {name}",
                f"threading.Timers that will call {name}")
    run = getattr(thread, "_target", None)
    if run is not None:
        name = _function(run)
        return f"a thread running {name}", f"threads running {name}"
    name = type(thread).__qualname__
    return f"a thread of class {name}", f"threads of class {name}"


def still_running(thread: threading.Thread) -> bool:
    """Whether ``thread``, not one of the worker's own, may still run the code under test:
    alive, not the main thread, not a ``threading.Timer`` cancelled or fired (it ends
    without running anything), not stagecheck's or a library's, not an idle pool worker.
    The one rule of both checks: after a call (``left_behind``) and after a protocol's
    sequence (``protocol/run.py``)."""
    if thread is threading.main_thread() or thread.ident in _KNOWN or not thread.is_alive():
        return False
    if isinstance(thread, threading.Timer) and thread.finished.is_set():
        return False
    return not (_library(thread) or idle_pool_worker(thread))


def left_behind() -> list[str]:
    """What could end this worker later, in words (empty: nothing): the threads the code
    under test started that still run (``still_running``; a ``threading.Timer`` not yet
    fired nor cancelled among them), grouped by what they run, a later dump of
    faulthandler that exits, armed, and a CPU-time limit lowered (the kernel kills the
    worker once its CPU time reaches it)."""
    counts: dict[tuple[str, str], int] = {}
    for thread in threading.enumerate():
        if not still_running(thread):
            continue
        kind = _kind(thread)
        counts[kind] = counts.get(kind, 0) + 1
    out = [printable(one if n == 1 else f"{n} {many}")[:160]
           for (one, many), n in sorted(counts.items())]
    if len(out) > _SHOWN:
        out[_SHOWN:] = [f"threads of {len(out) - _SHOWN} other kinds"]
    if _ARMED:
        out.append(f"faulthandler.dump_traceback_later({_ARMED[0]:g}, exit=True), armed")
    if (lowered := _cpu_limit_lowered()) is not None:
        out.append(lowered)
    return out
