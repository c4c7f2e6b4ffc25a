"""``symbolic``: CrossHair's symbolic diff of two targets over list-backed buffers."""

from __future__ import annotations

from dataclasses import dataclass

from stagecheck.oracles.commands.base import (VERDICT_EXIT, Command, Outcome, open_targets,
                                              schema_of)
from stagecheck.oracles.commands.outputs import Outputs
from stagecheck.oracles.commands.progress import progress_of
from stagecheck.oracles.options import SymbolicConfig, build
from stagecheck.oracles.report import json_document, render_json, render_symbolic
from stagecheck.oracles.report.json import symbolic_settings

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


class SymbolicCommand(Command):
    name = "symbolic"
    reports = ("json",)
    colored = True

    def configure(self, args, values: dict) -> SymbolicRun:
        return SymbolicRun(args.baseline, args.candidate, build(SymbolicConfig, self.name, values),
                           schema_of(values["schema"]), values["schema"], values["shims"],
                           values["strict"], values["verbose"])

    def run(self, run: SymbolicRun, values: dict, outputs: Outputs) -> Outcome:
        # the symbolic oracle imports CrossHair: only for the command that runs it
        from stagecheck.oracles.symbolic import run_symbolic
        shown = progress_of(values, self.name, "paths")
        try:
            with open_targets([(run.baseline, "BASELINE"), (run.candidate, "CANDIDATE")],
                              run.schema, run.shims) as runner:
                result = run_symbolic(*runner.targets, timeout=run.config.timeout,
                                      max_capacity=run.config.max_capacity,
                                      max_paths=run.config.max_paths, runner=runner,
                                      progress=shown.update if shown else None)
        finally:
            if shown:
                shown.close()
        verdict = "interrupted" if result.interrupted else result.verdict(run.strict)
        targets = {"baseline": runner.targets[0].record(),
                   "candidate": runner.targets[1].record()}
        files = {"--json": lambda: render_json(json_document(
            self.name, result.to_dict(), verdict, targets=targets,
            settings=symbolic_settings(result, run.strict, run.schema_given, run.shims)))}
        if result.interrupted:
            return Outcome(verdict, 0, result, files, interrupted=(
                result.paths_attempted, result.findings, "symbolic path(s)", ""))
        return Outcome(verdict, VERDICT_EXIT[verdict], result, files,
                       render_symbolic(result, run.strict, verbose=run.verbose))


COMMANDS = {"symbolic": SymbolicCommand()}
