"""What a user's file, imported into a stagecheck process, may change in it: put back.

A schema file's module-level code runs in the checker itself (after a worker loaded it
first: ``runner.load_schema_isolated``), and in every worker that loads targets for it.
Besides stagecheck's own code (``guard`` refuses that), it can change what the process
relies on: the working folder (every relative path of a target, a shim or an output is
taken from it), the umask (the mode of every file the run writes), a resource limit (12
open files left the checker unable to open its workers' pipes: exit 3), and fd 1 (stdout
carries the report, ``--json -`` the JSON document alone). ``state_kept`` runs the import
with fd 1 pointed at fd 2 (what it writes there, from Python or from C, goes to stderr),
then puts back the working folder, the umask, every resource limit, the signal handlers
Python installed, the interval timers that were not armed (disarmed) and the recursion
limit. A limit it cannot put back (a hard limit lowered, which an unprivileged process
cannot raise again) is named in the list the context gives, for the caller to refuse the
file. Standard library only.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import resource
import signal
import sys
from contextlib import contextmanager

__all__ = ["call_state", "keep_signals", "put_back_call_state", "state_kept"]

#: every resource limit of the platform, by name
_LIMITS = tuple({getattr(resource, name): name for name in sorted(dir(resource), reverse=True)
                 if name.startswith("RLIMIT_")}.items())


def _flush_python() -> None:
    for stream in {id(s): s for s in (sys.stdout, sys.__stdout__, sys.stderr)
                   if s is not None}.values():
        try:
            stream.flush()
        except (OSError, ValueError, AttributeError):
            pass


def _flush_c() -> None:
    """What C code wrote through its own buffered stdout (``printf``): out now, while
    fd 1 is still stderr."""
    try:
        ctypes.CDLL(None).fflush(None)
    except (OSError, AttributeError, TypeError):
        pass


def _limits() -> dict[str, tuple[int, int]]:
    out = {}
    for number, name in _LIMITS:
        try:
            out[name] = resource.getrlimit(number)
        except (ValueError, OSError):
            pass
    return out


#: the interval timers a user's import may arm (``ITIMER_REAL``: SIGALRM ended the checker)
_TIMERS = tuple(getattr(signal, name) for name in ("ITIMER_REAL", "ITIMER_VIRTUAL",
                                                   "ITIMER_PROF") if hasattr(signal, name))


def _handlers() -> dict:
    """The Python-level handler of every signal that has one (``getsignal``: None where C
    code installed it, which Python cannot put back)."""
    out = {}
    for number in signal.valid_signals():
        try:
            handler = signal.getsignal(number)
        except (ValueError, OSError):
            continue
        if handler is not None:
            out[number] = handler
    return out


def _put_back_signals(handlers: dict, timers: dict) -> None:
    """The handlers as they were (an import that set SIGTERM or SIGINT to SIG_IGN, as a
    library may, left a run that one signal no longer stopped), and the interval timers
    that were not armed disarmed (an armed ITIMER_REAL ended the checker with SIGALRM)."""
    for number, handler in handlers.items():
        try:
            if signal.getsignal(number) is not handler:
                signal.signal(number, handler)
        except (ValueError, OSError, TypeError):
            pass
    for which, before in timers.items():
        if not before[0] and signal.getitimer(which)[0]:
            signal.setitimer(which, 0)


#: the real ``signal.signal``, ``setitimer`` and ``alarm``, once ``keep_signals`` stood in
_REAL: dict = {}


def keep_signals(refused, kept: tuple) -> None:
    """From now on, while ``refused()`` (schema code runs in the checker: a derive, a
    protocol's check), ``signal.signal`` leaves the signals ``kept`` as they are (a derive
    that set SIGTERM to SIG_IGN: the run's one signal was lost) and ``signal.setitimer`` and
    ``signal.alarm`` arm no ITIMER_REAL (SIGALRM's default action ended the checker, exit
    142, no output). Installed once; nothing per call."""
    if _REAL:
        return
    _REAL.update((name, getattr(signal, name)) for name in ("signal", "setitimer", "alarm")
                 if hasattr(signal, name))

    def signal_kept(signum, handler):
        if signum in kept and refused():
            return signal.getsignal(signum)
        return _REAL["signal"](signum, handler)

    def setitimer_kept(which, seconds, interval=0.0):
        if which == signal.ITIMER_REAL and refused():
            return signal.getitimer(which)
        return _REAL["setitimer"](which, seconds, interval)

    def alarm_kept(seconds):
        return 0 if refused() else _REAL["alarm"](seconds)

    for name, kept_call in (("signal", signal_kept), ("setitimer", setitimer_kept),
                            ("alarm", alarm_kept)):
        if name in _REAL:
            setattr(signal, name, kept_call)


def _shown(value: int) -> str:
    return "unlimited" if value == resource.RLIM_INFINITY else str(value)


def _put_back_limits(before: dict[str, tuple[int, int]]) -> list[str]:
    lost = []
    for number, name in _LIMITS:
        if name not in before:
            continue
        try:
            now = resource.getrlimit(number)
        except (ValueError, OSError):
            continue
        if now == before[name]:
            continue
        try:
            resource.setrlimit(number, before[name])
        except (ValueError, OSError):
            soft, hard = before[name]
            lost.append(f"{name} lowered to {_shown(now[0])} (hard {_shown(now[1])}; was "
                        f"{_shown(soft)}, hard {_shown(hard)})")
    return lost


def call_state() -> tuple:
    """What a call of a user's code the checker runs (a schema's derive) may change that
    ``put_back_call_state`` puts back after it, cheaply enough for every call: the
    recursion limit, the standard streams, the open-files limit."""
    try:
        files = resource.getrlimit(resource.RLIMIT_NOFILE)
    except (ValueError, OSError):
        files = None
    return sys.getrecursionlimit(), sys.stdin, sys.stdout, sys.stderr, files


def put_back_call_state(state: tuple) -> str:
    """Put back ``call_state``'s ``state``; what could not be (a lowered hard limit), in
    words (empty: everything was)."""
    limit, sys.stdin, sys.stdout, sys.stderr, files = state
    if sys.getrecursionlimit() != limit:
        sys.setrecursionlimit(limit)
    return "" if files is None else "; ".join(_put_back_limits({"RLIMIT_NOFILE": files}))


@contextmanager
def state_kept():
    """Run the body (a user's import) with fd 1 on fd 2; then put back the working
    folder, the umask and the resource limits. Yields a list that names, once the body
    ended, what could not be put back (empty: everything was)."""
    lost: list[str] = []
    try:
        folder = os.open(".", os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    except OSError:
        folder = None
    mask = os.umask(0o022)
    os.umask(mask)
    limits = _limits()
    handlers, recursion = _handlers(), sys.getrecursionlimit()
    timers = {which: signal.getitimer(which) for which in _TIMERS}
    _flush_python()           # stagecheck's own output first, where it belongs
    try:
        saved_stdout = os.dup(1)
        os.dup2(2, 1)
    except OSError:
        saved_stdout = None
    try:
        with contextlib.redirect_stdout(sys.stderr):
            yield lost
    finally:
        _flush_python()
        _flush_c()
        lost.extend(_put_back_limits(limits))       # open files first: fds are needed
        _put_back_signals(handlers, timers)
        sys.setrecursionlimit(recursion)
        if saved_stdout is not None:
            try:
                os.dup2(saved_stdout, 1)
            finally:
                os.close(saved_stdout)
        os.umask(mask)
        if folder is not None:
            try:
                os.fchdir(folder)
            except OSError as exc:
                lost.append(f"the working folder (changed; cannot go back: {exc.strerror})")
            finally:
                os.close(folder)
