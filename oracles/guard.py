"""Schema code in the checker: under a deadline, unable to end the checker or patch it.

A schema file is code the checker itself runs: its derive functions judge every example,
its hooks draw scenarios. It is first loaded and dry-run in a worker (``oracles/runner.py:
load_schema_isolated``), where an exit or a hang ends only that worker; then it is
loaded here, and what it could still do to the checker is contained:

- ``guarded_call`` runs a piece of schema code under a deadline kept by a watchdog
  thread: ``CPU_SECONDS`` of the main thread's CPU time or ``WALL_SECONDS`` on the wall
  clock, less the time the main thread was ready to run but waited for a CPU (the
  kernel's ``schedstat``: a busy machine slows the call, it does not make it hang), and
  ``MEMORY_MIB`` more resident memory than when the watchdog first saw it;
  past it the watchdog interrupts the main thread (``SIGNAL``, whose handler raises
  only inside a guarded call), and the call is a ``SchemaError``. Code that took the
  signal over or ignores it is interrupted without it ``ESCALATE_SECONDS`` later (the
  exception raised in the main thread by the interpreter itself); code blocked in C
  that neither reaches is ended with the process ``ESCALATE_SECONDS`` after that, with
  one line and exit 2: a hang of schema code never hangs the run. A
  ``SystemExit`` or ``KeyboardInterrupt`` the code raises is a ``SchemaError`` too (under
  the command line, a real Ctrl-C is a flag, never an exception: see ``interrupt``).
- ``guard_schema`` wraps every function a schema holds (build, derive, hooks) so each
  call of it is a ``guarded_call``.
- ``snapshot`` / ``patched`` tell whether code changed stagecheck's own modules
  (``compare.compare = ...``) or ``builtins``: a schema declares, it does not patch.

- Once a guarded call ran, ``os._exit`` (and ``posix._exit``) raise instead of ending
  the checker when called inside a guarded call, from a thread schema code started (a
  timer), or by an exit handler once the command line has its exit code (``closing``):
  an exit that would have been the checker's exit 0 without a report is a
  ``SchemaError`` too (``exits_refused``, which a worker also wraps a schema's
  ``build`` in). ``os.fork`` and ``os.forkpty`` raise inside a guarded call and in a
  thread schema code started (the copy would carry on the checker's run beside it). A
  reference taken before the first guarded call is the original function.

Deliberate attacks (that reference, a signal to the checker's own process, writing into
its memory) are outside what this contains: see docs/reliability.md. Standard library
only.
"""

from __future__ import annotations

import builtins
import contextlib
import ctypes
import dataclasses
import math
import os
import signal
import sys
import threading
import time
from contextlib import contextmanager

from stagecheck.oracles import interrupt, messages
from stagecheck.oracles.errors import SchemaError
from stagecheck.oracles.memory import default_memory_mib
from stagecheck.oracles.process_state import call_state, keep_signals, put_back_call_state
from stagecheck.oracles.text import stopped_at

__all__ = ["CPU_SECONDS", "WALL_SECONDS", "closing", "exits_refused", "guard_schema",
           "guarded_call", "patched", "seconds_given", "snapshot", "thread_waited"]

#: the variable that changes ``CPU_SECONDS`` (and ``WALL_SECONDS``, three times it)
SECONDS_ENV = "STAGECHECK_CODE_SECONDS"


def seconds_given(variable: str, default: float, least: float) -> float:
    """The seconds the environment ``variable`` gives (at least ``least``), else
    ``default`` (unset, or not a finite number)."""
    try:
        given = float(os.environ.get(variable) or default)
    except ValueError:
        return default
    return max(given, least) if math.isfinite(given) else default


#: CPU seconds (of the checker's main thread) one call of schema code may take
CPU_SECONDS = seconds_given(SECONDS_ENV, 5.0, 0.5)
#: wall-clock seconds one call of schema code may take (a call that sleeps or waits)
WALL_SECONDS = 3 * CPU_SECONDS
#: the signal the watchdog sends the main thread (its handler raises only in a call)
SIGNAL = getattr(signal, "SIGUSR2", None)
#: seconds from the signal to raising in the main thread without it, and from that to
#: ending the process (code that ignores the signal, then code blocked in C)
ESCALATE_SECONDS = 2.0
_EVERY = 0.1
#: MiB of memory one call may add to the checker's resident memory (what a worker may
#: hold in all: ``memory.default_memory_mib``); past it the call is ended as a hang is
MEMORY_MIB = default_memory_mib()
#: held while the watchdog raises in the main thread and while a call is disarmed: the
#: exception lands inside the call it was raised for, never in stagecheck after it
_ARMING = threading.Lock()


