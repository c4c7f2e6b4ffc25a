"""The outline every command follows, and what commands share.

``Command.execute``: build the command's frozen config from the checked option values
(``configure``), probe the requested outputs, run the analysis (``run``: an ``Outcome``),
then write every file and print the report last (``deliver``), so a closed stdout costs
no file and no exit code. Exit codes: 0 clean, 1 findings, 2 usage/load error (or
undecided, or a clean run whose output could not be written), 3 internal error (an
exception inside stagecheck: see ``oracles/cli.py``), 130/143 interrupted.
"""

from __future__ import annotations

import importlib.util
import os
import shlex
import sys
from dataclasses import dataclass, field
from typing import Any, Callable

from stagecheck.oracles import interrupt, messages
from stagecheck.oracles.stdio import emit, note, shown
from stagecheck.oracles.commands.crash import is_internal
from stagecheck.oracles.commands.outputs import Outputs
from stagecheck.oracles.errors import SchemaError, ShimError, StagecheckError, UsageError
from stagecheck.oracles.options import DEFAULT_SAVE_DIR, flag_of, save_folder
from stagecheck.oracles.report.replay import untrusted_parts
from stagecheck.oracles.report.style import colorize, use_color
from stagecheck.oracles.runner import load_isolated, load_schema_isolated
from stagecheck.oracles.targets import is_file_spec, schema_spec, target_ref
from stagecheck.oracles.worker import WorkerError
from stagecheck.spec.schema_mistakes import SchemaCodeFailed

__all__ = ["EXIT_CLEAN", "EXIT_FINDINGS", "EXIT_INTERNAL", "EXIT_USAGE", "Command", "Outcome",
           "VERDICT_EXIT", "file_named", "interrupted_line", "open_targets", "replay_flags", "schema_of",
           "shim_option"]

EXIT_CLEAN, EXIT_FINDINGS, EXIT_USAGE, EXIT_INTERNAL = 0, 1, 2, 3
VERDICT_EXIT = {"equivalent": EXIT_CLEAN, "different": EXIT_FINDINGS, "undecided": EXIT_USAGE}


def file_named(error: SchemaError, values: dict) -> SchemaError:
    """``error`` with the ``FILE`` of its fix ('stagecheck schema check FILE') replaced by
    the protocol or schema file the run was given, where one was; returns ``error``."""
    if not error.fix:
        return error
    if values.get("schema") and not values.get("protocol"):     # the other file: no part
        error.fix = error.fix.replace(" or 'stagecheck protocol check FILE'", "")
    if values.get("protocol") and not values.get("schema"):
        error.fix = error.fix.replace("'stagecheck schema check FILE' or ", "")
    for command in ("protocol", "schema"):
        if values.get(command):
            error.fix = error.fix.replace(
                f"stagecheck {command} check FILE",
                f"stagecheck {command} check {shlex.quote(values[command])}")
    return error


@dataclass
class Outcome:
    """What a command's run gives: the verdict, its exit code, the result the renderers
    read, the files to write (``option -> render()``), the text report, and for a run a
    signal stopped, what it did before (``(count, findings, unit, where)``)."""

    verdict: str
    code: int
    result: Any = None
    files: dict[str, Callable[[], str]] = field(default_factory=dict)
    text: str | None = None
    interrupted: tuple | None = None
    saved: str | None = None         # where the findings were saved (the run manifest)
    notes: tuple[str, ...] = ()      # lines for stderr after the report
    said: str | None = None          # the verdict in the report's words (report.text.
                                     # verdict_said), for messages about its files


#: options that contradict each other: per option, ``(flag as said, its values key, whether
#: it is set, its value when it yields)``, then why they contradict
CONTRADICTIONS = (
    (("--save-infos", "save_infos", bool, False), ("--no-save", "no_save", bool, False),
     "--no-save writes no replay file, so no info finding would be saved"),
    (("--kernel-backend", "kernel_backend", lambda v: v is not None, None),
     ("--kernel off (--no-kernel)", "kernel", lambda v: v == "off", "auto"),
     "with --kernel off no kernel runs, so no backend would be used"),
    (("--save-dir", "save_dir", lambda v: v not in (None, DEFAULT_SAVE_DIR), DEFAULT_SAVE_DIR),
     ("--no-save", "no_save", bool, False),
     "--no-save writes no replay file and no manifest, so the folder would not be used"),
    (("--list", "list", bool, False), ("--json", "json", lambda v: v is not None, None),
     "--list prints the mutant catalog and runs nothing, so no --json report would be written"),
)


