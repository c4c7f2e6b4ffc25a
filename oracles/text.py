"""Text rules for everything stagecheck echoes that it did not write.

A target's exception text, a finding's id, a replay file's fields: ``printable`` writes
every character a terminal or a report must not receive as an escape, and
``exception_text`` reads an exception's text without ever raising. The worker applies
them when it captures what a target raised; ``report/escape.py`` applies ``printable``
to every report. Standard library only: every stage may import this module.
"""

from __future__ import annotations

__all__ = ["MAX_EXCEPTION_TEXT", "exception_text", "printable"]


#: longest exception text kept (a target may raise a message of any size)
MAX_EXCEPTION_TEXT = 2000


def printable(text: str, keep_layout: bool = True) -> str:
    """``text`` with every character ``str.isprintable`` refuses (C0 and C1 controls, DEL,
    line separators, bidi and other format characters, surrogates) written as an escape
    (``\\x1b``, ``\\u202e``; ``\\n``, ``\\t``, ``\\r``), so no text a target or a file
    chose can drive a terminal or break a report. ``keep_layout``: newline and tab stay.
    The one rule for echoed text: ``report/escape.py`` applies it to every report."""
    if text.isprintable():
        return text
    return "".join(ch if ch.isprintable() or (keep_layout and ch in "\n\t") else
                   _visible(ch) for ch in text)


def _visible(ch: str) -> str:
    code = ord(ch)
    return {9: "\\t", 10: "\\n", 13: "\\r"}.get(code) or (
        f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}")


def exception_text(exc: BaseException, kind: type | None = None) -> str:
    """``str(exc)`` as a report may show it: never raises (an ``__str__`` or a ``repr``
    that raises gives a note instead), at most ``MAX_EXCEPTION_TEXT`` characters, control
    characters escaped. ``kind``: also name the exception's type."""
    try:
        text = str(exc)
        if not isinstance(text, str):
            raise TypeError("__str__ returned a non-string")
    except BaseException as inner:     # noqa: BLE001 (whatever the target's __str__ does)
        try:
            name = type(inner).__name__
        except BaseException:       # noqa: BLE001
            name = "an exception"
        text = f"<str() of the exception raised {name}>"
    if len(text) > MAX_EXCEPTION_TEXT:
        text = text[:MAX_EXCEPTION_TEXT] + f"... ({len(text) - MAX_EXCEPTION_TEXT} more)"
    text = printable(text)
    return f"{printable(kind.__name__)}: {text}" if kind is not None else text

