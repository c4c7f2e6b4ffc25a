"""How a protocol's findings compare and show the plain data of two runs (values a device
work read, what the host held, what a download wrote): NaN equal to NaN, the first place
two values differ, and floats shown with as few digits as still tell them apart."""

from __future__ import annotations

__all__ = ["first_difference", "plain", "same", "shown"]


def plain(value, digits: int | None) -> str:
    """``repr`` of plain data, each float to ``digits`` significant digits (None: all)."""
    if isinstance(value, float):
        if digits is None or value != value or value in (float("inf"), float("-inf")):
            return repr(value)
        text = format(value, f".{digits}g")
        return text if any(c in text for c in ".e") else text + ".0"
    if isinstance(value, list):
        return "[" + ", ".join(plain(v, digits) for v in value) + "]"
    if isinstance(value, tuple):
        inner = ", ".join(plain(v, digits) for v in value)
        return f"({inner}{',' if len(value) == 1 else ''})"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k!r}: {plain(v, digits)}" for k, v in value.items()) + "}"
    return repr(value)


def shown(a, b, width: int) -> tuple[str, str]:
    """Two values of a message as text, each at most ``width`` characters: floats rounded
    to the fewest significant digits (6 at least) that still tell ``a`` and ``b`` apart,
    so a float32 0.7 reads 0.7, not 0.699999988079071."""
    for digits in (6, 9, 12, None):
        x, y = plain(a, digits), plain(b, digits)
        if x != y or a == b:
            break
    return x[:width], y[:width]


def first_difference(a, b, path: str = "") -> tuple[str, object, object] | None:
    """The first place where plain data ``a`` and ``b`` differ: (path, a there, b there);
    the path reads ``temperature[0]``, ``computed['req-1']``."""
    if a == b:
        return None
    if isinstance(a, dict) and isinstance(b, dict):
        for key in list(a) + [k for k in b if k not in a]:
            if a.get(key) != b.get(key):
                step = str(key) if not path and isinstance(key, str) else f"[{key!r}]"
                return first_difference(a.get(key), b.get(key), path + step)
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        for k, (x, y) in enumerate(zip(a, b)):
            if not same(x, y):
                return first_difference(x, y, f"{path}[{k}]")
    return path, a, b


def same(a, b) -> bool:
    """``a == b``, a NaN equal to a NaN (values read back from float memory)."""
    if a == b:
        return True
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    return isinstance(a, float) and isinstance(b, float) and a != a and b != b
