"""Every torch call the code under test makes, routed to the device model.

``DeviceMode`` is a ``torch.overrides.TorchFunctionMode``: while it is active, each torch
function and tensor method call (``torch.zeros``, ``t.copy_``, ``t[...] = v``, ``t.to``,
``t.tolist``...) comes here first. What it does with one:

- a copy between host and device memory, in any form (``dst.copy_(src, non_blocking=)``
  of slices and views, ``t.to(device, non_blocking=)``, ``t.cuda()``, ``t.cpu()``,
  ``t.to("cpu", non_blocking=)``, ``dst[i] = src`` across memories), goes to
  ``model.copy`` / ``to_device`` / ``to_host``;
- a factory asked for device memory (``device="cuda"``, a device object) or pinned memory
  (``pin_memory=True``, ``t.pin_memory()``) gets it from the model; ``is_pinned`` asks it;
- a host read of a device tensor (``tolist``, ``item``, ``int()``, printing) is a blocking
  download first; ``numpy()`` of one raises as torch does; ``numpy()`` of a host tensor
  is a view that reads nothing (vLLM's ``x.to("cpu", non_blocking=True).numpy()`` before
  the event: what is read through the array is judged by its values);
- any other operation on device tensors is device work the host issued
  (``model.device_op``); mixing them with host tensors raises as on CUDA;
- an operation on host tensors is run, and its reads and in-place writes of host memory
  are reported (``host_read`` / ``host_write``: a race with a pending copy is a hazard).

View and metadata calls (slicing, ``view``, ``shape``, ``data_ptr``...) pass through (the
CPU model's device tensors make their shape and their views by a basic index themselves,
without reaching the mode: ``cpu.device_tensor_class``). The model's own torch work runs
with torch function handling off, and device work the model runs (``model.inside``)
passes through untouched.
"""

from __future__ import annotations

from stagecheck.oracles.device.spans import span_of
from stagecheck.oracles.device.torchload import import_torch

__all__ = ["DeviceMode", "basic_index", "is_device_spec"]

#: calls that neither read nor write the elements of a tensor (views and metadata)
VIEWS = frozenset({
    "__get__", "view", "view_as", "reshape", "reshape_as", "narrow", "select", "unsqueeze",
    "squeeze", "flatten", "expand", "expand_as", "permute", "transpose", "t", "contiguous",
    "data_ptr", "size", "dim", "numel", "nelement", "element_size", "stride",
    "storage_offset", "is_contiguous", "untyped_storage", "storage", "__len__",
    "is_floating_point", "is_complex", "requires_grad_", "detach", "as_strided", "unbind",
    "split", "chunk", "__hash__", "get_device", "type", "__iter__", "dtype", "ndimension",
    "is_nonzero", "record_stream", "share_memory_", "is_shared", "retain_grad",
    "__array_priority__", "is_set_to", "_is_view", "_base", "__reduce_ex__", "__deepcopy__",
})
#: calls that read a tensor's values on the host
HOST_READS = frozenset({"tolist", "item", "__int__", "__float__", "__bool__", "__index__",
                        "__format__", "__repr__", "__array__", "__complex__"})


def is_device_spec(device) -> bool:
    """Whether a ``device=`` argument names the accelerator."""
    if device is None:
        return False
    if isinstance(device, int) and not isinstance(device, bool):
        return True
    if type(device) is str:
        return device.startswith("cuda")
    if _torch is not None and type(device) is _torch.device:
        return device.type == "cuda"
    text = str(device)
    return text.startswith("cuda")


#: torch, once a mode class was made (every handler runs after that)
_torch = None
_Tensor = None


def _tensors(values, out: list) -> list:
    Tensor = _Tensor
    for v in values:
        if isinstance(v, Tensor):
            out.append(v)
        elif type(v) is list or type(v) is tuple:
            for w in v:
                if isinstance(w, Tensor):
                    out.append(w)
    return out


_BASIC = (int, slice, type(None), type(Ellipsis), bool)


