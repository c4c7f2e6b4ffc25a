"""Protocols by name or file, checked before anything runs.

``load_protocol(spec)`` resolves a built-in protocol name (``input-prep-event``), the
one-step protocol of a staging schema (``single-call:mamba-postprocess``), or a Python
file declaring one (``path/to/protocol.py``: its ``PROTOCOL``; ``path.py:NAME``: another
module-level name), and checks it (``check_protocol``): every problem is a
``SchemaError`` naming the part of the declaration, the value and the fix (exit 2 in the
command line). ``protocol_for_target`` chooses the built-in protocol a target's name
implies; ``protocol_spec`` says how a worker loads the same protocol again.

A protocol file is code, and the checker runs some of it (its ``when`` functions draw and
unfold sequences, its ``checks`` judge traces). Outside a worker process ``load_protocol``
loads a file as ``load_protocol_isolated`` does: first in a worker
(``probe_protocol``: the import, the declaration's check and a dry run), where an exit, a
crash or a hang ends only that worker and is a ``SchemaError`` naming the file; then here
under ``oracles/guard.py`` (``load_protocol_guarded``: the import and each call of the
protocol's functions under a deadline, an exit an error, a file that patches stagecheck
refused). In a worker it is a plain import: an exit there ends only the worker.
"""

from __future__ import annotations

import dataclasses
import hashlib
import importlib.util
import os
import re
import sys
import traceback
from typing import Any

from stagecheck.oracles import guard, messages
from stagecheck.oracles._preload import preload_project_modules
from stagecheck.oracles.errors import SchemaError
from stagecheck.oracles.paths import refuse_loop, require_file
from stagecheck.oracles.process_state import state_kept
from stagecheck.oracles.protocol.generate import sample_sequence
from stagecheck.oracles.protocol.problems import check_protocol, drawable, dry_run_problems
from stagecheck.oracles.runner import load_schema_isolated
from stagecheck.oracles.schemas import load_schema
from stagecheck.oracles.text import did_you_mean
from stagecheck.oracles.observe.call import WALL_FACTOR, CallTimedOut, time_limit
from stagecheck.oracles.worker import WorkerEnded, WorkerPool
from stagecheck.oracles.worker.deadlines import probe_seconds
from stagecheck.spec.protocol import Operation, Protocol, ProtocolCheck, StepSpace, Trace
from stagecheck.spec.protocols import BUILTIN_PROTOCOLS, protocol_for_function, single_call
from stagecheck.spec.schemas import BUILTIN_SCHEMAS

__all__ = ["PROTOCOL_SECONDS", "is_protocol_file", "load_protocol", "load_protocol_guarded",
           "load_protocol_isolated", "probe_protocol", "protocol_for_target", "protocol_spec",
           "refuse_patches"]

SINGLE_CALL = "single-call:"
_SPECS: dict[int, str] = {}        # id(protocol) -> the spec it was loaded from
#: CPU seconds a worker may take to load a protocol file, check it and dry-run it
#: (``WALL_FACTOR`` times that on the wall clock; ``STAGECHECK_LOAD_SECONDS`` lowers it)
PROTOCOL_SECONDS = 10.0
#: the share of the dry run's limit after which a hang is stopped inside the worker, where
#: the part and line it stopped in are known (the rest: the worker's own end, its message)
PROBE_SHARE = 0.8
#: how a worker process runs (``python -m stagecheck.oracles.worker``)
_WORKER_MAIN = "stagecheck.oracles.worker.__main__"


def is_protocol_file(spec: Any) -> bool:
    """Whether ``spec`` names a protocol file (``path.py`` or ``path.py:NAME``)."""
    return isinstance(spec, str) and not spec.startswith(SINGLE_CALL) and (
        spec.endswith(".py") or ".py:" in spec) and spec not in BUILTIN_PROTOCOLS


def _in_worker() -> bool:
    """Whether this process is a worker (where code under test may end the process)."""
    main = sys.modules.get("__main__")
    return getattr(getattr(main, "__spec__", None), "name", None) == _WORKER_MAIN


