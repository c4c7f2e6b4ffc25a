"""Replay files: each finding saved with its scenario and targets, and read back; and the
run manifest that lists what one run saved.

A replay file's name is ``<Finding.id>-<digest>.json``: ``Finding.id`` says which bug
(the same across examples and runs), the digest which pair of targets (pinned: a git
target by its commit, a file by its absolute path), device, schema and scenario showed
it.
Runs of other pairs, sequential or parallel, in one folder never write the same name;
two runs that do write one name write the same content (atomically). The file holds
the pinned targets, so ``stagecheck replay FILE`` re-runs the pair it was printed for.

Each run that saves also writes ``runs/<run-id>.json`` under the save folder: the files
this run wrote (and its targets, verdict and counts, and every finding, saved or not), so
findings of earlier runs in the same folder cannot pass for this run's.

What a run saves (``save_run``): every error finding (a finding is never lost), info
findings only when asked (``--save-infos``), nothing at all for a run without one. The
default folder ``.stagecheck/`` carries its own ``.gitignore`` (``*``), as
``.pytest_cache`` does, and a save folder keeps the manifests of its last ``KEEP_RUNS``
runs and the replay files they name: older manifests, and the replay files only they
name, are removed (``prune_runs``).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import math
import os
import secrets
import shlex
import time

from stagecheck.oracles import messages
from stagecheck.oracles.errors import ScenarioError, UsageError
from stagecheck.oracles.options import LIMITS
from stagecheck.oracles.paths import read_regular
from stagecheck.oracles.report.files import make_folder, start_umask, write_atomic
from stagecheck.oracles.targets import repository_root, trusted_path, trusted_spec
from stagecheck.oracles.text import printable, short_text
from stagecheck.spec import StagingScenario
from stagecheck.spec.schemas import BUILTIN_SCHEMAS
from stagecheck.spec.space import malformed

__all__ = ["DEFAULT_SAVE_DIR", "GITIGNORE", "KEEP_RUNS", "PROTOCOL_RUN_FIELDS", "REPLAY_VERSION",
           "RUN_FIELDS",
           "kept_findings", "load_replay", "mark_ignored", "new_run_id", "prune_runs",
           "read_replay_document", "replay_id", "replay_run", "save_findings", "save_run",
           "saved_run", "version_checked", "write_manifest"]

#: the folder stagecheck keeps for itself (it ignores itself for git)
STAGECHECK_DIR = ".stagecheck"
DEFAULT_SAVE_DIR = os.path.join(STAGECHECK_DIR, "findings")
RUNS_DIR = "runs"
REPLAY_VERSION = 2
#: how many runs a save folder keeps: their manifests and the replay files they name
KEEP_RUNS = 20
#: the ``.gitignore`` of the ``.stagecheck`` folder (as ``.pytest_cache`` has its own)
GITIGNORE = "# Created by stagecheck: its replay files and run manifests stay local.\n*\n"


def replay_id(finding, baseline: str | None, candidate: str, device: str,
              schema: list | None = None, run: dict | None = None) -> str:
    """The file id of ``finding`` as shown by this pair on this device: its bug id and a
    digest of the pinned targets, the device, the schema (``[spec, name]``: the pinned
    ``--schema`` or None, and the name of the schema the run used), the run's settings a
    replay uses (``saved_run``: a ``--deferred-copies`` run never shares a file with one
    without) and the scenario."""
    key = json.dumps([baseline, candidate, device, schema, finding.scenario]
                     + ([run] if run else []), sort_keys=True, default=repr)
    return f"{finding.id}-{hashlib.sha1(key.encode()).hexdigest()[:10]}"


def new_run_id() -> str:
    """Unique per run: the start time, the process and a random part."""
    return f"{time.strftime('%Y%m%dT%H%M%S')}-{os.getpid()}-{secrets.token_hex(3)}"


def _pinned(target, given: str | None) -> str | None:
    return target.pinned if target is not None else given


def save_findings(result, directory: str, baseline=None, candidate=None,
                  shims: tuple[str, ...] = (), findings=None) -> dict[str, str]:
    """Write one replay file per finding; return finding id -> path.

    ``baseline``/``candidate``: the ``Target``s of the run, whose pinned specs the
    files keep (without them, the result's specs as given). The file also keeps the
    schema (``result.schema_spec``: how ``--schema`` loads it again, None when each
    target's function name chose it) and the shims, and the digest in its name covers
    the schema too: the same pair under two schemas never shares a file. ``findings``:
    the findings to save (default: all of the result's).
    """
    make_folder(directory)     # through the folder the run opened: never through a link
    device = result.config.run.device
    base = _pinned(baseline, result.baseline)
    cand = _pinned(candidate, result.candidate)
    used = getattr(result, "schema", None)
    schema = [getattr(result, "schema_spec", None), used.name if used is not None else None]
    saved = {}
    run = saved_run(result.config.run)
    for f in result.findings if findings is None else findings:
        rid = replay_id(f, base, cand, device, schema, run)
        path = os.path.join(directory, f"{rid}.json")
        write_atomic(path, json.dumps(
            {"stagecheck_replay": REPLAY_VERSION, "replay_id": rid, "baseline": base,
             "candidate": cand, "given": {"baseline": result.baseline,
                                          "candidate": result.candidate},
             "device": device, "schema": result.schema_spec, "shims": list(shims),
             "run": run, "finding": f.to_dict()},
            indent=1, sort_keys=True), inside=directory)
        saved[f.id] = path
    return saved


#: the ``RunOptions`` fields a replay file keeps (its ``run``), each with its type: the copy
#: model and the staging calls per example decide what a finding shows (a
#: ``no_copy_hazard`` needs ``--deferred-copies`` on the CPU)
RUN_FIELDS = {"deferred_copies": bool, "steps": int, "timeout": float}
#: the ``ProtocolConfig`` fields a protocol replay file keeps (its ``run``): the time limit
#: of each operation (a hang found under ``--timeout 0.3`` is one again only under it) and
#: the device work queued at each lazy boundary on cuda
PROTOCOL_RUN_FIELDS = {"timeout": float, "busy_cycles": int}


def saved_run(run, fields: dict = RUN_FIELDS) -> dict:
    """How each example ran (``RunOptions``; a protocol run's ``ProtocolConfig`` with
    ``PROTOCOL_RUN_FIELDS``), as a replay file keeps it."""
    return {name: kind(getattr(run, name)) for name, kind in fields.items()}


def replay_run(saved: dict, fields: dict = RUN_FIELDS) -> dict:
    """The run fields a replay file keeps (``saved_run``); none for a file of an older
    stagecheck, which kept only the device."""
    run = saved.get("run") or {}
    return {k: run[k] for k in fields if k in run}


def write_manifest(directory: str, run_id: str, command: str, result, saved: dict[str, str],
                   targets: dict, verdict: str) -> str:
    """Write ``runs/<run_id>.json`` under ``directory``: what this run saved; its path."""
    folder = os.path.join(directory, RUNS_DIR)
    make_folder(folder)
    path = os.path.join(folder, f"{run_id}.json")
    findings = [{"id": f.id, "severity": f.severity, "invariant": f.invariant,
                 "file": saved.get(f.id)} for f in result.findings]
    write_atomic(path, json.dumps(
        {"stagecheck_run": 1, "run_id": run_id, "command": command,
         "finished": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "targets": targets,
         "verdict": verdict, "interrupted": getattr(result, "interrupted", None),
         "schema": {"spec": getattr(result, "schema_spec", None),
                    "name": getattr(getattr(result, "schema", None), "name", None)},
         "examples": {"in_contract": getattr(result, "examples_in_contract", None),
                      "out_of_contract": getattr(result, "examples_out_of_contract", None),
                      "step_sequences": getattr(result, "sequences_run", None)},
         "findings": findings}, indent=1, sort_keys=True), inside=directory)
    return path


def kept_findings(result, infos: bool = False) -> list:
    """The findings of ``result`` a run saves: every error finding, and the info findings
    too with ``infos``."""
    return [f for f in result.findings if infos or f.severity == "error"]


def save_run(result, directory: str, run_id: str, command: str, targets: dict, verdict: str,
             baseline=None, candidate=None, shims: tuple[str, ...] = (),
             infos: bool = False, keep: int = KEEP_RUNS,
             write=None) -> tuple[dict[str, str], str | None]:
    """Save what a run must keep: one replay file per kept finding (``kept_findings``), the
    run's manifest (every finding, with its file where it has one); then the folder's
    ``.gitignore`` (``mark_ignored``) and the pruning of older runs (``prune_runs``).
    Nothing at all when no finding is kept. ``write(kept)`` writes the replay files
    (default: a staging run's, ``save_findings``; a protocol run gives its own). Returns
    (finding id -> file, manifest)."""
    kept = kept_findings(result, infos)
    if not kept:
        return {}, None
    with start_umask():        # its mode from the umask stagecheck started with
        os.makedirs(directory, exist_ok=True)
    mark_ignored(directory)
    saved = write(kept) if write is not None else \
        save_findings(result, directory, baseline, candidate, shims, kept)
    manifest = write_manifest(directory, run_id, command, result, saved, targets, verdict)
    prune_runs(directory, keep)
    return saved, manifest


def mark_ignored(directory: str) -> str | None:
    """Give the ``.stagecheck`` folder that holds ``directory`` (the default save folder,
    or one under it) a ``.gitignore`` of ``*`` unless it has one; a save folder
    elsewhere is the user's to manage. Returns the file's path, or None."""
    path = os.path.abspath(directory)
    while True:
        if os.path.basename(path) == STAGECHECK_DIR:
            break
        parent = os.path.dirname(path)
        if parent == path:
            return None
        path = parent
    marker = os.path.join(path, ".gitignore")
    if not os.path.lexists(marker):
        try:
            write_atomic(marker, GITIGNORE, inside=path)
        except OSError:      # an unwritable marker never costs a finding
            return None
    return marker


def _manifest(path: str) -> dict | None:
    """The run manifest at ``path`` (``write_manifest``'s), else None: a user's file in
    the runs folder is never taken for one, nor pruned."""
    try:
        with open(path, encoding="utf-8") as fh:
            data = json.loads(fh.read(MAX_REPLAY_BYTES + 1))
    except (OSError, ValueError, RecursionError):
        return None
    return data if isinstance(data, dict) and "stagecheck_run" in data else None


def _manifest_files(path: str, directory: str) -> set[str]:
    """The replay files (names directly in ``directory``) a manifest names."""
    findings = (_manifest(path) or {}).get("findings")
    names = set()
    for f in findings if isinstance(findings, list) else ():
        file = f.get("file") if isinstance(f, dict) else None
        if isinstance(file, str) and os.path.dirname(os.path.abspath(file)) == directory \
                and file.endswith(".json"):
            names.add(os.path.basename(file))
    return names


def prune_runs(directory: str, keep: int = KEEP_RUNS) -> list[str]:
    """Remove the manifests of all but the last ``keep`` runs under ``directory`` (by
    time written), and the replay files that only removed manifests name; a replay file
    written again since its run was removed (a later run showed it too) stays, and
    nothing outside ``directory``, not named by a manifest or not a manifest itself (a
    user's JSON file in the runs folder) is touched. Best effort:
    a file that cannot be read or removed is left. Returns the removed paths."""
    directory = os.path.abspath(directory)
    runs = os.path.join(directory, RUNS_DIR)
    try:     # only stagecheck's manifests
        entries = [e for e in os.scandir(runs) if e.name.endswith(".json") and
                   e.is_file(follow_symlinks=False) and _manifest(e.path) is not None]
    except OSError:
        return []
    entries.sort(key=lambda e: (e.stat(follow_symlinks=False).st_mtime, e.name))
    old, recent = entries[:-keep] if keep > 0 else entries, entries[-keep:] if keep > 0 else []
    if not old:
        return []
    kept: set[str] = set()
    for entry in recent:
        kept |= _manifest_files(entry.path, directory)
    removed = []
    for entry in old:
        written = entry.stat(follow_symlinks=False).st_mtime
        for name in _manifest_files(entry.path, directory) - kept:
            path = os.path.join(directory, name)
            with contextlib.suppress(OSError):
                if os.path.isfile(path) and not os.path.islink(path) and \
                        os.stat(path).st_mtime <= written:
                    os.remove(path)
                    removed.append(path)
        with contextlib.suppress(OSError):
            os.remove(entry.path)
            removed.append(entry.path)
    return removed


#: largest replay file read: a saved example of the largest capacity is far smaller
MAX_REPLAY_BYTES = 16 * 1024 * 1024
#: deepest nesting of a saved scenario (a scenario is a few levels deep)
MAX_DEPTH = 16
#: largest number a saved scenario may hold (int64; staged values are int32 or smaller)
MAX_NUMBER = 2**63


def _bounded(scenario) -> None:
    """``ValueError``/``TypeError`` unless the saved scenario stays within what a run
    can take: capacity and ``num_reqs`` within ``LIMITS``, lists no longer than the
    largest capacity allows, numbers finite int64 values, nesting shallow."""
    if not isinstance(scenario, dict):
        raise TypeError(f"a scenario is a JSON object, got {type(scenario).__name__}")
    cap_limit = LIMITS["max_capacity"]
    for key in ("capacity", "num_reqs"):
        value = scenario.get(key)
        if isinstance(value, bool) or not isinstance(value, int) or \
                not 0 <= value <= cap_limit:
            raise ValueError(f"{key}={value!r} is not a whole number in [0, {cap_limit}]")
    if not isinstance(scenario.get("schema", ""), str):
        raise TypeError(f"the scenario's schema is a {type(scenario['schema']).__name__}, "
                        "not a schema name")
    if scenario["num_reqs"] > scenario["capacity"]:
        raise ValueError(f"num_reqs={scenario['num_reqs']} is more than "
                         f"capacity={scenario['capacity']}")
    longest = 4 * cap_limit
    stack = [(scenario, 0)]
    while stack:
        value, depth = stack.pop()
        if depth > MAX_DEPTH:
            raise ValueError(f"it is nested more than {MAX_DEPTH} levels deep")
        if isinstance(value, str) and not value.replace("\n", "").replace("\t", "") \
                .isprintable():
            raise ValueError(f"it holds text with control characters ({printable(value)[:80]})")
        if isinstance(value, float) and not math.isfinite(value):
            raise ValueError(f"it holds {value!r}")
        if isinstance(value, int) and not isinstance(value, bool) and \
                not -MAX_NUMBER <= value < MAX_NUMBER:
            raise ValueError(f"it holds {value}, outside int64")
        if isinstance(value, (list, dict)):
            if len(value) > longest:
                raise ValueError(f"it holds a list or table of {len(value):,} entries "
                                 f"(at most {longest:,})")
            items = value.values() if isinstance(value, dict) else value
            stack.extend((v, depth + 1) for v in items)


def _escaped(value, depth: int = 0):
    """``value`` with every string outside the scenario escaped (``printable``): what a
    report echoes from a replay file (its id, targets, messages) cannot carry an escape
    sequence or a NUL to a terminal or an XML report."""
    if isinstance(value, str):
        return printable(value)
    if isinstance(value, list):
        return [_escaped(v, depth + 1) for v in value]
    if isinstance(value, dict):
        return {(printable(k) if isinstance(k, str) else k):
                (v if (k == "scenario" and depth == 1) or (k in _PATHS and depth == 0)
                 else _escaped(v, depth + 1))
                for k, v in value.items()}
    return value


#: the fields that name files to run (target specs, shims, a schema, a protocol), kept as they
#: were saved: a path whose name holds a byte that is not UTF-8 or a control character is a
#: real file the run that saved it ran; escaped, it named no file, and the finding could
#: not be replayed. Every report and error escapes them where they are shown.
_PATHS = frozenset(("baseline", "candidate", "shims", "schema", "protocol"))


#: the fields of a replay file outside its finding, and what each may hold
_FIELDS = {"baseline": (str, type(None)), "candidate": (str, type(None)),
           "schema": (str, type(None)), "device": (str, type(None)),
           "shims": (list, type(None)), "replay_id": (str, type(None)),
           "run": (dict, type(None))}


def _fields_checked(saved: dict, fields: dict = _FIELDS,
                    run_fields: dict = RUN_FIELDS) -> None:
    """``TypeError`` naming the first field of the file whose value has the wrong type (a
    schema that is a dict, shims that are a number), ``ValueError`` one that is missing
    (a field that may not be None)."""
    for name, kinds in fields.items():
        if name not in saved and type(None) not in kinds:
            raise ValueError(f"its field {name!r} is missing")
        value = saved.get(name)
        if not isinstance(value, kinds):
            raise TypeError(f"its field {name!r} is a {type(value).__name__}, not "
                            f"{' or '.join(k.__name__ for k in kinds if k is not type(None))}")
    if not all(isinstance(s, str) for s in saved.get("shims") or ()):
        raise TypeError("its field 'shims' holds something other than paths")
    run = saved.get("run") or {}
    for name, kind in run_fields.items():
        # a whole number is a float's value too; a bool is no number
        kinds = (int, float) if kind is float else (kind,)
        if name in run and (not isinstance(run[name], kinds) or (
                kind is not bool and isinstance(run[name], bool))):
            raise TypeError(f"its field 'run' holds {name} = {run[name]!r}, not a "
                            f"{kind.__name__}")


def version_checked(saved: dict, key: str, current: int, path: str) -> None:
    """``ScenarioError`` when the file ``path``'s format ``saved[key]`` is not one this
    stagecheck reads (a whole number from 1 to ``current``; a file without it: as written
    by hand), naming the key, its value as JSON writes it, and the fix."""
    version = saved.get(key, current)
    if type(version) is not int or version < 1:
        raise ScenarioError.of(messages.REPLAY_NOT_A_FORMAT, path, key=key, current=current,
                               shown=short_text(json.dumps(version), 40))
    if version > current:
        raise ScenarioError.of(messages.REPLAY_NEWER, path, key=key, version=version,
                               current=current)


def _malformed(path: str, exc: BaseException) -> ScenarioError:
    """The error of a replay file whose content is not what a replay file holds."""
    error = ("its JSON is nested too deeply" if isinstance(exc, RecursionError)
             else f"{type(exc).__name__}: {exc}")
    return ScenarioError.of(messages.REPLAY_MALFORMED, path, error=error, save_dir=DEFAULT_SAVE_DIR)


def read_replay_document(path: str):
    """The JSON document of replay file ``path`` (a staging or a protocol one), read as every
    replay file is: a FIFO or a device refused unread (``read_regular``), at most
    ``MAX_REPLAY_BYTES``; ``UsageError`` if unreadable, ``ScenarioError`` if not JSON."""
    try:
        data = read_regular(path, MAX_REPLAY_BYTES, "replay file", UsageError)
        if len(data) > MAX_REPLAY_BYTES:
            raise UsageError.of(messages.REPLAY_TOO_LARGE, path, size=os.path.getsize(path),
                                limit=MAX_REPLAY_BYTES)
        document = json.loads(data.decode("utf-8"))
    except OSError as exc:
        raise UsageError.of(messages.REPLAY_UNREADABLE, path,
                            error=exc.strerror or str(exc)) from None
    except (ValueError, RecursionError) as exc:
        raise _malformed(path, exc) from None
    listed = document.get("findings") if isinstance(document, dict) else None
    if isinstance(listed, list) and listed and "stagecheck_run" in document:    # a manifest
        files = [str(f.get("file") if isinstance(f, dict) else f) for f in listed  # saved:
                 if not isinstance(f, dict) or f.get("file")]   # an info one has no file
        raise UsageError.of(messages.REPLAY_IS_MANIFEST, path, count=len(files),
                            example=files[0] if files else "FILE")
    return document


def load_replay(path: str) -> tuple[dict, StagingScenario]:
    """The saved document (``read_replay_document``) and its scenario;
    ``UsageError``/``ScenarioError`` when unusable."""
    saved = read_replay_document(path)
    if isinstance(saved, dict):
        version_checked(saved, "stagecheck_replay", REPLAY_VERSION, path)
    try:
        if not isinstance(saved, dict) or not isinstance(saved.get("finding"), dict):
            raise TypeError("a replay file is a JSON object with a 'finding' object")
        _fields_checked(saved)
        _bounded(saved["finding"]["scenario"])
        scenario = StagingScenario.from_dict(saved["finding"]["scenario"])
        saved = _escaped(saved)
    except (ValueError, KeyError, TypeError, RecursionError) as exc:
        raise _malformed(path, exc) from None
    schema = BUILTIN_SCHEMAS.get(scenario.schema)
    problems = malformed(schema, scenario) if schema is not None else []
    if problems:
        raise ScenarioError.of(messages.REPLAY_UNBUILDABLE, path, problems="; ".join(problems[:3]))
    return saved, scenario


def untrusted_parts(saved: dict, anywhere: bool = False) -> tuple[dict, str]:
    """What of the code a replay file (or a run about to save one) names lies outside the
    trust boundary: builtins and files inside the current repository (its git top level,
    else the current folder) are trusted (``anywhere``: builtins only). Returns
    (``baseline``/``candidate`` -> target spec, ``shims`` -> shim files, ``schema`` ->
    schema file; only the untrusted ones) and the top folder."""
    top = os.devnull if anywhere else repository_root()
    parts: dict = {}
    for side in ("baseline", "candidate"):
        named = saved.get(side)
        if named is not None and not trusted_spec(named, top):
            parts[side] = named
    shims = [s for s in saved.get("shims") or () if not trusted_path(s, top)]
    if shims:
        parts["shims"] = shims
    schema = saved.get("schema")
    if isinstance(schema, str) and schema and schema not in BUILTIN_SCHEMAS:
        # a schema file runs in the checker's own process (its derive functions judge
        # every example): whatever its place, only the command line may name one
        parts["schema"] = schema
    return parts, top


def check_trusted(saved: dict, path: str, baseline: str | None = None,
                  candidate: str | None = None, shims_given: bool = False,
                  schema_given: bool = False, protocol: str | None = None) -> None:
    """A replay file runs only code the user chose: the targets, shims and schema file it
    names must be trusted (``untrusted_parts``) unless the command line names them;
    ``protocol``: a protocol file the file names outside the trust boundary and the
    command line does not. ``UsageError`` otherwise: one refusal that names every part
    to give and the command line that gives them all."""
    parts, top = untrusted_parts(saved)
    flags = ("--baseline BASELINE " if saved.get("baseline") is not None else "") + \
        "--candidate CANDIDATE"      # a finding of spec has no baseline
    needed = [(f"the {side} target {parts[side]!r}", f"--{side}", parts[side])
              for side, given in (("baseline", baseline), ("candidate", candidate))
              if side in parts and not given]
    if not shims_given:
        needed += [(f"the shim {s!r}", "--shim", s) for s in parts.get("shims", ())]
    if "schema" in parts and not schema_given:
        needed.append((f"the schema file {parts['schema']!r} (code stagecheck runs in its "
                       "own process)", "--schema", parts["schema"]))
    if protocol:
        needed.append((f"the protocol file {protocol!r}", "--protocol", protocol))
    if len(needed) > 1:      # every part at once: never one refusal after another
        command = "stagecheck replay " + " ".join(
            [shlex.quote(path)] + [f"{flag} {shlex.quote(str(value))}"
                                   for _, flag, value in needed])
        raise UsageError.of(messages.REPLAY_UNTRUSTED_PARTS, path, top=top,
                            parts="; ".join(what for what, _, _ in needed), command=command)
    for side, given in (("baseline", baseline), ("candidate", candidate)):
        if side in parts and not given:
            raise UsageError.of(messages.REPLAY_UNTRUSTED_TARGET, path, side=side,
                                target=parts[side], top=top, flags=flags)
    if not shims_given and parts.get("shims"):
        raise UsageError.of(messages.REPLAY_UNTRUSTED_SHIM, path, target=parts["shims"][0],
                            top=top)
    if "schema" in parts and not schema_given:
        raise UsageError.of(messages.REPLAY_SCHEMA_FILE, path, target=parts["schema"])
    if protocol:
        raise UsageError.of(messages.REPLAY_UNTRUSTED_PROTOCOL, path, target=protocol,
                            top=top)
