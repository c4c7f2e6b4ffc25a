"""What the host meant device work to read, and what it read.

When device work is launched, the model notes, for each element it reads, the value of the
host memory that the last upload into that element (issued before the launch) reads: what
the host meant the work to see (where the host already knew that upload complete: what
the memory held when it was issued, so that the host may reuse the memory once it knows).
Where that upload reads pinned memory a download the device orders before it fills (and
that has not landed at the launch), the work reads what the download delivers: nothing the
host meant is checked there. After the run, every element that no operation wrote
between that upload and the launch must have been read with that value; the others are
``mismatches`` (a consumer launched before the uploads it reads, an upload that ran late
and read bytes the host wrote after the launch).
"""

from __future__ import annotations

from stagecheck.oracles.device.order import covers
from stagecheck.oracles.device.spans import Span

__all__ = ["HostIntent"]

#: a source of at most this many elements is read whole (cheaper than a view of it)
SMALL = 256


class _FromDevice:
    """What an upload reads from pinned memory that a download ordered before it fills:
    the device's value, not one the host meant."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "FROM_DEVICE"


FROM_DEVICE = _FromDevice()


class _Later:
    """What the host meant device work to read of the state's memory it was not given
    (``launch``'s held memory), kept as what ``_intent`` reads at the launch and worked
    out only if the work read any of it (most never does): the arguments of ``_intent``,
    the host's clock then, and the bytes then of the host memory each upload into the
    storage issued by then reads (``_sources``; none of them changes after its issue)."""

    __slots__ = ("args", "host", "bytes")

    def __init__(self, args: tuple, host: dict, now: dict) -> None:
        self.args, self.host, self.bytes = args, host, now


class HostIntent:
    """Mixin of ``DeviceModel``: what the host meant (module doc)."""

    #: whether what the host meant of the state's memory that device work is not given
    #: is worked out only where the work read it (``_Later``; the CPU model)
    defers_held = False

    def _note_upload(self, storage: int, op) -> None:
        """Upload ``op`` into device ``storage`` was issued: listed by that storage, and
        the host memory it reads (its ``Op.fast`` key and view; None for the storage once
        one upload into it is not read by its bytes: ``_intent_later`` then works it out
        at once)."""
        uploads = self._uploads.get(storage)
        if uploads is None:
            self._uploads[storage] = [op]
            self._sources[storage] = {}
            self._pending[storage] = [op]
        else:
            uploads.append(op)
            self._pending[storage].append(op)
        sources = self._sources[storage]
        if sources is not None:
            fast = op.fast
            if fast is None:
                self._sources[storage] = None
            else:
                sources[fast[0]] = fast[2]

    def _intent_later(self, before: int, count: int, item: int, lo: int, storage: int):
        """``_intent``, or what it needs of this moment to be worked out later
        (``_Later``); at once where an upload into ``storage`` is not read by its bytes."""
        sources = self._sources.get(storage, {})
        if sources is None:
            return self._intent(before, count, item, lo, storage)
        return _Later((before, count, item, lo, storage), self._host,
                      {key: view.tobytes() for key, view in sources.items()})

    def _intent(self, before: int, count: int, item: int, lo: int, storage: int,
                then: _Later | None = None):
        """For each of the ``count`` elements (of ``item`` bytes) of a contiguous device
        tensor from address ``lo`` on (in ``storage``): the value of the host memory that
        the last upload into it, issued before op ``before``, reads, and that upload's
        index (None, None where no upload wrote it). The caller (``launch``, which read
        the tensor's metadata) has torch function handling off. ``then``: worked out now
        as it would have been when ``then`` was taken (the host's clock and the host
        memory as they were then)."""
        values: list = [None] * count
        sources: list = [None] * count
        alternates: dict = {}
        uploads = self._uploads.get(storage)
        if not uploads:
            return values, sources, lo, item, alternates
        left = count
        end = lo + count * item
        for up in reversed(uploads):
            if left == 0:
                break
            if up.index >= before:
                continue
            dst = up.dev_writes[0]
            first, last = max(dst.lo, lo), min(dst.hi, end)
            if first >= last or dst.elements is not None or dst.item != item:
                continue
            p0, p1 = (first - lo) // item, (last - lo) // item
            if left < count and None not in sources[p0:p1]:
                continue            # a later upload wrote each of them: nothing to take
            q0 = (first - dst.lo) // item
            held = _held_now(up, q0, p1 - p0) if then is None else \
                _held_then(up, q0, p1 - p0, then.bytes)
            if held is None:
                continue
            if self._known(up) if then is None else \
                    covers(then.host, up.stream.id, up.seq):
                # the host knew it complete: it read what the memory held at its issue
                # (a host write between was a hazard, reported as such), and the host
                # may have reused the memory since; what it holds now is kept beside,
                # meant instead where the next upload delivers it (``check_intents``)
                issued = self._issued_values(up, q0, p1 - p0)
                if issued != held:
                    base = up.snapshot[1].data_ptr() + q0 * item
                    for j, (a, b) in enumerate(zip(issued, held)):
                        if a != b and sources[p0 + j] is None and not \
                                self._downloaded_into(base + j * item, item, up.index,
                                                      before):
                            alternates[p0 + j] = b
                held = issued
            if up.fed:
                held = self._device_delivered(up, q0, held, item)
            left = _take(values, sources, held, p0, p1, up.index, left, count)
        return values, sources, lo, item, alternates

    def _intent_in_place(self, read, count: int, lo: int, item: int):
        """``_intent`` of pinned memory device work reads in place (``read``: the op that
        stands for that read, ``_read_directly``): what the memory holds at the launch."""
        return self._issued_values(read, 0, count), [read.index] * count, lo, item, {}

    def _held_by_state(self, reads: dict, spans: list) -> dict:
        """Device memory of the state that device work may read without being given it
        (``self.block_table.gpu`` in a method of the block table): each tensor named
        after a path of the state that an upload the host has not seen complete writes,
        and that no argument (``spans``) overlaps, by its name; what the work reads of it
        is compared with what the host meant, as for an argument. (Memory whose uploads
        the host knows complete at the launch is left out, for speed: an upload issued
        later that overwrites it before the work runs is seen only where the work was
        given the memory; the uploads the host knew complete at one launch are dropped
        from ``_pending`` then, since the host never unlearns.)"""
        held: dict = {}
        pending, known = self._pending, self._known
        for (lo, hi), (name, t, storage) in self._state_device.items():
            into = pending.get(storage)
            # an argument's memory (the usual case) is passed over before any torch call
            if into and name not in reads \
                    and not any(s.lo < hi and lo < s.hi for s in spans) \
                    and t.dim() and t.is_contiguous():
                if not known(into[-1]):     # the newest not known complete: held
                    held[name] = t
                    continue
                # the uploads into it the host has not seen complete (it never unlearns)
                left = [up for up in into if not known(up)]
                if len(left) < len(into):
                    pending[storage] = left
                if left:
                    held[name] = t
        return held

    def _issued_values(self, up, q0: int, n: int) -> list:
        """The ``n`` values from ``q0`` on that upload ``up``'s host source held when it
        was issued (``_snapshot``); of integer memory, listed from its bytes at issue
        once per upload (``Op.issued``: they never change)."""
        fast = up.fast
        if fast is None:
            return self._snapshot(up).reshape(-1)[q0:q0 + n].tolist()
        issued = up.issued
        if issued is None:      # a numpy array over the bytes kept (``ndarray``'s own type)
            view = fast[2]
            issued = up.issued = type(view)(view.shape, view.dtype, fast[1]).tolist()
        return issued[q0:q0 + n]

    def _device_delivered(self, up, q0: int, held: list, item: int) -> list:
        """``held`` (the values upload ``up``'s host source is taken to hold, from its
        element ``q0``) with ``FROM_DEVICE`` where a download the device orders before
        ``up``, not landed when ``up`` was issued, writes the source (``Op.fed``): the
        upload reads what that download delivers, not what the host held (a download fed
        back as the next step's input, ordered by an event the current stream waits on)."""
        base = up.snapshot[1].data_ptr() + q0 * item
        out = list(held)
        for j in range(len(out)):
            probe = Span(base + j * item, base + j * item + item, item)
            if any(w.overlaps(probe) for w in up.fed):
                out[j] = FROM_DEVICE
        return out

    def check_intents(self) -> None:
        """After the run: every device work against what the host meant (``mismatches``)."""
        for op in self._work_ops:
            for label, intent in op.intents.items():
                seen = op.seen.get(label)
                if intent is None or seen is None:
                    continue
                if type(intent) is _Later:      # read (``DeviceWork._work``): work it out
                    intent = op.intents[label] = self._intent(*intent.args, then=intent)
                meant, sources, lo, item, alternates = intent
                flat = _flatten(seen)
                bad = []
                # the elements to look at: read, of a known source, and read otherwise
                # than meant or meant otherwise (``alternates``); at every other one the
                # loop below would go on at once
                for p in [p for p, (got, want, source) in enumerate(zip(flat, meant, sources))
                          if source is not None and got is not None
                          and (not got == want or p in alternates)]:
                    want, source = meant[p], sources[p]
                    if p in alternates and self._delivered_later(
                            lo + p * item, item, op.index, alternates[p]):
                        # the host wrote the value again before the launch and the next
                        # upload delivers it: it was prepared for this work, which ran early
                        meant[p] = want = alternates[p]
                    if want is FROM_DEVICE:
                        continue                    # what a download delivers: not the host's
                    if flat[p] == want or self._overwritten(lo + p * item, item, source,
                                                            op.index):
                        continue
                    bad.append(p)
                if bad:
                    region, slots, row = self.describe_in_rows(Span(
                        lo + bad[0] * item, lo + bad[-1] * item + item, item,
                        tuple(lo + p * item for p in bad)))
                    memory = self.regions.at(lo)
                    self.mismatches.append({
                        "where": op.location, "work": op.what, "arg": label,
                        "region": region, "slots": list(slots) or bad, "row": row,
                        "meant": [meant[p] for p in bad], "read": [flat[p] for p in bad],
                        # pinned memory it read in place (no copy between)
                        "in_place": memory is not None and memory.kind == "pinned"})

    def _delivered_later(self, address: int, item: int, launch: int, value) -> bool:
        """Whether the first upload into device ``address`` issued after op ``launch``
        read ``value`` there (what the host held at the launch: prepared for the work)."""
        for up in self._issued:
            if up.index <= launch or up.kind != "h2d" or up.snapshot is None:
                continue
            dst = up.dev_writes[0]
            if not (dst.lo <= address < dst.hi) or dst.elements is not None \
                    or dst.item != item:
                continue
            issued = self._snapshot(up).reshape(-1)
            q = (address - dst.lo) // item
            return q < issued.numel() and issued[q].item() == value
        return False

    def _downloaded_into(self, address: int, item: int, after: int, before: int) -> bool:
        """Whether a download issued after op ``after`` and before op ``before`` writes
        host ``address`` (a value there came from the device, not from the host)."""
        probe = Span(address, address + item, item)
        for op in reversed(self._issued):
            if op.index <= after:
                return False
            if op.index >= before:
                continue
            if op.kind == "d2h" and any(w.overlaps(probe) for w in op.host_writes):
                return True
        return False

    def _overwritten(self, address: int, item: int, after: int, before: int) -> bool:
        """Whether an op issued between ``after`` and ``before`` wrote ``address``."""
        probe = Span(address, address + item, item)
        for op in self._writers:
            if after < op.index < before and any(w.overlaps(probe) for w in op.dev_writes):
                return True
        return False


def _held_now(up, q0: int, n: int) -> list | None:
    """The ``n`` values from ``q0`` on of the host memory upload ``up`` reads, as it holds
    them now (None: memory not read as one run)."""
    fast = up.fast
    if fast is not None:    # integer memory: read through its numpy view
        flat = fast[2]          # flat already (``model._bytes_view``)
        return flat.tolist()[q0:q0 + n] if flat.size <= SMALL else flat[q0:q0 + n].tolist()
    src = up.snapshot[1]
    if not src.is_contiguous():
        return None
    if src.numel() <= SMALL:      # all of it as a list, then the part wanted
        return (src.tolist() if src.dim() == 1 else src.reshape(-1).tolist())[q0:q0 + n]
    flat = src if src.dim() == 1 else src.reshape(-1)
    return flat[q0:q0 + n].tolist()


def _held_then(up, q0: int, n: int, then: dict) -> list:
    """``_held_now`` as it was when ``then`` (``_Later.bytes``) was taken: the host memory
    of integer upload ``up`` (``Op.fast``), read from its bytes then."""
    key, _, view = up.fast
    return type(view)(view.shape, view.dtype, then[key]).tolist()[q0:q0 + n]


#: the kinds of values a tensor's ``tolist`` gives (and None: an element not read)
_FLAT_KINDS = frozenset({int, float, bool, type(None)})


def _flatten(values) -> list:
    if type(values) is list:
        kinds = set(map(type, values))
        if kinds <= _FLAT_KINDS or not any(issubclass(kind, list) for kind in kinds):
            return values                 # flat already (the values of a 1-D tensor)
    if isinstance(values, list):
        out: list = []
        for v in values:
            out.extend(_flatten(v) if isinstance(v, list) else [v])
        return out
    return [values]


def _take(values: list, sources: list, held: list, p0: int, p1: int, index: int, left: int,
          count: int) -> int:
    """Positions ``p0 .. p1`` of ``values`` get ``held`` (what upload ``index`` wrote
    there) where no later upload was found for them yet; the count of positions left."""
    if left == count and len(held) == p1 - p0:      # nothing found yet: all new
        values[p0:p1] = held
        sources[p0:p1] = [index] * (p1 - p0)
        return left - (p1 - p0)
    for p in range(p0, p1):
        if sources[p] is None:
            values[p], sources[p] = held[p - p0], index
            left -= 1
    return left