def refuse_contradictions(values: dict, from_config=frozenset()) -> None:
    """Two options that contradict each other, both given on the command line, are exit 2
    naming them, never a run that quietly honours one. Where ``[tool.stagecheck]`` set one
    of them (``from_config``: the keys it set) and the command line the other, the command
    line wins: the file's value yields (``kernel = "off"`` and ``--kernel-backend triton``
    run the kernel on Triton)."""
    for one, other, why in CONTRADICTIONS:
        if not all(is_set(values.get(key)) for _, key, is_set, _ in (one, other)):
            continue
        configured = [option for option in (one, other) if option[1] in from_config]
        if len(configured) == 1:           # the file's setting yields to the command line
            values[configured[0][1]] = configured[0][3]
        elif not configured:
            raise UsageError.of(messages.OPTIONS_CONTRADICT, one[0], other=other[0],
                                why=why).located(f"option {one[0]}")


def schema_code_error(exc: SchemaCodeFailed, values: dict) -> SchemaError:
    """The ``SchemaError`` (exit 2) of schema or protocol code that failed during a run,
    naming the file (``file_named``)."""
    protocol = str(exc.what).startswith("protocol ")     # a protocol's check
    return file_named(SchemaError.of(
        (messages.SCHEMA_CODE_RETURNED if protocol else messages.SCHEMA_VALUE_RETURNED)
        if exc.returned else messages.PROTOCOL_CHECK_RAISED if protocol
        else messages.SCHEMA_CODE_FAILED, exc.what, error=exc.error), values)


class Command:
    """One command: ``configure`` (values -> frozen config), ``run`` (config -> Outcome).

    ``reports`` names the output options the command writes (``--json``...) and
    ``colored`` whether its text report takes ``--color``.
    """

    name = ""
    reports: tuple[str, ...] = ()
    colored = False

    def configure(self, args, values: dict) -> Any:
        raise NotImplementedError

    def run(self, config, values: dict, outputs: Outputs) -> Outcome:
        raise NotImplementedError

    def outputs(self, values: dict) -> Outputs:
        return Outputs({f"--{o.replace('_', '-')}": values.get(o) for o in self.reports},
                       save_folder(values))

    def execute(self, args, values: dict) -> int:
        """The outline: outputs probed, config built, the run, then files and report.

        An exception inside stagecheck propagates to the command line (exit 3); a
        ``WorkerError`` (stagecheck's machinery failed in a worker) is marked internal."""
        refuse_contradictions(values, getattr(args, "from_config", frozenset()))
        outputs = self.outputs(values)
        config = self.configure(args, values)
        try:
            outcome = self.run(config, values, outputs)
        except SchemaCodeFailed as exc:      # the schema's mistake: exit 2, never a verdict
            raise schema_code_error(exc, values) from None
        except SchemaError as exc:
            raise file_named(exc, values)
        except Exception as exc:
            internal(exc)
            raise
        return self.deliver(outcome, values, outputs)

    def deliver_partial(self, outcome: Outcome, outputs: Outputs,
                        error: BaseException) -> None:
        """Write the files of a run an internal error stopped (``outcome``: what it found
        before), and say where on the error's one line (``error.partial_saved``)."""
        for option, render in outcome.files.items():
            outputs.write(option, render)
        findings = list(getattr(outcome.result, "findings", None) or ())
        errors = sum(1 for f in findings if f.severity == "error")
        written = [outcome.saved] if outcome.saved else []
        written += [shown(path) for option, path in outputs.reports.items()
                    if not any(failed[0] == option for failed in outputs.failed)]
        if written:
            error.partial_saved = messages.INTERNAL_ERROR_PARTIAL.format(
                findings=len(findings), errors=errors, where=", ".join(written))

    def deliver(self, outcome: Outcome, values: dict, outputs: Outputs) -> int:
        """Every file first, the report last: a closed stdout cannot cost a file."""
        for option, render in outcome.files.items():
            outputs.write(option, render)
        if outcome.interrupted is not None:
            return outputs.finish(interrupted_line(*outcome.interrupted), outcome.verdict)
        if outcome.text is not None:
            emit(colored(values, outcome.text) if self.colored else outcome.text)
        for line in () if values.get("quiet") else outcome.notes:
            note(line)
        return outputs.finish(outcome.code, outcome.said or outcome.verdict)



def internal(exc: BaseException) -> bool:
    """Whether ``exc`` is an internal error (``crash.is_internal``); a ``WorkerError``
    (stagecheck's machinery failed inside a worker) is marked so."""
    if isinstance(exc, WorkerError):
        exc.internal = True
    return is_internal(exc)


def colored(values: dict, text: str) -> str:
    """``text`` with colour where ``--color`` and the terminal say so (style.use_color)."""
    return colorize(text, use_color(values.get("color") or "never", sys.stdout, os.environ))


def interrupted_line(examples: int | None, findings=(), unit: str = "example(s)",
                     saved: str = "") -> int:
    """The one line of an interrupted run (what ran, what was found so far, where it was
    saved), and its exit code; ``examples`` None: a command that counts none."""
    if examples is None:
        note(messages.INTERRUPTED_UNCOUNTED.format(
            signal=interrupt.signal_name(interrupt.requested())))
        return interrupt.exit_code()
    findings = list(findings)
    errors = sum(1 for f in findings if f.severity == "error")
    note(messages.INTERRUPTED.format(
        signal=interrupt.signal_name(interrupt.requested()), examples=examples, unit=unit,
        findings=len(findings), errors=errors, infos=len(findings) - errors, saved=saved))
    return interrupt.exit_code()


