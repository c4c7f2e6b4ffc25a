"""``python -m stagecheck`` and the ``stagecheck`` command: the command line."""

import os       # loaded with the interpreter, as sys is: nothing to import before run() catches
import sys

#: what an interrupt during the command line's own imports prints (exit 130): before
#: ``oracles/interrupt.py`` takes the signals over, Ctrl-C raises inside an import
INTERRUPTED_STARTING = ("stagecheck: interrupted by SIGINT while starting (nothing ran); "
                        "no verdict: interrupted")


def run() -> None:
    """Run the command line; an interrupt while it is imported ends it as an interrupt
    later does (one line, exit 130), never with a traceback."""
    try:
        # the boundary: the command line's imports run here, where an interrupt is caught
        from stagecheck.oracles.cli import entry_point
    except KeyboardInterrupt:
        sys.stderr.write(INTERRUPTED_STARTING + "\n")
        sys.exit(130)       # 128 + SIGINT, as every interrupted run exits
    entry_point()


def _cwd_last() -> None:
    """``python -m stagecheck`` puts the current folder first on ``sys.path``: a file of the
    user's project named like a module stagecheck runs on (``numpy.py``, ``torch.py``,
    ``hypothesis.py``) was imported in its place, an internal error (exit 3) blaming
    stagecheck. The folder stays on the path, last (a module target there still imports),
    as it is absent from the ``stagecheck`` command's."""
    try:
        here = os.getcwd()
    except OSError:     # a deleted folder: the command line says so (stdio.CWD_GONE)
        return
    if sys.path and sys.path[0] in ("", here):
        sys.path.append(sys.path.pop(0))


if __name__ == "__main__":
    _cwd_last()
    run()