class _Expired(BaseException):
    """Raised in the main thread inside a guarded call past its deadline."""


class _ExitRefused(BaseException):
    """``os._exit`` called by code under a guarded call (a BaseException: the code's
    ``except Exception`` cannot turn it into a behaviour)."""

    def __init__(self, status) -> None:
        super().__init__(status)
        self.status = status


class _ForkRefused(BaseException):
    """``os.fork`` called by code under a guarded call: the copy would carry on the
    checker's run (its progress, its report, its exit) beside the original."""


#: the modules whose ``_exit`` the guard replaces (``os`` re-exports ``posix._exit``)
_EXIT_HOLDERS = tuple(m for m in (os, sys.modules.get("posix"), sys.modules.get("nt"))
                      if m is not None and hasattr(m, "_exit"))
_REAL_EXIT = os._exit
#: ... and whose ``fork`` and ``forkpty`` (where the platform has them)
_FORKS = {(m, name): getattr(m, name) for m in _EXIT_HOLDERS for name in ("fork", "forkpty")
          if hasattr(m, name)}
#: the process the guard was installed in (a child forked from it exits as it likes)
_GUARDED_PID: list[int] = []


def _exit_refused(status, *args, **kwargs):
    """``os._exit`` once the guard is installed: a refusal while a guarded call runs (in
    any thread: one it starts may call at once), in a thread schema code started (a
    timer outlives its call), and once the command line is closing (an exit handler);
    the real one otherwise (stagecheck's own calls, other libraries' threads, a forked
    child)."""
    if os.getpid() in _GUARDED_PID and (
            _STATE.refusing or _STATE.closing or threading.get_ident() in _SCHEMA_THREADS):
        raise _ExitRefused(status)
    _REAL_EXIT(status)


def _refusing_fork(real):
    def fork(*args, **kwargs):
        """``os.fork`` once the guard is installed: refused where ``os._exit`` is."""
        if os.getpid() in _GUARDED_PID and (
                _STATE.refusing or threading.get_ident() in _SCHEMA_THREADS):
            raise _ForkRefused()
        return real(*args, **kwargs)
    return fork


#: threads started inside a guarded call (schema code's own: a timer outlives its call)
_SCHEMA_THREADS: set[int] = set()


def _note_new_threads(known: set[int]) -> None:
    for t in threading.enumerate():
        if t.ident is not None and t.ident not in known:
            _SCHEMA_THREADS.add(t.ident)


def user_code_ran() -> bool:
    """Whether schema or protocol code ran in this process under the guard."""
    return _STATE.generation > 0


def exit_now(code: int) -> None:
    """End this process with ``code`` at once: not waiting for threads schema code left
    running, nor running exit handlers it registered (either could keep the process from
    ending after its verdict). The caller has flushed what it wrote."""
    _REAL_EXIT(code)


def closing() -> None:
    """The command line has its exit code and is about to exit: from now on every
    ``os._exit`` of this process is refused, so that an exit handler schema code
    registered (``atexit``) cannot replace the code (a verdict's 1 with 0). Such a
    refusal is said in one line, not a traceback."""
    _STATE.closing = True
    previous = sys.unraisablehook

    def said(unraisable) -> None:
        if isinstance(unraisable.exc_value, _ExitRefused):
            if said.once:
                return
            said.once = True
            try:
                sys.stderr.write(messages.EXIT_HANDLER_REFUSED.format(
                    status=unraisable.exc_value.status) + "\n")
            except (OSError, ValueError):
                pass
            return
        previous(unraisable)

    said.once = False
    sys.unraisablehook = said


def _install_exit_refusal() -> None:
    if not _GUARDED_PID:
        _GUARDED_PID.append(os.getpid())
        for m in _EXIT_HOLDERS:
            m._exit = _exit_refused
        for (m, name), real in _FORKS.items():
            setattr(m, name, _refusing_fork(real))
        keep_signals(_refused_here, interrupt.SIGNALS)


