"""The device model's race detection: what the host knows complete, and the four hazards.

The host's knowledge is a clock (``order.py``) that grows only when it waits; an
operation it covers is *known complete* and leaves the open set. Every access is checked
against the open operations it is not ordered after:

- host writes and reads of pinned memory (``host_write``, ``host_read``, seen through
  torch), and host writes no interception saw, found by comparing the pinned memory of
  every open copy with what it held when the copy was issued (``sweep``);
- each new copy or device work against the open operations (``_race_at_issue``), and
  device work, once it ran, against what was issued after it (``_after_work``) and what
  it writes against what was open and unordered before it (``_writes_against_earlier``).

A race is a ``spec.observation.Hazard`` naming the memory and the slots involved, once per
pending operation and slot.
"""

from __future__ import annotations

from stagecheck.oracles.device.ops import Op
from stagecheck.oracles.device.order import covers, join
from stagecheck.oracles.device.spans import Span
from stagecheck.oracles.device.torchload import import_torch
from stagecheck.spec.observation import (DEVICE_READ_PENDING_WRITE, HOST_TOUCH_PENDING_DOWNLOAD,
                                         HOST_WRITE_PENDING_DOWNLOAD, HOST_WRITE_PENDING_UPLOAD,
                                         PINNED_REUSED_PENDING_COPY, Hazard)

__all__ = ["RaceDetection"]


