"""The standard descriptors: open before anything else, and writes that never decide a verdict.

A process started with a standard descriptor closed (``>&-``, ``2>&-``, ``<&-``) would
hand that number to the next file it opens: a pipe to a worker made then sits on fd 1,
and the worker's ``/dev/null`` replaces it. ``ensure_standard_fds`` opens every closed
one of 0, 1 and 2 on ``/dev/null`` (and gives ``sys.stdin``/``stdout``/``stderr`` a file
where Python left None), before any pipe is made.

``emit`` prints the report on stdout and ``note`` one line on stderr. Neither raises:
a closed reader (``| head -1``), a full disk (``>/dev/full``) or any other write error
loses the text, never the exit code; ``emit`` says so once on stderr (one line, no
traceback) and sends the rest of stdout to ``/dev/null`` so that the interpreter's own
flush at exit cannot fail either. Standard library only.
"""

from __future__ import annotations

import errno
import io
import os
import sys

from stagecheck.oracles import messages
from stagecheck.oracles.errors import UsageError
from stagecheck.oracles.text import printable

__all__ = ["CLOSED_AT_START", "check_working_folder", "emit", "ensure_standard_fds",
           "finish_stdout", "note", "report_to_stderr", "shown", "stdout_gone", "stdout_lost"]

_MODES = {0: os.O_RDONLY, 1: os.O_WRONLY, 2: os.O_WRONLY}
#: the standard fds the process started with closed (now on ``/dev/null``): what is
#: written there is lost, so an output asked of one (``--json -``) is not written
CLOSED_AT_START: set[int] = set()
#: what went wrong writing the report (None: nothing); said once
_FAILED: dict = {"said": False, "lost": False}
#: ``--json -``: stdout carries the JSON document alone, the text report goes to stderr
_REPORT_TO_STDERR = [False]


def report_to_stderr(yes: bool) -> None:
    """Send the text report to stderr (``--json -`` writes the document to stdout)."""
    _REPORT_TO_STDERR[0] = yes


def shown(path: str) -> str:
    """``path`` relative to the current folder when it is under it (shorter to read)."""
    rel = os.path.relpath(path)
    return path if rel.startswith("..") else rel


def _is_open(fd: int) -> bool:
    try:
        os.fstat(fd)
    except OSError:
        return False
    return True


def ensure_standard_fds() -> None:
    """Open each closed one of fds 0, 1, 2 on ``/dev/null``; give Python's ``sys.std*``
    a file where it has None. Cheap (three ``fstat`` calls when all are open)."""
    for fd, mode in _MODES.items():
        if _is_open(fd):
            continue
        CLOSED_AT_START.add(fd)
        try:
            opened = os.open(os.devnull, mode)
        except OSError:
            continue
        if opened != fd:          # a lower number was closed too: it got that one
            os.dup2(opened, fd)
            if opened > 2:
                os.close(opened)
    for name, fd, mode in (("stdin", 0, "r"), ("stdout", 1, "w"), ("stderr", 2, "w")):
        if getattr(sys, name) is None:
            try:
                setattr(sys, name, io.TextIOWrapper(
                    io.FileIO(fd, mode, closefd=False), encoding="utf-8",
                    errors="backslashreplace", line_buffering=(name == "stderr")))
            except (OSError, ValueError):
                pass


def stdout_gone() -> None:
    """stdout cannot take more (its reader left, the disk is full): send the rest, and
    what Python still buffers, to ``/dev/null``."""
    _FAILED["lost"] = True
    try:
        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, sys.stdout.fileno())
        os.close(null)
    except (OSError, ValueError, AttributeError):
        pass


def _why(exc: OSError) -> str:
    if exc.errno in (errno.EPIPE, errno.ECONNRESET):
        return ""                # its reader left on purpose (| head): nothing to say
    return exc.strerror or str(exc)


def emit(text: str) -> None:
    """Print ``text`` (the report) on stdout (on stderr under ``--json -``). A write error
    loses it, changes nothing else, and is said once on stderr (a closed pipe is not: the
    reader chose to stop)."""
    if _REPORT_TO_STDERR[0]:
        note(text)
        return
    try:
        print(text)
        sys.stdout.flush()
    except (OSError, ValueError, AttributeError) as exc:
        stdout_gone()
        why = _why(exc) if isinstance(exc, OSError) else "standard output is closed"
        if why and not _FAILED["said"]:
            _FAILED["said"] = True
            note(messages.STDOUT_FAILED.format(error=why))


def note(text: str) -> None:
    """One line on stderr (never raises), escaped as every echoed text is
    (``text.printable``): an error message may quote what a file or a target chose."""
    try:
        print(printable(text), file=sys.stderr)
        sys.stderr.flush()
    except (OSError, ValueError, AttributeError):
        pass


def finish_stdout() -> None:
    """Flush stdout at exit; a failure is handled as ``emit`` handles it."""
    try:
        sys.stdout.flush()
    except (OSError, ValueError, AttributeError) as exc:
        stdout_gone()
        why = _why(exc) if isinstance(exc, OSError) else ""
        if why and not _FAILED["said"]:
            _FAILED["said"] = True
            note(messages.STDOUT_FAILED.format(error=why))


def stdout_lost() -> bool:
    """Whether what the process printed on stdout may not have reached anyone: stdout was
    closed when it started, its reader left, or a write failed. A clean verdict is then
    not exit 0 (``cli.entry_point``)."""
    return _FAILED["lost"] or 1 in CLOSED_AT_START


def check_working_folder() -> None:
    """``UsageError`` when the current folder no longer exists (deleted after the shell
    entered it): every relative path, and the workers' folder, would fail."""
    try:
        os.getcwd()
    except OSError as exc:
        raise UsageError.of(messages.CWD_GONE, os.environ.get("PWD", "."),
                            error=exc.strerror) from None
