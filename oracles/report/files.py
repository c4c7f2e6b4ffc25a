"""Every file stagecheck writes goes through here: probed before a run, written atomically.

``write_atomic`` writes a temporary file in the destination's own folder and renames
it over the destination (``os.replace``), so a reader (or a process killed half-way)
sees the old file, the complete new one, or none; never a 0-byte or half file. A
destination that is not a regular file (``/dev/stdout``, ``/dev/full``, a FIFO) is
written directly, since a device cannot be renamed over.

``probe_file`` and ``probe_folder`` answer, before a run, whether a path can be
written, without creating, truncating or changing anything the user can see (a probe
creates and removes a temporary file of its own).
"""

from __future__ import annotations

import errno
import os
import stat
import tempfile

__all__ = ["probe_file", "probe_folder", "write_atomic"]


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def _special(path: str) -> bool:
    """True when ``path`` exists and is not a regular file (a device, a FIFO)."""
    try:
        return not stat.S_ISREG(os.stat(path).st_mode)
    except OSError:
        return False


def write_atomic(path: str, text: str, inside: str | None = None) -> None:
    """Write ``text`` to ``path`` (UTF-8) all at once; ``OSError`` when that fails.

    On failure the destination is untouched and no temporary file is left behind.
    ``inside``: a folder stagecheck owns (the save folder): the file is written there and
    nowhere else, never through a link: a symbolic link at ``path`` is replaced by the
    file (what it points to is left alone), and a folder on the way that leads out of
    ``inside`` is an ``OSError``.
    """
    if inside is not None:
        _write_inside(path, text, inside)
        return
    path = os.path.realpath(path)      # a symlinked report the user named: the file it names
    if _special(path):
        with open(path, "w", encoding="utf-8") as fh:
            fh.write(text)
            fh.flush()
        return
    folder, name = os.path.split(path)
    _replace(folder, name, text)


def _write_inside(path: str, text: str, inside: str) -> None:
    top = os.path.realpath(inside)
    folder, name = os.path.split(os.path.abspath(path))
    real = os.path.realpath(folder)
    if real != top and not real.startswith(top.rstrip(os.sep) + os.sep):
        raise OSError(errno.ELOOP, f"{folder!r} leads out of {inside!r} through a symbolic link")
    _replace(real, name, text)     # a link named ``name`` there is replaced, not followed


def _replace(folder: str, name: str, text: str) -> None:
    """Write ``text`` to a temporary file in ``folder``, then rename it to ``name`` there;
    on failure nothing is left behind and ``name`` is untouched."""
    fd, tmp = tempfile.mkstemp(prefix=f".{name}.", suffix=".tmp", dir=folder)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            os.fchmod(fh.fileno(), 0o666 & ~_umask())   # what open(path, "w") would give
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, os.path.join(folder, name))
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def _probe_create(folder: str) -> None:
    fd, tmp = tempfile.mkstemp(prefix=".stagecheck-probe-", dir=folder)
    os.close(fd)
    os.unlink(tmp)


def probe_file(path: str) -> str | None:
    """Why ``path`` cannot be written as a report, or None when it can. Changes nothing."""
    real = os.path.realpath(path)
    if os.path.isdir(real):
        return "it is a folder"
    if _special(real):
        return None if os.access(real, os.W_OK) else "permission denied"
    folder = os.path.dirname(real)
    if not os.path.isdir(folder):
        return f"folder {folder!r} does not exist"
    try:
        _probe_create(folder)
    except OSError as exc:
        return f"cannot create files in {folder!r}: {exc.strerror}"
    return None


def probe_folder(folder: str) -> str | None:
    """Why files cannot be written under ``folder`` (created when needed), or None.

    Nothing is created: a missing folder is judged by its nearest existing ancestor.
    """
    path = os.path.realpath(folder)
    missing = []
    while not os.path.exists(path):
        parent = os.path.dirname(path)
        if parent == path:
            break
        missing.append(path)
        path = parent
    if not os.path.isdir(path):
        return f"{path!r} is not a folder"
    try:
        _probe_create(path)
    except OSError as exc:
        what = f"{missing[-1]!r} cannot be created" if missing else "no file can be created there"
        return f"{what} ({path!r}: {exc.strerror})"
    return None
