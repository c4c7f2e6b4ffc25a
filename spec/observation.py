"""What a staging run was seen to do: plain data the invariants are checked over."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from itertools import chain


@dataclass(frozen=True)
class HostWrite:
    """A host write into a buffer's CPU side, through ``.np``, ``.cpu`` or not intercepted.

    ``into_pending_copy`` is True when the write touched a range whose host-to-device
    copy had been issued and the host had not yet seen complete (a write-after-copy
    hazard); ``pending_slots`` are then the written slots that copy may still read. A
    write of no element is no write: it is never logged.
    """

    buffer: str
    slots: tuple[int, ...]
    via: str            # "np" | "cpu" | "untracked" (seen only as a changed value)
    into_pending_copy: bool = False
    pending_slots: tuple[int, ...] = ()


@dataclass(frozen=True)
class StaleTransfer:
    """After a copy completed, the device held other bytes than the host had when it was queued."""

    buffer: str
    slots: tuple[int, ...]
    queued: tuple          # host values at the time the copy was queued
    received: tuple        # what the device holds for those slots


@dataclass(frozen=True)
class Copy:
    """One copy of a buffer's host side into its mirror, ``cpu[start:stop]`` into
    ``gpu[start:stop]``, whatever form issued it: ``copy_to_gpu(n)``,
    ``gpu[a:b].copy_(cpu[a:b], non_blocking=...)``, an assignment ``gpu[a:b] = ...`` of
    the host range (or of a device tensor ``.to(device)`` made from it), a helper built on
    these. ``requested`` is ``copy_to_gpu``'s ``n``; for the other forms the stop of a
    range that starts at 0, and None for the whole buffer."""

    buffer: str
    start: int
    stop: int
    requested: int | None       # the ``n`` argument; None = whole buffer


#: the kinds of ``Hazard`` (docs/protocols.md, "The four hazards")
HOST_WRITE_PENDING_UPLOAD = "host-write-pending-upload"         # (i)
HOST_TOUCH_PENDING_DOWNLOAD = "host-read-pending-download"      # (ii), a read
HOST_WRITE_PENDING_DOWNLOAD = "host-write-pending-download"     # (ii), a write
DEVICE_READ_PENDING_WRITE = "device-read-pending-write"         # (iii)
PINNED_REUSED_PENDING_COPY = "pinned-reused-pending-copy"       # (iv)
HAZARD_KINDS = (HOST_WRITE_PENDING_UPLOAD, HOST_TOUCH_PENDING_DOWNLOAD,
                HOST_WRITE_PENDING_DOWNLOAD, DEVICE_READ_PENDING_WRITE,
                PINNED_REUSED_PENDING_COPY)


@dataclass(frozen=True)
class Hazard:
    """An access that races with a copy or device work the host had not seen complete.

    ``kind`` is one of ``HAZARD_KINDS``; ``region`` names the memory (a buffer's host
    side or mirror, e.g. ``input_ids.cpu``, or an anonymous ``pinned tensor 2``);
    ``slots`` are its elements that the pending operation may still read or write (never
    empty: an access of no element races with nothing); ``pending`` describes that
    operation, ``by`` what raced with it. ``row``: elements per row of a region of two or
    more dimensions (its slots are flat indices, said as ``(row, column)``), else 0.
    ``at``: where the host issued the access that raced, when the race was seen later
    (queued device work that ran then), as ``(step, operation)``; else ``()``.
    ``forced``: the torch operation on device tensors, issued by the host, that made the
    CPU model run the pending upload before this write (such operations run at once), so
    that no completion schedule could show the write reaching it; else ``""``.
    """

    kind: str
    region: str
    slots: tuple[int, ...]
    pending: str
    by: str
    row: int = 0
    at: tuple = ()
    forced: str = ""


def slot_text(slots, row: int = 0, most: int = 8) -> str:
    """``slots`` (flat element indices) as a report says them: ``[1, 2]``, or
    ``[(0, 1), (1, 0)]`` (row, column) for a region of ``row`` elements per row."""
    shown = list(slots)[:most]
    if row > 0:
        return "[" + ", ".join(f"({s // row}, {s % row})" for s in shown) + "]"
    return str(shown)


@dataclass
class Observation:
    """Outcome, final state of every view, the ordered event log and the inputs afterwards."""

    exception_type: str | None          # e.g. "AssertionError"; None when it returned
    exception_message: str | None
    cpu: dict[str, list]                # buffer attribute -> final CPU contents
    gpu: dict[str, list]                # buffer attribute -> final mirror contents (after sync)
    events: list = field(default_factory=list)   # HostWrite | Copy | StaleTransfer | Hazard
    req_ids_reads: list[int] = field(default_factory=list)
    inputs_after: dict = field(default_factory=dict)
    timed_out: bool = False
    exception_mro: tuple[str, ...] = ()
    last_step_start: int = 0            # index in events where the last staging call began
    crashed: str | None = None          # what ended the call's process, e.g. "exited the
                                        # interpreter with code 0", "killed by SIGSEGV"
    left_running: tuple[str, ...] = ()  # names of processes the call started and left
                                        # running when it returned (ended by stagecheck)
    changed: tuple[str, ...] = ()       # what of its process the call left changed and
                                        # stagecheck put back (``builtins.len``)

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

    def _last_step_index(self) -> tuple[dict, dict]:
        """The copies and the host writes of the last step, by buffer, each with its
        position in the step (made once, and again if ``events`` changed)."""
        key = (id(self.events), len(self.events), self.last_step_start)
        index = self.__dict__.get("_index")
        if index is None or index[0] != key:
            copies: dict[str, list] = {}
            writes: dict[str, list] = {}
            for position, e in enumerate(self.last_step):
                if type(e) is Copy:
                    copies.setdefault(e.buffer, []).append((position, e))
                elif isinstance(e, HostWrite):
                    writes.setdefault(e.buffer, []).append((position, e))
            index = self.__dict__["_index"] = (key, copies, writes)
        return index[1], index[2]

    def copies(self, buffer: str) -> list[Copy]:
        """The copies of ``buffer`` in the last step, in order."""
        return [e for _, e in self._last_step_index()[0].get(buffer, ())]

    def hazards(self) -> list:
        return [e for e in self.events if isinstance(e, (StaleTransfer, Hazard))
                or (isinstance(e, HostWrite) and e.into_pending_copy)]

    def writes(self, buffer: str) -> list[HostWrite]:
        """The host writes into ``buffer`` in the last step, in order."""
        return [e for _, e in self._last_step_index()[1].get(buffer, ())]

    def writes_after(self, copy: Copy) -> list[HostWrite]:
        """The host writes into ``copy``'s buffer later in the last step than ``copy``
        (the first copy of the step equal to it)."""
        copies, writes = self._last_step_index()
        later = writes.get(copy.buffer)
        if not later:
            return []
        position = next(p for p, c in copies.get(copy.buffer, ()) if c == copy)
        return [e for p, e in later if p > position]

    def to_dict(self) -> dict:
        d = dataclasses.asdict(self)
        d["events"] = [{"op": type(e).__name__, **dataclasses.asdict(e)} for e in self.events]
        return d

    def to_wire(self, given: dict | None = None) -> tuple:
        """Plain tuples, cheap to pickle between processes (``from_wire`` reverses it).

        ``given``: the call's inputs as it was given them (``inputs_given`` of its
        scenario, taken before the call). An input the call left equal to what it was
        given goes by name only: ``from_wire`` with the same scenario puts a copy of it
        back. On a large batch that is most of the bytes, and nothing changes for the
        invariants: they compare the inputs for equality only."""
        after, same = self.inputs_after, ()
        if given and after:
            after, same = _split_given(after, given)
        events = [(0, e.buffer, e.start, e.stop, e.requested) if type(e) is Copy
                  else (1, e.buffer, e.slots, e.via, e.into_pending_copy, e.pending_slots)
                  if type(e) is HostWrite
                  else (2, e.buffer, e.slots, e.queued, e.received) if type(e) is StaleTransfer
                  else (3, e.kind, e.region, e.slots, e.pending, e.by) for e in self.events]
        return (self.exception_type, self.exception_message, self.cpu, self.gpu, events,
                self.req_ids_reads, after, self.timed_out, self.exception_mro,
                self.last_step_start, self.crashed, self.left_running, same, self.changed)

    @classmethod
    def from_wire(cls, wire: tuple, scenario=None) -> "Observation":
        """The observation ``to_wire`` sent; ``scenario``: the one it was sent with."""
        (exc_type, message, cpu, gpu, events, reads, inputs_after, timed_out, mro, start,
         crashed, left_running, *rest) = wire
        given = rest[0] if rest else ()
        changed = tuple(rest[1]) if len(rest) > 1 else ()
        if given:
            inputs_after = {name: _copied(_given_value(scenario, name)) if name in given
                            else value for name, value in inputs_after.items()}
        kinds = (Copy, HostWrite, StaleTransfer, Hazard)
        return cls(exc_type, message, cpu, gpu, [kinds[e[0]](*e[1:]) for e in events], reads,
                   inputs_after, timed_out, tuple(mro), start, crashed, tuple(left_running),
                   changed)


_ABSENT = object()
_CONTAINERS = frozenset({dict, list})


def _given_value(scenario, name: str):
    """What the call was given for input ``name`` (``req_ids`` included)."""
    if name == "req_ids":
        return scenario.req_ids
    return scenario.inputs.get(name, _ABSENT)


#: an input of fewer entries goes back whole (by name, it saves less than it costs)
BY_NAME_FROM = 32


def inputs_given(scenario) -> dict:
    """A deep copy of every container input of ``scenario`` of ``BY_NAME_FROM`` entries or
    more (``req_ids`` included), by name: what a call is given, kept apart from anything
    the call may reach (a request object shares its lists with the scenario)."""
    out = {}
    if len(scenario.req_ids) >= BY_NAME_FROM:
        out["req_ids"] = list(scenario.req_ids)
    for name, value in scenario.inputs.items():
        if name != "req_ids" and type(value) in _CONTAINERS and len(value) >= BY_NAME_FROM:
            out[name] = _deep_copied(value)
    return out


def _deep_copied(value):
    """A copy of plain data, its dicts and lists at every depth (a container of plain
    values in one C call)."""
    kind = type(value)
    if kind is dict:
        kinds = set(map(type, value.values()))
        if _CONTAINERS.isdisjoint(kinds):
            return dict(value)
        if kinds == {list} and _CONTAINERS.isdisjoint(
                set(map(type, chain.from_iterable(value.values())))):
            # a table of lists of plain values: each list copied, in one C loop
            return dict(zip(value, map(list, value.values())))
        return {k: _deep_copied(v) for k, v in value.items()}
    if kind is list:
        if _CONTAINERS.isdisjoint(set(map(type, value))):
            return value[:]
        return [_deep_copied(v) for v in value]
    return value


def _split_given(after: dict, given: dict) -> tuple[dict, tuple[str, ...]]:
    """``after`` with each input equal to what the call was given replaced by None, and
    the names of those inputs (the order of ``after`` kept)."""
    same = []
    for name, value in after.items():
        was = given.get(name, _ABSENT)
        if was is _ABSENT or type(value) is not type(was) or type(value) not in _CONTAINERS:
            continue
        try:
            equal = value == was
        except Exception:       # a value that does not compare: sent as it is
            equal = False
        if equal is True:
            same.append(name)
    if not same:
        return after, ()
    return {name: None if name in same else value for name, value in after.items()}, \
        tuple(same)


def _copied(value):
    """A copy of a container of plain data: its own dict or list, whose values (ints,
    strings, the lists of a table) are shared; scenarios are never changed in place
    (the shrinker makes new ones), so what they share stays as it was given."""
    return dict(value) if type(value) is dict else list(value) if type(value) is list \
        else value
