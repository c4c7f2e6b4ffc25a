"""torch, imported on first use without the call's time limit running.

A worker imports torch the first time a call needs it: inside the call, under the call's
``ITIMER_REAL`` alarm. On a loaded machine the first import takes seconds; the alarm
(or the ``ITIMER_PROF`` one: the import takes about a second of CPU)
could fire half-way through it, which leaves a half-imported ``torch`` module in
``sys.modules`` (every later call in that worker then fails in torch itself), and the
seconds would count as the target's time. ``import_torch`` suspends the timer for the
import and gives the call back exactly what was left of it, and tells the parent (through
the mark a worker holds here: ``hold_import_mark``) that the import runs, so that the
parent's deadline for the call does not count it either. A worker that never needs torch
(the built-in generations on the CPU read and write numpy only) never imports it.

Shared by the fast and instrumented backends (``oracles/observe``) and the device model.
"""

from __future__ import annotations

import signal
import sys

__all__ = ["first_use", "hold_import_mark", "import_torch"]

#: ``mark(True)`` as the import of torch starts, ``mark(False)`` when it ended (a worker's:
#: ``worker/child.py``); None elsewhere
_MARK: list = [None]


def hold_import_mark(mark) -> None:
    """``mark(running)``: called as ``import_torch`` starts (True) and ends (False) the
    import of torch."""
    _MARK[0] = mark


def import_torch():
    """The torch module, imported now if it was not, with the calling process's
    ``ITIMER_REAL`` and ``ITIMER_PROF`` timers suspended for the import and restored
    afterwards (a worker imports it while loading, before any call: ``worker/child.py``)."""
    module = sys.modules.get("torch")
    if module is not None and hasattr(module, "Tensor"):
        return module
    timers = (signal.ITIMER_REAL, signal.ITIMER_PROF) if hasattr(signal, "ITIMER_PROF") \
        else ()
    remaining = {}
    try:
        for timer in timers:
            remaining[timer] = signal.setitimer(timer, 0)[0]
    except (AttributeError, ValueError):   # no interval timers here (a thread, Windows)
        pass
    mark = _MARK[0]
    try:
        if mark is not None:
            mark(True)
        import torch  # the one import of torch, with the timers suspended (module doc)
    finally:
        if mark is not None:
            mark(False)
        for timer, seconds in remaining.items():
            if seconds > 0:
                signal.setitimer(timer, seconds)
    return torch


def first_use(device: str) -> None:
    """Make this process's first use of ``device`` now: for cuda, torch imported, the
    context created, pinned host memory allocated, device work queued, a copy each way,
    an event recorded and the device synchronized. A worker does this before its first
    call on the device (under the deadline of loading, not a call's): the first use
    costs the driver's initialisation (seconds where many processes start at once), which
    no call should be timed for. The cpu needs nothing."""
    if device != "cuda":
        return
    torch = import_torch()
    host = torch.ones(64, dtype=torch.int32, pin_memory=True)
    mirror = torch.empty(64, dtype=torch.int32, device="cuda")
    back = torch.zeros(64, dtype=torch.int32, pin_memory=True)
    torch.cuda._sleep(1000)
    mirror.copy_(host, non_blocking=True)
    back.copy_(mirror, non_blocking=True)
    event = torch.cuda.Event()
    event.record()
    event.synchronize()
    torch.cuda.synchronize()
