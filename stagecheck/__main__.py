"""``python -m stagecheck`` and the ``stagecheck`` command: the command line."""

import sys      # loaded with the interpreter: nothing to import before run() catches

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


if __name__ == "__main__":
    run()
