"""Protocol findings saved as replay files, read back and run again.

A file is named ``<Finding.id>-<digest>.json`` (the digest covers the protocol, the pinned
targets, the device and the step sequence), written atomically under the save folder, and
holds the protocol (a built-in name or its file), both targets, the device and the finding
with its shortest step sequence. ``replay_protocol`` runs that sequence again through the
targets it names (or others given) and returns the findings it shows now. A replay file
runs only code the user chose: targets, shims and a protocol file outside the repository
must be named on the command line (``report/replay.py``'s rule).
"""

from __future__ import annotations

import hashlib
import json
import os
import shlex
from dataclasses import replace

from stagecheck.oracles import messages
from stagecheck.oracles.errors import ScenarioError, SchemaError, UsageError
from stagecheck.oracles.protocol.campaign import ProtocolConfig, check_sequence
from stagecheck.oracles.report.files import write_atomic
from stagecheck.oracles.report.replay import (DEFAULT_SAVE_DIR, PROTOCOL_RUN_FIELDS, _bounded,
                                              _escaped, _fields_checked, _malformed,
                                              check_trusted, read_replay_document,
                                              replay_run, saved_run, untrusted_parts,
                                              version_checked)
from stagecheck.oracles.targets import repository_root, trusted_path
from stagecheck.spec.findings import Finding
from stagecheck.spec.steps import StepSequence

__all__ = ["PROTOCOL_REPLAY_VERSION", "is_protocol_replay", "load_protocol_replay",
           "replay_protocol", "save_protocol_findings"]

PROTOCOL_REPLAY_VERSION = 1


def save_protocol_findings(result, directory: str, protocol_spec: str,
                           shims: tuple[str, ...] = (), findings=None) -> dict[str, str]:
    """One replay file per finding of ``result`` (or of ``findings``, some of them) under
    ``directory``; finding id -> path."""
    os.makedirs(directory, exist_ok=True)
    saved = {}
    baseline, candidate = result.pinned()     # they load from any folder, at any commit
    run = saved_run(result.config, PROTOCOL_RUN_FIELDS)
    for f in result.findings if findings is None else findings:
        # the run's settings too: a run under another --timeout never shares a file
        key = json.dumps([protocol_spec, baseline, candidate,
                          result.config.device, f.scenario, run], sort_keys=True, default=repr)
        rid = f"{f.id}-{hashlib.sha1(key.encode()).hexdigest()[:10]}"
        path = os.path.join(directory, f"{rid}.json")
        write_atomic(path, json.dumps(
            {"stagecheck_protocol_replay": PROTOCOL_REPLAY_VERSION, "replay_id": rid,
             "protocol": protocol_spec, "baseline": baseline,
             "candidate": candidate, "device": result.config.device,
             "shims": list(shims), "finding": f.to_dict(),
             "run": run}, indent=1, sort_keys=True),
            inside=directory)
        saved[f.id] = path
    return saved


def is_protocol_replay(path: str) -> bool:
    """Whether ``path`` reads as a protocol replay file (anything else: False, and the
    staging replay's loader says what is wrong with it)."""
    try:           # a FIFO or a device is not read (``read_regular``): not one
        saved = read_replay_document(path)
    except (UsageError, ScenarioError):
        return False
    return isinstance(saved, dict) and "stagecheck_protocol_replay" in saved


def load_protocol_replay(path: str) -> tuple[dict, StepSequence]:
    """The saved document and its step sequence; ``UsageError``/``ScenarioError`` when the
    file cannot be used."""
    saved = read_replay_document(path)
    if not isinstance(saved, dict) or "stagecheck_protocol_replay" not in saved:
        raise UsageError.of(messages.PROTOCOL_REPLAY_NOT, path)
    version_checked(saved, "stagecheck_protocol_replay", PROTOCOL_REPLAY_VERSION, path)
    try:    # the step sequence first: what a staging replay file's scenario fails with
        if not isinstance(saved.get("finding"), dict):
            raise TypeError("a replay file is a JSON object with a 'finding' object")
        scenario = saved["finding"]["scenario"]
        try:
            seq = StepSequence.from_dict(scenario)
        except (ValueError, TypeError) as exc:
            raise type(exc)(f"in its step sequence (finding.scenario): {exc}") from None
        if "scenario" in seq.data:      # a one-step protocol's staging scenario
            _bounded(seq.data["scenario"])
        _fields_checked(saved, _FIELDS, PROTOCOL_RUN_FIELDS)
        _config(saved)
    except (ValueError, TypeError) as exc:     # a value out of range: its key, and the fix
        raise ScenarioError.of(messages.PROTOCOL_REPLAY_FIELD, path, save_dir=DEFAULT_SAVE_DIR,
                               error=f"{type(exc).__name__}: {exc}") from None
    except (KeyError, RecursionError) as exc:
        raise _malformed(path, exc) from None
    return _escaped({k: v for k, v in saved.items() if k != "finding"}) | {
        "finding": saved["finding"]}, seq


