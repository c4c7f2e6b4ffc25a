"""``replay``: a saved finding's example run again, on the saved targets or others."""

from __future__ import annotations

from contextlib import contextmanager

from stagecheck.oracles import interrupt, messages
from stagecheck.oracles.commands.alone import example_findings
from stagecheck.oracles.commands.base import (EXIT_CLEAN, EXIT_FINDINGS, Command, Outcome,
                                              open_targets, schema_of)
from stagecheck.oracles.commands.outputs import Outputs
from stagecheck.oracles.commands.protocol import replay_protocol_outcome
from stagecheck.oracles.errors import StagecheckError, TargetLoadError, UsageError
from stagecheck.oracles.observe import require_device
from stagecheck.oracles.options import ReplayConfig, RunOptions, build
from stagecheck.oracles.report import load_replay, render_replay
from stagecheck.oracles.report.protocol_replay import is_protocol_replay
from stagecheck.oracles.report.replay import check_trusted, replay_run

__all__ = ["COMMANDS", "ReplayCommand"]


class ReplayCommand(Command):
    name = "replay"

    def configure(self, args, values: dict) -> ReplayConfig:
        if "schema" in getattr(args, "from_config", ()) and is_protocol_replay(args.file):
            # the project's one-call schema ([tool.stagecheck]): a protocol finding's
            # replay leaves it out instead of refusing it (as a protocol run does)
            values = {**values, "schema": None}
        return build(ReplayConfig, self.name, {**values, "file": args.file})

    def run(self, config: ReplayConfig, values: dict, outputs: Outputs) -> Outcome:
        if is_protocol_replay(config.file):      # a protocol finding: its step sequence
            _refuse_unused("--schema", config.schema, config.file,
                           messages.REPLAY_HOLDS_SEQUENCE, messages.REPLAY_SCHEMA_ALTERNATIVE)
            return replay_protocol_outcome(config)
        _refuse_unused("--protocol", config.protocol, config.file,
                       messages.REPLAY_HOLDS_EXAMPLE)
        try:
            saved, scenario = load_replay(config.file)
            check_trusted(saved, config.file, config.baseline, config.candidate,
                          bool(config.shims), config.schema is not None)
        except StagecheckError as exc:
            raise exc.located("argument FILE") from None
        base_spec = config.baseline or saved.get("baseline")
        cand_spec = config.candidate or saved.get("candidate")
        shims = config.shims or tuple(saved.get("shims") or ())
        try:        # the copy model and steps the run had; a value out of range: its file's
            options = RunOptions(device=config.device or saved.get("device", "cpu"),
                                 **replay_run(saved))
        except StagecheckError as exc:
            raise exc.located(f"argument FILE{_bad_run_field(saved)}") from None
        require_device(options.device)
        schema = schema_of(config.schema)
        if schema is None and saved.get("schema"):
            schema = schema_of(saved["schema"], "argument FILE")
        # a target the file names is said of the file's field (a moved file: give the
        # option), one the command line gives of its option
        pairs = ([(base_spec, _said("baseline", config.baseline))] if base_spec else []) \
            + [(cand_spec, _said("candidate", config.candidate))]
        with _schema_blamed(config.schema), _moved_target(config), open_targets(
                pairs, schema, shims, None if config.shims else "argument FILE") as runner:
            drew = runner.targets[-1].schema.name
            if config.schema is not None and scenario.schema != drew:
                raise UsageError.of(messages.REPLAY_OTHER_SCHEMA, config.schema,
                                    saved=scenario.schema, given=drew
                                    ).located("option --schema")
            findings = example_findings(runner, scenario, options)
        errors = any(f.severity == "error" for f in findings)
        verdict = "different" if errors else "equivalent"
        if interrupt.requested():
            return Outcome("interrupted", 0, findings, interrupted=(1, findings, "example(s)",
                                                                  ""))
        return Outcome(verdict, EXIT_FINDINGS if errors else EXIT_CLEAN, findings,
                       text=render_replay(config.file, saved, base_spec, cand_spec,
                                          options.device, findings))


def _said(side: str, given: str | None) -> str:
    """Where a target of ``side`` came from, as an error names it: ``--candidate`` when
    the command line gave it, else the replay file's field."""
    return f"--{side}" if given is not None else f"FILE (its field '{side}')"


@contextmanager
def _moved_target(config: ReplayConfig):
    """A target the replay file names (not the command line) that is no longer where it
    was: the fix says how to name it where it lies now."""
    try:
        yield
    except StagecheckError as exc:
        for side in ("baseline", "candidate"):
            if getattr(config, side) is None and exc.where == f"argument {_said(side, None)}":
                exc.fix = (exc.fix + "; " if exc.fix else "") + \
                    messages.REPLAY_TARGET_ELSEWHERE.format(flag=f"--{side}")
        raise


def _bad_run_field(saved: dict) -> str:
    """`` (its field 'run.NAME')``: the first field of the file's ``run`` that
    ``RunOptions`` refuses on its own ('' when none does alone)."""
    for name, value in replay_run(saved).items():
        try:
            RunOptions(**{name: value})
        except StagecheckError:
            return f" (its field 'run.{name}')"
    return ""


@contextmanager
def _schema_blamed(given: str | None):
    """A target that cannot take the arguments of the schema ``--schema`` gave is said of
    that option (the targets are the replay file's, the schema is the user's)."""
    try:
        yield
    except TargetLoadError as exc:
        if given is not None and _SIGNATURE_WORDS in exc.problem:
            exc.where = "option --schema"
            exc.fix += f"; or leave --schema {given} out for the schema the file names"
        raise


#: what TARGET_SIGNATURE says of a target the schema cannot call
_SIGNATURE_WORDS = "cannot take the arguments of schema"
assert _SIGNATURE_WORDS in messages.TARGET_SIGNATURE[0]


def _refuse_unused(flag: str, value: str | None, file: str, what: str,
                   alternative: str = "") -> None:
    """An option given that the file's kind of finding does not read: exit 2, never a
    replay that quietly went without it."""
    if value is not None:
        raise UsageError.of(messages.REPLAY_OPTION_UNUSED, value, flag=flag, file=file,
                            what=what, alternative=alternative).located(f"option {flag}")


COMMANDS = {"replay": ReplayCommand()}
