"""Every file stagecheck writes goes through here: checked and probed before a run, written
atomically, never over a file that is not a stagecheck report, never through a link the
save folder gained during the run.

``write_atomic`` writes a temporary file in the destination's own folder and renames
it over the destination (``os.replace``), so a reader (or a process killed half-way)
sees the old file, the complete new one, or none; never a 0-byte or half file. A
destination that is not a regular file (``/dev/stdout``, ``/dev/full``, a FIFO) is
written directly, since a device cannot be renamed over; a FIFO no process reads, or
one whose reader stops reading, is an ``OSError`` after ``FIFO_SECONDS`` instead of a
wait for ever.

``check_outputs`` (before a run) refuses what would lose data or write nowhere: an empty
path, a path that exists and is not a stagecheck report (a target's source file, any
other file: the report would replace it), a save folder that is a dangling link.
``probe_file`` and ``probe_folder`` answer, before a run, whether a path can be written,
without creating, truncating or changing anything the user can see (a probe creates and
removes a temporary file of its own). ``probe_folder`` also opens the save folder (or its
nearest existing ancestor) once: every later write under it goes through that
descriptor (``dir_fd``, ``O_NOFOLLOW``), so a save folder replaced by a link during the
run is not followed.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import select
import stat
import tempfile
import time

from stagecheck.oracles import interrupt, messages
from stagecheck.oracles.errors import UsageError
from stagecheck.oracles.paths import link_loop, special_kind

__all__ = ["FIFO_SECONDS", "check_outputs", "is_report", "make_folder", "probe_file",
           "probe_folder", "special_kind", "start_umask",
           "write_atomic"]   # special_kind: oracles/paths.py

#: seconds a FIFO (or a device) named as a report may take to get a reader and take the
#: report; then the write fails (and says so) instead of waiting for ever
FIFO_SECONDS = 5.0
#: largest existing file looked into to tell whether it is a stagecheck report
_LARGEST_REPORT = 256 * 1024 * 1024
_SUFFIX = {"--junit-xml": "xml", "--markdown": "md"}
_DIRECTORY = os.O_RDONLY | getattr(os, "O_DIRECTORY", 0)
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


#: the umask stagecheck started with (this module is imported before any user code
#: runs in the checker): the mode of every file and folder written, whatever code run
#: since (a schema's) made of the umask
_START_UMASK = _umask()
#: the mode of a file written: the one ``open`` gives under that umask
FILE_MODE = 0o666 & ~_START_UMASK
_FOLDER_MODE = 0o777 & ~_START_UMASK


@contextlib.contextmanager
def start_umask():
    """The umask stagecheck started with, while the body runs (``os.makedirs``)."""
    mask = os.umask(_START_UMASK)
    try:
        yield
    finally:
        os.umask(mask)


def _special(path: str) -> bool:
    """True when ``path`` exists and is not a regular file (a device, a FIFO)."""
    try:
        return not stat.S_ISREG(os.stat(path).st_mode)
    except OSError:
        return False


# ------------------------------------------------------------------------------ before a run

def is_report(path: str) -> bool:
    """Whether the existing file ``path`` is a report stagecheck wrote (JSON with ``"tool":
    "stagecheck"``, JUnit XML whose ``testsuites`` is named stagecheck, Markdown that
    starts with ``## stagecheck``), or is empty and not Python source (an empty
    ``__init__.py`` is a package's): what a report may overwrite."""
    if os.path.basename(path).endswith(_SOURCE_SUFFIXES):
        return False
    try:
        size = os.path.getsize(path)
        if size == 0:
            return True
        if size > _LARGEST_REPORT:
            return False
        with open(path, "rb") as fh:
            data = fh.read()
    except OSError:
        return False
    head = data[:4096].lstrip()
    if head.startswith(b"{"):
        try:
            document = json.loads(data)
        except (ValueError, RecursionError):
            return False
        return isinstance(document, dict) and document.get("tool") == "stagecheck"
    if head.startswith(b"<?xml") or head.startswith(b"<testsuites"):
        return b'<testsuites name="stagecheck' in head
    return head.startswith(b"## stagecheck ")


#: names a report never overwrites, even empty: source files (``_what`` names them)
_SOURCE_SUFFIXES = (".py", ".pyi")


def _what(path: str) -> str:
    name = os.path.basename(path)
    if name.endswith(_SOURCE_SUFFIXES):
        return "a Python source file"
    try:
        return f"a file of {os.path.getsize(path):,} bytes"
    except OSError:
        return "a file"


def check_outputs(reports: dict[str, str | None], save_dir: str | None = None,
                  save_option: str = "--save-dir") -> None:
    """Refuse, before a run, outputs that would lose data or go nowhere (``UsageError``
    naming the option, the path and the fix): an empty path (``--json ''``); a report
    path that exists and is not a stagecheck report (``is_report``: a target's source
    file, a schema, any file of the user's); a save folder given as ''."""
    for option, path in reports.items():
        if path is None or path == "-":       # '-': stdout (``--json -``)
            continue
        if not str(path).strip():
            raise UsageError.of(messages.OUTPUT_EMPTY, path, flag=option,
                                example=f"{option} report.{_SUFFIX.get(option, 'json')}").located(
                f"option {option}")
        real = os.path.realpath(path)
        if os.path.isfile(real) and not is_report(real):
            raise UsageError.of(messages.REPORT_WOULD_OVERWRITE, path, what=_what(real),
                                flag=option).located(f"option {option}")
    if save_dir is not None and not str(save_dir).strip():
        raise UsageError.of(messages.OUTPUT_EMPTY, save_dir, flag=save_option,
                            example=f"{save_option} .stagecheck/findings").located(
            f"option {save_option}")


def _probe_create(folder: str) -> None:
    fd, tmp = tempfile.mkstemp(prefix=".stagecheck-probe-", dir=folder)
    os.close(fd)
    os.unlink(tmp)


def probe_file(path: str) -> str | None:
    """Why ``path`` cannot be written as a report, or None when it can. Changes nothing."""
    loop = link_loop(path)
    if loop is not None:        # writing would replace the link: refused, as read paths are
        return messages.LINK_LOOP_WHY.format(error=loop)
    real = os.path.realpath(path)
    if os.path.isdir(real):
        return "it is a folder"
    if _special(real):
        return None if os.access(real, os.W_OK) else "permission denied"
    if os.path.islink(path) and not os.path.exists(real):
        folder = os.path.dirname(real)
        if not os.path.isdir(folder):
            return f"it is a symbolic link to {real!r}, in a folder that does not exist"
    folder = os.path.dirname(real)
    if not os.path.isdir(folder):
        above = folder
        while above and not os.path.lexists(above) and os.path.dirname(above) != above:
            above = os.path.dirname(above)
        if above and os.path.lexists(above) and not os.path.isdir(above):
            return f"{above!r} is a file, not a folder"
        return f"folder {folder!r} does not exist"
    try:
        _probe_create(folder)
    except OSError as exc:
        return f"cannot create files in {folder!r}: {_why(exc, folder)}"
    return _name_too_long(os.path.basename(real), folder)


#: bytes the temporary file a report is written through adds to its name (``write_atomic``)
_TEMPORARY_NAME_EXTRA = len(".." + "0" * 8 + ".tmp")


def _name_too_long(name: str, folder: str) -> str | None:
    """Why a file ``name`` cannot be made in ``folder`` (longer than its file system's
    names, with the temporary name's extra bytes), or None."""
    try:
        limit = os.pathconf(folder, "PC_NAME_MAX")
    except (OSError, ValueError):
        limit = 255
    length = len(os.fsencode(name))
    if length + _TEMPORARY_NAME_EXTRA <= limit:
        return None
    return (f"its name is {length} bytes long, and its folder's file system takes names of "
            f"{limit} bytes at most ({limit - _TEMPORARY_NAME_EXTRA} for a report, which is "
            "written through a temporary file of a longer name first): give a shorter name")


def _why(exc: OSError, folder: str) -> str:
    """``exc``'s reason for refusing a new file in the existing ``folder``; "No such file or
    directory" there means the file system takes no new files (``/proc``, ``/sys``)."""
    if exc.errno == errno.ENOENT and os.path.isdir(folder):
        return "its file system takes no new files (a virtual one such as /proc or /sys)"
    return exc.strerror or str(exc)


#: save folders opened by ``probe_folder``: absolute path -> (descriptor of the folder, or
#: of its nearest existing ancestor, and the names still to create under it)
_OPENED: dict[str, tuple[int, list[str]]] = {}


def probe_folder(folder: str) -> str | None:
    """Why files cannot be written under ``folder`` (created when needed), or None.

    Nothing is created: a missing folder is judged by its nearest existing ancestor. A
    folder that is a symbolic link to nothing is refused. The folder (or that ancestor)
    is opened now, once: later writes under ``folder`` go through this descriptor.
    """
    loop = link_loop(folder)
    if loop is not None:
        return messages.LINK_LOOP_WHY.format(error=loop)
    if os.path.islink(folder) and not os.path.exists(folder):
        return f"it is a symbolic link to {os.path.realpath(folder)!r}, which does not exist"
    path = os.path.realpath(folder)
    missing = []
    while not os.path.exists(path):
        if os.path.islink(path):
            return f"{path!r} is a symbolic link to something that does not exist"
        parent = os.path.dirname(path)
        if parent == path:
            break
        missing.append(os.path.basename(path))
        path = parent
    if not os.path.isdir(path):
        return f"{path!r} is not a folder"
    try:
        _probe_create(path)
    except OSError as exc:
        what = (f"{os.path.join(path, missing[-1])!r} cannot be created" if missing
                else "no file can be created there")
        return f"{what} ({path!r}: {_why(exc, path)})"
    try:
        fd = os.open(path, _DIRECTORY)
    except OSError as exc:
        return f"{path!r} cannot be opened ({exc.strerror})"
    previous = _OPENED.pop(os.path.abspath(folder), None)
    if previous is not None:
        os.close(previous[0])
    _OPENED[os.path.abspath(folder)] = (fd, list(reversed(missing)))
    return None


# ------------------------------------------------------------------------------ writing

def _open_child(fd: int, name: str, create: bool) -> int:
    """The folder ``name`` in folder ``fd`` (made when ``create``), never through a link."""
    made = False
    if create:
        try:
            os.mkdir(name, _FOLDER_MODE, dir_fd=fd)
            made = True
        except FileExistsError:
            pass
    try:
        opened = os.open(name, _DIRECTORY | _NOFOLLOW, dir_fd=fd)
        if made:                # the mode asked, not what the umask now leaves of it
            os.fchmod(opened, _FOLDER_MODE)
        return opened
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENOTDIR):
            raise OSError(exc.errno, f"{name!r} leads out of the save folder through a "
                          "symbolic link (or is not a folder); stagecheck writes no file "
                          "through it") from None
        raise


