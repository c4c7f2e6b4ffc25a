"""stdout and stderr of the command line: the report (``emit``), one line on stderr
(``note``), a closed stdout (``stdout_gone``). Standard library only: ``--help`` and
usage errors print through it."""

from __future__ import annotations

import os
import sys

__all__ = ["emit", "note", "shown", "stdout_gone"]


def stdout_gone() -> None:
    """stdout was closed by its reader (``| head -1``): send the rest to /dev/null."""
    try:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    except (OSError, ValueError):
        pass


def emit(text: str) -> None:
    """Print the report; a closed stdout silences it and changes nothing else."""
    try:
        print(text)
        sys.stdout.flush()
    except BrokenPipeError:
        stdout_gone()


def note(text: str) -> None:
    """One line on stderr (never fails)."""
    try:
        print(text, file=sys.stderr)
        sys.stderr.flush()
    except (OSError, ValueError):
        pass


def shown(path: str) -> str:
    """``path`` relative to the current folder when it is under it (shorter to read)."""
    rel = os.path.relpath(path)
    return path if rel.startswith("..") else rel
