"""``diff`` and ``spec``: a campaign (``run_campaign``) over one or two targets.

The files: a replay file per finding and the run manifest under ``--save-dir``,
``--json``, ``--junit-xml``, ``--markdown``; then the text report.
"""

from __future__ import annotations

from dataclasses import dataclass

from stagecheck.oracles import messages
from stagecheck.oracles.campaign import run_campaign
from stagecheck.oracles.commands.alone import confirm_alone
from stagecheck.oracles.commands.base import (VERDICT_EXIT, Command, Outcome, internal,
                                              open_targets, refuse_unread_shims, replay_flags,
                                              require_triton, schema_of, triton_available)
from stagecheck.oracles.stdio import note, shown
from stagecheck.oracles.commands.outputs import Outputs
from stagecheck.oracles.commands.progress import CampaignProgress, progress_of
from stagecheck.oracles.commands.protocol import COMMANDS as PROTOCOL_COMMANDS
from stagecheck.oracles.commands.protocol import chosen_protocol
from stagecheck.oracles.errors import UsageError
from stagecheck.oracles.kernel import require_kernel_backend
from stagecheck.oracles.observe import require_device
from stagecheck.oracles.options import CampaignConfig, build
from stagecheck.oracles.report import json_document, render_campaign, render_json, render_junit
from stagecheck.oracles.report.json import campaign_body, campaign_settings
from stagecheck.oracles.report.markdown import render_markdown
from stagecheck.oracles.report.replay import kept_findings, new_run_id, save_run
from stagecheck.oracles.report.text import examples_tried, verdict_said
from stagecheck.oracles.runner import close_after_campaign
from stagecheck.oracles.targets import schema_spec
from stagecheck.spec.space import draft_bound

__all__ = ["CampaignCommand", "COMMANDS"]

#: the verdict of a run an internal error stopped (JSON, manifest): there is none
INTERNAL = "internal-error"


@dataclass(frozen=True)
class CampaignRun:
    """``diff``/``spec``'s config: the targets, the ``CampaignConfig``, the schema and
    shims, and how the verdict and the report read (``--strict``, ``--verbose``)."""

    baseline: str | None
    candidate: str
    config: CampaignConfig
    schema: object
    shims: tuple[str, ...]
    strict: bool
    verbose: bool
    save: bool = True           # --no-save: no replay file, no manifest
    save_infos: bool = False    # --save-infos: info findings saved too
    kernel_asked: str | None = None  # the kernel option given on the command line that
                                     # needs a consumer kernel: '--kernel always' or
                                     # '--kernel-backend NAME'
    drafts_asked: int | None = None  # --max-drafts as the command line gave it


def kernel_backend(values: dict) -> str | None:
    """Settle ``--kernel-backend`` before the run: an explicit triton without triton
    installed is exit 2; the default (triton on cuda) falls back to the reference
    backend, and says so."""
    backend = values.get("kernel_backend")
    if values.get("kernel") == "off":
        return backend
    if backend == "triton":
        require_triton("--kernel-backend triton", "; or use --kernel-backend reference, "
                       "which needs no triton")
    elif backend is None and values.get("device") == "cuda" and not triton_available():
        if not values.get("quiet"):
            note(messages.TRITON_FALLBACK)
        return "reference"
    return backend


def kernel_asked(values: dict, from_config) -> str | None:
    """The kernel option the command line gave that only a schema with a consumer kernel
    can honour ('--kernel always', '--kernel-backend NAME'); None where there is none (a
    ``[tool.stagecheck]`` setting applies where it can)."""
    if values.get("kernel") == "always" and "kernel" not in from_config:
        return "--kernel always"
    backend = values.get("kernel_backend")
    if backend and values.get("kernel") != "off" and "kernel_backend" not in from_config:
        return f"--kernel-backend {backend}"
    return None


