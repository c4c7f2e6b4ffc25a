"""What a call left in an input, read back as plain data: values as they are, containers
item by item, numpy values as lists, and any other object as text (``described``: its
type and its repr without the address), so that a read-back compares, pickles and prints
like data and the object a target put there is never compared itself.
"""

from __future__ import annotations

import re
from typing import Any

from stagecheck.oracles.text import type_name

__all__ = ["ATOMS", "KEYS", "SELF_REFERENCING", "described", "in_few_words", "plain"]

#: the values read back as they are. A float is not among them: no input holds floats
#: (docs/schemas.md), and 5.0 == 5 would hide an index replaced by a float
ATOMS = frozenset({int, str, bool, type(None)})
#: the keys of a dict read back as they are
KEYS = frozenset({int, str, bool})


def plain(value: Any) -> Any:
    """Plain data of what a target left in an input (numpy scalars and arrays included)."""
    kind = type(value)
    if kind in ATOMS:
        return value
    if kind is dict:
        if KEYS.issuperset(map(type, value)):
            return {k: v if type(v) in ATOMS else plain(v) for k, v in value.items()}
        return {_key(k): plain(v) for k, v in value.items()}
    if kind is list or kind is tuple:
        return [v if type(v) in ATOMS else plain(v) for v in value]
    if isinstance(value, dict):
        return {_key(k): plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    if isinstance(value, (set, frozenset)):
        items = [plain(v) for v in value]
        try:
            return sorted(items)
        except TypeError:           # values of several kinds: in the order of their text
            return sorted(items, key=repr)
    tolist = getattr(value, "tolist", None)
    if tolist is not None and kind.__module__.split(".")[0] == "numpy":
        return tolist()
    return described(value)


def _key(key: Any) -> Any:
    """A dict key read back: an int or a text as it is, anything else as text (a key
    object a target put there may not compare, hash alike or pickle)."""
    return key if type(key) in KEYS else described(key)


def described(value: Any) -> str:
    """An object that is not plain data (one a target put in an input: a lock, an object
    whose ``__eq__`` raises), as text: its type and its repr without the address, so it
    compares, pickles and prints like data, and the object itself is never compared."""
    try:
        text = repr(value)
    except Exception as exc:        # its repr raises too
        text = f"repr raised {type_name(type(exc))}"
    text = _ADDRESS.sub("", text)
    if len(text) > 120:
        text = text[:117] + "..."
    return f"<{type_name(type(value))}: {text}>"


#: the address in a default repr ("<Weird object at 0x7f...>"), which differs per run
_ADDRESS = re.compile(r" at 0x[0-9a-fA-F]+")


#: what a value that holds itself reads back as
SELF_REFERENCING = "<a value that holds itself (deeper than the recursion limit)>"


def in_few_words(value: Any) -> str:
    """A value a call put in place of an input, in a few words."""
    if value is None or isinstance(value, (bool, int, float)):
        return repr(value)
    if isinstance(value, str):
        return repr(value[:40])
    return f"an object of type {type_name(type(value))}"