def _refused_here() -> bool:
    """Schema code runs, in the command line's checker (its interrupts installed): it
    keeps SIGINT and SIGTERM the run's and arms no ITIMER_REAL (``keep_signals``)."""
    return _STATE.refusing > 0 and interrupt.installed()


@contextmanager
def exits_refused(what: str):
    """While the block runs schema code (``what`` names it), ``os._exit`` in this
    process raises instead, and the block ends in a ``SchemaError`` saying so: a
    guarded call in the checker, and a schema's ``build`` in a worker (where its exit
    would read as the target's)."""
    _install_exit_refusal()
    _STATE.refusing += 1
    try:
        yield
    except _ExitRefused as exc:
        raise SchemaError.of(messages.SCHEMA_CODE_EXITED, what,
                             error=f"os._exit({exc.status!r})") from None
    except _ForkRefused:
        raise SchemaError.of(messages.SCHEMA_CODE_FORKED, what) from None
    finally:
        _STATE.refusing -= 1


class _State:
    def __init__(self) -> None:
        self.depth = 0
        self.generation = 0       # one more per guarded call: the watchdog's decision
        self.started = 0.0        # holds for the call it was made for only
        self.cpu = 0.0
        self.waited = 0.0
        self.what = ""
        self.expired = False
        self.expired_at = 0.0     # when the watchdog signalled the call
        self.raised = False       # the watchdog raised in the main thread without it
        self.memory = (0, 0)      # (generation, resident MiB) when the watchdog first saw it
        self.over_memory = False  # the call was ended for its memory, not its time
        self.watchdog: threading.Thread | None = None
        self.handler_set = False
        self.closing = False      # the command line has its exit code (``closing``)
        self.refusing = 0         # blocks of schema code running (``exits_refused``)
        self.threads = -1         # threads alive at the last look, and their idents
        self.known: set = set()


_STATE = _State()


def _thread_cpu() -> float:
    try:
        return time.clock_gettime(time.pthread_getcpuclockid(threading.main_thread().ident))
    except (AttributeError, OSError):
        return time.process_time()


def thread_waited() -> float:
    """Seconds the main thread has been ready to run but waited for a CPU (0 where the
    kernel does not say)."""
    try:
        with open(f"/proc/self/task/{threading.main_thread().native_id}/schedstat",
                  "rb") as fh:
            return int(fh.read().split()[1]) / 1e9
    except (OSError, IndexError, ValueError, AttributeError):
        return 0.0


def _on_signal(signum, frame) -> None:
    if _STATE.depth and _STATE.expired:
        raise _Expired()


def _watch() -> None:
    while True:
        time.sleep(_EVERY)
        generation = _STATE.generation
        if not _STATE.depth:
            continue
        if _STATE.expired:
            _escalate(generation, time.monotonic() - _STATE.expired_at)
            continue
        wall = time.monotonic() - _STATE.started - (thread_waited() - _STATE.waited)
        cpu = _thread_cpu() - _STATE.cpu
        resident = _resident_mib()
        if _STATE.memory[0] != generation:
            _STATE.memory = (generation, resident)
        over_memory = resident - _STATE.memory[1] > MEMORY_MIB
        if (wall > WALL_SECONDS or cpu > CPU_SECONDS or over_memory) and _STATE.depth and \
                _STATE.generation == generation:
            _STATE.over_memory = over_memory
            _STATE.expired_at, _STATE.expired = time.monotonic(), True
            try:
                signal.pthread_kill(threading.main_thread().ident, SIGNAL)
            except (OSError, ValueError, AttributeError):
                pass


def _resident_mib() -> float:
    """This process's resident memory in MiB (0 where the kernel does not say)."""
    try:
        with open("/proc/self/statm", "rb") as fh:
            return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / (1 << 20)
    except (OSError, IndexError, ValueError, AttributeError):
        return 0.0