class CampaignCommand(Command):
    reports = ("json", "junit_xml", "markdown")
    colored = True

    def __init__(self, name: str) -> None:
        self.name = name

    def execute(self, args, values: dict) -> int:
        """A protocol run (``--protocol``, or the one the target's name implies) is the
        protocol command's (``commands/protocol.py``); the rest is one call per example."""
        baseline = args.baseline if self.name == "diff" else None
        candidate = args.candidate if self.name == "diff" else args.target
        if chosen_protocol(values, baseline, candidate, self.name)[0] is not None:
            return PROTOCOL_COMMANDS[self.name].execute(args, values)
        return super().execute(args, values)

    def configure(self, args, values: dict) -> CampaignRun:
        config = build(CampaignConfig, self.name, {**values,
                                                   "kernel_backend": kernel_backend(values)})
        require_kernel_backend(config.run)     # exit 2 before the run if it cannot run
        require_device(config.run.device)
        baseline = args.baseline if self.name == "diff" else None
        candidate = args.candidate if self.name == "diff" else args.target
        refuse_unread_shims(values["shims"], (baseline, candidate), args)
        configured = getattr(args, "from_config", ())    # set by [tool.stagecheck]
        return CampaignRun(baseline, candidate, config, schema_of(values["schema"]),
                           values["shims"], values["strict"], values["verbose"],
                           not values.get("no_save"), bool(values.get("save_infos")),
                           kernel_asked(values, configured),
                           None if "max_drafts" in configured else values.get("max_drafts"))

    def run(self, run: CampaignRun, values: dict, outputs: Outputs) -> Outcome:
        pairs = ([(run.baseline, "BASELINE")] if run.baseline else []) + \
            [(run.candidate, "CANDIDATE" if run.baseline else "TARGET")]
        shown_progress = progress_of(values, self.name, "examples", counters=("findings",))
        progress = CampaignProgress(shown_progress, run.config) if shown_progress else None
        try:
            with open_targets(pairs, run.schema, run.shims) as runner:   # workers end here
                baseline = runner.targets[0] if run.baseline else None
                candidate = runner.targets[-1]
                if run.kernel_asked and candidate.schema.consumer is None:
                    flag, _, value = run.kernel_asked.partition(" ")
                    raise UsageError.of(messages.KERNEL_ALWAYS_NO_CONSUMER, value,
                                        schema=candidate.schema.name
                                        ).located(f"option {flag}")
                if run.drafts_asked is not None and draft_bound(candidate.schema) is None:
                    raise UsageError.of(messages.MAX_DRAFTS_NO_DRAFTS, run.drafts_asked,
                                        schema=candidate.schema.name
                                        ).located("option --max-drafts")
                try:
                    result = run_campaign(baseline, candidate, run.config, progress,
                                          runner=runner)
                except Exception as exc:
                    partial = getattr(exc, "partial_result", None)
                    if partial is not None and internal(exc):
                        self.save_partial(run, partial, baseline, candidate, outputs, exc)
                    raise
                close_after_campaign(runner, bool(result.errors))
        finally:
            if progress:
                progress.close()
        if result.errors and not result.interrupted:     # does each show alone, too?
            confirm_alone(result, pairs, run.schema, run.shims)
        return self.outcome(run, result, baseline, candidate, outputs)

    def save_partial(self, run: CampaignRun, result, baseline, candidate, outputs: Outputs,
                     error: BaseException) -> None:
        """An internal error stopped the campaign: its findings so far are saved (replay
        files, manifest, and every requested report, marked stopped by an internal error
        and without a verdict); nothing is printed but the error's line."""
        result.interrupted = f"an internal error ({type(error).__name__})"
        outcome = self.outcome(run, result, baseline, candidate, outputs, INTERNAL)
        self.deliver_partial(outcome, outputs, error)

    def outcome(self, run: CampaignRun, result, baseline, candidate, outputs: Outputs,
                verdict: str | None = None) -> Outcome:
        """The replay files and manifest saved, and the reports of ``result``."""
        result.schema_spec = schema_spec(run.schema)   # pinned: a schema file by its path
        targets = {"baseline": baseline.record() if baseline else None,
                   "candidate": candidate.record()}
        verdict = verdict or ("interrupted" if result.interrupted
                              else result.verdict(run.strict))
        # every error finding is saved (never lost), info findings with --save-infos
        saved, manifest = {}, None
        if run.save and kept_findings(result, run.save_infos):
            saved, manifest = outputs.attempt("--save-dir", outputs.save_dir, lambda: save_run(
                result, outputs.save_dir, new_run_id(), self.name, targets, verdict,
                baseline, candidate, run.shims, infos=run.save_infos)) or ({}, None)
        flags = replay_flags(baseline, candidate, run.shims, result.schema_spec)
        lines = {k: shown(v) + flags for k, v in saved.items()}
        where = shown(manifest) if manifest else None
        body = campaign_body(result, run.strict, targets, manifest, saved)
        files = {
            "--json": lambda: render_json(json_document(
                self.name, body, verdict, targets=targets,
                settings=campaign_settings(result, run.strict, run.shims))),
            "--junit-xml": lambda: render_junit(result, run.strict, targets=targets,
                                                command=self.name, saved=lines),
            "--markdown": lambda: render_markdown(result, run.strict, targets, lines, where,
                                                  self.name, run.shims)}
        if result.interrupted:
            stopped = (examples_tried(result),
                       result.findings, "example(s)", f"; saved: {where}" if where else "")
            return Outcome(verdict, 0, result, files, interrupted=stopped, saved=where)
        text = render_campaign(result, run.strict, lines, targets=targets, manifest=where,
                               verbose=run.verbose, shims=run.shims)
        unsaved = sum(1 for f in result.findings if f.severity != "error" and f.id not in saved)
        notes = (messages.INFOS_NOT_SAVED.format(count=unsaved),) if unsaved and run.save \
            else ()
        return Outcome(verdict, VERDICT_EXIT[verdict], result, files, text, saved=where,
                       notes=notes, said=None if verdict == INTERNAL
                       else verdict_said(result, run.strict))


COMMANDS = {"diff": CampaignCommand("diff"), "spec": CampaignCommand("spec")}
