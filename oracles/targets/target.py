"""Target specs and the ``Target`` type: what a target is, and how a spec resolves to one.

A target is a builtin name, ``package.module:function``, ``path/to/file.py::function``
or ``git:REV:path/to/file.py::function``; in a file target, ``Class.method`` names one
method of a module-level class, loaded as a function whose first parameter is ``self``
(the schema's adapter makes a stand-in for it). File targets are parsed, not imported
(``source.py`` compiles them with their shims); revisions are read with git (``git.py``).

Paths of ``git:REV:PATH`` targets are taken relative to the current folder, as for a
file target (absolute paths work too); ``REV`` is resolved to its commit once, when the
target is loaded, and the target keeps the commit (``Target.sha``) and a spec pinned
to it (``Target.resolved``).
"""

from __future__ import annotations

import importlib
import inspect
import os
import sys
from dataclasses import dataclass, field
from typing import Any, Callable

from stagecheck.oracles import messages
from stagecheck.oracles.errors import TargetLoadError
from stagecheck.oracles.paths import refuse_special
from stagecheck.oracles.text import did_you_mean
from stagecheck.oracles.targets.git import git_show
from stagecheck.oracles.targets.source import (MAX_SOURCE_BYTES, decode_source,
                                               load_function_from_source, load_shims)
from stagecheck.spec.schema import StagingSchema, TargetProfile
from stagecheck.spec.schemas import BUILTIN_SCHEMAS, DEFAULT_SCHEMA, schema_for_function

__all__ = ["BUILTINS", "FileSource", "Target", "TargetRef", "is_file_spec", "is_module_spec",
           "load_target", "read_file_target", "remember_schema_spec", "schema_spec",
           "split_file_spec",
           "split_git_spec", "target_from_callable", "target_ref", "target_source"]

BUILTINS = {
    "legacy": "stagecheck.impl.staging_legacy:stage_postprocess_inputs_to_gpu",
    "single-loop": "stagecheck.impl.staging_single_loop:stage_postprocess_inputs_to_gpu",
    "prefix-migration": "stagecheck.impl.staging_prefix:stage_postprocess_inputs_to_gpu",
    "specdec": "stagecheck.impl.staging_all_specdec:preprocess_mamba_all_specdec",
    "preprocess-fused": "stagecheck.impl.staging_preprocess_fused:preprocess_mamba",
    "backup-tokens": "stagecheck.impl.staging_backup_tokens:prepare_next_token_ids_padded",
}


@dataclass(frozen=True)
class TargetRef:
    """How a worker process loads a target: a target spec, or a module's source text with
    the function to take from it (file and revision targets, read once by the checker
    with ``target_ref``; mutants), with the shims its global names may come from."""

    spec: str
    schema: str | None = None           # a schema spec; None: chosen by the function name
    source: str | None = None           # with ``filename`` and ``function``: load from text
    filename: str | None = None
    function: str | None = None
    shims: tuple[str, ...] = ()         # shim modules (absolute paths) for file targets
    origin: str | None = None           # where the source came from, for reports
    resolved: str | None = None         # the pinned spec (see ``Target.resolved``)
    sha: str | None = None              # the commit a revision target was read at


@dataclass
class Target:
    """A resolved staging function and what the spec needs to know about it: its schema
    and the optional keywords it takes (``profile``).

    In the checker's process ``func`` is None when the target was loaded into a worker
    (``oracles/runner.py``); ``ref`` says how a worker loads it (None: it cannot be,
    e.g. a lambda, and runs in this process).
    """

    spec: str
    func: Callable | None
    profile: TargetProfile
    origin: str          # where it came from, for reports
    ref: TargetRef | None = None
    resolved: str | None = None    # the spec pinned: git targets name their commit, file
                                   # targets their absolute path (None: same as spec)
    sha: str | None = None         # the commit a git target was read from
    shimmed: tuple[str, ...] = field(default_factory=tuple)   # "name from module" bound by
                                                              # a shim

    @property
    def schema(self) -> StagingSchema:
        return self.profile.schema

    @property
    def pinned(self) -> str:
        """The spec that loads this very target again, from any folder."""
        return self.resolved or self.spec

    def record(self) -> dict[str, Any]:
        """What a report says about the target."""
        return {"spec": self.spec, "resolved": self.pinned, "sha": self.sha,
                "origin": self.origin, "shims": list(self.shimmed)}


@dataclass(frozen=True)
class FileSource:
    """What ``read_file_target`` read: the source and where it came from."""

    source: str
    filename: str
    name: str
    origin: str
    resolved: str
    sha: str | None = None


def is_module_spec(spec: str) -> bool:
    return ":" in spec and "::" not in spec and not spec.startswith("git:") \
        and not spec.endswith(".py")


