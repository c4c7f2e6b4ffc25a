"""The commands of ``stagecheck``, one module each, with one outline.

Each command is a ``Command`` (``base.py``) in its own module (``diff`` and ``spec`` share
``campaign.py``): it builds its frozen config object from the checked option values
(``options.TABLE``), runs the analysis and returns an ``Outcome`` (the verdict, the exit
code, the data each renderer reads); ``Command.execute`` writes the requested files
first and prints the report last. ``oracles/cli.py`` only builds the parser from the
table, parses and dispatches.

This package's face holds only what the parser needs (each command's help, arguments
and exit codes), standard library only: a command's module, and with it the analysis
it runs, is imported by ``load`` once the arguments were parsed and checked.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass

__all__ = ["COMMANDS", "CommandSpec", "STARTS_WORKER", "load", "release"]

_TARGET_FORMS = "builtin name, module:function, file.py::function or git:REV:file.py::function"


@dataclass(frozen=True)
class CommandSpec:
    """What the parser says of a command: its help, its positional arguments
    (``(name, help)``), what exit 1 means, what else exit 2 means, one example, and the
    module that runs it."""

    name: str
    help: str
    arguments: tuple[tuple[str, str], ...]
    exit_1: str
    exit_2: str
    example: str
    module: str


def _spec(name, help, arguments, exit_1, exit_2, example, module=None) -> CommandSpec:
    return CommandSpec(name, help, tuple(arguments), exit_1, exit_2, example,
                       f"stagecheck.oracles.commands.{module or name}")


_FINDINGS = "error findings (--strict: any finding)"

#: every command, in the order ``stagecheck --help`` lists them
COMMANDS: dict[str, CommandSpec] = {c.name: c for c in (
    _spec("diff", "compare two staging targets on generated scenarios",
          [("baseline", _TARGET_FORMS), ("candidate", "same forms as BASELINE")], _FINDINGS,
          "", "stagecheck diff legacy single-loop --examples 1000 --json report.json",
          "campaign"),
    _spec("spec", "check one staging target against the spec",
          [("target", "the staging function: same forms as diff's BASELINE")], _FINDINGS, "",
          "stagecheck spec single-loop --max-capacity 16", "campaign"),
    _spec("replay", "re-run a saved finding",
          [("file", "a replay file a run saved (under .stagecheck/findings/)")],
          "the saved example still shows an error finding", "",
          "stagecheck replay .stagecheck/findings/FILE.json --candidate single-loop"),
    _spec("kernel", "kernel oracle 1: the Triton postprocess kernel against its reference, "
          "bit for bit (needs the kernel extra: pip install 'stagecheck[kernel]')", [],
          "the Triton kernel and its reference differ", "; triton not installed",
          "stagecheck kernel --examples 50"),
    _spec("symbolic", "CrossHair: symbolic diff of two targets over list-backed buffers",
          [("baseline", _TARGET_FORMS), ("candidate", "same forms as BASELINE")], _FINDINGS,
          "; undecided or inconclusive", "stagecheck symbolic legacy single-loop --max-paths 40"),
    _spec("bench", "per-call cost of two targets, interleaved, as ratios",
          [("baseline", _TARGET_FORMS), ("candidate", "same forms as BASELINE")],
          "(never: bench measures)", "", "stagecheck bench legacy single-loop"),
    _spec("mutants", "mutation catalog: which oracle kills which realistic refactoring "
          "mistake", [("target", "the staging function to mutate: a builtin name, "
                       "module:function or file.py::function")],
          "survivors (a non-equivalent mutant no stagecheck oracle killed)", "",
          "stagecheck mutants single-loop --oracles spec,differential --budget 100"),
    _spec("schema", "staging schemas: list the built-in ones, show one, or check a schema "
          "file and the scenario space it induces", [],
          "is not used (a listing or a check: no verdict)",
          "; a schema with problems (check)", "stagecheck schema check mamba-postprocess"),
    _spec("protocol", "staging protocols (step sequences across engine steps): list the "
          "built-in ones, or check a protocol file (docs/protocols.md); run one with "
          "diff/spec --protocol", [], "is not used (a listing or a check: no verdict)",
          "; a protocol with problems (check)",
          "stagecheck protocol check path/to/protocol.py"),
)}


#: the commands whose run starts a worker process at once (the targets run there): one is
#: started before the command's module is imported, so that the two overlap
STARTS_WORKER = frozenset({"diff", "spec"})


def load(name: str):
    """The ``Command`` that runs ``name``, its module imported now (after the arguments
    were parsed and checked: the one place a command's analysis is imported). For a
    command of ``STARTS_WORKER``, its worker process starts first (``release`` ends it
    if the run did not take it)."""
    if name in STARTS_WORKER:
        # the worker's own module (standard library and the pipe's protocol): the worker
        # starts on the second CPU while this process imports the analysis
        from stagecheck.oracles.worker.process import prestart
        prestart()
    return importlib.import_module(COMMANDS[name].module).COMMANDS[name]


def release(name: str) -> None:
    """End the worker ``load`` started ahead of ``name`` if the run did not take it (a
    usage error, a run in this process)."""
    if name in STARTS_WORKER:
        # loaded already by ``load``: no import happens here
        from stagecheck.oracles.worker.process import discard_spare
        discard_spare()
