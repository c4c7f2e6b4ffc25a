"""What the device is guaranteed to have done, and what the host knows it has done.

Every operation issued to a stream (a copy, device work, an event record, a wait) gets a
sequence number on that stream and a *clock*: for each stream, the highest sequence
number guaranteed complete before this operation completes (its own stream's ops before
it, and whatever its stream waited for through events). An operation X is *ordered
before* Y when Y's clock covers X. The host's own clock grows only when it waits
(``Event.synchronize``, ``Stream.synchronize``, ``torch.cuda.synchronize``, a blocking
copy, an event query that answers True): an operation the host's clock covers is *known
complete*, and nothing issued after that can race with it.

This is the happens-before order of CUDA streams and events; two accesses to the same
memory race when neither is ordered before the other. It does not depend on when the
device actually ran anything, so a race is found on every run that issues the racing
operations, whatever the completion schedule (the schedule decides only which values a
racing access happens to see).
"""

from __future__ import annotations

__all__ = ["Clock", "covers", "join"]

Clock = dict   # stream id -> highest sequence number covered


def join(a: dict, b: dict) -> dict:
    """The clock that covers both ``a`` and ``b`` (a new dict)."""
    out = dict(a)
    for k, v in b.items():
        if out.get(k, 0) < v:
            out[k] = v
    return out


def covers(clock: dict, stream: int, seq: int) -> bool:
    return clock.get(stream, 0) >= seq
