"""The modules a worker's own code runs on, as a call of code under test left them.

Code under test runs in the worker beside stagecheck's own code, which imports more of
itself, torch and numpy as it goes (a backend at a batch's start, a module on first
use). A target that deletes those modules from ``sys.modules`` (``del
sys.modules['numpy']``: numpy's C core "cannot load module more than once per process")
or sets them to None ("import ... halted") broke the worker it runs in: its next batch
failed inside stagecheck, an internal error (exit 3) with a traceback. ``Modules``
remembers them between calls; after each call of code under test (loading a target, a
call, a batch's examples) the worker asks ``broken``, and ends itself with
``BROKEN_EXIT`` where they changed: the checker says how the target ended its worker, a
finding against it (the example it ran) or its load error, never stagecheck's failure.

The same holds for the two pipe descriptors the worker talks to the checker through: a
target that closes them (``os.closerange(3, ...)``) or opens other files in their place
left a worker that could not answer. Its end came after the call had returned, and was
blamed on the targets' loading; ``end_if_broken`` also compares them with what they were
(``CLOSED_EXIT``), so the checker blames the call.
"""

from __future__ import annotations

import operator
import os
import sys

from stagecheck.oracles.worker.protocol import BROKEN_EXIT, CLOSED_EXIT

__all__ = ["Modules"]

#: the packages whose modules stagecheck's worker runs on
_PACKAGES = ("stagecheck", "torch", "numpy")
#: of torch and numpy, the modules looked at after every call (the packages, and the C
#: cores that cannot be loaded twice); every module of stagecheck is
_CORES = ("torch", "torch._C", "numpy", "numpy._core._multiarray_umath",
          "numpy.core._multiarray_umath")


class Modules:
    """``sys.modules``'s entries of stagecheck, torch and numpy as last seen whole."""

    def __init__(self, fds: tuple[int, ...] = ()) -> None:
        #: the worker's pipe descriptors, and the files they were (``closed``)
        self._fds = fds
        self._files = [_file_of(fd) for fd in fds]
        self._size = -1
        self._names: list[str] = []
        self._values: list = []
        self.remember()

    def remember(self) -> None:
        """Take the table as it is now (no code under test ran since ``broken`` was
        asked); cheap when no module was imported since the last time."""
        if len(sys.modules) == self._size:
            return
        watched = [(name, module) for name, module in list(sys.modules.items())
                   if module is not None and name.partition(".")[0] in _PACKAGES
                   and (name.startswith("stagecheck") or name in _CORES)]
        self._names = [name for name, _ in watched]
        self._values = [module for _, module in watched]
        self._size = len(sys.modules)

    def broken(self) -> list[str]:
        """The remembered modules that are gone from ``sys.modules`` or replaced there
        (a few microseconds when none is: compared in C, by identity)."""
        modules = sys.modules
        if all(map(operator.is_, map(modules.get, self._names), self._values)):
            return []
        return [name for name, module in zip(self._names, self._values)
                if modules.get(name) is not module]

    def closed(self) -> list[int]:
        """The worker's pipe descriptors that no longer are the files they were (two
        ``fstat`` calls)."""
        return [fd for fd, file in zip(self._fds, self._files) if _file_of(fd) != file]

    def end_if_broken(self) -> None:
        """End this worker (``BROKEN_EXIT``, ``CLOSED_EXIT``) where code under test broke
        the modules or closed its pipe: its own code could not go on, and the checker
        blames the call it ran."""
        if self.broken():
            os._exit(BROKEN_EXIT)
        if self.closed():
            os._exit(CLOSED_EXIT)


def _file_of(fd: int) -> tuple[int, int] | None:
    """The file descriptor ``fd`` is open on (device, inode), or None where it is closed."""
    try:
        stat = os.fstat(fd)
    except OSError:
        return None
    return stat.st_dev, stat.st_ino