def load_protocol(spec: Any, checked: bool = True) -> Protocol:
    """The protocol ``spec`` names (see the module doc); ``SchemaError`` when it cannot be
    found or (``checked``) is not right. ``checked=False``: whatever the file declares
    under the name, for ``check_protocol`` to list every problem (``protocol check``).
    Outside a worker a file is loaded in a worker first (``load_protocol_isolated``)."""
    if isinstance(spec, Protocol):
        if checked:
            _raise_problems(spec, spec.name)
        return spec
    if not isinstance(spec, str) or not spec.strip():
        raise SchemaError.of(messages.PROTOCOL_EMPTY, spec,
                             builtins=", ".join(BUILTIN_PROTOCOLS))
    if spec in BUILTIN_PROTOCOLS:
        return BUILTIN_PROTOCOLS[spec]
    if spec.startswith(SINGLE_CALL):
        if not spec[len(SINGLE_CALL):].strip():
            raise SchemaError.of(messages.PROTOCOL_NO_SCHEMA, spec,
                                 schemas=", ".join(BUILTIN_SCHEMAS))
        given = spec[len(SINGLE_CALL):]
        file = given.endswith(".py") or ".py:" in given     # loaded again by its path
        if file and not os.path.isabs(given):
            given = os.path.abspath(given)
            spec = SINGLE_CALL + given
        protocol = single_call(_schema(given), given if file else None)
        _SPECS[id(protocol)] = spec
        return protocol
    if is_protocol_file(spec) and not _in_worker():
        return load_protocol_isolated(spec, checked)
    return _load_file(spec, checked, guarded=False)


def load_protocol_isolated(spec: str, checked: bool = True) -> Protocol:
    """Protocol file ``spec`` for the checker (``load_protocol`` calls this for a file
    outside a worker), as ``runner.load_schema_isolated`` loads a schema file: loaded,
    checked and dry-run in a worker first (``probe_protocol``), where an exit, a crash or
    a hang ends the worker and is a ``SchemaError`` naming the file here (exit 2, never a
    verdict); then loaded in this process under ``oracles/guard.py``
    (``load_protocol_guarded``). A staging schema file it names is loaded as
    ``load_schema_isolated`` loads one."""
    if not is_protocol_file(spec):
        return load_protocol(spec, checked)
    seconds = probe_seconds(PROTOCOL_SECONDS)
    with WorkerPool() as pool:
        try:
            pool.call("stagecheck.oracles.protocol.load", "probe_protocol", spec,
                      deadline=seconds)
        except WorkerEnded as ended:
            if ended.hung:
                raise SchemaError.of(messages.PROTOCOL_HUNG, spec, seconds=seconds,
                                     wall=seconds * WALL_FACTOR) from None
            raise SchemaError.of(messages.PROTOCOL_ENDED, spec, what=ended.what) from None
    protocol = load_protocol_guarded(spec, checked)
    staging = protocol.staging if isinstance(protocol, Protocol) else None
    if isinstance(staging, str) and (staging.endswith(".py") or ".py:" in staging):
        load_schema_isolated(staging, checked=False)      # cached for every later load
    return protocol


def load_protocol_guarded(spec: str, checked: bool = True) -> Protocol:
    """Protocol file ``spec`` loaded in this process, its code under ``oracles/guard.py``
    (its import and every call of its functions under a deadline, an exit a
    ``SchemaError``, a file that changes stagecheck's own code refused): the checker's
    load, after a worker loaded the file first (``load_protocol_isolated``)."""
    return _load_file(spec, checked, guarded=True)


def _refuses_processes(func):
    """Mark a function a worker's ``call`` runs as one that must leave no process running
    (``WorkerProcess``'s keeper ends them; the call is then this message's error)."""
    func.refuses_processes = messages.PROTOCOL_STARTS_PROCESSES
    return func