class RaceDetection:
    """Mixin of ``DeviceModel``: the host's knowledge and the hazards (module doc)."""

    def host_write(self, span: Span, by: str) -> None:
        """The host wrote ``span`` (pinned memory a pending copy reads or writes: a hazard)."""
        lo, hi = span.lo, span.hi
        if hi <= lo:
            return
        for op in self._still_open():
            kind = op.kind
            if kind == "h2d":
                for read in op.host_reads:
                    if read.lo < hi and lo < read.hi:        # else no element is shared
                        self._race(op, HOST_WRITE_PENDING_UPLOAD, read, span,
                                   f"host write ({by})")
            elif kind == "d2h":
                for written in op.host_writes:
                    if written.lo < hi and lo < written.hi:
                        self._race(op, HOST_WRITE_PENDING_DOWNLOAD, written, span,
                                   f"host write ({by})")

    def host_read(self, span: Span, by: str) -> None:
        """The host read ``span`` (pinned memory a pending download writes: a hazard)."""
        lo, hi = span.lo, span.hi
        if hi <= lo:
            return
        for op in self._still_open():
            if op.kind == "d2h":
                for written in op.host_writes:
                    if written.lo < hi and lo < written.hi:  # else no element is shared
                        self._race(op, HOST_TOUCH_PENDING_DOWNLOAD, written, span,
                                   f"host read ({by})")
                        self._note_stale(op, written, span)

    def _note_stale(self, op: Op, written: Span, read: Span) -> None:
        """The host read elements of ``op``'s destination before it landed: what it read
        is kept, so that once the download runs (the CPU model) a value it then changes
        is a stale read (``stale_reads``), a race with an effect whatever is observed."""
        if op.snapshot is None or op.done:
            return
        shared = written.shared(read)
        dst = op.snapshot[1]
        with import_torch()._C.DisableTorchFunction():
            if not shared or not dst.is_contiguous():
                return
            base, item = dst.data_ptr(), dst.element_size()
            positions = [(a - base) // item for a in shared[:64]]
            values = dst.reshape(-1)[positions].tolist()
        region, slots, row = self.describe_in_rows(Span(shared[0], shared[-1] + item, item,
                                                        tuple(shared)))
        op.stale.append((self.location, region, list(slots)[:64] or positions, positions,
                         values, row))

    def _check_stale(self, op: Op) -> None:
        """Download ``op`` has landed (the CPU model: it has just run; CUDA: the host has
        just learnt it): a value the host read before it did that it changed is a stale
        read."""
        with import_torch()._C.DisableTorchFunction():
            flat = op.snapshot[1].reshape(-1)
            for location, region, slots, positions, values, row in op.stale:
                now = flat[positions].tolist()
                if now != values:
                    bad = [k for k, (a, b) in enumerate(zip(values, now)) if a != b]
                    self.stale_reads.append({
                        "where": location, "region": region, "pending": op.describe(),
                        "slots": [slots[k] for k in bad if k < len(slots)],
                        "read": [values[k] for k in bad], "written": [now[k] for k in bad],
                        "row": row})
        op.stale = []

    def _note_device_owned(self, op: Op) -> None:
        """Copy ``op`` of pinned memory, being issued: the bytes of it that an open
        download may still write (``Op.device_owned``), and, of an upload, those that a
        download the device orders before it and that has not landed writes (``Op.fed``:
        the upload reads what that download delivers)."""
        for other in self._still_open():
            if other.kind == "d2h":
                for span in other.host_writes:
                    if any(h.overlaps(span) for h in op.host_reads + op.host_writes):
                        op.device_owned.append(span)
                        if op.host_reads and not self._landed(other) and \
                                covers(op.clock, other.stream.id, other.seq):
                            op.fed.append(span)

    def _note_landed(self, op: Op) -> None:
        """Download ``op`` into pinned memory has just run (the CPU model): the values it
        wrote, which must not depend on when copies completed (``readback_as_written``)."""
        with import_torch()._C.DisableTorchFunction():
            fast = op.fast
            values = fast[2].tolist() if fast is not None else op.snapshot[1].tolist()
        self.landed.append((op, values))

    @staticmethod
    def _same(before, now) -> bool:
        """Whether two host tensors hold the same values (a NaN where a NaN was is no
        change: fresh memory is poisoned with NaN, and nothing wrote it)."""
        torch = import_torch()
        with torch._C.DisableTorchFunction():
            if torch.equal(before, now):
                return True
            if not before.is_floating_point():
                return False
            return bool(((before == now) | (before.isnan() & now.isnan())).all())

    @staticmethod
    def _changed(before, now) -> list[int]:
        torch = import_torch()
        with torch._C.DisableTorchFunction():
            if torch.equal(before, now):
                return []
            differs = before != now
            if before.is_floating_point():      # NaN where NaN was: unchanged
                differs &= ~(before.isnan() & now.isnan())
            return [int(i) for i in torch.nonzero(differs.reshape(-1)).reshape(-1).tolist()]

    def unlanded(self) -> tuple[str, ...]:
        """The downloads into pinned memory the host has not seen land (described); one
        of nothing (an empty batch's) changes nothing there and is left out."""
        return tuple(op.describe() for op in self._still_open()
                     if op.kind == "d2h" and op.host_writes
                     and not all(span.empty for span in op.host_writes))

    def host_pending(self) -> bool:
        """Whether a copy the host has not seen complete reads or writes pinned memory (an
        upload from it, a download into it): only then can a host access race."""
        for op in self._still_open():
            if op.host_reads or op.host_writes:
                return True
        return False

    def pending_reads(self, span: Span) -> tuple[int, ...]:
        """The slots of ``span`` (of its region) that an upload the host has not seen
        complete still reads: a host write there races with it."""
        region = self.regions.of(span)
        found: set[int] = set()
        for op in self._still_open():
            if op.kind == "h2d":
                for read in op.host_reads:
                    if read.overlaps(span):
                        shared = span.shared(read)
                        if region is not None:
                            found.update(region.slots(Span(shared[0], shared[-1] + span.item,
                                                           span.item, tuple(shared))))
        return tuple(sorted(found))

    def sweep(self) -> None:
        """Host writes no interception saw (a raw numpy write): compare the pinned memory
        of every copy still open with what it held when issued (an upload's source, a
        download's destination not yet landed). Called wherever the host may learn that a
        copy completed (a synchronization, an event query) and between the operations of a
        protocol, so a changed value is seen before the host could know the copy done."""
        held: dict = {}       # the bytes of memory compared by bytes, read once a sweep
        for op in self._still_open():
            if op.snapshot is None or (op.done and op.kind == "d2h"):
                continue      # a download the CPU model ran has landed: nothing to race
            fast = op.fast
            if fast is not None:
                key, before, view = fast
                now = held.get(key)
                if now is None:
                    now = held[key] = view.tobytes()
                if now == before:
                    continue              # nothing changed: no race to look for
            else:
                before, now = op.snapshot
                if self._same(before, now):
                    continue              # nothing changed: no race to look for
            if op.kind == "d2h":
                self.download_touched(op)
            elif op.kind == "h2d" and op.host_reads:
                # the same bytes as at a sweep that found no race, with no more memory a
                # download may write: the same answer (``_host_changes`` depends on these
                # alone), so it is not worked out again at every sweep while the upload
                # stays open
                quiet = (now, len(op.device_owned)) if fast is not None else None
                if quiet is not None and op.quiet == quiet:
                    continue
                touched = self._host_changes(op, op.host_reads[0])
                if touched is not None:
                    self._race(op, HOST_WRITE_PENDING_UPLOAD, op.host_reads[0], touched,
                               "host write (seen as a changed value)")
                else:
                    op.quiet = quiet

    def _host_changes(self, op: Op, span: Span) -> Span | None:
        """The elements of ``op``'s pinned ``span`` that changed since it was issued, less
        those a later download may have written (None: none)."""
        changed = self._changed(self._snapshot(op), op.snapshot[1])
        if not changed:
            return None
        if span.elements is None:
            picked = [span.lo + i * span.item for i in changed]
        else:
            picked = list(span.elements)
        if op.device_owned:
            picked = [a for a in picked
                      if not any(o.lo <= a < o.hi for o in op.device_owned)]
        if not picked:
            return None
        return Span(picked[0], picked[-1] + span.item, span.item, tuple(picked))

    def _snapshot(self, op: Op):
        """What ``op``'s pinned memory held when it was issued: where only its bytes were
        kept (``Op.fast``), a copy made from them once, when first needed."""
        before, now = op.snapshot
        if before is None:
            before = self._clone(now)
            memoryview(before.numpy().reshape(-1).view("u1"))[:] = op.fast[1]
            op.snapshot = (before, now)
        return before

    def download_touched(self, op: Op) -> None:
        """A download into pinned memory that has not landed: host writes into its
        destination since it was issued (seen as changed values) race with it."""
        if op.snapshot is None or self._landed(op):
            return
        if op.fast is not None and op.fast[2].tobytes() == op.fast[1]:
            return                        # nothing changed
        touched = self._host_changes(op, op.host_writes[0])
        if touched is not None:
            self._race(op, HOST_WRITE_PENDING_DOWNLOAD, op.host_writes[0], touched,
                       "host write (seen as a changed value)")

    def _landed(self, op: Op) -> bool:
        """Whether a copy has run (the CPU model knows; CUDA asks its event)."""
        return op.done

    def _learn(self, clock: dict) -> None:
        if any(self._host.get(k, 0) < v for k, v in clock.items()):
            self._host = join(self._host, clock)
            self._pruned = False

    def _known(self, op: Op) -> bool:
        return covers(self._host, op.stream.id, op.seq)

    def _still_open(self) -> list[Op]:
        if self._open and not self._pruned:
            self._open = [op for op in self._open if not self._known(op)]
            self._pruned = True
        return self._open

    def _race_at_issue(self, new: Op) -> None:
        """``new`` against every open operation not ordered before it."""
        clock, name = new.clock, None
        dev_reads, dev_writes = self._reads_at_issue(new), new.dev_writes
        host_reads, host_writes = new.host_reads, new.host_writes
        work = new.kind == "kernel"
        for old in self._still_open():
            if old is new or clock.get(old.stream.id, 0) >= old.seq:    # ordered before
                continue
            if work and (old.dev_reads or old.dev_writes):
                new.unordered.append(old)   # what its writes seen as it runs may race with
            # ``new`` is described (its name fixed) at the first pair it is checked on; a
            # pair of spans that share no byte is skipped here (``_race`` would find none)
            if dev_reads and old.dev_writes:
                name = name or new.describe()
                for read in dev_reads:
                    for written in old.dev_writes:
                        if written.lo < read.hi and read.lo < written.hi:
                            self._race(old, DEVICE_READ_PENDING_WRITE, written, read,
                                       name + " reads it")
            if dev_writes and (old.dev_writes or old.dev_reads):
                name = name or new.describe()
                held = old.dev_writes + self._reads_so_far(old)
                for written in dev_writes:
                    for other in held:
                        if other.lo < written.hi and written.lo < other.hi:
                            self._race(old, DEVICE_READ_PENDING_WRITE, other, written,
                                       name + " overwrites it")
            if host_writes and (old.host_reads or old.host_writes):
                name = name or new.describe()
                for written in host_writes:
                    for other in old.host_reads + old.host_writes:
                        if other.lo < written.hi and written.lo < other.hi:
                            self._race(old, PINNED_REUSED_PENDING_COPY, other, written,
                                       name + " writes it")
            if host_reads and old.host_writes:
                name = name or new.describe()
                for read in host_reads:
                    for other in old.host_writes:
                        if other.lo < read.hi and read.lo < other.hi:
                            self._race(old, PINNED_REUSED_PENDING_COPY, other, read,
                                       name + " reads it")

    def _race(self, pending: Op, kind: str, held: Span, touched: Span, by: str,
              at: tuple = ()) -> None:
        """Report that ``touched`` raced with ``pending``, which still holds ``held``: the
        elements of ``held`` that ``touched`` covers, once per pending operation."""
        if not held.overlaps(touched):
            return
        shared = held.shared(touched)
        if not shared:
            return
        region, slots, row = self.describe_in_rows(Span(shared[0], shared[-1] + held.item,
                                                        held.item, tuple(shared)))
        if not slots:       # memory without a name: elements counted from the held range
            slots = tuple(sorted({(a - held.lo) // held.item for a in shared}))
        fresh = tuple(s for s in slots if (kind, region, s) not in pending.reported)
        if slots and not fresh:
            return
        pending.reported.update((kind, region, s) for s in slots)
        forced = pending.forced if kind == HOST_WRITE_PENDING_UPLOAD else ""
        self.hazards.append(Hazard(kind, region, fresh or slots, pending.describe(), by, row,
                                   tuple(at) if at and tuple(at) != tuple(self.location)
                                   else (), forced))

    def _writes_against_earlier(self, op: Op) -> None:
        """Device work ``op`` has run: the device memory it was seen to write (not known
        when it was issued) against the operations issued before it that it is not ordered
        after and the host had not seen complete (``Op.unordered``): a copy still reading
        or writing that memory races with it (a download on a copy stream that the next
        step's sampling overwrites)."""
        if not op.dev_writes or not op.unordered:
            return
        name = None
        for old in op.unordered:
            for written in op.dev_writes:
                for other in old.dev_reads + old.dev_writes:
                    if other.lo < written.hi and written.lo < other.hi:
                        name = name or op.describe()
                        self._race(old, DEVICE_READ_PENDING_WRITE, other, written,
                                   name + " overwrites it", op.location)

    #: whether device work's reads of its arguments, once it ran, stand for the whole
    #: arguments in races with what was issued after its launch (the CPU model, which
    #: runs the work itself; the CUDA backend learns them only when the run ends)
    judges_reads_when_run = False

    def _reads_so_far(self, op: Op) -> list[Span]:
        """What device work ``op`` reads, for a race with a write issued after its
        launch: its arguments' spans (what it may read), or, where the model judges reads
        when the work ran, the elements it read of each argument whose reads it notes
        (none yet if it has not run: ``_after_work`` judges them then)."""
        if not (self.judges_reads_when_run and op.kind == "kernel" and op.touched):
            return op.dev_reads
        noted = {id(span): (span, seen) for span, seen, _ in op.touched.values()}
        out = []
        for span in op.dev_reads:
            if id(span) not in noted:
                out.append(span)
            elif op.done and noted[id(span)][1]:
                out.append(_elements(*noted[id(span)]))
        return out

    def _reads_at_issue(self, op: Op) -> list[Span]:
        """What ``op`` reads of device memory, against the writes open at its issue: its
        spans, less, of device work, the arguments whose reads it notes where the model
        judges reads when the work ran (``_after_work`` judges the elements it read
        against ``Op.unordered`` then: a load still pending into a block the work never
        indexes is no race)."""
        if not (self.judges_reads_when_run and op.kind == "kernel" and op.touched):
            return op.dev_reads
        noted = {id(span) for span, _, _ in op.touched.values()}
        return [span for span in op.dev_reads if id(span) not in noted]

    def _after_work(self, op: Op) -> None:
        """Device work ``op`` ran: what it wrote, and the elements it read of arguments
        whose reads it notes, against operations issued after it that are not ordered
        after it and touch the same device memory (a race, whichever ran first)."""
        read = [_elements(span, seen) for span, seen, _ in op.touched.values() if seen] \
            if self.judges_reads_when_run else []
        for old in op.unordered if read else ():      # writes open and unordered at issue
            for written in old.dev_writes:
                for span in read:
                    self._race(old, DEVICE_READ_PENDING_WRITE, written, span,
                               op.describe() + " reads it", op.location)
        for later in self._issued:
            # issued after ``op`` ran or not: the host had not seen ``op`` complete then
            if later.index <= op.index or covers(later.clock, op.stream.id, op.seq):
                continue
            for written in op.dev_writes:
                for other in later.dev_reads + later.dev_writes:
                    self._race(op, DEVICE_READ_PENDING_WRITE, written, other,
                               later.describe() + (" reads it" if other in later.dev_reads
                                                   else " overwrites it"), later.location)
            for other in later.dev_writes if read else ():
                for span in read:
                    self._race(op, DEVICE_READ_PENDING_WRITE, span, other,
                               later.describe() + " overwrites it", later.location)


def _elements(span: Span, seen: set) -> Span:
    """The elements (flat indices ``seen``) of contiguous argument ``span`` as a span."""
    if len(seen) * span.item >= span.hi - span.lo:
        return span
    return Span.of_elements(span.lo, span.item, sorted(seen))
