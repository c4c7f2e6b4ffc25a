"""Colour: whether to use it, and the few places that get it.

The rules (``use_color``), in order:

1. ``--color always`` colours, ``--color never`` does not, whatever the environment;
2. ``--color auto`` (the default), in pytest's order (``_pytest._io.terminalwriter``):
   no colour when ``NO_COLOR`` is set to a non-empty value (https://no-color.org);
   else colour when ``FORCE_COLOR`` is set to a non-empty value
   (https://force-color.org), a pipe, a file, CI or ``TERM=dumb`` included; else no
   colour when ``TERM`` is ``dumb`` or the stream is not a terminal (piped, redirected
   to a file, captured by CI); colour otherwise.

Only the verdict line and the ERRORS / INFO headers are coloured (``colorize``), so a
report reads the same without colour and a copied line carries no escape codes unless
it was one of those.
"""

from __future__ import annotations

import re
from typing import Mapping

from stagecheck.oracles.options import COLOR_CHOICES

__all__ = ["COLOR_CHOICES", "colorize", "paint", "use_color"]

_CODES = {"red": "1;31", "green": "1;32", "yellow": "1;33", "cyan": "1;36"}
_VERDICT_COLOUR = {"EQUIVALENT": "green", "DIFFERENT": "red", "CONFORMS": "green",
                   "VIOLATES": "red", "UNDECIDED": "yellow", "INTERRUPTED": "yellow"}
_VERDICT = re.compile(r"^(\s*verdict: )([A-Z-]+)")


def use_color(choice: str, stream, environ: Mapping[str, str]) -> bool:
    """Whether output to ``stream`` gets colour under ``--color choice``."""
    if choice == "always":
        return True
    if choice == "never":
        return False
    if choice != "auto":
        raise ValueError(f"colour choice must be one of {COLOR_CHOICES}, got {choice!r}")
    if environ.get("NO_COLOR"):
        return False
    if environ.get("FORCE_COLOR"):
        return True
    if environ.get("TERM") == "dumb":
        return False
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError, OSError):   # no isatty, or a closed stream
        return False


def paint(text: str, colour: str) -> str:
    """``text`` in ``colour`` (red, green, yellow, cyan), reset after it."""
    return f"\x1b[{_CODES[colour]}m{text}\x1b[0m"


def colorize(text: str, on: bool = True) -> str:
    """A rendered text report with its verdict line and ERRORS / INFO headers coloured;
    unchanged when ``on`` is false."""
    if not on:
        return text
    out = []
    for line in text.split("\n"):
        verdict = _VERDICT.match(line)
        if verdict:
            colour = _VERDICT_COLOUR.get(verdict.group(2), "yellow")
            line = paint(line, colour)
        elif line.startswith("ERRORS ("):
            line = paint(line, "red")
        elif line.startswith("INFO ("):
            line = paint(line, "cyan")
        out.append(line)
    return "\n".join(out)
