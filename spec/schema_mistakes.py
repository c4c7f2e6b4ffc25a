"""What is a schema's mistake, never a finding against the code under test: its own code
raised while the checker judged (``SchemaCodeFailed``), or a target asked one of its
stand-ins for something the stand-in does not model (``StandIn``, which raises
``StandInUnsupported``), or a target rebound a view of a paired buffer stagecheck passed
it (``ViewRebound``: stagecheck observes the views it made). The command line answers
each with exit 2.

User schemas derive their stand-ins from ``stagecheck.spec.schema.StandIn`` (the schema
module names both stand-in classes in its ``__all__``).
"""

from __future__ import annotations

import os
import sys
import traceback
import types

__all__ = ["SchemaCodeFailed", "StandIn", "StandInUnsupported", "ViewRebound", "ViewsKept"]


class SchemaCodeFailed(Exception):
    """A schema's or a protocol's own code (a derive, a column, a protocol check) raised
    while the checker judged: the schema's mistake, never a finding against the code
    under test and never stagecheck's own failure (the command line says so, exit 2)."""

    schema_mistake = True      # what the command line reads (no import of this module)

    def __init__(self, what: str, error: BaseException | None, said: str = "") -> None:
        self.returned = error is None
        if error is None:        # it returned something it must not: ``said`` says what
            super().__init__(f"{what} {said}")
            self.what, self.error = what, said
            return
        where = _user_frame(error)
        text = f"{type(error).__name__}: {_said(error)}" + (f" at {where}" if where else "")
        super().__init__(f"{what} raised {text}")
        self.what, self.error = what, text

    @classmethod
    def of(cls, what: str, error: Exception) -> Exception:
        """What to raise for ``error``, raised by the code ``what`` names: itself when
        it already says what went wrong (a ``SchemaCodeFailed`` from deeper down, or
        stagecheck's own error carrying a ``problem``: the guard's deadline or exit),
        else a ``SchemaCodeFailed``."""
        if isinstance(error, cls) or getattr(error, "problem", None) is not None:
            return error
        return cls(what, error)


def _said(error: BaseException) -> str:
    """``str(error)``, but an exception class of the user's own with an ``__str__`` of its
    own is read from its arguments without calling it (one that ends the process, hangs
    or raises would do so in the checker)."""
    if not isinstance(getattr(type(error), "__str__", None), types.FunctionType):
        try:
            return str(error)
        except Exception:       # noqa: BLE001 (a builtin's __str__ of an odd argument)
            pass
    return ", ".join(str.__str__(a) if isinstance(a, str) else
                     repr(a) if type(a) in (int, float, bool, type(None)) else
                     f"<{type(a).__name__}>" for a in error.args[:4])[:2000]


def _user_frame(error: BaseException) -> str | None:
    """``file:line`` of the innermost frame of ``error``'s traceback in the user's code
    (outside stagecheck's ``spec`` and ``oracles``, the standard library and installed
    packages), or None."""
    here = os.path.dirname(os.path.abspath(__file__))
    skip = (here + os.sep, os.path.join(os.path.dirname(here), "oracles") + os.sep,
            os.path.dirname(os.path.abspath(os.__file__)) + os.sep)
    for frame in reversed(traceback.extract_tb(error.__traceback__)):
        name = frame.filename
        if name.startswith("<") or name.startswith(skip) or "site-packages" in name \
                or name.startswith(sys.prefix + os.sep + "lib"):
            continue
        return f"{name}:{frame.lineno}"
    return None


class StandInUnsupported(BaseException):
    """A target asked a schema's stand-in for something it does not model: a limit of the
    schema, never a finding about the code (a BaseException, so that a target's
    ``except Exception`` cannot turn it into a behaviour)."""

    def __init__(self, stand_in: str, operation: str) -> None:
        super().__init__(f"{stand_in}: {operation}")
        self.stand_in, self.operation = stand_in, operation


def _unsupported(operation: str):
    def refuse(self, *args, **kwargs):
        raise StandInUnsupported(type(self).__name__, operation)
    return refuse