def basic_index(key) -> bool:
    """Whether indexing with ``key`` makes a view (no tensor or list inside)."""
    if type(key) in _BASIC:
        return True
    if type(key) is tuple:
        return all(type(k) in _BASIC for k in key)
    return False


def _view(t, key):
    with _torch._C.DisableTorchFunction():
        return t[key]


def DeviceMode(model):
    """The interception mode for ``model`` (a context manager; see the module doc)."""
    return _mode_class()(model)


_MODE = None
#: what ``__torch_function__`` does with a call, by its name: pass it through (a view or
#: metadata), or its handler
_PASS = object()
_DISPATCH: dict = {}
_EMPTY: dict = {}


def _mode_class():
    global _MODE, _torch, _Tensor
    if _MODE is not None:
        return _MODE
    _torch = import_torch()
    _Tensor = _torch.Tensor
    TorchFunctionMode = _torch.overrides.TorchFunctionMode
    _DISPATCH.update(dict.fromkeys(VIEWS, _PASS))
    _DISPATCH.update(_HANDLERS)

    class _DeviceMode(TorchFunctionMode):
        def __init__(self, model) -> None:
            super().__init__()
            self.model = model
            # the model's own tensor subclass (the CPU model's device tensors), whose
            # handling is run here, for a call of no other subclass (one dispatch less)
            device = model._device_type()
            self.own, self.call = ((device,), device._stagecheck_call) if device is not None \
                else ((), None)

        def __torch_function__(self, func, types, args=(), kwargs=None):
            model = self.model
            if model.inside:
                running = model.running
                if running is not None:
                    how = _WORK.get(func)
                    if how is None:
                        how = _WORK[func] = _work_kind(getattr(func, "__name__", ""))
                    if how[0] or kwargs:
                        _note_work_write(model, how, args, kwargs or _EMPTY)
                    if running.reading:     # an argument of it not read whole yet
                        reads = how[1]
                        if reads is _INDEX:     # ``t[key]``: a view reads nothing
                            if len(args) < 2:
                                model.read_by_work(_tensors(args, []))
                            elif not basic_index(args[1]):    # what the key picks
                                model.read_picked(args[0], args[1])
                        elif reads is not _NO_READ:
                            model.read_by_work(_tensors(args[reads], []))
                elif model.checking:       # the checker's own read (CUDA: may wait)
                    model.checker_read(func, args)
                if types == self.own and types:
                    return self.call(func, args, kwargs)
                return func(*args, **kwargs) if kwargs else func(*args)
            what = _BY_FUNC.get(func)
            if what is None:
                name = _NAMES[func] = getattr(func, "__name__", "")
                what = _BY_FUNC[func] = _DISPATCH.get(name, _OTHER)
            if what is _PASS or what is _getitem and len(args) > 1 \
                    and basic_index(args[1]):          # a view or metadata: as it is
                if types and (types == self.own or what is _getitem and self.own
                              and type(args[0]) is self.own[0]):
                    return self.call(func, args, kwargs)
                return func(*args, **kwargs) if kwargs else func(*args)
            kwargs = kwargs or {}
            if what is not _OTHER:
                return what(model, func, args, kwargs)
            if "device" in kwargs or kwargs.get("pin_memory"):
                return _factory(model, func, args, kwargs)
            return _generic(model, func, _NAMES[func], args, kwargs)

    _MODE = _DeviceMode
    return _MODE


#: how device work's torch calls are noted, by function: ``_work_kind``'s answer
_WORK: dict = {}
#: torch functions' names, by function
_NAMES: dict = {}
#: what ``__torch_function__`` does with a call outside device work, by function: its
#: entry in ``_DISPATCH``, or ``_OTHER`` (a factory or any other operation)
_BY_FUNC: dict = {}
_OTHER = object()
#: ``_work_kind``: a call that reads no tensor's elements (a view, metadata)
_NO_READ = "none"
#: ``_work_kind``: ``__getitem__``, which reads its tensor unless the index makes a view
_INDEX = "index"


