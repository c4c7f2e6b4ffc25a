"""What the device model orders: operations on streams, streams, events (plain state)."""

from __future__ import annotations

from typing import Any, Callable

from stagecheck.oracles.device.spans import Span

__all__ = ["COPY_KINDS", "EventState", "Op", "StreamState"]

COPY_KINDS = ("h2d", "d2h", "d2d")
_LABEL = {"h2d": "upload", "d2h": "download", "d2d": "device copy", "kernel": "device work",
          "record": "event record", "wait": "event wait"}


class Op:
    """One operation issued to a stream."""

    __slots__ = ("index", "kind", "stream", "seq", "clock", "dev_reads", "dev_writes",
                 "host_reads", "host_writes", "action", "done", "snapshot", "waits_for",
                 "what", "where", "reported", "event", "intents", "seen", "location",
                 "device_owned", "touched", "reading", "fast", "bounds", "stale", "fed",
                 "unordered", "forced", "described", "quiet", "issued")

    def __init__(self, index: int, kind: str, stream: "StreamState", what: str, where: str
                 ) -> None:
        self.index, self.kind, self.stream, self.what, self.where = (index, kind, stream,
                                                                     what, where)
        self.seq = 0
        self.clock: dict = {}
        self.dev_reads: list[Span] = []
        self.dev_writes: list[Span] = []
        self.host_reads: list[Span] = []      # pinned memory an upload reads
        self.host_writes: list[Span] = []     # pinned memory a download writes
        self.action: Callable[[], None] | None = None
        self.done = False
        self.snapshot = None                  # an upload's source as the host held it
        #: where ``snapshot`` compares by bytes (integer and bool memory): (key of the
        #: memory, its bytes as ``snapshot`` holds them, a numpy view of the memory)
        self.fast = None
        #: ``fast``'s bytes at issue as a flat list of values, made once when first needed
        self.issued: list | None = None
        #: a download into pinned memory: host reads of its destination before it landed,
        #: ``(location, region, slots, positions, values read)``
        self.stale: list = []
        self.waits_for: "Op | None" = None    # a wait: the record it waits for
        self.reported: set = set()            # (kind, slot) already reported against it
        self.event = None                     # CUDA: an event recorded right after it
        self.location: tuple = ()             # where the host issued it (step, operation)
        self.device_owned: list[Span] = []    # host memory a later download may write
        #: an upload: pinned memory it reads that a download the device orders before it
        #: had not written yet when it was issued (it reads what that download delivers)
        self.fed: list[Span] = []
        #: device work: the operations open and not ordered before it when it was issued
        self.unordered: list = []
        #: an upload the CPU model ran early, when the host issued a torch operation on
        #: device tensors queued behind it (such operations run at once): that operation
        self.forced = ""
        self.intents: dict = {}               # device work: what the host meant it to read
        self.seen: dict = {}                  # device work: what it read
        #: device work: for each contiguous argument (of one dimension or more), its span,
        #: the elements its operations read (flat, row-major) and its element count
        self.touched: dict = {}
        #: device work: the arguments of ``touched`` not read whole yet (once every one
        #: is, the work's further reads need no noting)
        self.reading: dict = {}
        #: device work: ``(lo, hi)`` around every argument of ``reading`` when launched
        self.bounds: tuple = (0, 0)
        self.described: str | None = None     # ``describe``'s text, once made
        #: an upload whose pinned source differs from what it held at issue only where a
        #: download may write (no race): ``(the source's bytes, len(device_owned))`` then,
        #: so that a sweep finding the same bytes need not compare them again
        self.quiet: tuple | None = None

    def describe(self) -> str:
        """The operation in words; made once (what it is made of does not change after
        its name is fixed), since every operation of a protocol run asks it of each
        download still pending (``unlanded``)."""
        described = self.described
        if described is None:
            if callable(self.what):           # named when first needed (a report)
                self.what = self.what()
            where = f" ({self.where})" if self.where else ""
            described = self.described = (f"{_LABEL[self.kind]} {self.what} #{self.index} "
                                           f"on stream {self.stream.id}{where}")
        return described


class StreamState:
    """A stream as the model orders it: its last sequence number, its clock, its queue
    (the CPU model's operations not yet run)."""

    __slots__ = ("id", "seq", "clock", "queue", "handle")

    def __init__(self, sid: int, handle: Any = None) -> None:
        self.id, self.handle = sid, handle
        self.seq = 0
        self.clock: dict = {}
        self.queue: list[Op] = []


class EventState:
    """An event as the model orders it: the clock of its last record (None: never
    recorded, so waiting on it waits for nothing, as in CUDA)."""

    __slots__ = ("clock", "record")

    def __init__(self) -> None:
        self.clock: dict | None = None
        self.record: Op | None = None
