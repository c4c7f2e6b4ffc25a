"""The list-model backend of ``observe``: ``CpuGpuBuffer`` over plain Python lists.

A model offers ``.np``, ``.cpu`` and ``.gpu`` views over two lists (int and slice keys,
``len``, iteration, int32 or bool element semantics of numpy 2 and torch) and
``copy_to_gpu(n=None)``, and logs every host write and copy as the same
``spec.observation`` events the instrumented torch buffer logs. CrossHair can reason
about it (the symbolic oracle), and so can plain Python (the contract models).
Surface it does not offer raises ``ModelUnsupported``, never a behaviour of the target.
"""

from __future__ import annotations

from typing import Any, Callable

from stagecheck.spec.observation import Copy, HostWrite
from stagecheck.spec.schema import INT32_MAX, INT32_MIN
from stagecheck.spec.schema_mistakes import ViewsKept

__all__ = ["ListBackend", "ListBuffer", "ListView", "ModelUnsupported"]


class ModelUnsupported(BaseException):
    """The staging code used buffer surface the list model does not offer.

    A BaseException so that a target's ``except Exception`` cannot swallow it; the
    path it happens on is counted as lost, never as a behaviour of the target.
    """


# --------------------------------------------------------------------------------------
# The list model of CpuGpuBuffer
# --------------------------------------------------------------------------------------

_VIA_LABEL = {"np": "numpy array", "cpu": "torch tensor", "gpu": "device tensor"}


def _is_numpy_value(value: Any) -> bool:
    return type(value).__module__.split(".")[0] == "numpy"


def _is_torch_value(value: Any) -> bool:
    return type(value).__module__.split(".")[0] == "torch"


class ListView:
    """One view (``.np``, ``.cpu`` or ``.gpu``) of a ``ListBuffer``: a window of its list.

    Slicing returns another view of the same storage (writes go through, as with
    numpy and torch); an int key reads or writes one element.
    """

    __slots__ = ("_owner", "_via", "_slots")

    def __init__(self, owner: "ListBuffer", via: str, slots: range) -> None:
        self._owner, self._via, self._slots = owner, via, slots

    # -- reading ----------------------------------------------------------------
    def __len__(self) -> int:
        return len(self._slots)

    def _storage(self) -> list:
        return self._owner._gpu if self._via == "gpu" else self._owner._cpu

    def __iter__(self):
        storage = self._storage()
        for i in self._slots:
            yield storage[i]

    def _index(self, key) -> int:
        if isinstance(key, bool) or not (isinstance(key, int) or _is_numpy_value(key)
                                         and hasattr(key, "__index__")):
            raise ModelUnsupported(f"index {key!r} of type {type(key).__name__} on the list "
                                   f"model of a {_VIA_LABEL[self._via]}")
        k = int(key)
        n = len(self._slots)
        if not -n <= k < n:
            axis = "axis" if self._via == "np" else "dimension"
            raise IndexError(f"index {k} is out of bounds for {axis} 0 with size {n}")
        return self._slots[k]

    def __getitem__(self, key):
        if isinstance(key, slice):
            return ListView(self._owner, self._via, self._slots[key])
        return self._storage()[self._index(key)]

    def tolist(self) -> list:
        return list(self)

    def __array__(self, dtype=None, copy=None):
        self._owner.note_concretized(f"numpy read the {_VIA_LABEL[self._via]} model")
        import numpy as np  # only to make an array: CrossHair explores without numpy
        return np.array(self._owner.realize(list(self)), dtype=dtype or self._owner.dtype)

    def __repr__(self) -> str:
        return f"ListView({self._owner.name}.{self._via}{list(self._slots)})"

    def __getattr__(self, name: str):
        if name.startswith("__"):   # protocol probes (numpy, copy, pickle): "not here"
            raise AttributeError(name)
        raise ModelUnsupported(f".{name} of a {_VIA_LABEL[self._via]} is not offered by the "
                               "list model of CpuGpuBuffer")

    # -- writing ----------------------------------------------------------------
    def __setitem__(self, key, value) -> None:
        if self._via == "gpu":
            raise ModelUnsupported("a host write into .gpu is not offered by the list model")
        if isinstance(key, slice):
            slots = self._slots[key]
            values = self._broadcast(value, len(slots))
        else:
            slots = range(self._index(key), self._index(key) + 1)
            values = [self._owner.convert_scalar(value, self._via)]
        storage = self._owner._cpu
        for i, v in zip(slots, values):
            storage[i] = v
        if len(slots):      # a write of no element is no write (spec.observation.HostWrite)
            self._owner.events.append(HostWrite(self._owner.name, tuple(slots), self._via))

    def fill(self, value) -> None:
        """``ndarray.fill`` of the numpy view: every slot of the view takes ``value``."""
        if self._via != "np":
            raise ModelUnsupported(f".fill of a {_VIA_LABEL[self._via]} is not offered by the "
                                   "list model of CpuGpuBuffer")
        self[:] = value

    def fill_(self, value) -> "ListView":
        """``Tensor.fill_`` of the torch view: every slot of the view takes ``value``."""
        if self._via != "cpu":
            raise ModelUnsupported(f".fill_ of a {_VIA_LABEL[self._via]} is not offered by "
                                   "the list model of CpuGpuBuffer")
        self[:] = value
        return self

    def _broadcast(self, value, n: int) -> list:
        owner = self._owner
        if isinstance(value, ListView):
            if self._via == "cpu":
                raise ModelUnsupported("assigning a view of the list model into .cpu")
            value = list(value)
        if _is_numpy_value(value) and getattr(value, "ndim", 0) >= 1:
            # array-to-array assignment casts unsafely (wraps), as numpy does
            owner.note_concretized("a numpy array was written into the model")
            items = [owner.convert_array_item(v) for v in value.tolist()]
        elif _is_torch_value(value):
            raise ModelUnsupported("writing a torch tensor into the list model")
        elif isinstance(value, (list, tuple)):
            if self._via == "cpu":   # torch takes tensors or scalars there, not sequences
                kind = "BoolTensor" if owner.dtype == "bool" else "IntTensor"
                raise TypeError(f"can't assign a {type(value).__name__} to a torch.{kind}")
            items = [owner.convert_scalar(v, self._via) for v in value]
        else:
            return [owner.convert_scalar(value, self._via)] * n
        if len(items) == 1:
            return items * n
        if len(items) != n:
            if self._via == "np":
                raise ValueError(f"could not broadcast input array from shape ({len(items)},) "
                                 f"into shape ({n},)")
            raise RuntimeError(f"The expanded size of the tensor ({n}) must match the existing "
                               f"size ({len(items)}) at non-singleton dimension 0.  Target "
                               f"sizes: [{n}].  Tensor sizes: [{len(items)}]")
        return items