def load_target(spec: str, schema: StagingSchema | None = None,
                shims: tuple[str, ...] | list[str] = ()) -> Target:
    """Resolve ``spec`` (against ``schema``, else the built-in schema its function's name
    chooses); raise ``TargetLoadError`` naming the value and the fix.

    ``shims``: paths of shim modules whose top-level names file targets may use (see
    ``load_shims``). The target's ``ref`` loads the very same function in a worker: a
    file target's ref carries the source read here (a revision read once, at its commit)
    and the shims.
    """
    names = ", ".join(BUILTINS)
    if not isinstance(spec, str) or not spec.strip():
        raise TargetLoadError.of(messages.TARGET_EMPTY, spec, builtins=names)
    ref = TargetRef(spec, schema_spec(schema))
    if spec in BUILTINS:
        func = _load_module_function(BUILTINS[spec], spec)
        return _finish(spec, func, f"builtin {spec} ({BUILTINS[spec]})", schema, ref)
    if spec.startswith("git:") or "::" in spec:
        ref = target_ref(spec, schema_spec(schema), shims)
        func = load_function_from_source(ref.source, ref.filename, ref.function, spec,
                                         shims=load_shims(ref.shims))
        target = _finish(spec, func, ref.origin, schema, ref)
        target.resolved, target.sha = ref.resolved, ref.sha
        target.shimmed = getattr(func, "__stagecheck_shimmed__", ())
        return target
    if is_module_spec(spec):
        func = _load_module_function(spec, spec)
        return _finish(spec, func, f"module {spec}", schema, ref)
    _refuse_bare_file(spec)
    raise TargetLoadError.of(messages.TARGET_UNKNOWN, spec, builtins=names,
                             hint=did_you_mean(spec, BUILTINS) or _file_meant(spec))


def _file_meant(spec: str) -> str:
    """`` (did you mean 'pkg/mod.py::func'?)`` for ``pkg.mod.func`` where that file exists
    (a module's dotted path with its function, written as Python imports it)."""
    module, dot, function = spec.rpartition(".")
    if not dot or not function.isidentifier() or not all(
            part.isidentifier() for part in module.split(".")):
        return ""
    path = module.replace(".", "/") + ".py"
    return messages.DID_YOU_MEAN.format(option=f"{path}::{function}") \
        if os.path.isfile(path) else ""


def _refuse_bare_file(spec: str) -> None:
    """A ``.py`` path given as a target without ``::FUNCTION`` is a ``TargetLoadError``
    saying how to name a function in it, or to give the file with ``--shim`` (a shim
    put where a target goes)."""
    if isinstance(spec, str) and spec.strip().endswith(".py") and not is_file_spec(spec):
        raise TargetLoadError.of(messages.TARGET_FILE_WITHOUT_FUNCTION, spec)


#: id(schema) -> the spec a schema file's schema was loaded from (``remember_schema_spec``)
_SCHEMA_SPECS: dict[int, str] = {}


def remember_schema_spec(schema: StagingSchema, spec: str) -> None:
    """Record that ``spec`` loads ``schema`` (``oracles.schemas.load_schema`` does, for a
    schema file), so that a worker can load it again."""
    _SCHEMA_SPECS[id(schema)] = spec


def schema_spec(schema: StagingSchema | None) -> str | None:
    """How a worker loads ``schema`` again: its built-in name, or the spec it was loaded
    from (``remember_schema_spec``); None for None."""
    if schema is None:
        return None
    if BUILTIN_SCHEMAS.get(schema.name) is schema:
        return schema.name
    return _SCHEMA_SPECS.get(id(schema), schema.name)


def is_file_spec(spec: str) -> bool:
    """``path.py::function`` or ``git:REV:path.py::function``: parsed, not imported."""
    return isinstance(spec, str) and (spec.startswith("git:") or "::" in spec)


def target_ref(spec: str, schema: str | None = None,
               shims: tuple[str, ...] | list[str] = ()) -> TargetRef:
    """How a worker loads ``spec`` (``schema``: a schema spec). Read here, in the
    checker's process, for a file or revision target: the source (a ``git:REV`` resolved
    to its commit once, so every worker, restarted or not, loads that commit), where it
    came from and its pinned spec; the worker compiles it with the ``shims`` (absolute
    paths). Raises ``TargetLoadError`` for a file or revision that cannot be read."""
    shims = tuple(os.path.abspath(s) if isinstance(s, str) else s for s in shims or ())
    if not is_file_spec(spec):
        _refuse_bare_file(spec)
        return TargetRef(spec, schema, shims=shims)
    read = read_file_target(spec)
    return TargetRef(spec, schema, read.source, read.filename, read.name, shims=shims,
                     origin=read.origin, resolved=read.resolved, sha=read.sha)


