"""``kernel``: kernel oracle 1, the Triton postprocess kernel against its reference."""

from __future__ import annotations

from types import SimpleNamespace

from stagecheck.oracles.commands.base import VERDICT_EXIT, Command, Outcome, require_triton
from stagecheck.oracles.commands.outputs import Outputs
from stagecheck.oracles.commands.progress import progress_of
from stagecheck.oracles.observe import require_device
from stagecheck.oracles.options import KernelConfig, build
from stagecheck.oracles.report import json_document, render_json, render_kernel
from stagecheck.oracles.report.json import kernel_settings

__all__ = ["COMMANDS", "KernelCommand"]


class KernelCommand(Command):
    name = "kernel"
    reports = ("json",)
    colored = True

    def configure(self, args, values: dict) -> KernelConfig:
        config = build(KernelConfig, self.name, values)
        require_triton("stagecheck kernel (the Triton kernel against its reference)")
        require_device(config.device)
        return config

    def run(self, config: KernelConfig, values: dict, outputs: Outputs) -> Outcome:
        # the kernel campaign imports hypothesis, torch and triton: only once triton was
        # found (configure), so that its absence is exit 2 with the extra to install
        from stagecheck.oracles.kernel.campaign import run_kernel_campaign
        shown = progress_of(values, self.name, "scenarios", config.examples)
        try:
            result = run_kernel_campaign(config.examples, config.seed, config.device,
                                         progress=shown.update if shown else None)
        finally:
            if shown:
                shown.close()
        verdict = ("interrupted" if result.interrupted else
                   "equivalent" if result.clean else "different")
        files = {"--json": lambda: render_json(json_document(
            self.name, result.to_dict(), verdict, settings=kernel_settings(result)))}
        if result.interrupted:
            mismatch = [] if result.clean else [SimpleNamespace(severity="error")]
            return Outcome(verdict, 0, result, files,
                           interrupted=(result.examples, mismatch, "example(s)", ""))
        return Outcome(verdict, VERDICT_EXIT[verdict], result, files, render_kernel(result))


COMMANDS = {"kernel": KernelCommand()}
