"""The files a command writes: each requested output resolved to an absolute path and
probed before the run (nothing created or truncated), written atomically after it; a
write that fails is reported on stderr and turns exit 0 into 2."""

from __future__ import annotations

import os
import sys

from stagecheck.oracles import messages
from stagecheck.oracles.stdio import CLOSED_AT_START, note, report_to_stderr, stdout_gone
from stagecheck.oracles.errors import UsageError
from stagecheck.oracles.options import DEFAULT_SAVE_DIR
from stagecheck.oracles.report.files import (check_outputs, probe_file, probe_folder,
                                             write_atomic)

__all__ = ["EXIT_CLEAN", "EXIT_USAGE", "Outputs"]

EXIT_CLEAN, EXIT_USAGE = 0, 2


class Outputs:
    """The reports a command was asked for (``{"--json": path}``) and its save folder."""

    def __init__(self, reports: dict[str, str | None], save_dir: str | None = None) -> None:
        check_outputs(reports, save_dir)     # '' paths; a file that is not a report
        self.reports = {opt: p if p == "-" else os.path.abspath(p)
                        for opt, p in reports.items() if p}
        report_to_stderr("-" in self.reports.values())     # a document on stdout: alone
        self.save_dir = os.path.abspath(save_dir) if save_dir else None
        self.failed: list[tuple[str, str, str]] = []
        paths = list(self.reports.values())
        if len(set(paths)) < len(paths):
            same = next(p for p in paths if paths.count(p) > 1)
            options = [o for o, p in self.reports.items() if p == same]
            if options == ["--json", "--junit-xml"]:
                raise UsageError.of(messages.SAME_REPORT_PATH, same)
            raise UsageError.of(messages.SAME_REPORT_PATHS, same, options=" and ".join(options))
        for option, path in self.reports.items():
            why = probe_file(path) if path != "-" else None
            if why:
                raise UsageError.of(messages.REPORT_UNWRITABLE, path, why=why).located(
                    f"option {option}")
        if self.save_dir:
            why = probe_folder(self.save_dir)
            if why:
                default = os.path.normpath(save_dir) == DEFAULT_SAVE_DIR
                raise UsageError.of(messages.SAVE_DIR_DEFAULT_UNWRITABLE if default
                                    else messages.SAVE_DIR_UNWRITABLE, self.save_dir,
                                    why=why).located("option --save-dir")

    def write(self, option: str, text_of) -> None:
        """Write the report ``option`` asked for (``text_of()`` renders it)."""
        path = self.reports.get(option)
        if not path:
            return
        if path == "-":             # stdout: the document alone (the report goes to stderr)
            if 1 in CLOSED_AT_START:
                self.failed.append((option, path, "standard output is closed"))
                return
            try:
                sys.stdout.write(text_of().rstrip("\n") + "\n")
                sys.stdout.flush()
            except BrokenPipeError:  # the reader chose to stop: not a failure
                stdout_gone()
            except (OSError, ValueError) as exc:
                stdout_gone()
                self.failed.append((option, path, getattr(exc, "strerror", None) or str(exc)))
            return
        try:
            write_atomic(path, text_of())
        except OSError as exc:
            self.failed.append((option, path, exc.strerror or str(exc)))

    def attempt(self, option: str, path: str, action):
        """Run ``action()`` (writes under ``path``); None when it failed (remembered)."""
        try:
            return action()
        except OSError as exc:
            self.failed.append((option, path, exc.strerror or str(exc)))
            return None

    def finish(self, code: int, verdict: str) -> int:
        """The exit code: ``code``; 2 instead of 0 when a requested output could not be
        written (0 means a clean verdict *and* every output written). A non-zero code
        (findings, undecided, interrupted, internal error) is kept: it already says the
        run is not clean."""
        for option, path, error in self.failed:
            template = messages.REPORT_NOT_WRITTEN if code == EXIT_CLEAN else \
                messages.REPORT_NOT_WRITTEN_KEPT
            error_ = UsageError.of(template, path, error=error, verdict=verdict.upper(),
                                   code=code).located(f"option {option}")
            note(f"stagecheck: error: {error_}")
        if self.failed and code == EXIT_CLEAN:
            return EXIT_USAGE
        return code