def read_file_target(spec: str) -> FileSource:
    """The source of a file or revision target, where it came from, and the spec pinned
    to it (a revision's commit SHA, a file's absolute path)."""
    if spec.startswith("git:"):
        rev, path, name = split_git_spec(spec)
        source, sha, abs_path = git_show(rev, path, spec)
        return FileSource(source, f"git:{rev}:{path}", name,
                          f"{path} at revision {rev} (commit {sha})",
                          f"git:{sha}:{abs_path}::{name}", sha)
    path, name = split_file_spec(spec, spec)
    if os.path.isdir(path):
        raise TargetLoadError.of(messages.TARGET_IS_FOLDER, spec, path=path)
    refuse_special(path, spec, "target file", TargetLoadError)     # a FIFO, a device
    if not os.path.isfile(path):
        raise TargetLoadError.of(messages.TARGET_FILE_MISSING, spec, path=path, cwd=os.getcwd())
    size = os.path.getsize(path)
    if size > MAX_SOURCE_BYTES:
        raise TargetLoadError.of(messages.TARGET_TOO_LARGE, spec, path=path, size=size,
                                 limit=MAX_SOURCE_BYTES)
    try:
        with open(path, "rb") as fh:
            data = fh.read(MAX_SOURCE_BYTES + 1)
    except OSError as exc:
        raise TargetLoadError.of(messages.TARGET_UNDECODABLE, spec, path=path,
                                 why=exc.strerror or str(exc)) from None
    source = decode_source(data, path, spec)
    abs_path = os.path.abspath(path)
    return FileSource(source, abs_path, name, f"file {path}", f"{abs_path}::{name}")


def target_source(spec: str) -> tuple[str, str, str]:
    """``(source, filename, function name)`` of a target: builtin names and
    ``package.module:function`` read the module's file, file targets the file,
    ``git:REV:file.py::f`` the file at that revision."""
    if spec in BUILTINS or is_module_spec(spec):
        dotted = BUILTINS.get(spec, spec)
        module_name, _, name = dotted.partition(":")
        module = _import(module_name, spec, name)
        filename = inspect.getsourcefile(module)
        if filename is None or "." in name:
            raise TargetLoadError.of(messages.TARGET_NO_SOURCE, spec, name=name)
        with open(filename, "rb") as fh:
            return decode_source(fh.read(), filename, spec), filename, name
    if spec.startswith("git:") or "::" in spec:
        read = read_file_target(spec)
        return read.source, read.filename, read.name
    load_target(spec)   # raises the usual message for anything else
    raise TargetLoadError.of(messages.TARGET_UNKNOWN, spec, builtins=", ".join(BUILTINS),
                             hint=did_you_mean(spec, BUILTINS))


def split_file_spec(file_part: str, spec: str) -> tuple[str, str]:
    path, _, name = file_part.rpartition("::")
    if not path or not name:
        raise TargetLoadError.of(messages.TARGET_BAD_SYNTAX, spec,
                                 why="both the file and the function must be given")
    parts = name.split(".")
    if len(parts) > 2 or not all(part.isidentifier() for part in parts):
        raise TargetLoadError.of(messages.TARGET_BAD_SYNTAX, spec,
                                 why=f"{name!r} is neither a Python identifier nor "
                                 "'Class.method'")
    return path, name


def split_git_spec(spec: str) -> tuple[str, str, str]:
    rest = spec[len("git:"):]
    rev, sep, file_part = rest.partition(":")
    if sep and rev and file_part.rstrip(":").endswith(".py") and "::" not in file_part:
        raise TargetLoadError.of(messages.GIT_NO_FUNCTION, spec.rstrip(":"))
    if not sep or not rev or "::" not in file_part:
        raise TargetLoadError.of(messages.TARGET_BAD_SYNTAX, spec,
                                 why="a revision target is 'git:REV:path/to/file.py::function'")
    path, name = split_file_spec(file_part, spec)
    return rev, path, name


def _import(module_name: str, spec: str, name: str):
    try:
        return importlib.import_module(module_name)
    except Exception as exc:  # ImportError, or the module failing at import time
        raise TargetLoadError.of(messages.TARGET_MODULE_MISSING, spec, module=module_name,
                                 error=f"{type(exc).__name__}: {exc}", name=name) from None


def _load_module_function(dotted: str, spec: str) -> Callable:
    module_name, _, name = dotted.partition(":")
    if not module_name or not name:
        raise TargetLoadError.of(messages.TARGET_BAD_SYNTAX, spec,
                                 why="a module target is 'package.module:function'")
    if module_name.endswith(".py") or "/" in module_name:
        raise TargetLoadError.of(messages.TARGET_ONE_COLON, spec, path=module_name, name=name)
    obj = _import(module_name, spec, name)
    for part in name.split("."):
        if not hasattr(obj, part):
            raise TargetLoadError.of(messages.TARGET_ATTRIBUTE_MISSING, spec,
                                     module=module_name, name=name)
        obj = getattr(obj, part)
    return obj


