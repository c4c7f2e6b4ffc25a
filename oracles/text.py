"""Text rules for everything stagecheck echoes that it did not write.

A target's exception text, a finding's id, a replay file's fields: ``printable`` writes
every character a terminal or a report must not receive as an escape, and
``exception_text`` reads an exception's text without ever raising. The worker applies
them when it captures what a target raised; ``report/escape.py`` applies ``printable``
to every report. The standard library and ``messages`` only: every stage may import this module.
"""

from __future__ import annotations

import difflib
import os
import traceback

from stagecheck.oracles import messages

__all__ = ["MAX_EXCEPTION_TEXT", "closest", "did_you_mean", "exception_text", "printable",
           "short_text", "stopped_at", "type_name"]


#: longest exception text kept (a target may raise a message of any size)
MAX_EXCEPTION_TEXT = 2000


def printable(text: str, keep_layout: bool = True) -> str:
    """``text`` with every character ``str.isprintable`` refuses (C0 and C1 controls, DEL,
    line separators, bidi and other format characters, surrogates) written as an escape
    (``\\x1b``, ``\\u202e``; ``\\n``, ``\\t``, ``\\r``), so no text a target or a file
    chose can drive a terminal or break a report. ``keep_layout``: newline and tab stay.
    The one rule for echoed text: ``report/escape.py`` applies it to every report. A
    value that is not a ``str`` (a class whose ``__name__`` is something else) is shown
    by its ``repr``, or a note when that raises."""
    if type(text) is not str:
        text = _as_text(text)
    if text.isprintable():
        return text
    return "".join(ch if ch.isprintable() or (keep_layout and ch in "\n\t") else
                   _visible(ch) for ch in text)


def type_name(cls) -> str:
    """The name of class ``cls`` as it was defined, escaped: what ``cls.__name__`` says
    unless a metaclass made that something else (a property, a number)."""
    try:
        name = type.__dict__["__name__"].__get__(cls)
    except (TypeError, AttributeError):
        name = getattr(cls, "__name__", None)
    return printable(name if isinstance(name, str) else "<class>")


def short_text(value, limit: int) -> str:
    """``repr(value)`` cut to ``limit`` characters, never raising (an object a target made
    may have a ``__repr__`` that raises)."""
    text = _as_text(value)
    return text if len(text) <= limit else text[:limit - 3] + "..."


def _as_text(value) -> str:
    try:
        text = str.__str__(value) if isinstance(value, str) else repr(value)
        if type(text) is str:
            return text
    except BaseException:      # noqa: BLE001 (whatever a target's object does)
        pass
    return f"<{type(value).__name__!s} object>" if isinstance(type(value).__name__, str) \
        else "<object>"


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
    return text if kind is None else f"{type_name(kind)}: {text}"


def did_you_mean(word: str, known) -> str:
    """`` (did you mean CLOSEST?)`` for a misspelt ``word`` (an option, a key, a builtin
    target's name), the closest of ``known`` (``difflib``); '' when none is close. The
    command line's unknown options, ``[tool.stagecheck]``'s unknown keys and unknown
    builtin targets all say it. A prefix of exactly one of ``known`` names that one first
    (``--ex``: ``--examples``, not the closer-spelt ``--seed``; it is still refused)."""
    close = closest(word, known)
    return messages.DID_YOU_MEAN.format(option=close) if close is not None else ""


def closest(word: str, known) -> str | None:
    """The one of ``known`` that ``did_you_mean`` names for ``word``, or None."""
    known = list(known)
    longer = [k for k in known if k.startswith(word) and k != word]
    if len(longer) == 1 and word.strip("-"):
        return longer[0]
    close = difflib.get_close_matches(word, known, n=1, cutoff=0.6)
    return close[0] if close else None


def stopped_at(exc: BaseException, caller: str) -> str:
    """`` (stopped at FILE:LINE)``: the innermost line of the call ``exc`` stopped outside
    the module ``caller`` (its ``__file__``, which raised it there): where its loop was;
    '' where none is known."""
    here = os.path.realpath(caller)
    frames = [f for f in traceback.extract_tb(exc.__traceback__)
              if os.path.realpath(f.filename) != here]
    return f" (stopped at {frames[-1].filename}:{frames[-1].lineno})" if frames else ""
