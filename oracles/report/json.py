"""The JSON renderer: one envelope for every command, the result's own fields inside."""

from __future__ import annotations

import json
from typing import Any

__all__ = ["SCHEMA_VERSION", "json_document", "render_json"]

#: Bumped when a field changes meaning or disappears (docs/json.md).
SCHEMA_VERSION = 1


def json_document(command: str, body: dict[str, Any], verdict: str | None = None) -> dict:
    """The envelope: what produced the document, then the command's body."""
    from stagecheck import __version__
    return {"schema_version": SCHEMA_VERSION, "tool": "stagecheck", "version": __version__,
            "command": command, "verdict": verdict, **body}


def render_json(document: dict) -> str:
    return json.dumps(document, indent=2, sort_keys=True, default=repr)


def campaign_body(result, strict: bool = False, targets: dict | None = None,
                  manifest: str | None = None) -> dict:
    """``diff``/``spec``: the verdict ("interrupted" for a run a signal stopped: then the
    findings are those found so far), what ran, and every finding. ``targets``: each
    side's ``Target.record()`` (spec, pinned spec, commit SHA, shims)."""
    c = result.config
    interrupted = getattr(result, "interrupted", None)
    return {
        "verdict": "interrupted" if interrupted else result.verdict(strict),
        "interrupted": interrupted,
        "targets": targets,
        "manifest": manifest,
        "baseline": result.baseline,
        "candidate": result.candidate,
        "device": c.run.device,
        "seed": c.seed,
        "seconds": round(result.seconds, 3),
        "examples": {"in_contract": result.examples_in_contract,
                     "out_of_contract": result.examples_out_of_contract,
                     "edge": result.examples_edge,
                     "instrumented": result.examples_instrumented},
        "engine": c.engine,
        "jobs": c.jobs,
        "first_error_seconds": (None if result.first_error_seconds is None
                                else round(result.first_error_seconds, 3)),
        "findings": [f.to_dict() for f in result.findings],
    }
