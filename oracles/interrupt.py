"""SIGINT and SIGTERM as a flag that the search loops poll.

A ``KeyboardInterrupt`` raised at an arbitrary point can be swallowed (hypothesis runs
a gc callback; an exception raised inside it is printed as "Exception ignored in ..."
and lost), so the command line does not rely on it. ``install`` replaces the two
handlers with one that records the signal; every search loop (the campaign, the
symbolic exploration, the mutants, the kernel campaign) calls ``requested`` after each
example and stops, returning what it found so far marked as interrupted. The flag,
not an exception, decides the exit code: 128 + the signal number (130 for SIGINT, 143
for SIGTERM).

The first signal also starts a grace period: every wait on a worker ends within
``INTERRUPT_GRACE`` seconds of it (``oracles/worker/pool.py``: the worker is killed and
``Interrupted`` raised), so one signal stops any run. A second signal ends that grace at
once (``urgent``) and raises nothing: the run goes on writing what it found, so a second
SIGTERM loses nothing. Only a third raises ``Interrupted`` where the checker is (for a
checker stuck in its own code), and not once the run is writing its files (``settle``).

Without ``install`` (the library API, the pytest fixture) nothing changes: Ctrl-C
raises ``KeyboardInterrupt`` as usual.

Worker processes (``oracles/worker/``) run in a session of their own (a SIGINT there
comes from the code under test, and ends the worker: a crash blamed on that code); a
loop that runs inside a worker (the symbolic exploration) is told to stop by the checker, which sends ``FORWARDED`` (SIGUSR1) while it waits for the answer: the
worker's handler sets the worker's own flag (``request``), which the loop polls.
"""

from __future__ import annotations

import signal
import threading
import time

__all__ = ["FORWARDED", "Interrupted", "check", "exit_code", "install", "installed", "request",
           "requested", "reset", "settle", "signal_name", "since", "uninstall", "urgent"]

_state: dict = {"signum": None, "count": 0, "previous": {}, "at": None, "settled": False}
SIGNALS = (signal.SIGINT, signal.SIGTERM)
#: what the checker sends a worker to pass its interrupt on (a worker's SIGINT is
#: its code's own)
FORWARDED = getattr(signal, "SIGUSR1", None)


class Interrupted(KeyboardInterrupt):
    """Raised by ``check`` (and by a second signal): the run was asked to stop.

    A ``KeyboardInterrupt``: hypothesis re-raises it at once (no shrinking, nothing
    saved to its database), ``observe`` lets it through a target, and a target's
    ``except Exception`` does not take it.
    """

    def __init__(self, signum: int | None = None) -> None:
        super().__init__(signal_name(signum))
        self.signum = signum


def _handler(signum, frame) -> None:
    _state["count"] += 1
    if _state["signum"] is None:
        _state["signum"], _state["at"] = signum, time.monotonic()
    if _state["count"] > 2 and not _state["settled"]:
        raise Interrupted(_state["signum"])


def install() -> None:
    """Record SIGINT/SIGTERM in the flag instead of raising (main thread only)."""
    if threading.current_thread() is not threading.main_thread():
        return
    for s in SIGNALS:
        previous = signal.signal(s, _handler)
        _state["previous"].setdefault(s, previous)


def installed() -> bool:
    """Whether ``install`` took SIGINT/SIGTERM over (the command line): a
    ``KeyboardInterrupt`` then comes from code, never from Ctrl-C."""
    return bool(_state["previous"])


def uninstall() -> None:
    """Put the handlers ``install`` replaced back."""
    for s, previous in _state["previous"].items():
        signal.signal(s, previous)
    _state["previous"] = {}


def reset() -> None:
    """Forget a recorded signal (a new run in the same process)."""
    _state["signum"], _state["count"], _state["at"], _state["settled"] = None, 0, None, False


def request(signum: int = signal.SIGINT) -> None:
    """Set the flag as a first signal would (a worker told by its checker to stop)."""
    if _state["signum"] is None:
        _state["signum"], _state["at"] = signum, time.monotonic()


def since() -> float | None:
    """When (``time.monotonic``) the first signal came; None without one."""
    return _state["at"]


def urgent() -> bool:
    """Whether a second signal came: waits on workers end at once."""
    return _state["count"] > 1


def settle() -> None:
    """The run is writing its files: from here on signals are recorded, never raised
    (a signal must not cost a file that was about to be written)."""
    _state["settled"] = True


def requested() -> int | None:
    """The signal that asked the run to stop, or None."""
    return _state["signum"]


def awaited(seconds: float) -> int | None:
    """``requested()``, after waiting up to ``seconds`` for a signal: one sent to the whole
    process group (``timeout``, a terminal's Ctrl-C) ends child processes at once, and what
    their end raised here may come before this process's handler has run."""
    limit = time.monotonic() + seconds
    while _state["signum"] is None and time.monotonic() < limit:
        time.sleep(0.02)
    return _state["signum"]


def check() -> None:
    """Raise ``Interrupted`` when a signal asked the run to stop."""
    if _state["signum"] is not None:
        raise Interrupted(_state["signum"])


def exit_code(signum: int | None = None) -> int:
    """What a shell expects from a process stopped by ``signum``: 128 + its number."""
    signum = signum if signum is not None else (_state["signum"] or signal.SIGINT)
    return 128 + int(signum)


def signal_name(signum: int | None) -> str:
    if signum is None:
        return "interrupted"
    try:
        return signal.Signals(signum).name
    except ValueError:
        return f"signal {signum}"