def _escalate(generation: int, since: float) -> None:
    """The call ``generation`` was signalled ``since`` seconds ago and runs on: raise in
    the main thread without the signal, then end the process (the module doc)."""
    with _ARMING:
        if not _STATE.depth or _STATE.generation != generation:
            return
        if since > 2 * ESCALATE_SECONDS:
            line = messages.CODE_STUCK.format(value=_STATE.what, cpu=CPU_SECONDS,
                                              wall=WALL_SECONDS)
            try:
                os.write(2, (line + "\n").encode("utf-8", "replace"))
            finally:
                _REAL_EXIT(2)
        if since > ESCALATE_SECONDS and not _STATE.raised:
            _STATE.raised = True
            ctypes.pythonapi.PyThreadState_SetAsyncExc(
                ctypes.c_ulong(threading.main_thread().ident), ctypes.py_object(_Expired))


def _ready() -> bool:
    """The watchdog runs and the handler is set (main thread, a platform with signals)."""
    if SIGNAL is None or threading.current_thread() is not threading.main_thread():
        return False
    if not _STATE.handler_set:
        previous = signal.getsignal(SIGNAL)
        if previous not in (signal.SIG_DFL, signal.SIG_IGN, None, _on_signal):
            return False          # the program uses the signal itself: no deadline then
        signal.signal(SIGNAL, _on_signal)
        _STATE.handler_set = True
    else:       # taken back from code that took it since (faulthandler.register, its own
        signal.signal(SIGNAL, _on_signal)      # handler): else its deadline never comes
    if _STATE.watchdog is None or not _STATE.watchdog.is_alive():
        _STATE.watchdog = threading.Thread(target=_watch, name="stagecheck-schema-watchdog",
                                           daemon=True)
        _STATE.watchdog.start()
    return True


def guarded_call(what: str, func, *args, **kwargs):
    """``func(*args, **kwargs)``, schema code: past ``CPU_SECONDS``/``WALL_SECONDS``, or
    raising ``SystemExit``/``KeyboardInterrupt``, it is a ``SchemaError`` naming ``what``;
    other exceptions pass as they are (a derive's ``KeyError`` means "lacks an input").
    What it changes of the process (``process_state.call_state``) is put back after it."""
    if _STATE.depth:          # inside a guarded call already: that deadline holds
        return func(*args, **kwargs)
    kept = call_state()
    try:      # no deadline where the watchdog cannot run; the state is put back anyway
        return _guarded_call(what, func, args, kwargs) if _ready() else func(*args, **kwargs)
    finally:
        lost = put_back_call_state(kept)
        if lost:    # an audit: such a derive ended the run with exit 3 or 120
            raise SchemaError.of(messages.SCHEMA_CODE_CHANGED, what, changes=lost)


def _guarded_call(what: str, func, args, kwargs):
    # the call's clocks first, ``depth`` last: the watchdog judges a call only once it is
    # armed, never by the clocks of the call before it (on a busy machine the main thread
    # can lose its CPU between any two of these lines, and the watchdog looks meanwhile)
    _STATE.expired, _STATE.raised, _STATE.what = False, False, what
    _STATE.over_memory = False
    _STATE.generation += 1
    _STATE.started, _STATE.cpu = time.monotonic(), _thread_cpu()
    _STATE.waited = thread_waited()
    threads = threading.active_count()
    if threads != _STATE.threads:      # which threads are not schema code's
        _STATE.known = {t.ident for t in threading.enumerate()}
        _STATE.threads = threads
    try:
        # what it prints goes to stderr: stdout holds the report (``--json -`` too)
        with exits_refused(what), contextlib.redirect_stdout(sys.stderr):
            _STATE.depth = 1
            try:
                return func(*args, **kwargs)
            finally:       # disarmed before anything else: a late signal raises nothing
                with _ARMING:
                    _STATE.depth = 0
                if threading.active_count() > threads:
                    _note_new_threads(_STATE.known)
    except _Expired as exc:
        _STATE.depth = 0       # raised by the watchdog before the call disarmed itself
        if _STATE.over_memory:
            raise SchemaError.of(messages.SCHEMA_CODE_MEMORY, what, mib=MEMORY_MIB) from None
        raise SchemaError.of(messages.SCHEMA_CODE_HUNG, what, cpu=CPU_SECONDS,
                             wall=WALL_SECONDS, stopped=stopped_at(exc, __file__)) from None
    except MemoryError:       # the machine ran out before the watchdog looked
        _STATE.depth = 0
        raise SchemaError.of(messages.SCHEMA_CODE_MEMORY, what, mib=MEMORY_MIB) from None
    except SystemExit as exc:
        raise SchemaError.of(messages.SCHEMA_CODE_EXITED, what,
                             error=f"SystemExit({exc.code!r})") from None
    except KeyboardInterrupt:
        if interrupt.installed() and not interrupt.requested():
            raise SchemaError.of(messages.SCHEMA_CODE_EXITED, what,
                                 error="KeyboardInterrupt") from None
        raise
    finally:
        _STATE.expired = False


