"""The JSON renderer: one envelope for every command, the command's body beside it.

Every ``--json`` document (``diff``, ``spec``, ``symbolic``, ``kernel``, ``mutants``,
``bench``) is one JSON object made by ``json_document``: the envelope keys
(``ENVELOPE``: schema version, tool, tool version, command, verdict, settings,
targets) and, beside them, the command's own body keys. docs/json.md lists every
field of the envelope and of each body.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any

from stagecheck import __version__
from stagecheck.oracles.collect import error_groups
from stagecheck.oracles.options import flat, settings
from stagecheck.oracles.report.finding_text import alike
from stagecheck.oracles.report.text import campaign_bounds

__all__ = ["ENVELOPE", "SCHEMA_VERSION", "bench_settings", "campaign_body", "campaign_settings",
           "error_groups_body", "findings_with_groups", "json_document", "kernel_settings",
           "mutants_settings", "render_json", "symbolic_settings"]

#: Bumped when a field changes meaning or disappears (docs/json.md).
SCHEMA_VERSION = 1

#: the keys every document has, whatever the command
ENVELOPE = ("schema_version", "tool", "version", "command", "verdict", "settings", "targets")


def json_document(command: str, body: dict[str, Any], verdict: str | None = None, *,
                  settings: dict[str, Any] | None = None,
                  targets: dict[str, Any] | None = None) -> dict:
    """The envelope: what produced the document and how it was run, then the command's
    body. ``settings``: every option that shapes the run; ``targets``: what each side
    resolved to (``Target.record()``: spec, pinned spec, commit SHA, origin, shims).
    A body key that repeats an envelope key (a result's own ``verdict``, computed without
    ``--strict``) is replaced by the envelope's value: one document, one verdict."""
    envelope = {"schema_version": SCHEMA_VERSION, "tool": "stagecheck", "version": __version__,
                "command": command,
                "verdict": verdict if verdict is not None else body.get("verdict"),
                "settings": dict(settings or {}),
                "targets": targets if targets is not None else body.get("targets")}
    return {**body, **envelope}


def render_json(document: dict) -> str:
    return json.dumps(document, indent=2, sort_keys=True, default=repr)


def _fields(result) -> dict[str, Any]:
    """A result's own fields by name (what its settings are read from)."""
    if dataclasses.is_dataclass(result):
        return {f.name: getattr(result, f.name) for f in dataclasses.fields(result)}
    return dict(vars(result))


# Each command's settings are its options in options.TABLE that have a settings name,
# with the values the run used (its config object, and what the command line gave).

def campaign_settings(result, strict: bool = False, shims=()) -> dict:
    """``diff``/``spec``: every option of the campaign (``result.config``; the capacity
    and draft bounds as drawn, the schema's where the run left them open), the
    strictness, the shims and the schema (pinned spec, else the name of the one used)."""
    capacity, drafts = campaign_bounds(result)
    return settings("diff", {
        **flat(result.config), "max_capacity": capacity, "max_drafts": drafts,
        "strict": strict, "shims": tuple(shims),
        "schema": getattr(result, "schema_spec", None)
        or getattr(getattr(result, "schema", None), "name", None)})


def symbolic_settings(result, strict: bool = False, schema: str | None = None,
                      shims=()) -> dict:
    """``symbolic``: the path budget, time limit, capacity, strictness, schema, shims."""
    return settings("symbolic", {**_fields(result), "strict": strict, "schema": schema,
                                 "shims": tuple(shims)})


def kernel_settings(result) -> dict:
    """``kernel``: scenarios, seed, device (cpu: the Triton interpreter)."""
    return settings("kernel", _fields(result))


def bench_settings(result, schema: str | None = None, shims=()) -> dict:
    """``bench``: its options; and the least rounds and seconds per size and the sizes
    timed, which are the benchmark's own."""
    return {**settings("bench", {**_fields(result), "schema": schema, "shims": tuple(shims)}),
            "repeats": result.repeats, "min_time": result.min_time,
            "sizes": [r.num_reqs for r in result.rows]}


def mutants_settings(config, schema: str | None = None) -> dict:
    """``mutants``: the ``MutantsConfig`` (oracles, budgets, jobs, streams) and schema."""
    return settings("mutants", {**flat(config), "schema": schema})


def error_groups_body(findings) -> list[dict]:
    """The error findings grouped by cause (``oracles.collect.error_groups``): one entry
    per error a reader counts, its head and every member by id."""
    return [{"id": g.id, "head": g.head.id, "invariant": g.head.invariant,
             "message": g.head.message, "cause": g.cause, "kernel_impact": g.kernel_impact,
             "members": [f.id for f in g.findings]} for g in error_groups(findings)]


def findings_with_groups(findings, saved: dict | None = None) -> list[dict]:
    """Every finding as ``Finding.to_dict`` gives it, with ``replay`` (the file ``saved``
    maps its id to, else None) and, an error one, ``group``: the id of its error group
    (info findings: None)."""
    group_of = {f.id: g.id for g in error_groups(findings) for f in g.findings}
    return [{**f.to_dict(), "replay": (saved or {}).get(f.id), "group": group_of.get(f.id)}
            for f in findings]


def campaign_body(result, strict: bool = False, targets: dict | None = None,
                  manifest: str | None = None, saved: dict | None = None) -> dict:
    """``diff``/``spec``: the verdict ("interrupted" for a run a signal stopped: then the
    findings are those found so far), what ran, and every finding. ``targets`` (each
    side's ``Target.record()``) belongs to the envelope; it is accepted here for callers
    that build the body alone and is kept under the same key."""
    c = result.config
    interrupted = getattr(result, "interrupted", None)
    body = {
        "verdict": "interrupted" if interrupted else result.verdict(strict),
        "interrupted": interrupted,
        "manifest": manifest,
        "baseline": result.baseline,
        "candidate": result.candidate,
        "device": c.run.device,
        "seed": c.seed,
        "seconds": round(result.seconds, 3),
        "examples": {"in_contract": result.examples_in_contract,
                     "out_of_contract": result.examples_out_of_contract,
                     "edge": result.examples_edge,
                     "instrumented": result.examples_instrumented,
                     "kernel": getattr(result, "examples_kernel", 0)},
        "kernel_seconds": round(getattr(result, "kernel_seconds", 0.0), 3),
        "engine": c.engine,
        "jobs": c.jobs,
        "first_error_seconds": (None if result.first_error_seconds is None
                                else round(result.first_error_seconds, 3)),
        # a pair whose errors both sides show alike (the text's BOTH_VIOLATE_ALIKE line)
        "violate_alike": bool(result.baseline) and alike(result.errors),
        "shrink_seconds": round(getattr(result, "shrink_seconds", 0.0), 3),
        "stream_notes": dict(getattr(result, "stream_notes", {})),
        "findings": findings_with_groups(result.findings, saved),
        "error_groups": error_groups_body(result.findings),
    }
    if targets is not None:
        body["targets"] = targets
    return body
