"""``mutants``: every oracle on every mutant of a target, the kill matrix."""

from __future__ import annotations

from dataclasses import dataclass
from types import SimpleNamespace

from stagecheck.oracles.commands.base import (EXIT_CLEAN, EXIT_FINDINGS, Command, Outcome,
                                              open_targets, refuse_unread_shims, schema_of,
                                              shim_option)
from stagecheck.oracles.commands.outputs import Outputs
from stagecheck.oracles.commands.progress import MutantProgress, progress_of
from stagecheck.oracles.errors import StagecheckError, UsageError
from stagecheck.oracles.kernel import use_interpreter_without_gpu
from stagecheck.oracles.mutants import MutantsConfig, list_mutants, run_mutants
from stagecheck.oracles.options import build
from stagecheck.oracles.report import json_document, render_json, render_mutants
from stagecheck.oracles.report.json import mutants_settings
from stagecheck.oracles.targets import schema_spec

__all__ = ["COMMANDS", "MutantsCommand"]


@dataclass(frozen=True)
class MutantsRun:
    """``mutants``' config: the target, the ``MutantsConfig``, the schema (and its pinned
    spec: a schema file by its absolute path), whether only the list is asked for."""

    target: str
    config: MutantsConfig
    schema: object
    pinned_schema: str | None
    list_only: bool


class MutantsCommand(Command):
    name = "mutants"
    reports = ("json",)

    def configure(self, args, values: dict) -> MutantsRun:
        config = build(MutantsConfig, self.name, values)
        refuse_unread_shims(values["shims"], (args.target,), args)
        schema = schema_of(values["schema"])
        return MutantsRun(args.target, config, schema, schema_spec(schema), values["list"])

    def run(self, run: MutantsRun, values: dict, outputs: Outputs) -> Outcome:
        config = run.config
        if run.list_only:
            try:
                mutants = list_mutants(run.target, config.operators, run.pinned_schema,
                                       config.shims)
            except StagecheckError as exc:
                raise exc.located(shim_option(exc) or "argument TARGET") from None
            return Outcome("listed", EXIT_CLEAN, mutants, text="\n".join(
                f"{m.id} {m.operator:<24} {str(m.location):<36} {m.description}"
                + ("  [equivalent: operator reason]" if m.equivalent_reason else "")
                for m in mutants))
        with open_targets([(run.target, "TARGET")], run.schema, config.shims) as runner:
            original = runner.targets[0]          # checked, read once
        use_interpreter_without_gpu()
        shown = progress_of(values, self.name, "mutants",
                            counters=("killed", "equivalent", "survived"))
        try:
            report = run_mutants(run.target, config, MutantProgress(shown),
                                 schema=run.pinned_schema, original=original)
        except UsageError as exc:       # no mutant: --operators's, else the target's
            raise (exc if exc.option else exc.located("argument TARGET")) from None
        finally:
            if shown:
                shown.close()
        verdict = ("interrupted" if report.interrupted else
                   "all-killed" if report.all_killed() else "survivors")
        files = {"--json": lambda: render_json(json_document(
            self.name, report.to_dict(), verdict, targets={"target": original.record()},
            settings=mutants_settings(config, run.pinned_schema)))}
        if report.interrupted:
            killed = [SimpleNamespace(severity="error") for r in report.results
                      if r.killed_by_stagecheck]
            return Outcome(verdict, 0, report, files, interrupted=(
                len(report.results), killed, "mutant(s) (findings: mutants killed)", ""))
        return Outcome(verdict, EXIT_CLEAN if report.all_killed() else EXIT_FINDINGS, report,
                       files, render_mutants(report))


COMMANDS = {"mutants": MutantsCommand()}
