"""Every form of copy between a staged buffer's host side and its mirror is one ``Copy``.

Staging code copies a paired buffer's host range into its mirror in many spellings:
``buf.copy_to_gpu(n)``, ``buf.gpu[:n].copy_(buf.cpu[:n], non_blocking=True)`` (any slice
or view), ``buf.gpu[:n] = buf.cpu[:n]``, ``buf.gpu[:n] = buf.cpu[:n].to(device,
non_blocking=True)`` (a device tensor made from the host range, then assigned), a copy from
``torch.from_numpy(buf.np[:n])``, helpers built on these. What makes each one a copy of
buffer ``X`` over ``[a, b)`` is where its two tensors lie: the destination is slots
``[a, b)`` of ``X``'s mirror, and the source is slots ``[a, b)`` of ``X``'s host side (or
a device tensor made from them). ``Pairs`` knows where each buffer's two sides lie, by
address, and ``mirror_copy`` applies that rule; the fast and instrumented backends and the
device model all end a copy they recognise in ``buffer.on_copy(start, stop)``.
"""

from __future__ import annotations

from stagecheck.oracles.device.spans import Region, Regions, Span, span_of

__all__ = ["CLONING", "MOVING", "Pairs", "mirror_copy"]

#: tensor methods whose result is a host copy of their host tensor (a clone of a range:
#: ``Pairs.cloned_from``), and those whose result, where new, is a tensor made from it on a
#: device (``Pairs.made_from``; the instrumented buffers take it as a clone too)
CLONING = frozenset({"clone", "pin_memory"})
MOVING = frozenset({"to", "cuda"})


class Pairs:
    """The host side and the mirror of each paired buffer, by address; and device tensors
    made from a host range (``t.to(device)``), by the address of their first element."""

    def __init__(self, regions: Regions | None = None) -> None:
        self.regions = regions if regions is not None else Regions()
        self._made_from: dict[int, tuple[Region, int]] = {}
        #: host tensors cloned from a host range (``buf.cpu[:n].clone()``), by address:
        #: what a copy or a device tensor made from one comes from (never a side itself,
        #: so a write into a clone is no write into the buffer)
        self._clones: dict[int, tuple[Region, int]] = {}
        self._keep: list = []

    def add(self, buffer, host: Span, mirror: Span) -> None:
        """Pair ``buffer``'s host side and mirror (regions ``NAME.cpu`` and ``NAME.gpu``)."""
        self.regions.add(Region(f"{buffer.name}.cpu", "pinned", host.lo,
                                max(host.hi, host.lo + 1), host.item, buffer))
        self.regions.add(Region(f"{buffer.name}.gpu", "device", mirror.lo,
                                max(mirror.hi, mirror.lo + 1), mirror.item, buffer))

    def remove(self, buffer) -> None:
        kept = [r for r in self.regions if r.owner is not buffer]
        self.regions = Regions()
        for r in kept:
            self.regions.add(r)
        self._made_from = {k: v for k, v in self._made_from.items() if v[0].owner is not buffer}
        self._clones = {k: v for k, v in self._clones.items() if v[0].owner is not buffer}

    def made_from(self, device_tensor, source_tensor) -> None:
        """``device_tensor`` was made from ``source_tensor`` (a host range of a buffer, or a
        clone of one)."""
        found = self._host_range(span_of(source_tensor))
        if found is not None:
            self._made_from[span_of(device_tensor).lo] = found
            self._keep.append(device_tensor)

    def cloned_from(self, clone, source_tensor, found=None) -> None:
        """Host tensor ``clone`` was cloned from ``source_tensor`` (a host range of a
        buffer): a copy of it, or a device tensor made from it, is of that range
        (``found``: ``host_range(source_tensor)``, where the caller took it earlier)."""
        found = found or self._host_range(span_of(source_tensor))
        if found is not None:
            self._clones[span_of(clone).lo] = found
            self._keep.append(clone)

    def host_range(self, tensor) -> tuple[Region, int] | None:
        """The host side ``tensor`` lies in (or that a clone there was cloned from) and the
        slot it starts at."""
        return self._host_range(span_of(tensor))

    def _host_range(self, src: Span) -> tuple[Region, int] | None:
        """The host side ``src`` lies in (or that a clone there was cloned from) and the
        slot it starts at; an empty range starts at the slot its address is at (all empty
        tensors may share one address: the latest made is the one a copy uses next)."""
        region = self.regions.of(src)
        if region is not None and region.kind == "pinned":
            slots = region.slots(src)
            return region, slots[0] if slots else region.first(src)
        return self._clones.get(src.lo) if region is None else None

    def side(self, span: Span) -> tuple[Region, tuple[int, ...]] | None:
        """The buffer side ``span`` lies in, and its slots; a device tensor made from a host
        range counts as that range."""
        region = self.regions.of(span)
        if region is not None:
            return region, region.slots(span)
        return _range_of(self._made_from.get(span.lo), span)

    def clone_side(self, span: Span) -> tuple[Region, tuple[int, ...]] | None:
        """``side`` of a clone of a host range: the range it was cloned from."""
        return _range_of(self._clones.get(span.lo), span)

    def first(self, span: Span) -> int | None:
        """The slot ``span`` starts at (an empty one too), made-from tensors and clones
        included."""
        clone = self._clones.get(span.lo)       # a clone first, as in ``mirror_copy``
        region = self.regions.of(span) if clone is None else None
        if region is not None:
            return region.first(span)
        made = clone or self._made_from.get(span.lo)
        return None if made is None else made[1]


def _range_of(made: tuple[Region, int] | None, span: Span):
    """``(region, slots)`` of a tensor made or cloned from a host range (``made``: that
    range's region and first slot), as many slots as ``span`` holds; None for ``made``
    None."""
    if made is None:
        return None
    source, first = made
    return source, tuple(range(first, first + (span.hi - span.lo) // span.item))


def mirror_copy(pairs: Pairs, dst: Span, src: Span):
    """``(buffer, start, stop)`` when copying ``src`` into ``dst`` copies a buffer's host
    slots ``[start, stop)`` into the same slots of its mirror; else None."""
    # a clone first: one pinned (``clone().pin_memory()``) is also a pinned region of its own
    to, frm = pairs.side(dst), pairs.clone_side(src) or pairs.side(src)
    if to is None or frm is None:
        return None
    (region, slots), (source, src_slots) = to, frm
    if region.kind != "device" or source.kind != "pinned" or region.owner is None \
            or region.owner is not source.owner:
        return None
    if dst.empty and src.empty:        # a copy of nothing is still a copy (of no slot)
        start = region.first(dst)
        return (region.owner, start, start) if start == pairs.first(src) else None
    if not slots or slots != src_slots or len(slots) != slots[-1] - slots[0] + 1:
        return None
    return region.owner, slots[0], slots[-1] + 1