class StandIn:
    """Base of the objects a schema passes for what the staging code only hands on (a
    device tensor a kernel launch takes): whatever a subclass does not define (an
    attribute, indexing, iteration, arithmetic, conversion) raises
    ``StandInUnsupported``, which stagecheck reports as exit 2 naming the stand-in and
    the operation, never as a difference in the code."""

    def __getattr__(self, name: str):
        if name.startswith("__"):
            raise AttributeError(name)
        raise StandInUnsupported(type(self).__name__, f"attribute .{name}")

    __getitem__ = _unsupported("indexing [...]")
    __setitem__ = _unsupported("item assignment [...] =")
    __iter__ = _unsupported("iteration")
    __len__ = _unsupported("len()")
    __contains__ = _unsupported("'in'")
    __int__ = _unsupported("int()")
    __index__ = _unsupported("use as an index")
    __float__ = _unsupported("float()")
    __array__ = _unsupported("conversion to a numpy array")
    for _op in ("add", "sub", "mul", "truediv", "floordiv", "mod", "pow", "and", "or", "xor",
                "lshift", "rshift", "matmul"):
        locals()[f"__{_op}__"] = _unsupported(f"arithmetic ({_op})")
        locals()[f"__r{_op}__"] = _unsupported(f"arithmetic ({_op})")
    for _op in ("lt", "le", "gt", "ge"):
        locals()[f"__{_op}__"] = _unsupported(f"comparison ({_op})")
    __neg__ = _unsupported("arithmetic (neg)")
    del _op


class ViewRebound(StandInUnsupported):
    """A target assigned (or deleted) ``.cpu``, ``.gpu`` or ``.np`` of a paired buffer
    stagecheck made: the checker observes the views it made, so what the target does with
    the new object would go unseen (or, on a property, fail as stagecheck's own
    AttributeError); a limit of stagecheck's buffers, never a finding (exit 2)."""

    def __init__(self, view: str, where: str) -> None:
        super().__init__("paired buffer", f"rebinding .{view}")
        self.view, self.where = view, where


#: the views of a paired buffer a target may write into but not rebind
VIEWS = frozenset(("cpu", "gpu", "np"))


class ViewsKept:
    """Mixin of stagecheck's paired buffers: ``buf.gpu = tensor`` (an array or a tensor
    assigned to a view already made) and ``del buf.gpu`` raise ``ViewRebound`` naming the
    target's line."""

    __slots__ = ()

    def __setattr__(self, name: str, value) -> None:
        # an array or a tensor: a view the real buffer would follow, which stagecheck
        # cannot; anything else breaks the buffer, as it would the real one (a finding)
        if name in VIEWS and _made(self, name) and (
                hasattr(value, "data_ptr") or hasattr(value, "__array_interface__")):
            raise ViewRebound(name, _caller())
        object.__setattr__(self, name, value)

    def __delattr__(self, name: str) -> None:
        if name in VIEWS:
            raise ViewRebound(name, _caller())
        object.__delattr__(self, name)

    def replaced_view(self) -> str | None:
        """The view (``cpu`` or ``gpu``) whose memory the code replaced in place
        (``buf.cpu.set_(other)``, ``buf.gpu.data = other``): the buffer's own memory is no
        longer what the view reads, so what the code then does through it goes unseen, as
        with a rebound view; None where none was (each buffer class says it of its
        views, ``own_memory``). A mirror given memory of another size is not one: what
        it holds then is read as the code left it (a resized mirror), a finding where it
        differs."""
        for name, view, address, size in self.own_memory():
            if view is not None and address and view.untyped_storage().data_ptr() != address \
                    and (name == "cpu" or view.numel() == size):
                return name
        return None

    def own_memory(self) -> tuple:
        """``(view name, the view made or None, the address of its own memory, its
        elements)`` for each view of the buffer that is a tensor (none: a buffer of
        lists)."""
        return ()


def _made(buffer, name: str) -> bool:
    """Whether ``buffer``'s view ``name`` is already there (a property always is)."""
    if isinstance(getattr(type(buffer), name, None), property):
        return True
    try:
        object.__getattribute__(buffer, name)
    except AttributeError:
        return False
    return True


def _caller() -> str:
    """``file:line`` of the code that rebinds the view (two frames up)."""
    frame = sys._getframe(2)
    return f"{frame.f_code.co_filename}:{frame.f_lineno}"