def target_from_callable(func, name: str | None = None,
                         schema: StagingSchema | None = None) -> Target:
    """Wrap a plain staging function into a ``Target`` (same signature checks as files).

    ``name`` becomes the target's spec (shown in reports, and part of the example
    database key); by default ``module:qualname`` of the function.
    """
    module = getattr(func, "__module__", None)
    qualname = getattr(func, "__qualname__", type(func).__name__)
    if name is None:
        name = f"{module or '<callable>'}:{qualname}"
    ref = None
    if module and "<" not in qualname and sys.modules.get(module) is not None and \
            getattr(sys.modules[module], qualname, None) is func:
        ref = TargetRef(f"{module}:{qualname}", schema_spec(schema))
    return _finish(name, func, f"callable {name}", schema, ref)


def _binds(sig: inspect.Signature, parameters: tuple[str, ...], keywords: frozenset) -> bool:
    try:
        sig.bind(*parameters, **{k: None for k in keywords})
    except TypeError:
        return False
    return True


def _positional(sig: inspect.Signature) -> tuple[str, ...]:
    return tuple(p.name for p in sig.parameters.values()
                 if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD))


def _signature_of(schema: StagingSchema, sig: inspect.Signature, keywords: frozenset):
    """``(found, parameters)``: the schema's signature the target has: the one whose
    parameters its positional parameters are, by name, else the one they bind to by
    position (the schema's own first); ``found`` False where none binds."""
    names = _positional(sig)
    candidates = [schema.parameters, *(g.parameters for g in schema.signatures)]
    for parameters in candidates:
        if names == parameters and _binds(sig, parameters, keywords):
            return True, parameters
    for parameters in candidates:
        if _binds(sig, parameters, keywords):
            return True, parameters
    return False, schema.parameters


def unmapped(schema: StagingSchema, names: tuple[str, ...]) -> str:
    """Which of a target's parameters ``names`` no adapter of ``schema`` maps, and which
    it lacks, against the signature closest to it (the most parameters in common)."""
    known = [(schema.parameters, schema.releases),
             *((g.parameters, g.releases) for g in schema.signatures)]
    parameters, releases = max(known, key=lambda k: (len(set(k[0]) & set(names)),
                                                     -abs(len(k[0]) - len(names))))
    extra = [n for n in names if n not in parameters]
    lacking = [n for n in parameters if n not in names]
    parts = []
    if extra:
        parts.append("no adapter maps parameter(s) " + ", ".join(repr(n) for n in extra))
    if lacking:
        parts.append("it lacks " + ", ".join(repr(n) for n in lacking))
    if not parts:
        parts.append("its parameters are in another order")
    where = f" ({releases})" if releases else ""
    return (f"{'; '.join(parts)}, against the closest adapter's ({', '.join(parameters)})"
            f"{where}")


def _finish(spec: str, func, origin: str, schema: StagingSchema | None = None,
            ref: TargetRef | None = None) -> Target:
    """The target of ``func``: its schema (given, or the built-in one its name chooses,
    else the default one if the signature fits it), the keywords it takes, and which of
    the schema's signatures (an adapter each) it has."""
    if inspect.isclass(func) or not callable(func):
        kind = "class" if inspect.isclass(func) else type(func).__name__
        raise TargetLoadError.of(messages.TARGET_NOT_FUNCTION, spec,
                                 name=getattr(func, "__name__", spec), kind=kind)
    by_name = schema_for_function(getattr(func, "__name__", ""))
    chosen = schema or by_name or DEFAULT_SCHEMA
    try:
        sig = inspect.signature(func)
    except (TypeError, ValueError):
        return Target(spec, func, chosen.profile(), origin, ref)
    keywords = frozenset(k for k in chosen.keywords if k in sig.parameters)
    found, parameters = _signature_of(chosen, sig, keywords)
    if schema is None and by_name is None and not found:
        raise TargetLoadError.of(messages.SCHEMA_NONE_FOR, spec,
                                 name=getattr(func, "__name__", spec),
                                 builtins=", ".join(BUILTIN_SCHEMAS))
    if not found:
        raise TargetLoadError.of(messages.TARGET_SIGNATURE, spec, schema=chosen.name,
                                 parameters=", ".join(chosen.parameters),
                                 signature=f"{getattr(func, '__name__', spec)}{sig}",
                                 unmapped=unmapped(chosen, _positional(sig))) from None
    return Target(spec, func, chosen.profile(keywords, parameters), origin, ref)
