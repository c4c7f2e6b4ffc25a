"""The ``stagecheck`` command line: ``main(argv) -> int``.

This module only builds the parser (each command's arguments from
``oracles/commands``, its options from ``options.TABLE``), parses (over the defaults of
``[tool.stagecheck]``), checks every option value with its option's check, and
dispatches to the command (``oracles/commands/``: config, run, outcome, files, report).

Exit codes: 0 no error finding; 1 error findings (with ``--strict`` info findings count
too); 2 usage or load error, with a message that names the argument, the value and the
fix, an undecided symbolic run, or a requested output that could not be written; 3 an
internal error (an exception inside stagecheck, not inside the code under test: one line
on stderr names the file that holds its traceback, and what was found before it is
still written where the command has a partial result); 130/143 a run stopped by
SIGINT/SIGTERM (never 0).

Standard library only at import: ``--help``, ``--version`` and usage errors answer
before anything of the analysis (torch, hypothesis, triton, crosshair) is imported; a
command's module is imported by ``commands.load`` once its arguments were checked.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import textwrap

from stagecheck import __version__
from stagecheck.oracles import interrupt, messages, stdio
from stagecheck.oracles.stdio import emit, note, shown
from stagecheck.oracles.commands import COMMANDS, load, release
from stagecheck.oracles.commands.crash import is_internal, report_internal
from stagecheck.oracles.environment import hypothesis_outside_the_repository, refuse_bad_environment
from stagecheck.oracles.config import KEYS, file_words, load_config
from stagecheck.oracles.text import did_you_mean
from stagecheck.oracles.errors import StagecheckError, UsageError
from stagecheck.oracles.options import (OPTIONS, PROTOCOL_FIELDS, Option, flag_of, options_of,
                                        save_folder, validated)
from stagecheck.oracles.paths import require_file

__all__ = ["build_parser", "entry_point", "main"]

EXIT_CLEAN, EXIT_FINDINGS, EXIT_USAGE = 0, 1, 2


class _Parser(argparse.ArgumentParser):
    """argparse that raises ``UsageError`` instead of exiting, refuses abbreviations of
    long options (``--example`` is not ``--examples``), checks an option's value with
    the option's own check (``options.TABLE``) and answers an unknown option with the
    closest option of the command and the command's own ``--help``."""

    def __init__(self, *args, **kwargs) -> None:
        kwargs.setdefault("formatter_class", argparse.RawDescriptionHelpFormatter)
        kwargs.setdefault("allow_abbrev", False)
        super().__init__(*args, **kwargs)

    def print_help(self, file=None) -> None:
        """``--help`` on stdout through ``emit``: help that cannot be written (``>/dev/full``,
        ``>&-``) is exit 2, as ``--version`` is (``entry_point``), never lost at exit 0."""
        if file is not None:
            super().print_help(file)
        else:
            emit(self.format_help().rstrip("\n"))

    def error(self, message: str):  # never exit from inside argparse
        raise UsageError.of(messages.USAGE, message=self._reworded(message), prog=self.prog)

    def _reworded(self, message: str) -> str:
        """argparse's words where they name no fix: a switch given a value, a missing
        positional argument by its destination (``candidate``) instead of its name in the
        usage line (``CANDIDATE``)."""
        switch = re.fullmatch(r"argument (--[\w-]+): ignored explicit argument (.*)", message)
        if switch:
            return messages.SWITCH_VALUE.format(flag=switch.group(1), value=switch.group(2))
        bare = re.fullmatch(r"argument (--[\w-]+): expected one argument", message)
        if bare:        # an option given without its value: what the value is
            action = self._option_string_actions.get(bare.group(1))
            metavar = getattr(action, "metavar", None) or bare.group(1).lstrip("-").upper()
            return messages.OPTION_VALUE_MISSING.format(flag=bare.group(1), metavar=metavar)
        missing = re.fullmatch(r"the following arguments are required: (.*)", message)
        if missing:
            names = {a.dest: a.metavar or a.dest.upper() for a in self._actions
                     if not a.option_strings}
            return "missing argument(s): " + ", ".join(
                names.get(n.strip(), n.strip()) for n in missing.group(1).split(","))
        choice = re.fullmatch(r"argument (\w+): invalid choice: '?(.*?)'? \(choose from (.*)\)",
                              message)
        if choice and choice.group(1) in ("COMMAND", "SUBCOMMAND"):     # a misspelt command
            return message + did_you_mean(choice.group(2), [
                c.strip(" '") for c in choice.group(3).split(",")])
        return message

    def _check_value(self, action, value):
        option = getattr(action, "table_option", None)
        if option is not None and action.choices and value not in action.choices:
            # a wrong choice reads as it does from [tool.stagecheck] and the fixture
            try:
                option.check(option.field, value)
            except UsageError as exc:
                raise exc.located(f"option {option.flag}") from None
        super()._check_value(action, value)

    def parse_known_args(self, args=None, namespace=None):
        return super().parse_known_args(self._joined(args), namespace)

    def _joined(self, args):
        """``--timeout -inf`` as ``--timeout=-inf``: a value that starts with '-' and reads
        as a number (-1e5, -inf, -nan) is argparse's "expected one argument" otherwise, with
        no value and no fix; joined, the option's own check refuses it by name."""
        if args is None:
            args = sys.argv[1:]
        args = list(args)
        out: list[str] = []
        for k, word in enumerate(args):
            if word == "--":
                return out + args[k:]
            action = self._option_string_actions.get(out[-1]) if out else None
            if (action is not None and action.nargs is None and word.startswith("-")
                    and _numeric(word)):
                out[-1] = f"{out[-1]}={word}"
            else:
                out.append(word)
        return out

    def parse_args(self, args=None, namespace=None):
        parsed, extras = self.parse_known_args(args, namespace)
        if extras:
            raise self._unrecognized(parsed, extras)
        return parsed

    def _unrecognized(self, parsed, extras: list[str]) -> UsageError:
        parser = self            # the (sub)command the arguments chose
        while True:
            sub = next((a for a in parser._actions
                        if isinstance(a, argparse._SubParsersAction)), None)
            chosen = getattr(parsed, sub.dest, None) if sub is not None else None
            if chosen not in (sub.choices if sub is not None else {}):
                break
            parser = sub.choices[chosen]
        known = [o for a in parser._actions for o in a.option_strings if o.startswith("--")]
        hint = ""
        for word in extras:
            if word.startswith("--"):
                hint = _time_flag(word, known, parser.prog) \
                    if word.split("=")[0] in TIME_WORDS else \
                    did_you_mean(word.split("=")[0], known) or _field_flag(word, known)
                if hint:
                    break
        return UsageError.of(messages.USAGE, message=f"unrecognized arguments: "
                             f"{' '.join(extras)}{hint}", prog=parser.prog)