def _work_kind(name: str) -> tuple:
    """How a torch call named ``name`` inside device work is noted: ``(writes, reads)``;
    ``writes``: ``"setitem"``, ``"first"`` (it writes its first argument in place) or ""
    (only an ``out=`` it is given); ``reads``: which of its arguments it reads (not a
    view made, not the destination of a copy or an assignment, not an ``out=``):
    ``_INDEX`` (a ``__getitem__``: its tensor unless the index makes a view),
    ``_NO_READ``, or a slice of its arguments."""
    if name == "__setitem__":
        writes = "setitem"
    elif name == "copy_" or (name[-1:] == "_" and (name[:1] != "_"
                                                   or name.startswith("_foreach_"))):
        writes = "first"        # (a ``_foreach_*_`` op: each tensor of its first list)
    else:
        writes = ""
    if name in VIEWS:
        reads = _NO_READ
    elif name == "__getitem__":
        reads = _INDEX
    elif name == "__setitem__":
        reads = slice(2, 3)
    elif name in ("copy_", "_foreach_copy_"):
        reads = slice(1, 2)
    else:
        reads = slice(None)
    return writes, reads


def _note_work_write(model, how, args, kwargs) -> None:
    """Device work that runs writes a device tensor in place (``how``: ``_work_kind``'s
    answer for the torch call): note it (what it wrote)."""
    target = None
    writes = how[0]
    if writes:
        target = args[0] if args else None
        if type(target) is list or type(target) is tuple:     # a ``_foreach_*_`` op
            for t in _tensors(target, []):
                model.wrote(t)
            return
    elif kwargs:
        out = kwargs.get("out")
        if isinstance(out, _Tensor):
            target = out
    if target is not None and isinstance(target, _Tensor):
        if writes != "setitem":
            model.wrote(target)
        elif basic_index(args[1]):
            model.wrote(_view(target, args[1]))
        else:                   # ``t[blocks, offsets] = v``: only what the key picks
            model.wrote_picked(target, args[1])


# ============================================================================ handlers

def _copy_(model, func, args, kwargs):
    dst, src = args[0], args[1]
    non_blocking = kwargs.get("non_blocking", args[2] if len(args) > 2 else False)
    to, frm = model.memory(dst), model.memory(src)
    if to != "device" and frm != "device":
        return _generic(model, func, "copy_", args, kwargs)
    model.copy(dst, src, bool(non_blocking), to, frm)
    return dst


def _foreach_copy_(model, func, args, kwargs):
    """``torch._foreach_copy_(dsts, srcs)``: one ``copy_`` per pair."""
    if not all(isinstance(t, _Tensor) for t in (*args[0], *args[1])):
        return _generic(model, func, "_foreach_copy_", args, kwargs)    # torch's own error
    non_blocking = kwargs.get("non_blocking", args[2] if len(args) > 2 else False)
    for dst, src in zip(args[0], args[1]):
        _copy_(model, _torch.Tensor.copy_, (dst, src), {"non_blocking": non_blocking})
    return list(args[0])


def _to(model, func, args, kwargs):
    torch = _torch
    t = args[0]
    kw = dict(kwargs)
    copy = kw.pop("copy", False)
    if len(args) > 1 and isinstance(args[1], torch.Tensor):     # t.to(other)
        device, dtype, non_blocking = args[1].device, args[1].dtype, kw.get("non_blocking",
                                                                            False)
    else:
        device, dtype, non_blocking, _ = torch._C._nn._parse_to(*args[1:], **kw)
    return _move(model, func, args, kwargs, t, device, dtype, non_blocking, copy)


def _move(model, func, args, kwargs, t, device, dtype, non_blocking, copy=False):
    here = model.memory(t)
    if device is None:
        return _generic(model, func, "to", args, kwargs)
    if is_device_spec(device):
        if here == "device":
            if dtype is None or dtype == t.dtype:
                return _generic(model, func, "clone", (t,), {}) if copy else t
            return _generic(model, func, "to", (t, dtype), {})
        return model.to_device(t, dtype, bool(non_blocking))
    if here == "device":                                  # a download
        return model.to_host(t, dtype, bool(non_blocking))
    return _generic(model, func, "to", args, kwargs)


