"""What a path names, and reading a file that must be a regular one, without waiting on it.

A FIFO, a device or a socket given where stagecheck reads a file (a target, a shim, a
schema, a replay file) is named as what it is, never "does not exist", and never read:
opening a FIFO for reading waits for a writer, and ``/dev/zero`` never ends. Standard
library only.
"""

from __future__ import annotations

import errno
import os
import stat

from stagecheck.oracles import messages
from stagecheck.oracles.errors import StagecheckError

__all__ = ["link_loop", "read_regular", "refuse_loop", "refuse_special", "require_file",
           "special_kind"]


def _kind_of(mode: int) -> str | None:
    if stat.S_ISREG(mode) or stat.S_ISDIR(mode):
        return None
    if stat.S_ISFIFO(mode):
        return "a FIFO (named pipe)"
    if stat.S_ISCHR(mode):
        return "a character device"
    if stat.S_ISBLK(mode):
        return "a block device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "not a regular file"


def special_kind(path) -> str | None:
    """What ``path`` is when it exists and is neither a regular file nor a folder ("a FIFO
    (named pipe)", "a character device", ...); None otherwise. Follows links."""
    try:
        return _kind_of(os.stat(path).st_mode)
    except (OSError, ValueError, TypeError):
        return None


def link_loop(path) -> str | None:
    """The system's words for a symbolic link loop ("Too many levels of symbolic links")
    when ``path`` is one (or leads through one); None otherwise. ``replay`` says it from
    the failed read; every other path stagecheck reads or writes says it from here."""
    try:
        os.stat(path)
    except OSError as exc:
        return (exc.strerror or "Too many levels of symbolic links") \
            if exc.errno == errno.ELOOP else None
    except (ValueError, TypeError):
        return None
    return None


def refuse_loop(path, value, what: str, error: type = StagecheckError) -> None:
    """Raise ``error`` (exit 2) naming ``path`` as a symbolic link loop when it is one,
    never "does not exist"."""
    why = link_loop(path)
    if why is not None:
        raise error.of(messages.LINK_LOOP, value, path=path, error=why, what=what)


def refuse_special(path, value, what: str, error: type = StagecheckError) -> None:
    """Raise ``error`` (exit 2) naming ``path`` as a FIFO, a device or a socket when it is
    one, or as a symbolic link loop: ``what`` says what stagecheck wanted there (a target
    file, a shim, ...)."""
    refuse_loop(path, value, what, error)
    kind = special_kind(path)
    if kind is not None:
        raise error.of(messages.NOT_A_REGULAR_FILE, value, path=path, kind=kind, what=what)


def require_file(path, what: str, missing: tuple[str, str], error: type = StagecheckError,
                 value=None, /, **fields) -> None:
    """Raise ``error`` unless ``path`` names a regular file: a FIFO, a device or a socket
    named as what it is (``refuse_special``), anything else (nothing there, a folder) with
    ``missing``, a ``messages`` pair formatted with ``fields``. ``value``: what the user
    gave, where ``path`` is only part of it (default: ``path``)."""
    value = path if value is None else value
    refuse_special(path, value, what, error)
    if not isinstance(path, str) or not os.path.isfile(path):
        raise error.of(missing, value, **fields)


def read_regular(path: str, limit: int, what: str, error: type = StagecheckError) -> bytes:
    """The bytes of the regular file ``path``, at most ``limit`` + 1 of them (the caller
    tells a file past ``limit``). Opened without waiting (a FIFO opens at once and is then
    refused), checked on the open descriptor, so what is read is what was checked."""
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    try:
        kind = _kind_of(os.fstat(fd).st_mode)
        if kind is not None:
            raise error.of(messages.NOT_A_REGULAR_FILE, path, path=path, kind=kind, what=what)
        if stat.S_ISDIR(os.fstat(fd).st_mode):
            raise IsADirectoryError(21, "Is a directory", path)
        os.set_blocking(fd, True)
        chunks, size = [], 0
        while size <= limit:
            chunk = os.read(fd, min(1 << 20, limit + 1 - size))
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)
