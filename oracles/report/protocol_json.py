"""A protocol campaign as a JSON document (what ``--json`` writes for a protocol run)."""

from __future__ import annotations

import json

from stagecheck.oracles.options import OPTIONS, PROTOCOL_FIELDS
from stagecheck.oracles.report.finding_text import alike
from stagecheck.oracles.report.protocol_text import protocol_error_groups

__all__ = ["protocol_json_document", "protocol_settings", "render_protocol_json"]

PROTOCOL_JSON_VERSION = 1


def protocol_settings(config) -> dict:
    """Every setting that shaped a protocol run, by its name in a staging document's
    ``settings`` (``examples``: the step sequences drawn; ``timeout``: seconds per
    operation; ``max_capacity``: a ``single-call:`` protocol's scenario capacity), and
    ``jobs``."""
    out = {}
    for name, option in PROTOCOL_FIELDS.items():
        value = getattr(config, name)
        out[OPTIONS[option].setting] = list(value) if isinstance(value, tuple) else value
    out["jobs"] = config.jobs
    return out


def protocol_json_document(result, saved: dict | None = None, strict: bool = False) -> dict:
    """The verdict (info findings count with ``strict``, as the exit code and the text say),
    what was tried and every finding (with its step sequence, its table,
    the replay file it was saved to and ``group``: the id of its error's head), and the
    error findings grouped by cause (``error_groups``, as the text report groups them)."""
    verdict = "interrupted" if result.interrupted else result.verdict(strict)
    groups = protocol_error_groups(result.errors)
    group_of = {f.id: g.id for g in groups for f in g.findings}
    return {
        "stagecheck_protocol": PROTOCOL_JSON_VERSION,
        "protocol": result.protocol, "baseline": result.baseline,
        "candidate": result.candidate, "targets": result.targets, "verdict": verdict,
        "device": result.config.device, "seed": result.config.seed, "strict": strict,
        "settings": protocol_settings(result.config),
        "sequences": {"budget": result.config.sequences, "run": result.sequences_run,
                      "shrinking": getattr(result, "shrink_evaluations", 0)},
        "seconds": round(result.seconds, 3),
        "gates_forced": {"runs": getattr(result, "gates_forced", 0),
                         "where": list(getattr(result, "stalls", []))},
        "never_ran": dict(getattr(result, "never_ran", None) or {
            "operations": [], "device_work": [], "sequences": result.sequences_run,
            "steps": getattr(result, "steps_run", 0), "cut_short": 0}),
        "first_error_seconds": (None if result.first_error_seconds is None
                                else round(result.first_error_seconds, 3)),
        "errors": len(result.errors), "infos": len(result.infos),
        "violate_alike": bool(result.baseline) and alike(result.errors, exact=True),
        "findings": [dict(f.to_dict(), replay=(saved or {}).get(f.id),
                          group=group_of.get(f.id)) for f in result.findings],
        "error_groups": [{"id": g.id, "head": g.head.id, "invariant": g.head.invariant,
                          "message": g.head.message, "cause": g.cause,
                          "members": [f.id for f in g.findings]} for g in groups],
    }


def render_protocol_json(result, saved: dict | None = None, strict: bool = False) -> str:
    return json.dumps(protocol_json_document(result, saved, strict), indent=1, sort_keys=True)