def _folder_fd(folder: str, top: str | None = None) -> tuple[int, bool]:
    """A descriptor of ``folder`` (created when needed) and whether the caller closes it.

    From the descriptor ``probe_folder`` opened for it or a folder above it, else from
    ``top`` (opened now, links and all: the user's choice), one name at a time, never
    through a link."""
    path = os.path.abspath(folder)
    base = path
    rest: list[str] = []
    while base not in _OPENED:
        parent = os.path.dirname(base)
        if parent == base or (top is not None and base == os.path.abspath(top)):
            os.makedirs(base, exist_ok=True)
            fd = os.open(base, _DIRECTORY)
            try:
                current, _ = _walk(fd, rest)
            finally:
                if rest:
                    os.close(fd)
            return current, True
        rest.insert(0, os.path.basename(base))
        base = parent
    fd, missing = _OPENED[base]
    current, opened = _walk(fd, missing + rest)
    return current, opened


def _walk(fd: int, names: list[str]) -> tuple[int, bool]:
    """Folder ``names`` below folder ``fd``, each made when missing, none a link; the
    descriptor of the last one and whether it is a new one (``fd`` when ``names`` is
    empty)."""
    current = fd
    try:
        for name in names:
            opened = _open_child(current, name, create=True)
            if current != fd:
                os.close(current)
            current = opened
    except BaseException:
        if current != fd:
            os.close(current)
        raise
    return current, current != fd


