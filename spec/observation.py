"""What a staging run was seen to do: plain data the invariants are checked over."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field


@dataclass(frozen=True)
class HostWrite:
    """A host write into a buffer's CPU side, through ``.np``, ``.cpu`` or not intercepted.

    ``into_pending_copy`` is True when the write touched a range whose host-to-device
    copy had been queued but had not yet executed (a write-after-copy hazard).
    """

    buffer: str
    slots: tuple[int, ...]
    via: str            # "np" | "cpu" | "untracked" (seen only as a changed value)
    into_pending_copy: bool = False


@dataclass(frozen=True)
class StaleTransfer:
    """After a copy completed, the device held other bytes than the host had when it was queued."""

    buffer: str
    slots: tuple[int, ...]
    queued: tuple          # host values at the time the copy was queued
    received: tuple        # what the device holds for those slots


@dataclass(frozen=True)
class Copy:
    """One ``copy_to_gpu`` call: ``cpu[start:stop]`` into ``gpu[start:stop]``."""

    buffer: str
    start: int
    stop: int
    requested: int | None       # the ``n`` argument; None = whole buffer


@dataclass
class Observation:
    """Outcome, final state of every view, the ordered event log and the inputs afterwards."""

    exception_type: str | None          # e.g. "AssertionError"; None when it returned
    exception_message: str | None
    cpu: dict[str, list]                # buffer attribute -> final CPU contents
    gpu: dict[str, list]                # buffer attribute -> final mirror contents (after sync)
    events: list = field(default_factory=list)       # HostWrite | Copy, in order
    req_ids_reads: list[int] = field(default_factory=list)
    inputs_after: dict = field(default_factory=dict)
    timed_out: bool = False
    exception_mro: tuple[str, ...] = ()
    last_step_start: int = 0            # index in events where the last staging call began
    crashed: str | None = None          # what ended the call's process, e.g. "exited the
                                        # interpreter with code 0", "killed by SIGSEGV"
    left_running: tuple[str, ...] = ()  # names of processes the call started and left
                                        # running when it returned (ended by stagecheck)

    @classmethod
    def of_crash(cls, what: str) -> "Observation":
        """The call never came back: its process ended (``what`` says how)."""
        return cls(exception_type="ProcessEnded", exception_message=what, cpu={}, gpu={},
                   crashed=what)

    @classmethod
    def of_hang(cls) -> "Observation":
        """The call did not return within its time limit and was stopped."""
        return cls(exception_type="CallTimedOut", exception_message=None, cpu={}, gpu={},
                   timed_out=True)

    @property
    def last_step(self) -> list:
        """Events of the last staging call (runs of several steps observe them all)."""
        return self.events[self.last_step_start:]

    @property
    def returned(self) -> bool:
        return self.exception_type is None and not self.timed_out and self.crashed is None

    def raised(self, type_name: str) -> bool:
        return type_name in self.exception_mro or self.exception_type == type_name

    def copies(self, buffer: str) -> list[Copy]:
        """The copies of ``buffer`` in the last step, in order."""
        key = (id(self.events), len(self.events), self.last_step_start)
        index = self.__dict__.get("_copies")
        if index is None or index[0] != key:
            by_buffer: dict[str, list[Copy]] = {}
            for e in self.last_step:
                if type(e) is Copy:
                    by_buffer.setdefault(e.buffer, []).append(e)
            index = self.__dict__["_copies"] = (key, by_buffer)
        return list(index[1].get(buffer, ()))

    def hazards(self) -> list:
        return [e for e in self.events if isinstance(e, StaleTransfer)
                or (isinstance(e, HostWrite) and e.into_pending_copy)]

    def writes(self, buffer: str) -> list[HostWrite]:
        return [e for e in self.last_step if isinstance(e, HostWrite) and e.buffer == buffer]

    def to_dict(self) -> dict:
        d = dataclasses.asdict(self)
        d["events"] = [{"op": type(e).__name__, **dataclasses.asdict(e)} for e in self.events]
        return d

    def to_wire(self) -> tuple:
        """Plain tuples, cheap to pickle between processes (``from_wire`` reverses it)."""
        events = [(0, e.buffer, e.start, e.stop, e.requested) if type(e) is Copy
                  else (1, e.buffer, e.slots, e.via, e.into_pending_copy) if type(e) is HostWrite
                  else (2, e.buffer, e.slots, e.queued, e.received) for e in self.events]
        return (self.exception_type, self.exception_message, self.cpu, self.gpu, events,
                self.req_ids_reads, self.inputs_after, self.timed_out, self.exception_mro,
                self.last_step_start, self.crashed, self.left_running)

    @classmethod
    def from_wire(cls, wire: tuple) -> "Observation":
        (exc_type, message, cpu, gpu, events, reads, inputs_after, timed_out, mro, start,
         crashed, left_running) = wire
        kinds = (Copy, HostWrite, StaleTransfer)
        return cls(exc_type, message, cpu, gpu, [kinds[e[0]](*e[1:]) for e in events], reads,
                   inputs_after, timed_out, tuple(mro), start, crashed, tuple(left_running))
