"""Which slots of a staged buffer's host side a write wrote (``instrumented.py`` logs
them): an index, a slice, a mask or an index array of a numpy or torch call, taken
along the buffer's one dimension. What cannot be read is taken as every element (a
write is never missed); a mask or index that selects nothing is no write; a view of
any shape writes the slots its elements lie on. And ``RecordingFlat``, the ``.flat`` of a
recording view, whose assignments are logged. numpy only: torch comes in as an argument
where a torch call is read."""

from __future__ import annotations

import numpy as np

from stagecheck.spec.observation import HostWrite

__all__ = ["FIRST_ARGUMENT_WRITERS", "RecordingFlat", "masked", "one_slot_write", "slots_of",
           "tensor_key", "view_slots"]


def slots_of(view_offset: int, view_stride: int, length: int, key) -> tuple[int, ...]:
    """The buffer's slots that ``key`` selects of a view of ``length`` elements that
    starts at slot ``view_offset``, ``view_stride`` slots apart (every element of the view
    where ``key`` cannot index it)."""
    if isinstance(key, (int, np.integer)) and not isinstance(key, bool):
        k = int(key)
        if k < 0:
            k += length
        return (view_offset + k * view_stride,)
    try:
        local = np.arange(length)[key]
    except Exception:
        local = np.arange(length)
    return tuple(int(view_offset + j * view_stride) for j in np.atleast_1d(local))


def view_slots(offset: int, strides: tuple[int, ...], shape: tuple[int, ...], key,
               flat: bool = False) -> tuple[int, ...]:
    """``slots_of`` for a view of any shape (``strides`` in elements): a reshaped or
    unsqueezed view of the buffer writes the slots its elements lie on; ``flat``: ``key``
    indexes the view's elements in order (``ndarray.flat``)."""
    if len(shape) == 1 and not flat:
        return slots_of(offset, strides[0], shape[0], key)
    grid = np.asarray(offset, dtype=np.int64)
    for axis, (length, stride) in enumerate(zip(shape, strides)):
        grid = grid + np.arange(length, dtype=np.int64).reshape(
            [-1 if d == axis else 1 for d in range(len(shape))]) * stride
    if flat:
        grid = grid.reshape(-1)
    try:
        chosen = grid[key]
    except Exception:         # a key numpy took but this cannot read: every element
        chosen = grid
    return tuple(int(x) for x in np.unique(np.asarray(chosen).reshape(-1)))


#: numpy functions that write into their first argument (``RecordingArray``), and where
#: each takes the mask of what it writes (its position and keyword; absent: every element)
FIRST_ARGUMENT_WRITERS = {np.copyto: (3, "where"), np.putmask: (1, "mask"),
                          np.place: (1, "mask")}


def _selected(mask, shape: tuple[int, ...]) -> np.ndarray:
    """The positions a boolean ``mask``, broadcast to ``shape``, selects."""
    return np.flatnonzero(np.broadcast_to(np.asarray(mask, dtype=bool), shape))


def masked(func, written: np.ndarray, args, kwargs):
    """The key of what ``func`` wrote into ``written`` (1-D): the positions its mask
    selects; every element where it has none or the mask cannot be read."""
    at, name = FIRST_ARGUMENT_WRITERS[func]
    mask = args[at] if len(args) > at else kwargs.get(name, True)
    try:
        return _selected(mask, written.shape)
    except Exception:         # a mask numpy took but this cannot read: every element
        return slice(None)


def tensor_key(torch, name: str, args, target):
    """What an in-place torch call ``name`` wrote of ``target`` (its first argument), as
    a key of ``view_slots``: an assignment's own key; of a 1-D ``target``, the positions a
    tensor or list key, a mask or an index along dim 0 selects (none: no write); every
    element otherwise or when they cannot be read."""
    def plain(value):
        if isinstance(value, torch.Tensor):
            return value.detach().cpu().numpy()
        return np.asarray(value)

    one_dim = target.dim() == 1
    try:
        if name == "__setitem__":
            key = args[1]
            if not isinstance(key, (torch.Tensor, list)):
                return key
            return plain(key) if one_dim else slice(None)
        if not one_dim:
            return slice(None)
        if name in ("masked_fill_", "masked_scatter_"):
            return _selected(plain(args[1]), target.shape)
        if name in ("index_fill_", "index_copy_", "index_add_", "index_reduce_", "scatter_",
                    "scatter_add_", "scatter_reduce_") and int(args[1]) in (0, -1):
            return plain(args[2]).astype(np.intp).reshape(-1)
        if name == "index_put_" and len(args[1]) == 1:
            index = plain(args[1][0])
            return np.flatnonzero(index) if index.dtype == bool else \
                index.astype(np.intp).reshape(-1)
    except Exception:         # arguments torch took but this cannot read: every element
        pass
    return slice(None)


class RecordingFlat:
    """``RecordingArray.flat``: numpy's flat iterator of the array, whose item and slice
    assignments are logged (the array's ``_note``) as writes of the elements they reach."""

    def __init__(self, array) -> None:
        self._array = array
        self._flat = np.ndarray.flat.__get__(array)

    def __setitem__(self, key, value) -> None:
        self._flat[key] = value
        self._array._note(key, flat=True)

    def __getitem__(self, key):
        return self._flat[key]

    def __iter__(self):
        return iter(self._flat)

    def __len__(self) -> int:
        return len(self._flat)

    def __array__(self, dtype=None, copy=None):
        return np.asarray(self._flat.copy(), dtype=dtype)

    def __getattr__(self, name):
        return getattr(self._flat, name)


#: (buffer, slot) -> the (frozen, shared) event of a write of that slot through ``.np``
_ONE_SLOT_WRITES: dict[tuple[str, int], HostWrite] = {}
#: entries ``_ONE_SLOT_WRITES`` holds at most (the buffers of a schema at full capacity)
_ONE_SLOT_WRITES_KEPT = 1 << 16


def one_slot_write(name: str, slot: int) -> HostWrite:
    """The event of a write of slot ``slot`` of buffer ``name`` through ``.np`` with nothing
    pending (events are frozen: one object serves every such write)."""
    event = _ONE_SLOT_WRITES.get((name, slot))
    if event is None:
        if len(_ONE_SLOT_WRITES) >= _ONE_SLOT_WRITES_KEPT:
            _ONE_SLOT_WRITES.clear()
        event = _ONE_SLOT_WRITES[(name, slot)] = HostWrite(name, (slot,), "np", False, ())
    return event