def _numeric(word: str) -> bool:
    """Whether ``word`` reads as a number to ``float`` (``-1e5``, ``-inf``, ``-nan``)."""
    try:
        float(word)
    except ValueError:
        return False
    return True


#: commands that count no examples or step sequences: an interrupted one says no count
UNCOUNTED = frozenset({"schema", "protocol"})
#: what users type for a time budget; a command's own one is --budget (mutants) or
#: --timeout (symbolic: the whole exploration), elsewhere the search counts examples
TIME_WORDS = frozenset({"--seconds", "--time", "--duration", "--time-budget", "--time-limit",
                        "--max-time", "--max-seconds", "--deadline"})


def _time_flag(word: str, known: list[str], prog: str) -> str:
    """`` (did you mean --budget?)`` for ``--seconds`` (one of ``TIME_WORDS``) where the
    command has a time budget, else what sets how long it runs (``NO_TIME_BUDGET``)."""
    # mutants' budget; symbolic (the command with --max-paths) caps its run with --timeout
    for marker, budget in (("--budget", "--budget"), ("--max-paths", "--timeout")):
        if marker in known:
            return messages.DID_YOU_MEAN.format(option=budget)
    how = [text for flag, text in (("--examples", messages.NO_TIME_BUDGET_EXAMPLES),
                                   ("--timeout", messages.NO_TIME_BUDGET_TIMEOUT))
           if flag in known]
    return messages.NO_TIME_BUDGET.format(command=prog, how=", ".join(how)) if how else ""


