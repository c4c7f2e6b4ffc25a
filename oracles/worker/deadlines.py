"""The parent's deadlines on a worker: how long one call (``Deadline``: CPU or wall-clock
seconds, whichever passes first), a batch's calls (``batch_deadline``) and loading
(``load_deadline``) may take before the worker counts as hung and is killed; and the
diagnostic line each such hang can write (``STAGECHECK_TRACE_HANGS``,
docs/reliability.md). ``WorkerPool`` (``pool.py``) enforces them.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass

from stagecheck.oracles.guard import seconds_given
from stagecheck.oracles.observe.call import WALL_FACTOR, call_limits
from stagecheck.oracles.options import RunOptions

__all__ = ["Deadline", "GRACE_SECONDS", "LOAD_SECONDS", "TRACE_HANGS_ENV", "batch_deadline",
           "load_deadline", "probe_seconds", "trace_hang"]

#: CPU and wall-clock seconds a stuck call gets on top of its limits (``call_limits``)
#: before its worker is killed (the worker's own timers stop a call at the limits)
GRACE_SECONDS = 1.0
#: CPU seconds loading the targets may take in a worker (its imports included), and
#: ``WALL_FACTOR`` times that on the wall clock; ``STAGECHECK_LOAD_SECONDS`` changes it
LOAD_SECONDS = 60.0


@dataclass(frozen=True)
class Deadline:
    """How long the worker may stay at one position (one call) before it is a hang:
    ``cpu`` seconds of its CPU time (as the kernel counts it: nothing in the worker can
    change the count) or ``wall`` seconds on the wall clock, whichever comes first."""

    cpu: float | None
    wall: float | None

    @classmethod
    def of(cls, seconds: float | None, grace: float = 0.0) -> "Deadline | None":
        """The deadline of a limit of ``seconds`` (``call_limits``), plus ``grace``."""
        if seconds is None:
            return None
        cpu, wall = call_limits(seconds)
        return cls(cpu + grace, wall + grace)


def load_deadline() -> Deadline:
    """How long loading may take (``LOAD_SECONDS``, or ``STAGECHECK_LOAD_SECONDS``)."""
    seconds = seconds_given("STAGECHECK_LOAD_SECONDS", LOAD_SECONDS, 1.0)
    return Deadline(seconds, seconds * WALL_FACTOR)


def probe_seconds(most: float) -> float:
    """How long the dry run of a schema or protocol file may take: ``most`` seconds, or
    the loading limit where ``STAGECHECK_LOAD_SECONDS`` sets it lower."""
    return min(most, load_deadline().cpu)


#: a file each hang the checker ends is written to (one line of JSON): which clock passed
#: its deadline and by how much, and where the worker was (a diagnostic, docs/reliability.md)
TRACE_HANGS_ENV = "STAGECHECK_TRACE_HANGS"


def trace_hang(wall: float, used, since_cpu: float, since_waited, position: int, best: int,
               deadline: Deadline) -> None:
    """Append one line of JSON on a hang the checker ended to the file ``TRACE_HANGS_ENV``
    names (which clock passed its deadline, by how much, where the worker was)."""
    path = os.environ.get(TRACE_HANGS_ENV)
    if not path:
        return
    waited = (used.waited - since_waited) if used is not None and since_waited is not None \
        else None
    line = {"pid": os.getpid(), "wall": round(wall, 3), "position": position, "best": best,
            "cpu": round(used.cpu - since_cpu, 3) if used is not None else None,
            "waited": round(waited, 3) if waited is not None else None,
            "deadline": [deadline.cpu, deadline.wall]}
    try:        # never blocking: a FIFO no process reads held the checker for ever
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NONBLOCK, 0o666)
    except OSError:
        return
    try:
        os.write(fd, (json.dumps(line) + "\n").encode())
    except OSError:
        pass
    finally:
        os.close(fd)


def batch_deadline(options: RunOptions) -> Deadline:
    """Each call of a batch: its time limit (every step of it), plus ``GRACE_SECONDS``."""
    return Deadline.of(options.timeout * options.steps, GRACE_SECONDS)