@_refuses_processes
def probe_protocol(spec: str) -> None:
    """In a worker: load protocol file ``spec``, check it and dry-run it (its ``when``
    functions on drawn sequences, its ``checks`` on an empty trace), its problems aside:
    an exit or a hang here ends the worker, not the checker. A hang stopped inside (by
    a limit below the worker's, ``PROBE_SHARE``) is said of the part and line of the file
    it stopped in; one that outlasts it ends the worker (``PROTOCOL_HUNG``)."""
    limit = probe_seconds(PROTOCOL_SECONDS) * PROBE_SHARE
    loaded: list = []
    try:
        with time_limit(limit):
            _probe(spec, loaded)
    except CallTimedOut as exc:
        stopped = _stopped_in(exc, spec, loaded[0] if loaded else None)
        if stopped is None:
            raise
        part, where = stopped
        raise SchemaError.of(messages.PROTOCOL_PROBE_HUNG, spec, part=part, where=where,
                             limit=limit) from None


def _stopped_in(exc: BaseException, spec: str, protocol) -> tuple[str, str] | None:
    """The part of protocol file ``spec`` that was running when ``exc`` stopped it, and
    its ``file:line`` (the innermost frame in the file); None: it stopped outside it."""
    path = spec if spec.endswith(".py") else spec.partition(":")[0]
    real, found, tb = os.path.realpath(path), None, exc.__traceback__
    while tb is not None:
        if os.path.realpath(tb.tb_frame.f_code.co_filename) == real:
            found = tb
        tb = tb.tb_next
    if found is None:
        return None
    parts: dict = {}
    if isinstance(protocol, Protocol):
        for i, op in enumerate(protocol.operations if isinstance(protocol.operations, tuple)
                               else ()):
            code = getattr(getattr(op, "when", None), "__code__", None)
            parts.setdefault(code, f"operations[{i}].when ({getattr(op, 'name', '?')!r})")
        for i, check in enumerate(protocol.checks if isinstance(protocol.checks, tuple)
                                  else ()):
            code = getattr(getattr(check, "check", check), "__code__", None)
            parts.setdefault(code, f"checks[{i}]")
    code = found.tb_frame.f_code
    part = parts.get(code) or ("module-level code" if code.co_name == "<module>"
                               else f"function {code.co_name!r}")
    return part, f"{path}:{found.tb_lineno}"


def _probe(spec: str, loaded: list) -> None:
    protocol = load_protocol(spec, checked=False)
    loaded.append(protocol)
    if not isinstance(protocol, Protocol):
        return
    try:
        dry_run_problems(protocol)
    except Exception:       # the checker finds and says the problems itself
        pass
    if isinstance(protocol.checks, tuple) and protocol.checks:
        try:
            seq = sample_sequence(drawable(protocol), 0, 0)
        except Exception:
            return
        for check in protocol.checks:
            try:
                check.check(seq, Trace())
            except Exception:   # an empty trace may not be what a check expects
                pass


def _schema(spec: str):
    """A staging schema for a one-step protocol: a schema file is loaded in a worker first
    outside a worker (``runner.load_schema_isolated``)."""
    if (spec.endswith(".py") or ".py:" in spec) and not _in_worker():
        return load_schema_isolated(spec)
    return load_schema(spec)