def make_folder(folder: str) -> None:
    """Create ``folder`` (and what is missing above it) the way files are written under
    it: through the save folder's descriptor, never through a link."""
    fd, close = _folder_fd(folder)
    if close:
        os.close(fd)


def write_atomic(path: str, text: str, inside: str | None = None) -> None:
    """Write ``text`` to ``path`` (UTF-8) all at once; ``OSError`` when that fails.

    On failure the destination is untouched and no temporary file is left behind.
    ``inside``: a folder stagecheck owns (the save folder): the file is written there and
    nowhere else, never through a link: a symbolic link at ``path`` is replaced by the
    file (what it points to is left alone), and a folder on the way that is a link is an
    ``OSError``; the folder is the one ``probe_folder`` opened before the run, even if
    its path now leads elsewhere. A signal during the write is recorded, never raised
    (``interrupt.settle``): a file the run was writing is written.
    """
    interrupt.settle()
    if inside is not None:
        _write_inside(path, text, inside)
        return
    path = os.path.realpath(path)      # a symlinked report the user named: the file it names
    if _special(path):
        _write_special(path, text)
        return
    folder, name = os.path.split(path)
    fd = os.open(folder, _DIRECTORY)
    try:
        _replace(fd, name, text)
    finally:
        os.close(fd)