def _cuda(model, func, args, kwargs):
    torch = _torch
    t = args[0]
    return _move(model, func, args, kwargs, t, torch.device("cuda", 0), None,
                 kwargs.get("non_blocking", False))


def _cpu(model, func, args, kwargs):
    t = args[0]
    if model.memory(t) != "device":
        return t
    return model.to_host(t, None, False)


def _setitem(model, func, args, kwargs):
    torch = _torch
    dst, key, value = args[0], args[1], args[2]
    to = model.memory(dst)
    value_is_tensor = isinstance(value, torch.Tensor)
    frm = model.memory(value) if value_is_tensor else "host value"
    if value_is_tensor and (to == "device") != (frm == "device") and basic_index(key) \
            and value.dim() > 0:
        model.copy(_view(dst, key), value, False)       # blocking, as torch's assignment
        return None
    if to == "device" or frm == "device":
        return _generic(model, func, "__setitem__", args, kwargs)
    if model._open and model.host_pending():
        if value_is_tensor:
            model.host_read(span_of(value), "torch __setitem__")
        target = _view(dst, key) if basic_index(key) else dst
        model.host_write(span_of(target), "torch __setitem__")
    return func(*args, **kwargs)


def _device_read(model, func, args, kwargs):
    t = args[0]
    if model.memory(t) == "device":
        host = model.to_host(t, None, False)
        torch = _torch
        with torch._C.DisableTorchFunction():
            return func(host, *args[1:], **kwargs)
    if model._open and model.host_pending():
        model.host_read(span_of(t), f"torch {getattr(func, '__name__', '')}")
    return func(*args, **kwargs)


def _numpy(model, func, args, kwargs):
    t = args[0]
    if model.memory(t) == "device":
        raise TypeError("can't convert cuda:0 device type tensor to numpy. Use Tensor.cpu() "
                        "to copy the tensor to host memory first.")
    return func(*args, **kwargs)      # a view: it reads nothing (what is read through it
    #                                    is seen in its values: readback_as_written)


def _pin_memory(model, func, args, kwargs):
    t = args[0]
    if model.memory(t) == "device":
        with _torch._C.DisableTorchFunction():      # torch's name of it: LongTensor...
            kind = t.type().rsplit(".", 1)[-1]
        raise RuntimeError(f"cannot pin 'torch.cuda.{kind}' only dense CPU tensors can be "
                           "pinned")
    if model.memory(t) == "pinned":
        return t
    if model._open and model.host_pending():
        model.host_read(span_of(t), "torch pin_memory()")
    found = model.pairs.host_range(t)   # pinning a clone of a host range (vllm-ascend's
    out = model.pinned(t)               # ``cpu[:n].clone().pin_memory()``) is another clone
    if found is not None:               # (taken first: an empty one's address is the new
        model.pairs.cloned_from(out, t, found)      # pinned region's)
    return out


def _is_pinned(model, func, args, kwargs):
    return model.memory(args[0]) == "pinned"


def _record_stream(model, func, args, kwargs):
    return None


def _getitem(model, func, args, kwargs):
    if len(args) > 1 and basic_index(args[1]):     # a view
        device = model._device_type()
        if device is not None and type(args[0]) is device:
            return device._stagecheck_call(func, args, kwargs)   # its own handling
        return func(*args, **kwargs)
    return _generic(model, func, "__getitem__", args, kwargs)


_HANDLERS = {
    "copy_": _copy_, "_foreach_copy_": _foreach_copy_, "to": _to, "cuda": _cuda, "cpu": _cpu,
    "__setitem__": _setitem,
    "numpy": _numpy, "pin_memory": _pin_memory, "is_pinned": _is_pinned,
    "record_stream": _record_stream, "__getitem__": _getitem,
    **{name: _device_read for name in HOST_READS},
}


# ============================================================================ the rest

#: factories of a tensor shaped like their first argument, which read no value of it
_LIKE = frozenset({"empty_like", "zeros_like", "ones_like", "full_like", "rand_like",
                   "randn_like", "randint_like"})