def _load_file(spec: str, checked: bool, guarded: bool) -> Protocol:
    path, _, name = spec.partition(":") if not spec.endswith(".py") else (spec, "", "")
    if path.endswith(".py") and name.startswith(":"):     # FILE::NAME, as a target is named
        name = name[1:]
    if path.endswith(".py") and spec.endswith(":"):
        raise SchemaError.of(messages.PROTOCOL_NO_NAME, spec)
    if not path.endswith(".py"):
        if os.path.isdir(spec):
            raise SchemaError.of(messages.PROTOCOL_FOLDER, spec,
                                 builtins=", ".join(BUILTIN_PROTOCOLS))
        refuse_loop(spec, spec, "protocol file", SchemaError)
        raise SchemaError.of(messages.PROTOCOL_UNKNOWN, spec, meant=did_you_mean(
            spec, BUILTIN_PROTOCOLS), builtins=", ".join(BUILTIN_PROTOCOLS))
    require_file(path, "protocol file", messages.PROTOCOL_FILE_MISSING, SchemaError, spec,
                 path=path)      # a FIFO or a device is named as such, never imported
    if guarded:    # every module of stagecheck loaded first: a patch of one is then seen
        preload_project_modules()
    before = guard.snapshot() if guarded else None
    module = _import(path, spec, guarded)
    if before is not None:
        refuse_patches(before, spec)
    name = name or "PROTOCOL"
    protocol = getattr(module, name, None)
    if protocol is None or (checked and not isinstance(protocol, Protocol)):
        found = sorted(n for n, v in vars(module).items() if isinstance(v, Protocol))
        raise SchemaError.of(messages.PROTOCOL_NOT_DECLARED, spec, name=name, path=path,
                             found=", ".join(found) or "none")
    if guarded and isinstance(protocol, Protocol):
        _guard_protocol(protocol, path)
    if not checked:
        return protocol
    _raise_problems(protocol, spec)
    _SPECS[id(protocol)] = os.path.abspath(path) + (f":{name}" if name != "PROTOCOL" else "")
    return protocol


#: the declaration classes a protocol file builds, by name (``_declaration_hint``)
_DECLARATIONS = {c.__name__: c for c in (Protocol, Operation, ProtocolCheck, StepSpace)}


def _declaration_hint(exc: BaseException) -> str:
    """What a declaration class's TypeError leaves unsaid: the part it needs
    (``Protocol(...)`` without ``build``), or `` (did you mean 'operations'?)`` for a
    misspelt keyword (``Protocol(operatons=...)``); '' otherwise."""
    text = str(exc) if isinstance(exc, TypeError) else ""
    lacking = re.fullmatch(r"(\w+)\.__init__\(\) missing \d+ required (?:positional|keyword-only)"
                           r" arguments?: (.*)", text)
    if lacking and lacking.group(1) in _DECLARATIONS:     # a part left out: which, and where
        parts = re.findall(r"'(\w+)'", lacking.group(2))  # its parts are listed
        return messages.PROTOCOL_PART_MISSING.format(
            cls=lacking.group(1), parts=", ".join(f"{p}=..." for p in parts))
    found = re.fullmatch(r"(\w+)\.__init__\(\) got an unexpected keyword argument '(\w+)'",
                         text)
    cls = _DECLARATIONS.get(found.group(1)) if found else None
    if cls is None:
        return ""
    return did_you_mean(found.group(2), [f.name for f in dataclasses.fields(cls)]).replace(
        "mean ", "mean keyword ")


def _import(path: str, spec: str, guarded: bool = False):
    here = os.path.abspath(path)
    module_name = f"stagecheck_protocol_{hashlib.sha1(here.encode()).hexdigest()[:12]}"
    try:
        loader_spec = importlib.util.spec_from_file_location(module_name, path)
        module = importlib.util.module_from_spec(loader_spec)
        # its working folder, umask and resource limits put back, what it writes to fd 1
        # sent to stderr (stdout holds the report), as for a schema file
        with state_kept() as lost:
            if guarded:
                _guarded(f"protocol file {path!r} (its module-level code)",
                         loader_spec.loader.exec_module, module)
            else:
                loader_spec.loader.exec_module(module)
    except (SchemaError, CallTimedOut):   # a time limit's stop: said by the one who set it
        raise
    except BaseException as exc:     # the user's file failed to import: say so, exit 2
        lines = [f.lineno for f in traceback.extract_tb(exc.__traceback__) if f.filename == here]
        raise SchemaError.of(messages.PROTOCOL_IMPORT, spec,
                             error=f"{type(exc).__name__}: {exc}{_declaration_hint(exc)}",
                             line=f" at line {lines[-1]}" if lines else "") from None
    if lost:
        raise SchemaError.of(messages.PROTOCOL_CHANGES_PROCESS, spec, path=path,
                             changes="; ".join(lost))
    return module