def _write_inside(path: str, text: str, inside: str) -> None:
    top = os.path.abspath(inside)
    full = os.path.abspath(path)
    if full != top and not full.startswith(top.rstrip(os.sep) + os.sep):
        raise OSError(errno.EINVAL, f"{path!r} is not under {inside!r}")
    folder, name = os.path.split(full)
    fd, close = _folder_fd(folder, top)
    try:
        _replace(fd, name, text)     # a link named ``name`` there is replaced, not followed
    finally:
        if close:
            os.close(fd)


def _replace(folder_fd: int, name: str, text: str) -> None:
    """Write ``text`` to a temporary file in the folder ``folder_fd``, then rename it to
    ``name`` there; on failure nothing is left behind and ``name`` is untouched."""
    data = text.encode("utf-8")
    for _ in range(100):
        tmp = f".{name}.{os.urandom(4).hex()}.tmp"
        try:
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW,
                         FILE_MODE, dir_fd=folder_fd)
            break
        except FileExistsError:
            continue
    else:
        raise OSError(errno.EEXIST, "no temporary file name was free")
    try:
        try:
            os.fchmod(fd, FILE_MODE)    # the mode asked, not what the umask now leaves
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, name, src_dir_fd=folder_fd, dst_dir_fd=folder_fd)
    except BaseException:
        try:
            os.unlink(tmp, dir_fd=folder_fd)
        except OSError:
            pass
        raise


def _write_special(path: str, text: str) -> None:
    """Write ``text`` into a FIFO or device within ``FIFO_SECONDS``: a FIFO waits that long
    for a reader, and a reader that stops reading fails the write then."""
    deadline = time.monotonic() + FIFO_SECONDS
    while True:
        try:
            fd = os.open(path, os.O_WRONLY | os.O_NONBLOCK)
            break
        except OSError as exc:
            if exc.errno != errno.ENXIO:     # ENXIO: a FIFO that no process reads yet
                raise
            if time.monotonic() > deadline:
                raise OSError(errno.ENXIO, f"no process read the FIFO within "
                              f"{FIFO_SECONDS:.0f} s") from None
            time.sleep(0.05)
    try:
        view = memoryview(text.encode("utf-8"))
        while view:
            left = deadline - time.monotonic()
            if left <= 0:
                raise OSError(errno.ETIMEDOUT, f"its reader took no more of the report for "
                              f"{FIFO_SECONDS:.0f} s")
            waiting = select.poll()      # not select(): a descriptor past 1,023 is valid
            waiting.register(fd, select.POLLOUT)
            if not waiting.poll(left * 1000):
                continue
            try:
                view = view[os.write(fd, view):]
            except BlockingIOError:
                continue
    finally:
        os.close(fd)