#: the fields of a protocol replay file besides its finding, and what each may hold (the
#: protocol and the candidate are always saved)
_FIELDS = {"protocol": (str,), "candidate": (str,), "baseline": (str, type(None)),
           "device": (str, type(None)), "shims": (list, type(None)),
           "replay_id": (str, type(None)), "run": (dict, type(None)), "finding": (dict,)}


def _config(saved: dict, device: str | None = None,
            shims: tuple[str, ...] = ()) -> ProtocolConfig:
    """The config a replay runs the sequence with: the saved device and run options
    (``PROTOCOL_RUN_FIELDS``: the time limit found with), each checked as its option is;
    ``ValueError`` naming the field whose value the option refuses."""
    fields = {"device": device or saved.get("device") or "cpu",
              **replay_run(saved, PROTOCOL_RUN_FIELDS)}
    for name, value in fields.items():
        try:
            ProtocolConfig(sequences=1, **{name: value})
        except (UsageError, OverflowError) as exc:
            key = "device" if name == "device" else f"run.{name}"
            raise ValueError(f"its field {key!r} is {value!r:.80}, which the option refuses: "
                             f"{exc}") from None
    return ProtocolConfig(sequences=1, shims=shims, **fields)


def replay_protocol(path: str, baseline: str | None = None, candidate: str | None = None,
                    protocol: str | None = None, device: str | None = None,
                    shims: tuple[str, ...] = ()) -> list[Finding]:
    """Run the saved step sequence again; the findings it shows now. What is given
    replaces what the file saved (targets, protocol, device, shims); a target, shim or
    protocol file the file names outside the repository must be given."""
    saved, seq = load_protocol_replay(path)
    spec = protocol or saved["protocol"]
    if protocol is None:
        given = {"baseline": baseline, "candidate": candidate}
        _require_saved_protocol(str(spec), path, "".join(
            f" --{side} {shlex.quote(named)}" for side, named
            in untrusted_parts(saved)[0].items() if side in given and given[side] is None))
    untrusted = None        # a protocol file outside the repository that was not given
    named = str(spec).removeprefix("single-call:")     # a protocol file, or a schema file's
    if protocol is None and (named.endswith(".py") or ".py:" in named):
        file = named.rpartition(":")[0] if ".py:" in named else named
        if not trusted_path(file, repository_root()):
            untrusted = str(spec)
    check_trusted(saved, path, baseline, candidate, shims_given=bool(shims),
                  protocol=untrusted)
    base = baseline if baseline is not None else saved.get("baseline")
    cand = candidate if candidate is not None else saved["candidate"]
    found = check_sequence(base, cand, spec, seq,
                           _config(saved, device, tuple(shims or saved.get("shims") or ())))
    # each with the sequence it ran, so that a report shows its step table
    return [f if f.scenario else replace(f, scenario=seq.to_dict()) for f in found]


def _require_saved_protocol(spec: str, path: str, targets: str = "") -> None:
    """A saved protocol file that no longer exists is a ``SchemaError`` saying to give its
    new path (``--protocol NEWPATH``), not only that the file is missing; ``targets``: the
    options the command must give besides (targets outside the repository, not given)."""
    if not (spec.endswith(".py") or ".py:" in spec) or spec.startswith("single-call:"):
        return              # a built-in protocol, or single-call:SCHEMA (its load says)
    file, _, name = spec.rpartition(":") if ".py:" in spec else (spec, "", "")
    if not os.path.lexists(file):
        raise SchemaError.of(messages.PROTOCOL_REPLAY_MOVED, spec, path=file, file=path,
                             command_file=shlex.quote(path), name=f":{name}" if name else "",
                             targets=targets)