def _field_flag(word: str, known: list[str]) -> str:
    """`` (did you mean --examples?)`` for ``--sequences``: an option spelt as the
    ``ProtocolConfig`` field it sets (the name the library and the fixture use)."""
    option = OPTIONS.get(PROTOCOL_FIELDS.get(word[2:].split("=")[0].replace("-", "_"), ""))
    flag = option.flag if option is not None else None
    return messages.DID_YOU_MEAN.format(option=flag) if flag in known else ""


def _epilog(name: str, example: str | None = None) -> str:
    """Exit codes and an example, under ``COMMAND --help`` (and its subcommands': the
    command's codes, their own example)."""
    spec = COMMANDS[name]
    codes = textwrap.fill(messages.EXIT_CODES_EPILOG.format(findings=spec.exit_1,
                                                            two=spec.exit_2), 78)
    return f"{codes}\n\nexample:\n  {example or spec.example}"


def _add_option(parser: argparse.ArgumentParser, option: Option) -> None:
    """``option`` of the table on ``parser``: its flag, destination, default and help."""
    flags = [option.flag] + ([option.short] if option.short else [])
    kwargs: dict = {"dest": option.dest, "help": option.help_text()}
    if option.action == "switch":
        kwargs.update(action="store_true", default=option.default_value())
    elif option.action == "negated":
        kwargs.update(action="store_false", default=option.default_value())
    elif option.action == "const":
        kwargs.update(action="store_const", const=option.const, default=argparse.SUPPRESS)
    elif option.action == "append":
        kwargs.update(action="append", default=list(option.default_value() or ()),
                      metavar=option.metavar)
    else:
        kwargs.update(default=option.default_text(), metavar=option.metavar,
                      choices=option.choices)
    action = parser.add_argument(*flags, **kwargs)
    action.table_option = option


def build_parser() -> argparse.ArgumentParser:
    """The parser: each command's arguments (``commands.COMMANDS``), then its options
    from ``options.TABLE``."""
    parser = _Parser(prog="stagecheck", description="Formal spec and differential testing of "
                     "host-side staging code for the Mamba postprocess kernel.",
                     epilog=messages.EXIT_CODES_EPILOG.format(
                         findings="findings (see each command's --help)", two="") +
                     "\n\nexample:\n  stagecheck diff legacy single-loop\n\n"
                     "defaults may be set in pyproject.toml under [tool.stagecheck]")
    parser.add_argument("--version", action="store_true",
                        help="print stagecheck's version and exit")
    sub = parser.add_subparsers(dest="command", parser_class=_Parser, metavar="COMMAND")
    for name, spec in COMMANDS.items():
        command = sub.add_parser(name, help=spec.help, description=spec.help,
                                 epilog=_epilog(name))
        for argument, text in spec.arguments:
            command.add_argument(argument, help=text)
        for option in options_of(name) if name != "protocol" else ():   # its 'check''s
            _add_option(command, option)
    schema_sub = _subparsers(parser)["schema"].add_subparsers(
        dest="schema_command", parser_class=_Parser, metavar="SUBCOMMAND")
    schema_sub.add_parser("list", help="the built-in schemas and the functions they describe",
                          epilog=_epilog("schema", "stagecheck schema list"))
    show = schema_sub.add_parser("show", help="what a schema declares, as Markdown",
                                 epilog=_epilog("schema", "stagecheck schema show mamba-postprocess"))
    show.add_argument("schema", help="a built-in name or 'path/to/schema.py[:NAME]'")
    check = schema_sub.add_parser("check", help="validate a schema (declarations and a dry "
                                  "run) and show the scenario space it induces",
                                  epilog=_epilog("schema",
                                                 "stagecheck schema check my_schema.py"))
    check.add_argument("schema", help="a built-in name or 'path/to/schema.py[:NAME]'")
    protocol_sub = _subparsers(parser)["protocol"].add_subparsers(
        dest="protocol_command", parser_class=_Parser, metavar="SUBCOMMAND")
    protocol_sub.add_parser("list", help="the built-in protocols and what they drive",
                            epilog=_epilog("protocol", "stagecheck protocol list"))
    check = protocol_sub.add_parser("check", help="validate a protocol (its declaration and "
                                    "a dry run of its step generator; with TARGET, a dry run "
                                    "of build, the operations, observe and its checks)",
                                    epilog=_epilog("protocol",
                                                   "stagecheck protocol check my_protocol.py "
                                                   "src/stager.py::TokenStager"))
    check.add_argument("protocol", help="a built-in name or 'path/to/protocol.py[:NAME]'")
    check.add_argument("target", nargs="?", metavar="TARGET",
                       help="the component to dry-run the protocol on "
                            "('path/to/file.py::Class'): a few step sequences run through "
                            "build, every operation, observe and the protocol's checks")
    for option in options_of("protocol"):       # what the dry run loads the target with
        _add_option(check, option)
    return parser


