"""What an operation or ``observe`` of a protocol returned, as the plain data a trace keeps
and compares between runs and targets (``plain``, ``plain_result``): tensors and arrays as
lists, dataclasses as their fields, NaN as the text ``'nan'``; a value whose text would
differ between two runs of the same code (an object's default text, with its address),
one that holds itself, one of more than ``PLAIN_ITEMS`` values, or one that holds a device
tensor (``refuse_device_values``) is the protocol's mistake (exit 2)."""

from __future__ import annotations

import dataclasses
import re
from typing import Any

from stagecheck.oracles import messages
from stagecheck.oracles.device.torchload import import_torch
from stagecheck.oracles.errors import SchemaError
from stagecheck.oracles.text import short_text, type_name
from stagecheck.spec.protocol import Protocol

__all__ = ["PLAIN_DEPTH", "PLAIN_ITEMS", "SCALARS", "NotPlain", "plain", "plain_result",
           "refuse_device_values"]

#: values that are plain data as they are
SCALARS = frozenset({int, float, str, bool})


class NotPlain(Exception):
    """``plain`` met a value that is not plain data: ``(where, what)``."""


#: how deep ``plain`` follows containers (deeper: a value that holds itself, or not data)
PLAIN_DEPTH = 32
#: most values (and bytes) one result of an operation or observe may hold: each is kept
#: for every step of every sequence, and sent from the worker
PLAIN_ITEMS = 1_000_000
_ADDRESS = re.compile(r" at 0x[0-9a-fA-F]+")


def plain(value: Any, path: str = "", depth: int = 0) -> Any:
    """Plain data of ``value`` (tensors and arrays as lists, sets sorted, dataclasses as
    dicts of their fields, other objects as their text); ``NotPlain`` for a value whose
    text would differ between two runs of the same code (an object's default text, with
    its address) or that nests deeper than ``PLAIN_DEPTH``."""
    kind = type(value)
    if value is None or kind in SCALARS:
        return value if kind is not float or value == value else "nan"
    if depth > PLAIN_DEPTH:
        raise NotPlain(path, f"a value nested deeper than {PLAIN_DEPTH} levels "
                              "(one that holds itself?)")
    if kind is list or kind is tuple:
        for v in value:
            if v is not None and type(v) not in SCALARS:
                return [plain(v, f"{path or 'the value'}[{k}]", depth + 1)
                        for k, v in enumerate(value)]
        return list(value)              # plain already (values read back, scalars)
    if isinstance(value, dict):
        out = {}
        for k, v in value.items():
            key = k if isinstance(k, (str, int)) else repr(plain(k, path, depth + 1))
            of = type(v)
            if v is None or of in SCALARS:        # as ``plain`` gives it, without a path
                out[key] = v if of is not float or v == v else "nan"
            else:
                out[key] = plain(v, f"{path or 'the value'}[{k!r}]", depth + 1)
        return out
    if isinstance(value, (list, tuple)):
        return [plain(v, f"{path or 'the value'}[{k}]", depth + 1)
                for k, v in enumerate(value)]
    if isinstance(value, (set, frozenset)):
        return sorted((plain(v, path, depth + 1) for v in value), key=repr)
    tolist = getattr(value, "tolist", None)
    if tolist is not None and callable(tolist):
        try:
            torch = import_torch()
            if isinstance(value, torch.Tensor):
                with torch._C.DisableTorchFunction():
                    return value.detach().cpu().tolist()
        except ImportError:
            pass
        return plain(tolist(), path, depth + 1)
    if isinstance(value, (bytes, bytearray, memoryview)):
        if len(value) > PLAIN_ITEMS:
            raise NotPlain(path, f"{len(value):,} bytes (more than {PLAIN_ITEMS:,})")
        return bytes(value).hex()
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {"dataclass": type_name(kind),
                **{f.name: plain(getattr(value, f.name, None),
                                  f"{path or 'the value'}.{f.name}", depth + 1)
                   for f in dataclasses.fields(value)}}
    text = short_text(value, 4000)
    if kind.__repr__ is object.__repr__ or _ADDRESS.search(text):
        name = type_name(kind)
        article = "an" if name[:1].lower() in "aeiou" else "a"
        raise NotPlain(path, f"{article} {name} object (its text "
                              f"{short_text(value, 60)} holds an address)")
    return text


def _comparable(data: Any, count: list) -> int:
    """The number of values in ``data`` (``plain``'s result; each character of a text
    counts as one), each NaN replaced by the text ``'nan'`` in place, so that two equal
    runs compare equal (NaN != NaN)."""
    kind = type(data)
    if kind is not list and kind is not dict:
        count[0] += len(data) if kind is str else 1
        return count[0]
    for k, v in (enumerate(data) if kind is list else list(data.items())):
        if type(v) is float and v != v:
            data[k] = "nan"
        elif type(v) is list or type(v) is dict:
            _comparable(v, count)
        elif type(v) is str:
            count[0] += len(v)
    count[0] += len(data)
    return count[0]


def plain_result(protocol: Protocol, value: Any, part: str, step: int) -> Any:
    """``plain(value)`` of what an operation or ``observe`` returned, or the protocol's
    mistake (``PROTOCOL_NOT_PLAIN``) when it is not plain data."""
    try:
        data = plain(value)
        count = _comparable(data, [0])
        if count > PLAIN_ITEMS:
            raise NotPlain("", f"{count:,} values and characters (more than {PLAIN_ITEMS:,}: "
                                "return what the check needs, e.g. a sum or the first rows)")
        return data
    except NotPlain as exc:
        where, what = exc.args
        where = where if len(where) <= 80 else where[:77] + "..."
        raise SchemaError.of(messages.PROTOCOL_NOT_PLAIN, protocol.name, part=part,
                             what=what, where=f" at {where}" if where else "",
                             step=step) from None
    except RecursionError:
        raise SchemaError.of(messages.PROTOCOL_NOT_PLAIN, protocol.name, part=part,
                             what="a value nested too deep to read", where="",
                             step=step) from None



def refuse_device_values(model, protocol: Protocol, value: Any, part: str,
                          step: int) -> None:
    """A ``SchemaError`` when ``value`` (what an operation or ``observe`` returned) holds a
    device tensor: the host does not hold it, and reading it here would bypass the device
    model (no download seen, whatever the copies in flight)."""
    where = _device_value(model, value, "", 0)
    if where is not None:
        raise SchemaError.of(messages.PROTOCOL_DEVICE_RESULT, protocol.name, part=part,
                             where=f" at {where}" if where else "", step=step)


def _device_value(model, value: Any, path: str, depth: int) -> str | None:
    """Where in ``value`` a device tensor of ``model`` lies (``the value[0]['ids']``)."""
    kind = type(value)
    if value is None or kind in SCALARS or depth > 8:
        return None
    if isinstance(value, (list, tuple)):
        for k, v in enumerate(value):
            if v is not None and type(v) not in SCALARS:
                found = _device_value(model, v, f"{path or 'result'}[{k}]", depth + 1)
                if found is not None:
                    return found
        return None
    if isinstance(value, dict):
        for k, v in value.items():
            if v is None or type(v) in SCALARS:
                continue                    # no device tensor (and no path to write)
            found = _device_value(model, v, f"{path or 'result'}[{k!r}]", depth + 1)
            if found is not None:
                return found
        return None
    if getattr(value, "tolist", None) is not None:
        try:
            torch = import_torch()
        except ImportError:
            return None
        if isinstance(value, torch.Tensor):
            with model.passthrough():
                if model.memory(value) == "device":
                    return path
    return None
