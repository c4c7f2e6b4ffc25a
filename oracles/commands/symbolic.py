"""``symbolic``: CrossHair's symbolic diff of two targets over list-backed buffers."""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from types import SimpleNamespace

from stagecheck.oracles.commands.base import (VERDICT_EXIT, Command, Outcome, open_targets,
                                              refuse_unread_shims, replay_flags, schema_of)
from stagecheck.oracles.commands.outputs import Outputs
from stagecheck.oracles.commands.progress import progress_of
from stagecheck.oracles.options import RunOptions, SymbolicConfig, build, flag_of
from stagecheck.oracles.report import json_document, render_json, render_symbolic
from stagecheck.oracles.report.json import symbolic_settings
from stagecheck.oracles.report.replay import kept_findings, new_run_id, save_run
from stagecheck.oracles.stdio import shown as shown_path
from stagecheck.oracles.targets import schema_spec

__all__ = ["COMMANDS", "SymbolicCommand"]


@dataclass(frozen=True)
class SymbolicRun:
    """``symbolic``'s config: the targets, the ``SymbolicConfig``, the schema and shims,
    and how the verdict and the report read."""

    baseline: str
    candidate: str
    config: SymbolicConfig
    schema: object
    schema_given: str | None
    shims: tuple[str, ...]
    strict: bool
    verbose: bool
    save: bool = True           # --no-save: no replay file, no manifest


class SymbolicCommand(Command):
    name = "symbolic"
    reports = ("json",)
    colored = True

    def configure(self, args, values: dict) -> SymbolicRun:
        refuse_unread_shims(values["shims"], (args.baseline, args.candidate), args)
        return SymbolicRun(args.baseline, args.candidate, build(SymbolicConfig, self.name, values),
                           schema_of(values["schema"]), values["schema"], values["shims"],
                           values["strict"], values["verbose"], not values.get("no_save"))

    def run(self, run: SymbolicRun, values: dict, outputs: Outputs) -> Outcome:
        # the symbolic oracle imports CrossHair: only for the command that runs it
        from stagecheck.oracles.symbolic import raise_if_inconclusive, run_symbolic
        shown = progress_of(values, self.name, "paths")
        try:
            with open_targets([(run.baseline, "BASELINE"), (run.candidate, "CANDIDATE")],
                              run.schema, run.shims) as runner:
                result = run_symbolic(*runner.targets, timeout=run.config.timeout,
                                      max_capacity=run.config.max_capacity,
                                      max_paths=run.config.max_paths, runner=runner,
                                      progress=shown.update if shown else None, strict=False)
        finally:
            if shown:
                shown.close()
        # paths lost (or none explored) leave no verdict to vouch for, unless an error
        # finding was seen: the torch replay confirmed it, and it is reported and saved
        if not result.interrupted and not result.errors:
            raise_if_inconclusive(result)
        verdict = "interrupted" if result.interrupted else result.verdict(run.strict)
        targets = {"baseline": runner.targets[0].record(),
                   "candidate": runner.targets[1].record()}
        # every error finding is saved (never lost), replayable as a diff's is: the
        # torch replay of its concrete scenario, the one the report shows
        saved, manifest = {}, None
        if run.save and kept_findings(result):
            spec = schema_spec(run.schema)
            kept = SimpleNamespace(
                findings=result.findings, baseline=run.baseline, candidate=run.candidate,
                config=SimpleNamespace(run=RunOptions()), schema=runner.targets[1].schema,
                schema_spec=spec, interrupted=result.interrupted)
            saved, manifest = outputs.attempt("--save-dir", outputs.save_dir, lambda: save_run(
                kept, outputs.save_dir, new_run_id(), self.name, targets, verdict,
                *runner.targets, run.shims)) or ({}, None)
            flags = replay_flags(*runner.targets, run.shims, spec)
            saved = {k: shown_path(v) + flags for k, v in saved.items()}
        where = shown_path(manifest) if manifest else None
        files = {"--json": lambda: render_json(json_document(
            self.name, {**result.to_dict(), "manifest": manifest}, verdict, targets=targets,
            settings=symbolic_settings(result, run.strict, run.schema_given, run.shims)))}
        if result.interrupted:
            return Outcome(verdict, 0, result, files, interrupted=(
                result.paths_attempted, result.findings, "symbolic path(s)",
                f"; saved: {where}" if where else ""), saved=where)
        return Outcome(verdict, VERDICT_EXIT[verdict], result, files,
                       render_symbolic(result, run.strict, verbose=run.verbose, saved=saved,
                                       schema=runner.targets[1].schema, manifest=where,
                                       flags=diff_flags(run.schema_given, run.shims)),
                       saved=where)


def diff_flags(schema: str | None, shims) -> str:
    """The options a printed ``stagecheck diff`` of the same targets needs to load them as
    this run did: its ``--schema`` and ``--shim`` values."""
    out = [f"{flag_of('diff', 'schema')} {shlex.quote(schema)}"] if schema else []
    out += [f"{flag_of('diff', 'shims')} {shlex.quote(s)}" for s in shims]
    return "".join(" " + part for part in out)


COMMANDS = {"symbolic": SymbolicCommand()}
