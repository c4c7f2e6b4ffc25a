"""Control characters made visible, for every report that echoes text it did not write.

A finding's id, a target's exception text and a replay file's fields come from code
under test or from a file on disk: a ``\\x1b`` in them would drive the reader's
terminal, a ``\\x00`` would make JUnit XML ill-formed (XML 1.0 cannot carry it even
as a character reference). ``escape`` writes each such character as a Python-style
escape (``\\x1b``, ``\\x00``, ``\\u2028``), so the report shows what the text held and
stays one line where it was one line.
"""

from __future__ import annotations

import re

__all__ = ["escape", "escape_lines"]

# C0 controls, DEL, C1 controls, the line/paragraph separators, lone surrogates and the
# two non-characters XML 1.0 excludes; tab and newline are decided by the caller
_UNSAFE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029\ud800-\udfff\ufffe\uffff]")
_UNSAFE_WITH_LAYOUT = re.compile(
    "[\x00-\x1f\x7f-\x9f\u2028\u2029\ud800-\udfff\ufffe\uffff]")


def _visible(match: re.Match) -> str:
    code = ord(match.group())
    return {9: "\\t", 10: "\\n", 13: "\\r"}.get(code) or (
        f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}")


def escape(text) -> str:
    """``text`` (any value: ``str()`` of it) on one line, every control character made
    visible; newline and tab included."""
    return _UNSAFE_WITH_LAYOUT.sub(_visible, str(text))


def escape_lines(text) -> str:
    """Like ``escape``, but newlines and tabs are kept (a traceback, a snippet)."""
    return _UNSAFE.sub(_visible, str(text))
