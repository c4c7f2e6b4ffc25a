"""Loading and checking staging schemas: built-in names, or a user's schema file.

``--schema NAME`` names a built-in schema (``spec/schemas/``); ``--schema FILE[:NAME]``
imports that file (the user's own code) and takes its ``SCHEMA`` (or ``NAME``). Every
schema is checked before use: its declarations (``check_declarations``), then a dry run
that draws scenarios, builds the call's arguments, derives every slot and applies the
mutations (``check_schema``); a problem is a ``SchemaError`` (exit 2) naming the part.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import sys
import traceback
from typing import Any

from stagecheck.oracles import guard, messages
from stagecheck.oracles._preload import preload_project_modules
from stagecheck.oracles.errors import SchemaError
from stagecheck.oracles.observe import Builder, make_backend
from stagecheck.oracles.observe.build import BuilderRefused
from stagecheck.oracles.observe.listmodel import ListBackend, ModelUnsupported
from stagecheck.oracles.options import CAPACITY_LIMIT, RunOptions
from stagecheck.oracles.paths import refuse_loop, refuse_special
from stagecheck.oracles.process_state import state_kept
from stagecheck.oracles.sample import sample_breach, sample_scenario
from stagecheck.oracles.schema_types import type_problems
from stagecheck.oracles.targets import remember_schema_spec
from stagecheck.oracles.text import did_you_mean, exception_text, printable, type_name
from stagecheck.spec.invariants import (column_disagreement, column_values, expected_inputs_after,
                                         expected_value)
from stagecheck.spec.protocol import Protocol
from stagecheck.spec.scenario import MISSING
from stagecheck.spec.schema import (FLAG, ID_SET, MAY_MISS, NUMBER, OPTIONAL, PER_REQUEST,
                                    PER_SLOT, REQUIRED, Call, StagingSchema)
from stagecheck.spec.schema_mistakes import SchemaCodeFailed
from stagecheck.spec.schemas import BUILTIN_SCHEMAS
from stagecheck.spec.space import contract_breaches

__all__ = ["check_declarations", "check_schema", "load_schema", "probe_schema", "schema_space"]

_KINDS = (PER_REQUEST, PER_SLOT, ID_SET, FLAG, NUMBER)
_PRESENCES = (REQUIRED, OPTIONAL, MAY_MISS)
_INPUT_DTYPES, _FIELD_DTYPES = ("int", "int-list", "bool"), ("int32", "int64", "bool")
_ABSENT = object()      # what ``getattr`` gives for a name the file does not define


def load_schema(spec: str, checked: bool = True, guarded: bool = False) -> StagingSchema:
    """A built-in schema by name, or ``path.py[:NAME]``; with ``checked``, a schema file's
    schema passes ``check_schema`` (``SchemaError`` naming its first problems if not).

    ``guarded`` (the checker, once a worker loaded the file: ``runner.load_schema_isolated``):
    its import and every call of its functions run under ``guard`` (a deadline; an exit is
    a ``SchemaError``; a file that changes stagecheck's code or ``builtins`` is refused)."""
    if spec in BUILTIN_SCHEMAS:
        return BUILTIN_SCHEMAS[spec]
    path, sep, name = (spec, "", "") if spec.endswith(".py") or ":" not in spec else spec.rpartition(":")
    if sep and not name and path.endswith(".py"):     # 'file.py:': a NAME left out
        raise SchemaError.of(messages.SCHEMA_NO_NAME, spec)
    if not path.endswith(".py"):
        refuse_loop(spec, spec, "schema file", SchemaError)
        raise SchemaError.of(messages.SCHEMA_UNKNOWN, spec, builtins=", ".join(BUILTIN_SCHEMAS),
                             guess=did_you_mean(spec, BUILTIN_SCHEMAS))
    refuse_special(path, spec, "schema file", SchemaError)
    if not os.path.isfile(path):
        raise SchemaError.of(messages.SCHEMA_FILE_MISSING, spec, path=path, cwd=os.getcwd())
    if guarded:    # every module of stagecheck loaded first: a patch of one is then seen
        preload_project_modules()
    before = guard.snapshot() if guarded else None
    module = _import_file(path, spec, guarded)
    attribute = name or "SCHEMA"
    schema = getattr(module, attribute, None)
    if not isinstance(schema, StagingSchema):
        found = sorted(k for k, v in vars(module).items() if isinstance(v, StagingSchema))
        protocols = sorted(k for k, v in vars(module).items() if isinstance(v, Protocol))
        if not found and protocols:       # a protocol file given where a schema goes
            raise SchemaError.of(messages.SCHEMA_IS_PROTOCOL, spec, path=path,
                                 names=", ".join(protocols),
                                 protocol=path if "PROTOCOL" in protocols
                                 else f"{path}:{protocols[0]}")
        if not found:
            held = getattr(module, attribute, _ABSENT)
            raise SchemaError.of(messages.SCHEMA_NONE_IN_FILE, spec, path=path, name=attribute,
                                 what="is not defined" if held is _ABSENT else
                                 f"is of type {type_name(type(held))}")
        raise SchemaError.of(messages.SCHEMA_NOT_FOUND, spec, path=path, name=attribute,
                             found=", ".join(found))
    if guarded:
        guard.guard_schema(schema, printable(str(schema.name)))
    problems = check_schema(schema, list_model=False) if checked else []
    if before is not None:
        _refuse_patches(before, spec)
    if problems:
        raise SchemaError.of(messages.SCHEMA_INVALID, spec, problems="; ".join(problems[:4]),
                             more=f" (and {len(problems) - 4} more)" if len(problems) > 4 else "")
    remember_schema_spec(schema, os.path.abspath(path) + (f":{name}" if name else ""))
    return schema


def _refuses_processes(func):
    """Mark ``probe_schema``: the schema file must leave no process running when it is
    loaded and dry-run in a worker (the checker imports it too: such a process would
    outlive the run); the worker ends them and the call is this message's error."""
    func.refuses_processes = messages.SCHEMA_STARTS_PROCESSES
    return func


@_refuses_processes
def probe_schema(spec: str) -> None:
    """Load schema file ``spec`` and dry-run it, its problems aside: what a worker does
    before the checker loads the file itself (an exit or a hang then ends the worker)."""
    check_schema(load_schema(spec, checked=False))


def _refuse_patches(before: dict, spec: str) -> None:
    changed = guard.patched(before)
    if changed:
        raise SchemaError.of(messages.SCHEMA_PATCHES, spec, names=", ".join(changed[:4]) + (
            f" and {len(changed) - 4} more" if len(changed) > 4 else ""))


def _import_file(path: str, spec: str, guarded: bool = False):
    digest = hashlib.sha1(os.path.abspath(path).encode()).hexdigest()[:12]
    module_name = f"stagecheck_user_schema_{digest}"
    if module_name in sys.modules:
        return sys.modules[module_name]
    loader_spec = importlib.util.spec_from_file_location(module_name, path)
    module = importlib.util.module_from_spec(loader_spec)
    sys.modules[module_name] = module
    before = guard.snapshot() if guarded else None
    try:
        # its working folder, umask and resource limits put back, what it writes to fd 1
        # sent to stderr (stdout holds the report)
        with state_kept() as lost:
            if guarded:
                guard.guarded_call(f"schema file {path!r} (its module-level code)",
                                   loader_spec.loader.exec_module, module)
            else:
                loader_spec.loader.exec_module(module)
    except SchemaError:
        del sys.modules[module_name]
        raise
    except BaseException as exc:    # the user's file failed (its own BaseException
        del sys.modules[module_name]     # too): say where, no traceback
        raise SchemaError.of(messages.SCHEMA_IMPORT, spec, path=path,
                             error=exception_text(exc, type(exc))) from None
    if lost:
        del sys.modules[module_name]
        raise SchemaError.of(messages.SCHEMA_CHANGES_PROCESS, spec, path=path,
                             changes="; ".join(lost))
    if before is not None:
        try:
            _refuse_patches(before, spec)
        except SchemaError:
            del sys.modules[module_name]
            raise
    return module


#: attributes of the request view (``q``) itself: unreachable as inputs ``q.<name>``
_VIEW_NAMES = ("scenario", "slot", "id", "get", "has", "slot_value", "input")


def _fits(value: Any, dtype: str) -> bool:
    if dtype == "bool":
        return isinstance(value, bool)
    low, high = {"int32": (-(2**31), 2**31 - 1), "int64": (-(2**63), 2**63 - 1)}[dtype]
    return isinstance(value, int) and not isinstance(value, bool) and low <= value <= high


def check_declarations(schema: StagingSchema) -> list[str]:
    """Problems with the declarations themselves, each naming the part and the fix."""
    if out := type_problems(schema):     # the checks below read each part as its type
        return out
    if not schema.functions:
        out.append("functions: name the staging function(s) this schema describes")
    if not schema.parameters:
        out.append("parameters: list the positional parameters of the staging function")
    if not callable(schema.build):
        out.append("build: must be a function (builder, profile) -> Call")
    capacity = schema.max_capacity
    if isinstance(capacity, bool) or not isinstance(capacity, int) \
            or not 1 <= capacity <= CAPACITY_LIMIT:
        out.append(messages.SCHEMA_MAX_CAPACITY_BAD.format(value=capacity,
                                                           limit=CAPACITY_LIMIT))
    names = [i.name for i in schema.inputs]
    by_name = {i.name: i for i in schema.inputs}
    for dup in sorted({n for n in names if names.count(n) > 1}):
        out.append(f"input {dup!r}: declared twice; give each input one name")
    groups_seen: set = set()
    previous_group = None
    for i in schema.inputs:
        where = f"input {i.name!r}"
        if i.kind not in _KINDS:
            out.append(f"{where}: kind {i.kind!r} is not one of {', '.join(_KINDS)}")
        if i.dtype not in _INPUT_DTYPES:
            out.append(f"{where}: dtype {i.dtype!r} is not one of {', '.join(_INPUT_DTYPES)}")
        if i.presence not in _PRESENCES:
            out.append(f"{where}: presence {i.presence!r} is not one of "
                       f"{', '.join(_PRESENCES)}")
        low_high = i.length if isinstance(i.length, tuple) and len(i.length) == 2 else None
        if i.dtype == "int-list" and (low_high is None or not all(
                isinstance(n, int) and not isinstance(n, bool) for n in low_high)
                or not 0 <= low_high[0] <= low_high[1]):
            out.append(messages.SCHEMA_LENGTH_BAD.format(name=i.name, length=i.length))
        if i.values.low > i.values.high:
            out.append(f"{where}: values.low {i.values.low} is above values.high "
                       f"{i.values.high}; swap them")
        outside = [v for v in i.values.special if not i.values.low <= v <= i.values.high]
        if outside:
            out.append(f"{where}: values.special {outside[0]} lies outside [values.low, "
                       f"values.high] = [{i.values.low}, {i.values.high}]; drawn in contract "
                       "it would breach the contract: widen the range or drop the value")
        if i.name in _VIEW_NAMES or i.name.startswith("_"):
            out.append(f"{where}: the request view has its own attribute {i.name!r}, so "
                       f"q.{i.name} would not read this input; rename the input")
        if i.group and i.group in groups_seen and previous_group != i.group:
            out.append(f"{where}: the inputs of group {i.group!r} must be declared one after "
                       "the other")
        if i.group:
            groups_seen.add(i.group)
        previous_group = i.group
    fields = [f.name for f in schema.fields]
    buffers = [f.buffer for f in schema.fields]
    for dup in sorted({n for n in fields if fields.count(n) > 1}):
        out.append(f"field {dup!r}: declared twice; give each field one name")
    for dup in sorted({b for b in buffers if buffers.count(b) > 1}):
        out.append(f"buffer {dup!r}: two fields stage it; one field per buffer")
    for f in schema.fields:
        where = f"field {f.name!r}"
        if f.dtype not in _FIELD_DTYPES:
            out.append(f"{where}: dtype {f.dtype!r} is not one of {', '.join(_FIELD_DTYPES)}")
        if f.derive is not None and not callable(f.derive):
            out.append(f"{where}: derive must be a function of the request view, e.g. "
                       "lambda q: q.num_scheduled_tokens")
        if f.column is not None and not callable(f.column):
            out.append(f"{where}: column must be a function (inputs, live request ids) -> "
                       "one value per id, or None")
        elif f.column is not None and f.derive is None:
            out.append(f"{where}: column is a shortcut for derive, and derive is None (the "
                       "values are not checked); give derive too, or drop column")
        if f.tail.kind not in ("untouched", "fill", "free"):
            out.append(f"{where}: tail {f.tail.kind!r} is not untouched, fill or free")
        if f.copy.kind not in ("live", "whole", "none"):
            out.append(f"{where}: copy {f.copy.kind!r} is not live, whole or none")
        if f.missing is not None and f.missing.input not in names:
            out.append(f"{where}: missing.input {f.missing.input!r} is not a declared input")
        if f.missing is not None and f.missing.kind not in ("assertion", "raises"):
            out.append(f"{where}: missing.kind {f.missing.kind!r} is not assertion or raises")
        if f.tail.kind == "untouched" and f.copy.kind == "whole":
            out.append(f"{where}: tail untouched and copy whole contradict each other (the "
                       "whole copy overwrites the device tail); give tail=TAIL_FREE, or "
                       "tail_fill(value) if the function fills the tail")
        if f.tail.kind == "fill" and f.dtype in _FIELD_DTYPES and not _fits(f.tail.value, f.dtype):
            out.append(f"{where}: the tail fill value {f.tail.value!r} is not a {f.dtype} "
                       "value; give one the buffer can hold")
        policed = by_name.get(f.missing.input) if f.missing is not None else None
        if policed is not None and policed.kind != PER_REQUEST:
            out.append(f"{where}: missing.input {policed.name!r} is of kind {policed.kind}; "
                       "a missing-input policy is about a per-request input")
        elif policed is not None and policed.presence == REQUIRED:
            out.append(f"{where}: missing.input {policed.name!r} is required, so no "
                       "in-contract scenario lacks it and the policy is never checked; "
                       "declare it with presence=MAY_MISS")
        if f.missing is not None and f.missing.applies is not None \
                and not callable(f.missing.applies):
            out.append(f"{where}: missing.applies must be a function of the request view "
                       "(lambda q: ...) or None")
    seen_parameters = [tuple(schema.parameters)]
    for g in schema.signatures:
        where = f"signature ({', '.join(g.parameters)})"
        if tuple(g.parameters) in seen_parameters:
            out.append(f"{where}: the same parameters as another signature; each adapter "
                       "must be chosen by parameters no other has")
        seen_parameters.append(tuple(g.parameters))
        if not callable(g.build):
            out.append(f"{where}: build must be a function (builder, profile) -> Call")
    for k in schema.keywords:
        if k not in names:
            out.append(f"keyword {k!r}: declare it as an input (kind=FLAG) so scenarios hold "
                       "its value")
    return out


def _column_problem(s, f) -> str | None:
    """Where ``f.column`` disagrees with ``f.derive`` on ``s`` (None: nowhere)."""
    try:
        got = column_values(s, f)
    except SchemaCodeFailed as exc:
        return (f"{exc.what} raised {exc.error}; it takes (inputs, live request ids), "
                "reads the inputs without changing them, and gives derive's value for "
                "each id (MISSING where derive raises KeyError)")
    # derive raised nothing on s (checked before)
    found = column_disagreement(s, f, got, range(len(got)))
    if found is None:
        return None
    i, value, want = found
    return (f"field {f.name!r}: column gives {value!r} for slot {i} ({s.live_ids[i]!r}) "
            f"where derive gives {want!r}; column must equal derive on every slot (or drop "
            "column: derive alone is enough)")


def check_schema(schema: StagingSchema, samples: int = 30, list_model: bool = True
                 ) -> list[str]:
    """``check_declarations``, then a dry run on ``samples`` drawn scenarios per profile.

    The dry run builds each call on the list model of ``CpuGpuBuffer`` (the symbolic
    oracle's), and on torch buffers where the adapter uses surface the list model does
    not offer; with ``list_model`` that use is a problem too (``schema check`` says so;
    the other commands build on torch buffers and only ``symbolic`` would lose paths)."""
    out = check_declarations(schema)
    if out:
        return out
    profiles = schema.profiles()
    lives: dict[str, int] = {}      # field -> live slots derived in the dry run
    valued: set[str] = set()        # fields whose derive gave a value at least once
    reached: set[str] = set()       # inputs that reached a call through the builder
    limits: list[str] = []          # what the list model could not build
    calls = 0
    for k in range(samples):
        try:
            s = sample_scenario(schema, 0, k)
        except Exception as exc:
            return [f"generate: drawing a scenario raised {type(exc).__name__}: {exc}; fix "
                    "the generate hook or the input declarations"]
        breaches = contract_breaches(schema, s)
        if breaches:
            return [f"generate: a scenario drawn in contract breaks the contract "
                    f"({breaches[0]}); the generate hook must keep scenarios in contract"]
        for profile in profiles:
            calls += 1
            builder = Builder(s, profile, ListBackend())
            try:
                try:
                    call = profile.build(builder)
                except ModelUnsupported as exc:
                    if not limits:
                        limits.append(_list_model_limit(profile, exc))
                    builder = Builder(s, profile, make_backend("instrumented", RunOptions()))
                    call = profile.build(builder)
            except BuilderRefused as exc:
                return [f"build: {exc}"]
            except Exception as exc:
                return [f"build: raised {type(exc).__name__}: {exc} on a drawn scenario; fix "
                        "the call adapter"]
            if not isinstance(call, Call):
                return ["build: must return Call(args, kwargs)"]
            made = builder.made()
            reached.update(made)
            raw = _raw_inputs(schema, s, call, made)
            if raw:
                return [messages.SCHEMA_RAW_INPUT.format(name=raw, right=_maker(schema, raw))]
            unmade = [f for f in profile.staged_fields(s) if f.buffer not in builder.buffers]
            if unmade:
                return [f"build: field {unmade[0].name!r} is staged into buffer "
                        f"{unmade[0].buffer!r}, which the call never gets; make it with "
                        f"b.buffer({unmade[0].buffer!r}) and pass it where the function "
                        "expects it"]
            for f in profile.staged_fields(s):
                if f.derive is None:        # derive=None: the values are not checked
                    continue
                for i, r in enumerate(s.live_ids):
                    lives[f.name] = lives.get(f.name, 0) + 1
                    try:
                        value = expected_value(s, f, i, r)
                        if value is not MISSING:
                            valued.add(f.name)
                        if value is not MISSING and f.dtype != "bool" and isinstance(
                                value, int) and not _fits(int(value), f.dtype):
                            return [messages.SCHEMA_DERIVE_UNFIT.format(
                                name=f.name, value=value, slot=i, dtype=f.dtype)]
                    except Exception as exc:
                        if getattr(exc, "returned", False):     # a value of a wrong type
                            return [messages.SCHEMA_DERIVE_TYPE.format(name=f.name,
                                                                       said=exc.error, slot=i)]
                        error = exc.error if isinstance(exc, SchemaCodeFailed) else \
                            f"{type(exc).__name__}: {exc}"
                        return [f"field {f.name!r}: derive raised {error} for slot {i}; a "
                                "request lacking an input may raise KeyError only"]
                if f.column is not None:
                    problem = _column_problem(s, f)
                    if problem:
                        return [problem]
            for f in profile.staged_fields(s):
                if f.missing is None:
                    continue
                for i, r in enumerate(s.live_ids):
                    try:
                        f.missing.applies_to(s, i, r)
                    except Exception as exc:
                        return [f"field {f.name!r}: missing.applies raised "
                                f"{type(exc).__name__}: {exc} for slot {i}; it may read only "
                                "what the request has (the policy's input is absent)"]
            try:
                after = expected_inputs_after(profile, s)
            except Exception as exc:
                return [f"mutations: raised {type(exc).__name__}: {exc}; it takes (scenario, "
                        "inputs as plain data) and returns them as the call must leave them"]
            if not isinstance(after, dict):
                return ["mutations: must return the inputs as a dict"]
        try:
            breach, b = sample_breach(schema, 0, k)
        except Exception as exc:
            return [f"the out-of-contract stream: drawing raised {type(exc).__name__}: {exc}"]
        for f, (i, r) in ((f, p) for f in schema.fields if f.derive is not None
                          for p in enumerate(b.req_ids[:b.num_reqs])):
            try:
                expected_value(b, f, i, r)
            except SchemaCodeFailed as exc:     # the run would stop there (exit 2)
                return [messages.SCHEMA_DERIVE_BREACH.format(name=f.name, error=exc.error,
                                                             slot=i, breach=breach)]
    unseen = [i.name for i in schema.inputs if i.kind not in (FLAG, NUMBER)
              and i.name not in reached]
    if unseen:
        return [messages.SCHEMA_INPUT_UNSEEN.format(name=unseen[0], calls=calls,
                                                    right=_maker(schema, unseen[0]))]
    never = [name for name in lives if name not in valued]
    if never:
        return [f"field {never[0]!r}: derive gave no value for any of {lives[never[0]]} live "
                f"slots of {samples} drawn scenarios (each raised KeyError, read as 'the "
                "request lacks an input'), so nothing would check this field; derive it "
                "from inputs the requests have, or give derive=None to check no values"]
    if schema.bench is not None:
        try:
            s = schema.bench(4)
        except Exception as exc:
            return [f"bench: raised {type(exc).__name__}: {exc}"]
        if contract_breaches(schema, s) or s.num_reqs != 4:
            return ["bench: bench(n) must return an in-contract scenario with n live requests"]
    return out + (limits if list_model else [])


def _maker(schema: StagingSchema, name: str) -> str:
    """The builder call that makes input ``name``."""
    kind = schema.input(name).kind
    return {PER_SLOT: f"b.array({name!r}, dtype)", ID_SET: f"b.id_set({name!r})"}.get(
        kind, f"b.table({name!r}) or b.objects(attr={name!r})")


def _raw_inputs(schema: StagingSchema, s: Any, call: Call, made: dict) -> str | None:
    """An input the call's arguments hold as the scenario's own object (not made by the
    builder, so what the call does to it would go unseen and change the scenario)."""
    own = {id(s.inputs[i.name]): i.name for i in schema.inputs
           if i.kind not in (FLAG, NUMBER) and i.name not in made
           and isinstance(s.inputs.get(i.name), (dict, list))}
    if not own:
        return None
    seen: set[int] = set()
    todo = [*call.args, *call.kwargs.values()]
    while todo:
        value = todo.pop()
        if id(value) in own:
            return own[id(value)]
        if id(value) in seen or len(seen) > 10_000:
            continue
        seen.add(id(value))
        if isinstance(value, dict):
            todo.extend(value.values())
        elif isinstance(value, (list, tuple)):
            todo.extend(value)
        elif type(value).__name__ == "SimpleNamespace":
            todo.extend(vars(value).values())
    return None


def _list_model_limit(profile, exc: BaseException) -> str:
    """What the list model could not build, where in the schema's build, and what to do."""
    where = "in build"
    build = profile.signature.build if profile.signature else profile.schema.build
    build = getattr(build, "__wrapped__", build)       # the schema's own, not the guard's
    code = getattr(build, "__code__", None)
    for frame in reversed(traceback.extract_tb(exc.__traceback__)):
        if code is not None and frame.filename == code.co_filename:
            where = f"at {frame.filename}:{frame.lineno} ({(frame.line or '').strip()})"
            break
    return messages.SCHEMA_LIST_MODEL.format(error=exc, where=where)


def schema_space(schema: StagingSchema, seed: int = 0, count: int = 200) -> dict[str, Any]:
    """What the scenario space of ``schema`` looks like over ``count`` drawn scenarios."""
    stats = {"scenarios": count, "empty batches": 0, "full batches": 0, "with padded ids": 0,
             "with a live request lacking a may-miss input": 0, "largest capacity": 0}
    may_miss = [i.name for i in schema.inputs if i.presence == MAY_MISS
                and i.kind == PER_REQUEST]
    for k in range(count):
        s = sample_scenario(schema, seed, k)
        stats["empty batches"] += s.num_reqs == 0
        stats["full batches"] += s.num_reqs == s.capacity
        stats["with padded ids"] += len(s.req_ids) > s.num_reqs
        stats["with a live request lacking a may-miss input"] += any(
            r not in s.inputs[name] for name in may_miss for r in s.live_ids)
        stats["largest capacity"] = max(stats["largest capacity"], s.capacity)
    breaches: dict[str, int] = {}
    for k in range(count):
        label, _ = sample_breach(schema, seed, k)
        breaches[label] = breaches.get(label, 0) + 1
    stats["out-of-contract breaches"] = breaches
    return stats