def _wrapped(func, what: str):
    if getattr(func, "__stagecheck_guarded__", False):
        return func

    def call(*args, **kwargs):
        return guarded_call(what, func, *args, **kwargs)

    call.__stagecheck_guarded__ = True
    call.__wrapped__ = func
    for name in ("__name__", "__qualname__", "__doc__", "__module__"):
        try:
            setattr(call, name, getattr(func, name))
        except (AttributeError, TypeError):
            pass
    return call


def guard_schema(schema, name: str) -> None:
    """Make every function ``schema`` holds (its own, its fields', their policies') run as
    a ``guarded_call``, in place (the schema object stays the same object)."""
    seen: set[int] = set()

    def visit(obj, where: str) -> None:
        if id(obj) in seen or not dataclasses.is_dataclass(obj) or isinstance(obj, type):
            return
        seen.add(id(obj))
        for f in dataclasses.fields(obj):
            value = getattr(obj, f.name, None)
            label = f"{where}.{f.name}"
            if callable(value) and not isinstance(value, type) and \
                    not dataclasses.is_dataclass(value):
                object.__setattr__(obj, f.name, _wrapped(value, label))
            elif dataclasses.is_dataclass(value):
                visit(value, label)
            elif isinstance(value, (list, tuple)):
                for k, item in enumerate(value):
                    if dataclasses.is_dataclass(item):
                        item_name = getattr(item, "name", k)
                        visit(item, f"{where}.{f.name}[{item_name!r}]")

    visit(schema, f"schema {name!r}")


def snapshot(also: tuple[str, ...] = ()) -> dict:
    """What stagecheck's own code is now: each module of ``stagecheck`` (and ``builtins``,
    and the modules ``also`` names that are imported: ``torch``, whose functions the
    device model intercepts) by identity, each of their functions and classes, and each
    class's attributes."""
    out: dict = {}
    modules = {name: module for name, module in list(sys.modules.items())
               if module is not None and (name == "stagecheck" or name.startswith("stagecheck."))
               and not name.startswith(("stagecheck_user_schema_", "stagecheck_target_"))}
    modules["builtins"] = builtins
    for name in also:
        if sys.modules.get(name) is not None:
            modules[name] = sys.modules[name]
    for name, module in modules.items():
        out[("module", name)] = id(module)
        try:
            items = list(vars(module).items())
        except TypeError:
            continue
        for attr, value in items:
            if callable(value) or isinstance(value, type):
                out[(name, attr)] = id(value)
            if isinstance(value, type) and getattr(value, "__module__", None) == name:
                for key, member in list(vars(value).items()):
                    if callable(member) or isinstance(member, (staticmethod, classmethod,
                                                               property)):
                        out[(f"{name}.{attr}", key)] = id(member)
                if name in also:    # a name set on the class shadows its base's method
                    out[(f"{name}.{attr}", "(its names)")] = frozenset(vars(value))
    return out


def patched(before: dict, after: dict | None = None, also: tuple[str, ...] = ()) -> list[str]:
    """The names ``before`` had that now stand for something else or are gone
    (``module.name``); new names (a module imported since) are not changes."""
    after = snapshot(also) if after is None else after
    changed = []
    for key, ident in before.items():
        if isinstance(ident, frozenset):      # names set on a class (``snapshot``'s also)
            changed += [f"{key[0]}.{n}" for n in sorted(after.get(key, ident) - ident)]
            continue
        if key[0] == "module":
            if key[1] in sys.modules and after.get(key) != ident:
                changed.append(key[1])
            continue
        if after.get(key) != ident:
            changed.append(f"{key[0]}.{key[1]}")
    return sorted(changed)