def _located(error: UsageError, command: str | None) -> UsageError:
    """Name the option the way the command line spells it."""
    if error.where is None and getattr(error, "option", None):
        error.located(f"option {flag_of(command, error.option)}")
    return error


def _said_of_config(error: StagecheckError, command: str | None, args) -> None:
    """An error said of an option (``option --schema``) whose value this run took from
    ``[tool.stagecheck]`` (``args.from_config``) is said of the key and the file that gave
    it instead, as a value the table itself refuses is: the command line never held it."""
    from_config = getattr(args, "from_config", None)
    path = getattr(args, "config_path", None)
    if not from_config or path is None or not (error.where or "").startswith("option "):
        return
    flag = error.where[len("option "):]
    for option in options_of(command):
        if option.flag == flag and option.dest in from_config:
            key = next((k for k, spec in KEYS.items() if spec.dest == option.dest), None)
            if key is not None:
                error.where = messages.CONFIG_WHERE.format(key=key, path=path)
                error.problem = file_words(error.problem, flag, key, error.value)
            return


def _values(args) -> dict:
    """The options of ``args.command`` by field, each checked by its option's check
    (``options.TABLE``): a bad value is exit 2 naming the option, before the command's
    module is imported."""
    raw = {o.field: getattr(args, o.dest, None) for o in options_of(args.command)
           if o.action != "const"}
    try:
        values = validated(args.command, raw)
    except UsageError as exc:
        raise _located(exc, args.command) from None
    if values.get("shims"):     # absolute: a target that changes folder must not move them
        _shim_files(values["shims"], getattr(args, "shims_from", None))
        values["shims"] = tuple(os.path.abspath(p) for p in values["shims"])
    return values


def _shim_files(shims, config_path: str | None) -> None:
    """Each shim is a regular file, checked here before any worker starts, whatever the
    targets (a builtin reads none): a missing shim, or a FIFO or a device given as one, is
    exit 2 naming the option (``--shim``, or the ``[tool.stagecheck]`` key at
    ``config_path`` that gave it), never the target that would have read it."""
    for path in shims:
        try:
            require_file(path, "shim", messages.SHIM_MISSING, UsageError, cwd=os.getcwd())
        except UsageError as exc:
            exc.option = "shims"
            if config_path is not None:
                exc.located(messages.CONFIG_WHERE.format(key="shims", path=config_path))
            raise


def _subparsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def _parse(parser: argparse.ArgumentParser, argv: list[str] | None):
    """Parse ``argv`` over the defaults of ``[tool.stagecheck]`` (the command line wins).

    The arguments are parsed first without the file, so a typo answers at once and
    ``--help`` / ``--version`` work whatever the file holds; then the file is read and
    checked, its values become the defaults of the command's options, and the
    arguments are parsed again over them.
    """
    args = parser.parse_args(argv)
    if args.version or args.command is None:
        return args
    config = load_config()
    defaults = config.defaults_for(args.command)
    if not defaults:
        return args
    command = _subparsers(parser)[args.command]
    shims = defaults.pop("shim", None)
    command.set_defaults(**defaults)
    given = args
    args = parser.parse_args(argv)
    # the options whose value is the file's (the command line did not set them)
    args.config_path = config.path
    args.from_config = {dest for dest, value in defaults.items()
                        if getattr(args, dest, None) == value
                        and getattr(given, dest, None) != value}
    if shims is not None and not args.shim:    # --shim on the command line replaces them
        args.shim, args.shims_from = shims, config.path
    used = config.summary(args.command, args)
    if used and not getattr(args, "quiet", False):
        note(messages.CONFIG_USED.format(path=shown(config.path), values=used))
    return args


