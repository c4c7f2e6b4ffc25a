"""Whose code failed in a protocol run: the user protocol's own (its mistake, exit 2) or the
code under test's (an observed outcome, a finding). A run's ``build``, operations and
``observe`` are protocol functions calling the component; these helpers tell the two
apart by the frames an exception passed (``protocol_mistake``), by what a refused call's
``TypeError`` names (``call_refused``), and by the line that called ``os._exit`` or
started a process (``own_exits_refused``)."""

from __future__ import annotations

import os
import subprocess
import sys
import traceback
from contextlib import contextmanager

from stagecheck.oracles import messages
from stagecheck.oracles.errors import SchemaError
from stagecheck.oracles.protocol.context import RunContext
from stagecheck.oracles.text import did_you_mean, type_name
from stagecheck.spec.protocol import Protocol

__all__ = ["ProtocolExited", "ProtocolStartedProcess", "built_class", "call_refused",
           "component_lacks", "lacking_guess", "own_exits_refused", "protocol_mistake",
           "refuse_own_hang"]


class ProtocolExited(BaseException):
    """``os._exit`` called by a user protocol's own code (not the code under test's): its
    mistake, never a process that ended (a BaseException: no ``except Exception`` of the
    code under test takes it)."""

    def __init__(self, status, where: str) -> None:
        super().__init__(status)
        self.status, self.where = status, where

    def __str__(self) -> str:
        return f"os._exit({self.status!r})"


class ProtocolStartedProcess(ProtocolExited):
    """A process started by a user protocol's own code (``subprocess``, ``os.fork``,
    ``os.posix_spawn``): its mistake, refused before the process exists (what a run
    leaves running is otherwise charged to the code under test, ``no_process_left``)."""

    def __str__(self) -> str:
        return str(self.status)


@contextmanager
def own_exits_refused(protocol: Protocol, code):
    """While a sequence runs: ``os._exit`` called from a line of the user protocol's own
    file raises ``ProtocolExited`` (said as the protocol's mistake, exit 2), a process
    started there ``ProtocolStartedProcess``; called from anywhere else (the code under
    test) they do as before (an observed end, a process the run may leave). Nothing changes for a built-in protocol, or one in the target's own file."""
    own = getattr(getattr(protocol.build, "__code__", None), "co_filename", None)
    if not own or own.startswith(_NEUTRAL) or protocol_mistake(protocol.build, None, code,
                                                                 own_only=True) is None:
        yield
        return
    own = os.path.realpath(own)
    holders = [m for m in (os, sys.modules.get("posix")) if m is not None
               and hasattr(m, "_exit")]
    previous = [m._exit for m in holders]

    def exit_refused(status, *args, **kwargs):
        frame = sys._getframe(1)
        if os.path.realpath(frame.f_code.co_filename) == own:
            raise ProtocolExited(status, f"{frame.f_code.co_filename}:{frame.f_lineno}")
        previous[0](status, *args, **kwargs)

    targets = _target_files(code)

    def protocols_line() -> str | None:
        """``file:line`` of the protocol's own code that led to the start of a process:
        outward from the call, past the standard library (``subprocess``,
        ``multiprocessing``, a frozen ``os``), stagecheck and installed packages, and past
        modules of neither side (a helper the protocol imports), the first frame of the
        protocol's file; None where the code under test's comes first (or neither)."""
        frame = sys._getframe(2)
        while frame is not None:
            name = frame.f_code.co_filename
            if not _neutral(name):
                path = os.path.realpath(name)
                if path in targets:
                    return None
                if path == own:
                    return f"{name}:{frame.f_lineno}"
            frame = frame.f_back
        return None

    def refusing(name: str, real):
        def start(*args, **kwargs):
            where = protocols_line()
            if where is not None:
                raise ProtocolStartedProcess(name, where)
            return real(*args, **kwargs)
        return start

    spawners = [(m, name) for m, name in ((subprocess.Popen, "__init__"), (os, "fork"),
                                          (os, "posix_spawn"), (os, "posix_spawnp"),
                                          (os, "system"))
                if hasattr(m, name)]
    started = [getattr(m, name) for m, name in spawners]
    for m in holders:
        m._exit = exit_refused
    for (m, name), real in zip(spawners, started):
        label = "subprocess.Popen" if m is subprocess.Popen else f"os.{name}"
        setattr(m, name, refusing(label, real))
    try:
        yield
    finally:
        for m, real in zip(holders, previous):
            m._exit = real
        for (m, name), real in zip(spawners, started):
            setattr(m, name, real)


def _target_files(code) -> set[str]:
    """The files of the code under test (its target's file, as ``protocol_mistake`` names
    them)."""
    ref = getattr(code, "ref", None)
    return {os.path.realpath(p) for p in (getattr(ref, "filename", None),
                                          str(getattr(ref, "spec", "")).split("::")[0]) if p}


