"""``bench``: the per-call cost of two targets, interleaved, as ratios."""

from __future__ import annotations

from dataclasses import dataclass

from stagecheck.oracles.bench import require_bench_scenario, run_bench
from stagecheck.oracles.commands.base import (EXIT_CLEAN, Command, Outcome, open_targets,
                                              refuse_unread_shims, schema_of)
from stagecheck.oracles.commands.outputs import Outputs
from stagecheck.oracles.errors import StagecheckError
from stagecheck.oracles.options import BenchConfig, build
from stagecheck.oracles.report import json_document, render_bench, render_json
from stagecheck.oracles.report.json import bench_settings

__all__ = ["BenchCommand", "COMMANDS"]


@dataclass(frozen=True)
class BenchRun:
    """``bench``'s config: the targets, the ``BenchConfig``, the schema and shims."""

    baseline: str
    candidate: str
    config: BenchConfig
    schema: object
    schema_given: str | None
    shims: tuple[str, ...]


class BenchCommand(Command):
    name = "bench"
    reports = ("json",)

    def configure(self, args, values: dict) -> BenchRun:
        refuse_unread_shims(values["shims"], (args.baseline, args.candidate), args)
        return BenchRun(args.baseline, args.candidate, build(BenchConfig, self.name, values),
                        schema_of(values["schema"]), values["schema"], values["shims"])

    def run(self, run: BenchRun, values: dict, outputs: Outputs) -> Outcome:
        with open_targets([(run.baseline, "BASELINE"), (run.candidate, "CANDIDATE")],
                          run.schema, run.shims) as runner:
            try:
                require_bench_scenario(runner.targets)
            except StagecheckError as exc:
                raise exc.located("option --schema" if run.schema_given else
                                  ("argument BASELINE", "argument CANDIDATE")[exc.target_index]
                                  ) from None
            result = run_bench(*runner.targets, device=run.config.device, runner=runner,
                               timeout=run.config.timeout)
        targets = {"baseline": runner.targets[0].record(),
                   "candidate": runner.targets[1].record()}
        files = {"--json": lambda: render_json(json_document(
            self.name, result.to_dict(), "measured", targets=targets,
            settings=bench_settings(result, run.schema_given, run.shims)))}
        return Outcome("measured", EXIT_CLEAN, result, files, render_bench(result))


COMMANDS = {"bench": BenchCommand()}