def refuse_patches(before: dict, spec: str, also: tuple[str, ...] = ()) -> None:
    """``PROTOCOL_PATCHES`` when protocol file ``spec`` changed, since ``before``
    (``guard.snapshot(also)``), stagecheck's own code or that of the modules ``also``
    names."""
    changed = guard.patched(before, also=also)
    if changed:
        raise SchemaError.of(messages.PROTOCOL_PATCHES, spec, names=", ".join(changed[:4]) + (
            f" and {len(changed) - 4} more" if len(changed) > 4 else ""))


#: guard's fixes (said of schema code) -> the same said of protocol code
_FIXES = {messages.SCHEMA_CODE_HUNG[1]: messages.PROTOCOL_CODE_HUNG_FIX,
          messages.SCHEMA_CODE_EXITED[1]: messages.PROTOCOL_CODE_EXITED_FIX}


def _guarded(what: str, func, *args, **kwargs):
    """``guard.guarded_call``, its hang or exit said of protocol code."""
    try:
        return guard.guarded_call(what, func, *args, **kwargs)
    except SchemaError as exc:
        exc.fix = _FIXES.get(exc.fix, exc.fix)
        raise


def _wrapped(func, what: str):
    if not callable(func) or getattr(func, "__stagecheck_guarded__", False):
        return func

    def call(*args, **kwargs):
        return _guarded(what, func, *args, **kwargs)

    call.__stagecheck_guarded__ = True
    call.__wrapped__ = func
    for attr in ("__name__", "__qualname__", "__doc__", "__module__"):
        try:
            setattr(call, attr, getattr(func, attr))
        except (AttributeError, TypeError):
            pass
    return call


def _guard_protocol(protocol: Protocol, path: str) -> None:
    """Each function ``protocol`` holds (build, observe, each operation's run and when,
    each check) runs as a guarded call when the checker calls it, in place."""
    where = f"protocol file {path!r}"

    def wrap(obj, attr: str, label: str) -> None:
        value = getattr(obj, attr, None)
        if callable(value) and not isinstance(value, type):
            object.__setattr__(obj, attr, _wrapped(value, f"{where}: {label}"))

    wrap(protocol, "build", "build")
    wrap(protocol, "observe", "observe")
    for k, op in enumerate(protocol.operations if isinstance(protocol.operations, tuple)
                           else ()):
        if isinstance(op, Operation):
            wrap(op, "run", f"operations[{k}].run")
            wrap(op, "when", f"operations[{k}].when")
    for k, check in enumerate(protocol.checks if isinstance(protocol.checks, tuple) else ()):
        if isinstance(check, ProtocolCheck):
            wrap(check, "check", f"checks[{k}].check")


def protocol_spec(protocol: Protocol) -> str:
    """How a worker loads ``protocol`` again (a built-in name, or the file it came from)."""
    if BUILTIN_PROTOCOLS.get(protocol.name) is protocol:
        return protocol.name
    if protocol.staging and protocol.name.startswith(SINGLE_CALL):
        return _SPECS.get(id(protocol), protocol.name)
    spec = _SPECS.get(id(protocol))
    if spec is None:
        raise SchemaError.of(messages.PROTOCOL_NOT_LOADABLE, protocol.name)
    return spec


def protocol_for_target(target: str) -> Protocol | None:
    """The built-in protocol a target spec's function (or class) name implies, if one."""
    name = target.rsplit("::", 1)[-1] if "::" in target else target.rsplit(":", 1)[-1]
    return protocol_for_function(name)


def _raise_problems(protocol: Protocol, spec: str) -> None:
    problems = check_protocol(protocol)
    if problems:
        raise SchemaError.of(messages.PROTOCOL_INVALID, spec, count=len(problems),
                             problems="; ".join(problems))
