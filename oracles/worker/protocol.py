"""What the two sides of a worker's pipe agree on, besides the commands themselves.

- where the worker is (``SharedPosition``): two int64s in a shared file both sides map.
  The first, the position: the worker writes it before each call of target code, the
  parent reads it to know which call crashed or hung; its values are named below
  (``IDLE``, ``BUSY``, ``observing``); nothing else writes or decodes them. The second,
  ``pause``: the worker's own one-time work inside a call (its import of torch, on the
  first use that needs it: ``UNTIMED`` while it runs, ``TIMED`` after), which the
  parent does not time as the call's (once per worker process: ``pool.py``).
- ``MEMORY_EXIT``: the exit code of a worker that ran out of memory; how much memory a
  worker may hold (``default_memory_mib``);
- ``TargetArg``: an argument of a ``call`` that stands for a target the worker loaded.
"""

from __future__ import annotations

from dataclasses import dataclass

# DEFAULT_MEMORY_MIB and default_memory_mib: named in __all__ (their home is
# oracles/memory.py, which the checker's guard reads too)
from stagecheck.oracles.memory import DEFAULT_MEMORY_MIB, default_memory_mib

__all__ = ["BROKEN_EXIT", "BUSY", "CLOSED_EXIT", "DEFAULT_MEMORY_MIB", "IDLE", "MEMORY_EXIT",
           "RESTART", "SIDES_PER_EXAMPLE", "SharedPosition", "TIMED", "TargetArg", "UNTIMED",
           "default_memory_mib", "held_targets", "end_left_running", "hold_ender",
           "hold_position", "next_position", "observed", "observing", "target_arg"]

#: between requests: no target code runs
IDLE = 0
#: loading targets, or running a ``call``: target code runs, under the parent's deadline
BUSY = 1
#: ``SharedPosition.pause``: the worker's own one-time work (its import of torch) runs
#: inside a call, under the deadline of loading instead of the call's
UNTIMED = 1
#: ... that work is done: the call's clock starts again
TIMED = 2
#: positions per example of a batch: one per side (a batch has fewer sides than this)
SIDES_PER_EXAMPLE = 8


#: the last entry of a ``call``'s answer (a protocol batch's) that asks the parent for a
#: fresh worker before the rest: threads the code under test left running would have their
#: CPU time charged to later calls
RESTART = (-1, "restart")

#: this worker's ``SharedPosition`` (set when the worker starts; None elsewhere), for code
#: a ``call`` runs to mark each unit of target code it starts (``next_position``)
_CURRENT: list = [None]


def hold_position(position: "SharedPosition | None") -> None:
    """The worker's position, made reachable by ``next_position``."""
    _CURRENT[0] = position


def next_position() -> None:
    """In a worker's ``call``: the next unit of target code starts (a protocol run's next
    operation), so the parent's per-position deadline starts again (``WorkerPool.call``
    with ``steps``). Nothing outside a worker."""
    position = _CURRENT[0]
    if position is not None:
        position.value = position.value + 1


#: this worker's way to end what code under test left running (set when the worker starts)
_ENDER: list = [None]


def hold_ender(end) -> None:
    """``end()``: end the processes the code under test left running; their names."""
    _ENDER[0] = end


def end_left_running() -> tuple[str, ...]:
    """In a worker: end what the code under test started and left running so far (a
    protocol run's sequence), and name it; nothing outside a worker."""
    end = _ENDER[0]
    return tuple(end()) if end is not None else ()


def observing(example: int, side: int) -> int:
    """The position of side ``side`` of the ``example``-th scenario of a batch."""
    return example * SIDES_PER_EXAMPLE + side + 1


def observed(position: int) -> tuple[int, int] | None:
    """``(example, side)`` of a position ``observing`` wrote (``BUSY`` reads as the
    first example's first side); None for ``IDLE`` or below."""
    if position <= IDLE:
        return None
    return divmod(position - 1, SIDES_PER_EXAMPLE)


#: the exit code a worker uses when it ran out of memory (so the parent can say so)
MEMORY_EXIT = 86
#: ... and when code under test removed or replaced modules its own code runs on
#: (``modules.py``)
BROKEN_EXIT = 87
#: ... and when code under test closed or replaced its pipe descriptors (``modules.py``)
CLOSED_EXIT = 88
class SharedPosition:
    """Two int64s in shared memory: where the worker is (``IDLE``: between requests), and
    whether the worker's own one-time work runs inside a call (``pause``)."""

    __slots__ = ("_view",)
    #: the bytes of the shared file
    BYTES = 16

    def __init__(self, buf) -> None:
        self._view = memoryview(buf).cast("q")

    @property
    def value(self) -> int:
        return self._view[0]

    @value.setter
    def value(self, v: int) -> None:
        self._view[0] = v

    @property
    def pause(self) -> int:
        return self._view[1]

    @pause.setter
    def pause(self, v: int) -> None:
        self._view[1] = v


@dataclass(frozen=True)
class TargetArg:
    """An argument of ``call`` that stands for the worker's loaded target ``index``."""

    index: int


def target_arg(index: int) -> TargetArg:
    return TargetArg(index)


def held_targets(args, targets: list) -> list:
    """``args`` with each ``TargetArg`` replaced by the target it stands for."""
    return [targets[a.index] if isinstance(a, TargetArg) else a for a in args]
