"""Replay files: each finding saved with its scenario and targets, and read back."""

from __future__ import annotations

import json
import os

from stagecheck.oracles import messages
from stagecheck.oracles.errors import ScenarioError, UsageError
from stagecheck.spec import StagingScenario
from stagecheck.spec.space import malformed

__all__ = ["DEFAULT_SAVE_DIR", "load_replay", "save_findings"]

DEFAULT_SAVE_DIR = os.path.join(".stagecheck", "findings")


def save_findings(result, directory: str) -> dict[str, str]:
    """Write one replay file per finding; return finding id -> path."""
    os.makedirs(directory, exist_ok=True)
    saved = {}
    for f in result.findings:
        path = os.path.join(directory, f"{f.id}.json")
        with open(path, "w", encoding="utf-8") as fh:
            json.dump({"stagecheck_replay": 1, "baseline": result.baseline,
                       "candidate": result.candidate, "device": result.config.run.device,
                       "schema": result.schema_spec, "finding": f.to_dict()}, fh, indent=1,
                      sort_keys=True)
        saved[f.id] = path
    return saved


def load_replay(path: str) -> tuple[dict, StagingScenario]:
    """The saved document and its scenario; ``UsageError``/``ScenarioError`` when unusable."""
    try:
        with open(path, encoding="utf-8") as fh:
            saved = json.load(fh)
        scenario = StagingScenario.from_dict(saved["finding"]["scenario"])
    except OSError as exc:
        raise UsageError.of(messages.REPLAY_UNREADABLE, path, error=exc.strerror) from None
    except (ValueError, KeyError, TypeError) as exc:
        raise ScenarioError.of(messages.REPLAY_MALFORMED, path,
                               error=f"{type(exc).__name__}: {exc}",
                               save_dir=DEFAULT_SAVE_DIR) from None
    from stagecheck.spec.schemas import BUILTIN_SCHEMAS
    schema = BUILTIN_SCHEMAS.get(scenario.schema)
    problems = malformed(schema, scenario) if schema is not None else []
    if problems:
        raise ScenarioError.of(messages.REPLAY_UNBUILDABLE, path, problems="; ".join(problems[:3]))
    return saved, scenario