#: frames of these folders are neither the protocol's nor the target's (torch, stagecheck,
#: the standard library): the innermost frame outside them says whose code raised
_NEUTRAL = tuple(os.path.dirname(os.path.abspath(f)) + os.sep for f in (
    os.__file__,                                   # the standard library
    messages.__file__,                             # stagecheck's oracles
    sys.modules[Protocol.__module__].__file__))    # stagecheck's spec (built-in protocols)


def _neutral(filename: str) -> bool:
    """Whether a frame of ``filename`` is neither side's: frozen or generated code, the
    ``_NEUTRAL`` folders, an installed package."""
    return filename.startswith("<") or filename.startswith(_NEUTRAL) \
        or "site-packages" in filename


def protocol_mistake(run, exc: BaseException | None, code,
                      own_only: bool = False) -> str | None:
    """``file:line`` where a user protocol's own function raised ``exc`` (its innermost
    frame outside torch, stagecheck and the standard library lies in the protocol's file,
    which is not the target's); None when the code under test raised it. ``own_only``:
    whether ``run`` is a user protocol's function in a file of its own at all (its file)."""
    own = getattr(getattr(run, "__code__", None), "co_filename", None)
    if not own or own.startswith(_NEUTRAL):
        return None                          # a built-in protocol: its code is stagecheck's
    if os.path.realpath(own) in _target_files(code):
        return None                          # one file holds both: the target's, to be safe
    if own_only:
        return own
    for frame in reversed(traceback.extract_tb(exc.__traceback__)):
        name = frame.filename
        if _neutral(name):
            continue
        return f"{name}:{frame.lineno}" if os.path.realpath(name) == os.path.realpath(own) \
            else None
    return None


def lacking_guess(exc: AttributeError) -> str:
    """`` (did you mean NAME?)``: the public attribute of the object an ``AttributeError``
    names that is spelt closest to the one asked for ('' when none is close)."""
    known = [n for n in dir(type(exc.obj)) if not n.startswith("__")]
    return did_you_mean(exc.name, known)


def component_lacks(exc: BaseException, code) -> str | None:
    """The name of the class of the code under test whose object lacked the attribute an
    ``AttributeError`` names (``exc.obj``: a protocol's line asked the target's component
    for a method it does not have), else None."""
    obj = getattr(exc, "obj", None) if isinstance(exc, AttributeError) else None
    if obj is None or not isinstance(getattr(exc, "name", None), str):
        return None
    kind = type(obj)
    try:
        if kind is code.component():
            return type_name(kind)
    except Exception:       # the component is not loadable: judged by its files below
        pass
    files = _target_files(code)
    for value in vars(kind).values():
        func = getattr(value, "__func__", value)
        filename = getattr(getattr(func, "__code__", None), "co_filename", None)
        if filename and os.path.realpath(filename) in files:
            return type_name(kind)
    return None


def refuse_own_hang(protocol: Protocol, func, exc: BaseException, code, part: str,
                     limit: float | None) -> None:
    """A ``SchemaError`` when the per-call limit stopped a user protocol's own function
    ``func`` in its own code (``protocol_mistake``): a loop of the protocol's, never a
    hang of the code under test."""
    mistake = protocol_mistake(func, exc, code)
    if mistake is not None:
        raise SchemaError.of(messages.PROTOCOL_CODE_HUNG, protocol.name, part=part,
                             limit=limit or 0, where=mistake) from None


def built_class(code, protocol: Protocol) -> str:
    """The name of the class ``build`` was building: the one the target names (which may
    not be the protocol's component), else the protocol's component."""
    try:
        return type_name(code.component())
    except Exception:
        return protocol.component or "the component"


def call_refused(build, exc: BaseException) -> str | None:
    """``file:line`` where ``build`` called ``ctx.component`` when ``exc`` is the TypeError
    of that call's binding (the component refused the arguments: the innermost frame is
    ``ctx.component``'s own, the class's ``__init__`` never started); None otherwise (the
    component's code raised it, or ``build``'s own code did: ``len(5)``, a None called)."""
    code = getattr(build, "__code__", None)
    if not isinstance(exc, TypeError) or code is None or exc.__traceback__ is None:
        return None
    frames = traceback.extract_tb(exc.__traceback__)

    def is_(frame, fn_code) -> bool:
        return frame.name == fn_code.co_name and \
            os.path.realpath(frame.filename) == os.path.realpath(fn_code.co_filename)

    if len(frames) < 2 or not is_(frames[-1], RunContext.component.__code__) \
            or not any(is_(f, code) for f in frames):
        return None
    caller = frames[-2]          # the protocol's line that called ctx.component
    return f"{caller.filename}:{caller.lineno}"
