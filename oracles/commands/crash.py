"""Internal errors: an exception inside stagecheck (not inside the code under test) is
never a verdict. Its traceback is saved to a file (under the command's save folder when
it has one, else the temporary folder), one line on stderr names the error and the
file (and what was saved of the run before it), and the exit code is 3 ("internal
error", as pytest uses 3). Standard library only: it must work whatever failed.
"""

from __future__ import annotations

import os
import secrets
import tempfile
import time
import traceback

from stagecheck.oracles import messages
from stagecheck.oracles.stdio import note, shown
from stagecheck.oracles.errors import StagecheckError

__all__ = ["EXIT_INTERNAL", "is_internal", "report_internal"]

EXIT_INTERNAL = 3


def is_internal(exc: BaseException) -> bool:
    """Whether ``exc`` is stagecheck's own failure: any exception but a ``StagecheckError``
    (bad input: exit 2), unless one is marked internal (its machinery failed in a worker)."""
    if getattr(exc, "schema_mistake", False):     # the schema's or protocol's own code
        return False                                # (spec.schema_mistakes.SchemaCodeFailed)
    return not isinstance(exc, StagecheckError) or bool(getattr(exc, "internal", False))


def _save(text: str, folder: str | None) -> str | None:
    """Write ``text`` to a new file under ``folder`` (else the temporary folder); its
    path, or None when neither could be written."""
    name = f"stagecheck-internal-error-{time.strftime('%Y%m%dT%H%M%S')}-{os.getpid()}-" \
           f"{secrets.token_hex(3)}.txt"
    for where in ([folder] if folder else []) + [tempfile.gettempdir()]:
        try:
            os.makedirs(where, exist_ok=True)
            path = os.path.join(os.path.abspath(where), name)
            with open(path, "x", encoding="utf-8") as handle:
                handle.write(text)
            return path
        except OSError:
            continue
    return None


def report_internal(exc: BaseException, argv: list[str] | None,
                    save_dir: str | None = None) -> int:
    """Save the traceback of ``exc``, say so in one line, return exit code 3.

    ``exc.partial_saved`` (set by the command that still wrote what it found before the
    error) is said in the same line."""
    lines = traceback.format_exception(type(exc), exc, exc.__traceback__)
    text = (f"stagecheck internal error\ncommand line: {argv!r}\n\n" + "".join(lines))
    path = _save(text, save_dir)
    error = " ".join(traceback.format_exception_only(type(exc), exc)[-1].split())[:300]
    where = shown(path) if path else messages.INTERNAL_ERROR_UNSAVED
    note(messages.INTERNAL_ERROR.format(error=error, path=where,
                                        partial=getattr(exc, "partial_saved", "")))
    return EXIT_INTERNAL