class ListBuffer(ViewsKept):
    """A ``CpuGpuBuffer`` over two plain lists, logging host writes and copies."""

    def __init__(self, name: str, dtype: str, initial_cpu: list, initial_gpu: list,
                 events: list, on_concretized: Callable[[str], None] | None = None,
                 realize: Callable = lambda values: values) -> None:
        self.name, self.dtype, self.events = name, dtype, events
        self._cpu, self._gpu = list(initial_cpu), list(initial_gpu)
        self._on_concretized = on_concretized
        self.realize = realize
        size = len(self._cpu)
        self.np = ListView(self, "np", range(size))
        self.cpu = ListView(self, "cpu", range(size))
        self.gpu = ListView(self, "gpu", range(size))

    def note_concretized(self, why: str) -> None:
        if self._on_concretized is not None:
            self._on_concretized(why)

    def convert_scalar(self, value, via: str):
        """The element a scalar write stores, or the exception numpy 2 / torch raise."""
        if _is_torch_value(value):
            raise ModelUnsupported("writing a torch tensor into the list model")
        if _is_numpy_value(value):
            value = self._from_numpy_scalar(value)
        if self.dtype == "bool":
            if isinstance(value, bool):
                return value
            if isinstance(value, (int, float)):
                return value != 0
            raise ModelUnsupported(f"writing a {type(value).__name__} into a bool model")
        if isinstance(value, bool):
            return 1 if value else 0
        if isinstance(value, int):
            if not INT32_MIN <= value <= INT32_MAX:
                if via == "cpu":
                    raise RuntimeError("value cannot be converted to type int without overflow")
                raise OverflowError(f"Python integer {value} out of bounds for int32")
            return value
        if isinstance(value, float):
            if value != value or value in (float("inf"), float("-inf")):
                raise ModelUnsupported("writing a non-finite float into the int32 model")
            as_int = int(value)
            if not INT32_MIN <= as_int <= INT32_MAX:
                raise ModelUnsupported("writing an out-of-range float into the int32 model")
            return as_int
        raise ModelUnsupported(f"writing a {type(value).__name__} into the int32 list model")

    def _from_numpy_scalar(self, value):
        import numpy as np  # only to make an array: CrossHair explores without numpy
        self.note_concretized("a numpy scalar was written into the model")
        if isinstance(value, np.ndarray) and value.ndim == 0:
            value = value[()]
        if isinstance(value, np.bool_):
            return bool(value)
        if isinstance(value, np.integer):
            return int(value)
        if isinstance(value, np.floating):
            return float(value)
        raise ModelUnsupported(f"writing a numpy {type(value).__name__} into the list model")

    def convert_array_item(self, value):
        """One element of a numpy array written into the model: unsafe cast (wraps)."""
        if self.dtype == "bool":
            return bool(value)
        value = int(value)
        return (value + 2**31) % 2**32 - 2**31

    def copy_to_gpu(self, n: int | None = None) -> ListView:
        size = len(self._cpu)
        stop = size if n is None else len(range(size)[:n])
        self.events.append(Copy(self.name, 0, stop, n))
        for i in range(stop):
            self._gpu[i] = self._cpu[i]
        return self.gpu[:stop]

    def complete_copies(self) -> None:
        """Copies of the model execute when issued: nothing is ever pending."""

    def release(self) -> None:
        """Nothing to release."""

    def final_cpu(self) -> list:
        return list(self._cpu)

    def final_gpu(self) -> list:
        return list(self._gpu)


class ListBackend:
    """The ``observe`` backend of list models.

    ``on_concretized`` hears when numpy made model values concrete; ``realize``
    turns symbolic values concrete where numpy needs them; ``machinery`` says which
    exceptions belong to the caller (CrossHair's control flow) and pass through.
    """

    device = "cpu"

    def __init__(self, on_concretized: Callable[[str], None] | None = None,
                 realize: Callable = lambda values: values,
                 machinery: Callable[[BaseException], bool] = lambda exc: False) -> None:
        self.on_concretized, self.realize, self.machinery = on_concretized, realize, machinery

    def make_buffer(self, name: str, dtype: str, cpu: list, gpu: list,
                    events: list) -> ListBuffer:
        return ListBuffer(name, dtype, cpu, gpu, events, self.on_concretized, self.realize)

    def passes_through(self, exc: BaseException) -> bool:
        return isinstance(exc, ModelUnsupported) or self.machinery(exc)