def _factory(model, func, args, kwargs):
    kw = dict(kwargs)
    device = kw.pop("device", None)
    pin = kw.pop("pin_memory", False)
    on_device = is_device_spec(device)
    if not on_device and device is not None:
        kw["device"] = device
    if not on_device and not pin:
        if device is not None and getattr(func, "__name__", "") in _LIKE and args \
                and model.memory(args[0]) == "device":
            # ``empty_like(dev, device="cpu")``: host memory shaped like a device tensor
            # (such a factory reads its metadata only)
            with _torch._C.DisableTorchFunction():
                return func(*args, **kw)
        return _generic(model, func, getattr(func, "__name__", ""), args, kw)
    if on_device:
        return model.make_device(func, args, kw)
    return model.make_pinned(func, args, kw)


#: operations whose index argument (the second) CUDA lets be host tensors with device
#: data: it copies them to the device when the operation is issued
_HOST_INDEX_OK = frozenset({"__getitem__", "__setitem__", "index_put_", "index_put"})


#: operations on device tensors whose result's size depends on the device's data: CUDA
#: makes the host wait for the stream to reach them (a boolean mask index is one too, and
#: ``repeat_interleave`` with tensor repeats and no ``output_size``)
_HOST_WAITS = frozenset({"unique", "unique_consecutive", "_unique", "_unique2", "nonzero",
                         "argwhere", "masked_select", "bincount"})


def _host_waits(name: str, args, kwargs) -> bool:
    """Whether the host waits for the device operation ``name`` (``_HOST_WAITS``)."""
    if name in _HOST_WAITS:
        return True
    torch = _torch
    if name == "repeat_interleave":
        repeats = args[1] if len(args) > 1 else kwargs.get("repeats")
        return isinstance(repeats, torch.Tensor) and kwargs.get("output_size") is None
    if name == "__getitem__" and len(args) > 1:
        keys = args[1] if type(args[1]) in (tuple, list) else (args[1],)
        return any(isinstance(k, torch.Tensor) and k.dtype == torch.bool for k in keys)
    return False


def _host_indices(name: str, args, strays: list) -> list:
    """The tensors of ``strays`` (host tensors in a device operation) that are its index
    argument, where CUDA takes host indices; the rest would raise on CUDA."""
    if name not in _HOST_INDEX_OK or len(args) < 2:
        return []
    key = args[1]
    keys = key if type(key) in (tuple, list) else (key,)
    return [t for t in strays if any(t is k for k in keys)]


def _generic(model, func, name, args, kwargs):
    torch = _torch
    tensors = _tensors(args, [])
    _tensors(kwargs.values(), tensors)
    on_device = [t for t in tensors if model.memory(t) == "device"]
    in_place = name.endswith("_") and not name.startswith("_")
    out = kwargs.get("out")
    if on_device:
        strays = [t for t in tensors if model.memory(t) != "device" and t.dim() > 0]
        indices = _host_indices(name, args, strays)
        if len(indices) < len(strays):
            raise RuntimeError("Expected all tensors to be on the same device, but found at "
                               "least two devices, cuda:0 and cpu!")
        if model._open and model.host_pending():
            for t in indices:               # read by the host when the index is issued
                model.host_read(span_of(t), f"torch {name} (host indices)")
        writes = ([args[0]] if in_place and args and isinstance(args[0], torch.Tensor) else [])
        if isinstance(out, torch.Tensor):
            writes.append(out)
        result = model.device_op(lambda: func(*args, **kwargs), name or "device operation",
                                 on_device, writes, _host_waits(name, args, kwargs))
        model.point()
        return result
    if tensors and model._open and model.host_pending():
        target = args[0] if in_place and args and isinstance(args[0], torch.Tensor) else None
        for t in tensors:
            if t is not target and t is not out:
                model.host_read(span_of(t), f"torch {name}")
        if target is not None:
            model.host_write(span_of(target), f"torch {name}")
        if isinstance(out, torch.Tensor):
            model.host_write(span_of(out), f"torch {name}")
    if name == "clone" and args and isinstance(args[0], torch.Tensor):
        result = func(*args, **kwargs)      # a copy from it is one of the range it cloned
        model.pairs.cloned_from(result, args[0])
        return result
    return func(*args, **kwargs)