def main(argv: list[str] | None = None) -> int:
    """Run one command; its exit code. SIGINT/SIGTERM are taken over for the run (see
    ``oracles/interrupt.py``) and given back on return."""
    stdio.ensure_standard_fds()     # before any pipe: no fd 0-2 may be reused
    interrupt.reset()
    interrupt.install()             # before anything else: Ctrl-C now sets the flag
    parser = build_parser()
    args, values = None, {}
    try:
        try:
            stdio.check_working_folder()
            try:
                args = _parse(parser, argv)
            except SystemExit as exit_:     # --help, shown: entry_point judges stdout
                args, code = None, exit_.code or EXIT_CLEAN
            if args is None:
                pass
            elif args.version:
                emit(f"stagecheck {__version__}")
                code = EXIT_CLEAN
            elif args.command is None:
                emit(parser.format_help().rstrip("\n"))
                code = EXIT_USAGE
            else:
                refuse_bad_environment()
                hypothesis_outside_the_repository()
                values = _values(args)
                try:
                    code = load(args.command).execute(args, values)
                finally:
                    release(args.command)
        except StagecheckError as exc:
            if is_internal(exc):       # stagecheck's machinery failed in a worker
                code = report_internal(exc, _argv(argv), save_folder(values))
            else:
                if isinstance(exc, UsageError):
                    _located(exc, getattr(args, "command", None))
                _said_of_config(exc, getattr(args, "command", None), args)
                note(f"stagecheck: error: {exc}")
                code = EXIT_USAGE
        except Exception as exc:       # an internal error: never a verdict
            code = report_internal(exc, _argv(argv), save_folder(values))
        except KeyboardInterrupt:   # a second signal, or Ctrl-C outside a search loop
            if not interrupt.requested():
                raise
            # the line of an interrupted run lives with the commands (imported late: it
            # brings the report stage, which --help and usage errors never need)
            from stagecheck.oracles.commands.base import interrupted_line
            protocol = values.get("protocol") if isinstance(values, dict) else None
            command = getattr(args, "command", None)
            code = interrupted_line(None) if command in UNCOUNTED else interrupted_line(
                0, unit="step sequence(s)" if protocol else "example(s)")
        if interrupt.requested() and code != interrupt.exit_code():
            # the flag decides: a signal that came while files were written, or one an
            # exception handler swallowed, still ends the run as interrupted
            note(f"stagecheck: interrupted by {interrupt.signal_name(interrupt.requested())}"
                 "; no verdict: interrupted")
            code = interrupt.exit_code()
        return code
    finally:
        interrupt.uninstall()


def _argv(argv: list[str] | None) -> list[str]:
    return list(sys.argv[1:] if argv is None else argv)


def entry_point() -> None:
    code = main()
    stdio.finish_stdout()
    if code == EXIT_CLEAN and stdio.stdout_lost():
        # a closed pipe is never exit 0: what the run printed did not all reach its reader
        stdio.note(messages.STDOUT_LOST)
        code = EXIT_USAGE
    guard = sys.modules.get("stagecheck.oracles.guard")    # loaded only with schema code
    if guard is not None:
        guard.closing()         # an exit handler that code registered keeps this code
        if guard.user_code_ran():     # nor may a thread or an exit handler of it hang
            for stream in (sys.stdout, sys.stderr):      # the process after its verdict
                try:
                    stream.flush()
                except (OSError, ValueError):
                    pass
            guard.exit_now(code)
    sys.exit(code)


if __name__ == "__main__":
    entry_point()
