"""Control characters made visible, for every report that echoes text it did not write.

A finding's id, a target's exception text and a replay file's fields come from code
under test or from a file on disk: a ``\\x1b`` in them would drive the reader's
terminal, a ``\\x00`` would make JUnit XML ill-formed (XML 1.0 cannot carry it even
as a character reference). ``escape`` writes each such character as a Python-style
escape (``\\x1b``, ``\\x00``, ``\\u2028``), so the report shows what the text held and
stays one line where it was one line. The rule is ``printable`` of ``oracles/text.py``,
the one the worker applies when it captures a target's exception text.
"""

from __future__ import annotations

from stagecheck.oracles.text import printable

__all__ = ["escape", "escape_lines"]


def escape(text) -> str:
    """``text`` (any value: ``str()`` of it) on one line, every control character made
    visible; newline and tab included."""
    return printable(str(text), keep_layout=False)


def escape_lines(text) -> str:
    """Like ``escape``, but newlines and tabs are kept (a traceback, a snippet)."""
    return printable(str(text))