# ------------------------------------------------------------------------------ loading

def schema_of(spec: str | None, where: str = "option --schema", checked: bool = True):
    """The schema ``--schema`` names (None: chosen by each target's function name); a
    schema file is probed in a worker first (``runner.load_schema_isolated``)."""
    if spec is None:
        return None
    try:
        return load_schema_isolated(spec, checked=checked)
    except StagecheckError as exc:
        raise exc.located(where) from None


def open_targets(pairs: list[tuple[str, str]], schema=None, shims=(),
                 shims_from: str | None = None):
    """Load the targets ``(spec, argument)`` in a worker process, never in this one; a
    runner holding them. A file or revision target is read here first (a ``git:REV``
    resolved to its commit once: the runner's targets keep the commit and the pinned
    spec); the worker compiles it with ``shims``. A loading error names its argument,
    whether it came from reading here or from loading in the worker (a global name no
    import, definition or shim provides: exit 2, never a difference in a run); a shim
    that cannot be read or imported, of ``--shim`` or of ``shims_from`` (``shim_option``)."""
    spec = schema_spec(schema)
    refs = []
    for target, argument in pairs:
        try:
            refs.append(target_ref(target, spec, shims))
        except StagecheckError as exc:
            raise exc.located(f"argument {argument}") from None
    try:
        return load_isolated(refs, {spec: schema} if schema is not None else None)
    except StagecheckError as exc:
        index = getattr(exc, "target_index", None)
        raise exc.located(shim_option(exc, shims_from) or (
            f"argument {pairs[index][1]}" if index is not None else "arguments")) from None


def refuse_unread_shims(shims, targets, args) -> None:
    """``--shim`` on the command line where no target is a file (diff, spec, bench,
    symbolic, mutants): a built-in or module target reads no shim, so the file would not
    even be imported (a broken one passed unseen, exit 0) -- exit 2, as ``protocol check
    FILE --shim`` without a target is.
    Shims of ``[tool.stagecheck]`` are the project's, for whichever command reads them."""
    if not shims or getattr(args, "shims_from", None) is not None:
        return
    if any(is_file_spec(t) for t in targets if t):
        return
    raise UsageError.of(messages.SHIM_UNREAD, shims[0],
                        command=args.command).located("option --shim")


def shim_option(exc: BaseException, shims_from: str | None = None) -> str | None:
    """Where a shim that cannot be read or imported (``ShimError``) is said of: the option
    ``--shim`` (the user mistyped the shim, not the target that was loading it), or
    ``shims_from`` where the shims came from elsewhere (a replay file); None for any other
    error."""
    if not isinstance(exc, ShimError):
        return None
    return shims_from or f"option {flag_of(None, 'shims')}"


def replay_flags(baseline, candidate, shims, schema: str | None,
                 anywhere: bool = False) -> str:
    """What the printed ``stagecheck replay FILE`` line must add so that it runs as
    printed: a replay file runs only the targets, shims and schema file inside the trust
    boundary unless the command line names them (``report.replay.untrusted_parts``;
    ``anywhere``: so that it runs from any folder, every file named)."""
    parts, _ = untrusted_parts({"baseline": baseline.pinned if baseline else None,
                                "candidate": candidate.pinned, "shims": list(shims),
                                "schema": schema}, anywhere)
    flag = {name: flag_of("replay", name) for name in ("baseline", "candidate", "shims",
                                                        "schema")}     # options.TABLE
    out = []
    if "baseline" in parts or "candidate" in parts:
        if baseline is not None:
            out += [flag["baseline"], shlex.quote(baseline.pinned)]
        out += [flag["candidate"], shlex.quote(candidate.pinned)]
    for s in shims if "shims" in parts else ():
        out += [flag["shims"], shlex.quote(s)]
    if "schema" in parts:
        out += [flag["schema"], shlex.quote(schema)]
    return (" " + " ".join(out)) if out else ""


# ------------------------------------------------------------------------------ triton

def triton_available() -> bool:
    """Whether ``import triton`` can work, without importing it (a second)."""
    if "triton" in sys.modules:
        return sys.modules["triton"] is not None
    try:
        return importlib.util.find_spec("triton") is not None
    except (ImportError, ValueError):
        return False


def require_triton(what: str, alternative: str = "") -> None:
    """Exit 2 naming the kernel extra when ``what`` needs triton and it is missing."""
    if triton_available():
        return
    raise StagecheckError.of(messages.TRITON_EXTRA_MISSING, what=what,
                             error="import triton fails", alternative=alternative)
