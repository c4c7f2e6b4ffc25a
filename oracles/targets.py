"""Resolve a target specification to a staging function.

A target is a builtin name, ``package.module:function``, ``path/to/file.py::function``
or ``git:REV:path/to/file.py::function``; in a file target, ``Class.method`` names one
method of a module-level class, loaded as a function whose first parameter is ``self``
(the schema's adapter makes a stand-in for it). File targets are parsed, not imported: the
named function, and the module-level functions and constants it uses (transitively),
are compiled without running the module's imports, so a staging function from an
engine checkout at any revision runs without the engine installed.

Every global name the compiled code uses is resolved at load time, never at run time
(a ``NameError`` inside a run would be reported as a difference of the code under
test): imports of the standard library, numpy and torch are honoured; a name imported
from another module is taken from a *shim* (the ones shipped in
``stagecheck.impl.shims.vllm`` for vLLM's small pure helpers, applied when the import
names the module they stand for, then the user's ``--shim FILE.py`` modules); any
other name is a ``TargetLoadError`` that names it, the module it comes from and the fix.

Paths of ``git:REV:PATH`` targets are taken relative to the current folder, as for a
file target (absolute paths work too); ``REV`` is resolved to its commit once, when the
target is loaded, and the target keeps the commit (``Target.sha``) and a spec pinned
to it (``Target.resolved``).
"""

from __future__ import annotations

import ast
import builtins
import copy
import hashlib
import importlib
import importlib.util
import inspect
import linecache
import os
import subprocess
import symtable
import sys
from dataclasses import dataclass, field
from typing import Any, Callable

from stagecheck.oracles import messages
from stagecheck.oracles.errors import TargetLoadError
from stagecheck.spec.schema import StagingSchema, TargetProfile
from stagecheck.spec.schemas import DEFAULT_SCHEMA, schema_for_function

BUILTINS = {
    "legacy": "stagecheck.impl.staging_legacy:stage_postprocess_inputs_to_gpu",
    "single-loop": "stagecheck.impl.staging_single_loop:stage_postprocess_inputs_to_gpu",
    "prefix-migration": "stagecheck.impl.staging_prefix:stage_postprocess_inputs_to_gpu",
    "specdec": "stagecheck.impl.staging_all_specdec:preprocess_mamba_all_specdec",
    "preprocess-fused": "stagecheck.impl.staging_preprocess_fused:preprocess_mamba",
    "backup-tokens": "stagecheck.impl.staging_backup_tokens:prepare_next_token_ids_padded",
}
_HONOURED_TOP = {"numpy", "torch"}


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


def _is_module_spec(spec: str) -> bool:
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
    if _is_module_spec(spec):
        func = _load_module_function(spec, spec)
        return _finish(spec, func, f"module {spec}", schema, ref)
    raise TargetLoadError.of(messages.TARGET_UNKNOWN, spec, builtins=names)


def schema_spec(schema: StagingSchema | None) -> str | None:
    """How a worker loads ``schema`` again: its built-in name, or the spec it was loaded
    from (``oracles.schemas.load_schema`` records it)."""
    if schema is None:
        return None
    from stagecheck.oracles.schemas import spec_of
    return spec_of(schema)


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
        return TargetRef(spec, schema, shims=shims)
    read = read_file_target(spec)
    return TargetRef(spec, schema, read.source, read.filename, read.name, shims=shims,
                     origin=read.origin, resolved=read.resolved, sha=read.sha)


def read_file_target(spec: str) -> FileSource:
    """The source of a file or revision target, where it came from, and the spec pinned
    to it (a revision's commit SHA, a file's absolute path)."""
    if spec.startswith("git:"):
        rev, path, name = _split_git(spec)
        source, sha, abs_path = _git_show(rev, path, spec)
        return FileSource(source, f"git:{rev}:{path}", name,
                          f"{path} at revision {rev} (commit {sha})",
                          f"git:{sha}:{abs_path}::{name}", sha)
    path, name = _split_file(spec, spec)
    if os.path.isdir(path):
        raise TargetLoadError.of(messages.TARGET_IS_FOLDER, spec, path=path)
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


#: largest target file read (a staging module is a few hundred lines; a larger "source" is
#: a mistake, e.g. a data file, and would only cost time and memory)
MAX_SOURCE_BYTES = 4 * 1024 * 1024


def decode_source(data: bytes, path: str, spec: str) -> str:
    """``data`` decoded as Python decodes a source file: a PEP 263 coding declaration or a
    UTF-8 BOM, else UTF-8 (universal newlines, the BOM dropped); a ``TargetLoadError``
    naming ``path`` for a binary or undecodable file."""
    if len(data) > MAX_SOURCE_BYTES:
        raise TargetLoadError.of(messages.TARGET_TOO_LARGE, spec, path=path, size=len(data),
                                 limit=MAX_SOURCE_BYTES)
    if b"\0" in data:
        raise TargetLoadError.of(messages.TARGET_BINARY, spec, path=path)
    try:
        return importlib.util.decode_source(data)
    except (SyntaxError, UnicodeDecodeError, LookupError) as exc:
        why = exc.msg if isinstance(exc, SyntaxError) else str(exc)
        raise TargetLoadError.of(messages.TARGET_UNDECODABLE, spec, path=path,
                                 why=why) from None


def target_source(spec: str) -> tuple[str, str, str]:
    """``(source, filename, function name)`` of a target: builtin names and
    ``package.module:function`` read the module's file, file targets the file,
    ``git:REV:file.py::f`` the file at that revision."""
    if spec in BUILTINS or _is_module_spec(spec):
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
    raise TargetLoadError.of(messages.TARGET_UNKNOWN, spec, builtins=", ".join(BUILTINS))


def _split_file(file_part: str, spec: str) -> tuple[str, str]:
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


def _split_git(spec: str) -> tuple[str, str, str]:
    rest = spec[len("git:"):]
    rev, sep, file_part = rest.partition(":")
    if not sep or not rev or "::" not in file_part:
        raise TargetLoadError.of(messages.TARGET_BAD_SYNTAX, spec,
                                 why="a revision target is 'git:REV:path/to/file.py::function'")
    path, name = _split_file(file_part, spec)
    return rev, path, name


def _git(*args: str, cwd: str | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(["git", *args], capture_output=True, text=True, cwd=cwd,
                          errors="replace")


def _git_bytes(*args: str, cwd: str | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(["git", *args], capture_output=True, cwd=cwd)


def _existing_folder(path: str) -> str:
    folder = os.path.dirname(path)
    while folder and not os.path.isdir(folder):
        parent = os.path.dirname(folder)
        if parent == folder:
            break
        folder = parent
    return folder or os.getcwd()


def _unknown_revision(rev: str, path: str, name: str, spec: str, top: str) -> TargetLoadError:
    """Why git does not know ``rev``, and how to make it known (CI clones are shallow and
    single-branch: the base branch is not in them)."""
    shallow = _git("rev-parse", "--is-shallow-repository", cwd=top).stdout.strip() == "true"
    remotes = _git("remote", cwd=top).stdout.split()
    remote = "origin" if "origin" in remotes or not remotes else remotes[0]
    fetch = _git("config", "--get-all", f"remote.{remote}.fetch", cwd=top).stdout.split()
    single = bool(remotes) and not any(f.endswith(f"refs/remotes/{remote}/*") for f in fetch)
    branch_like = not any(ch in rev for ch in "~^@:") and not rev.startswith(f"{remote}/")
    if (shallow or single) and branch_like and remotes:
        kind = " and ".join(k for k, on in (("shallow", shallow), ("single-branch", single)) if on)
        depth = "--depth 1 " if shallow else ""
        return TargetLoadError.of(messages.GIT_REVISION_NOT_FETCHED, spec, rev=rev, kind=kind,
                                  remote=remote, depth=depth, path=path, name=name)
    return TargetLoadError.of(messages.GIT_BAD_REVISION, spec, rev=rev, remote=remote,
                              shallow=" (this clone is shallow: history older than its "
                              "commits is not in it; 'git fetch --unshallow' brings it)"
                              if shallow else "")


def _git_show(rev: str, path: str, spec: str) -> tuple[str, str, str]:
    """``(source, commit sha, absolute path)`` of ``path`` at ``rev``.

    ``path`` is taken relative to the current folder, like a file target's (an
    absolute path works too); git runs in the repository that holds it.
    """
    _, _, name = spec.rpartition("::")
    abs_path = os.path.realpath(path)
    where = _existing_folder(abs_path)
    top = _git("rev-parse", "--show-toplevel", cwd=where)
    if top.returncode != 0:
        raise TargetLoadError.of(messages.GIT_NOT_REPO, spec, cwd=where)
    top = os.path.realpath(top.stdout.strip())
    rel = os.path.relpath(abs_path, top).replace(os.sep, "/")
    if rel == ".." or rel.startswith("../"):
        raise TargetLoadError.of(messages.GIT_PATH_OUTSIDE, spec, path=abs_path, top=top)
    resolved = _git("rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}", cwd=top)
    if resolved.returncode != 0:
        raise _unknown_revision(rev, path, name, spec, top)
    sha = resolved.stdout.strip()
    kind = _git("cat-file", "-t", f"{sha}:{rel}", cwd=top)
    if kind.returncode == 0 and kind.stdout.strip() == "tree":
        raise TargetLoadError.of(messages.GIT_PATH_IS_TREE, spec, path=path, rev=rev, rel=rel)
    shown = _git_bytes("show", f"{sha}:{rel}", cwd=top)
    if shown.returncode != 0:
        raise TargetLoadError.of(messages.GIT_PATH_MISSING, spec, path=path, rel=rel, rev=rev,
                                 cwd=os.getcwd(), top=top,
                                 folder=os.path.dirname(rel) or ".")
    return decode_source(shown.stdout, f"{path} at revision {rev}", spec), sha, abs_path


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


def _binds(sig: inspect.Signature, schema: StagingSchema, keywords: frozenset) -> bool:
    try:
        sig.bind(*schema.parameters, **{k: None for k in keywords})
    except TypeError:
        return False
    return True


def _finish(spec: str, func, origin: str, schema: StagingSchema | None = None,
            ref: TargetRef | None = None) -> Target:
    """The target of ``func``: its schema (given, or the built-in one its name chooses,
    else the default one if the signature fits it) and the keywords it takes."""
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
    if schema is None and by_name is None and not _binds(sig, chosen, keywords):
        from stagecheck.spec.schemas import BUILTIN_SCHEMAS
        raise TargetLoadError.of(messages.SCHEMA_NONE_FOR, spec,
                                 name=getattr(func, "__name__", spec),
                                 builtins=", ".join(BUILTIN_SCHEMAS))
    if not _binds(sig, chosen, keywords):
        raise TargetLoadError.of(messages.TARGET_SIGNATURE, spec, schema=chosen.name,
                                 parameters=", ".join(chosen.parameters),
                                 signature=f"{getattr(func, '__name__', spec)}{sig}") from None
    return Target(spec, func, chosen.profile(keywords), origin, ref)


def _honoured(module: str) -> bool:
    top = module.split(".")[0]
    return top in _HONOURED_TOP or top in sys.stdlib_module_names


# ------------------------------------------------------------------------------ shims

#: The shims shipped with stagecheck: module path of the shim module.
BUILTIN_SHIMS = "stagecheck.impl.shims.vllm"


@dataclass(frozen=True)
class Shim:
    """A name a shim module offers to file targets."""

    name: str
    value: Any
    origin: str                       # the shim module (a file path, or a dotted name)
    stands_for: tuple[str, ...] = ()  # modules it replaces; () : any (user shims)


def _builtin_shims() -> dict[str, Shim]:
    module = importlib.import_module(BUILTIN_SHIMS)
    return {name: Shim(name, getattr(module, name), BUILTIN_SHIMS, tuple(modules))
            for name, modules in module.STANDS_FOR.items()}


def load_shims(paths) -> dict[str, Shim]:
    """The names the shim modules at ``paths`` offer: their public top-level functions,
    classes and constants (not the modules they import). A later file wins a name."""
    offered: dict[str, Shim] = {}
    for path in paths or ():
        if not isinstance(path, str) or not os.path.isfile(path):
            raise TargetLoadError.of(messages.SHIM_MISSING, path, cwd=os.getcwd())
        path = os.path.abspath(path)
        digest = hashlib.sha1(path.encode()).hexdigest()[:12]
        spec = importlib.util.spec_from_file_location(f"stagecheck_shim_{digest}", path)
        module = importlib.util.module_from_spec(spec)
        try:
            spec.loader.exec_module(module)
        except Exception as exc:
            raise TargetLoadError.of(messages.SHIM_BROKEN, path,
                                     error=f"{type(exc).__name__}: {exc}") from None
        for name, value in vars(module).items():
            if name.startswith("_") or inspect.ismodule(value):
                continue
            offered[name] = Shim(name, value, path)
    return offered


# ------------------------------------------------------------------------------ loading

class _StripAnnotations(ast.NodeTransformer):
    """Drop annotations and decorators: they may name engine types we never import."""

    def visit_FunctionDef(self, node):
        self.generic_visit(node)
        node.decorator_list = []
        node.returns = None
        for a in (*node.args.posonlyargs, *node.args.args, *node.args.kwonlyargs,
                  node.args.vararg, node.args.kwarg):
            if a is not None:
                a.annotation = None
        return node

    visit_AsyncFunctionDef = visit_FunctionDef

    def visit_ClassDef(self, node):
        """A class-level ``name: T`` declares a field (NamedTuple, dataclass): keep it,
        with the annotation as a string, which names nothing."""
        body = []
        for stmt in node.body:
            if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name):
                stmt.annotation = ast.copy_location(ast.Constant(ast.unparse(stmt.annotation)),
                                                    stmt.annotation)
                body.append(stmt)
            else:
                body.append(self.visit(stmt))
        node.body = body
        return node

    def visit_AnnAssign(self, node):
        if node.value is None:
            return ast.Pass()
        return ast.copy_location(ast.Assign(targets=[node.target], value=node.value), node)


def _global_uses(node: ast.stmt) -> set[str]:
    """Global names one module-level statement reads (in its body, nested functions,
    comprehensions, default values), from the compiler's own symbol table."""
    table = symtable.symtable(ast.unparse(node), "<stagecheck>", "exec")
    used: set[str] = set()

    def walk(t, top: bool) -> None:
        for sym in t.get_symbols():
            if sym.is_referenced() and (sym.is_global() if not top else
                                        not (sym.is_assigned() or sym.is_imported())):
                used.add(sym.get_name())
        for child in t.get_children():
            walk(child, False)

    walk(table, True)
    return used


def _declared_globals(node: ast.stmt) -> set[str]:
    """Names a function assigns through a ``global`` statement (bound when it runs)."""
    out: set[str] = set()
    for sub in ast.walk(node):
        if isinstance(sub, ast.Global):
            out.update(sub.names)
    return out


def _statement_names(node: ast.stmt) -> list[str]:
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return [node.name]
    if isinstance(node, ast.Assign):
        return [t.id for t in node.targets if isinstance(t, ast.Name)]
    if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
        return [node.target.id]
    return []


def _resolve_import(local: str, module_name: str, attr: str | None,
                    shims: dict[str, Shim], builtin: dict[str, Shim]):
    """``(value, shimmed-note)`` for an imported name, or ``(None, why)`` when unresolved."""
    if _honoured(module_name):
        try:
            mod = importlib.import_module(module_name)
            return (getattr(mod, attr) if attr else mod), None
        except Exception as exc:
            return None, f"{type(exc).__name__}: {exc}"
    wanted = attr or local
    if wanted in shims:
        shim = shims[wanted]
        return shim.value, f"{local} from {shim.origin}"
    shim = builtin.get(wanted)
    if attr and shim is not None and module_name in shim.stands_for:
        return shim.value, f"{local} from {shim.origin} (for {module_name}.{attr})"
    return None, None


def load_function_from_source(source: str, filename: str, name: str, spec: str = "",
                              shims: dict[str, Shim] | None = None) -> Callable:
    """Compile ``name`` and what it uses from ``source`` without running the module.

    Every global name the compiled code reads must resolve now: to a definition in
    the compiled part, a builtin, an honoured import (standard library, numpy, torch),
    or a shim (``shims``, from ``load_shims``, then the builtin ones for the modules
    they stand for). Otherwise ``TargetLoadError`` (``TARGET_UNRESOLVED``) names each
    missing name, who uses it, the module it comes from, and the fix. The function
    gets ``__stagecheck_shimmed__``: the names shims gave it.
    """
    spec = spec or f"{filename}::{name}"
    shims = shims or {}
    try:
        tree = ast.parse(source, filename)
    except SyntaxError as exc:
        raise TargetLoadError.of(messages.TARGET_FILE_SYNTAX, spec, path=filename,
                                 error=f"line {exc.lineno}: {exc.msg}") from None
    defs: dict[str, ast.stmt] = {}
    imports: dict[str, tuple[str, str | None]] = {}   # local name -> (module, attribute)
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            defs[node.name] = node
        elif isinstance(node, ast.Assign) and all(isinstance(t, ast.Name) for t in node.targets):
            for t in node.targets:
                defs.setdefault(t.id, node)
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.value:
            defs.setdefault(node.target.id, node)
        elif isinstance(node, ast.Import):
            for alias in node.names:
                local = alias.asname or alias.name.split(".")[0]
                imports[local] = (alias.name if alias.asname else alias.name.split(".")[0], None)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            for alias in node.names:
                imports[alias.asname or alias.name] = (node.module, alias.name)
    dotted = name
    if "." in name:
        name = _method_as_function(defs, name, filename, spec)
    node = defs.get(name)
    if node is None or not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
        if isinstance(node, ast.ClassDef):
            raise TargetLoadError.of(messages.TARGET_NOT_FUNCTION, spec, name=name, kind="class")
        available = sorted(n for n, d in defs.items() if isinstance(d, ast.FunctionDef))
        raise TargetLoadError.of(messages.TARGET_FUNCTION_MISSING, spec, path=filename, name=name,
                                 available=", ".join(available) or "none")

    # the function and, transitively, every module-level definition it reads
    wanted, queue = set(), [name]
    uses: dict[str, set[str]] = {}        # global name -> the definitions that read it
    stripped: dict[str, ast.stmt] = {}
    while queue:
        current = queue.pop()
        if current in wanted:
            continue
        wanted.add(current)
        stmt = stripped.setdefault(id(defs[current]),
                                   _StripAnnotations().visit(copy.deepcopy(defs[current])))
        for used in _global_uses(stmt):
            uses.setdefault(used, set()).update(_statement_names(defs[current]) or [current])
            if used in defs and used not in wanted:
                queue.append(used)
    chosen = {id(defs[w]) for w in wanted}
    in_tree = {id(n) for n in tree.body}
    body = [stripped[id(n)] for n in tree.body if id(n) in chosen]
    if id(defs[name]) not in in_tree:     # a method, compiled as a module-level function
        body.append(stripped[id(defs[name])])
    defined = {n for stmt in body for n in _statement_names(stmt)}
    defined |= {n for stmt in body for n in _declared_globals(stmt)}

    builtin = _builtin_shims()
    namespace: dict = {}
    shimmed: list[str] = []
    missing: list[str] = []
    for used in sorted(uses):
        if used in defined or hasattr(builtins, used) or used in ("__file__", "__name__"):
            continue
        users = ", ".join(sorted(uses[used]))
        if used in imports:
            module_name, attr = imports[used]
            value, note = _resolve_import(used, module_name, attr, shims, builtin)
            if value is not None:
                namespace[used] = value
                if note and not _honoured(module_name):
                    shimmed.append(note)
                continue
            missing.append(f"{used!r} (used by {users}) from module {module_name!r}"
                           + (f", which fails to import ({note})" if note else ""))
        elif used in shims:
            namespace[used] = shims[used].value
            shimmed.append(f"{used} from {shims[used].origin}")
        else:
            missing.append(f"{used!r} (used by {users}), not defined by a module-level def, "
                           "class or NAME = ... statement (the ones stagecheck compiles)")
    if missing:
        raise TargetLoadError.of(messages.TARGET_UNRESOLVED, spec, count=len(missing),
                                 names="; ".join(missing), function=name)

    module = ast.Module(body=body, type_ignores=[])
    ast.fix_missing_locations(module)
    digest = hashlib.sha1(source.encode()).hexdigest()[:12]
    namespace.update({"__name__": f"stagecheck_target_{digest}", "__builtins__": builtins,
                      "__file__": filename})
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    try:
        exec(compile(module, filename, "exec"), namespace)
    except Exception as exc:
        raise TargetLoadError.of(messages.TARGET_COMPILE, spec,
                                 error=f"{type(exc).__name__}: {exc}") from None
    func = namespace[name]
    if dotted != name:        # a method: named as in its class
        func.__name__, func.__qualname__ = dotted.rpartition(".")[2], dotted
    try:
        func.__stagecheck_shimmed__ = tuple(shimmed)
    except AttributeError:
        pass
    return func


def _method_as_function(defs: dict, dotted: str, filename: str, spec: str) -> str:
    """Put method ``Class.method`` of ``defs`` among them as a module-level function;
    return its key. It keeps its name unless a module-level name takes it."""
    class_name, _, method = dotted.partition(".")
    owner = defs.get(class_name)
    if not isinstance(owner, ast.ClassDef):
        available = sorted(n for n, d in defs.items() if isinstance(d, ast.ClassDef))
        raise TargetLoadError.of(messages.TARGET_CLASS_MISSING, spec, path=filename,
                                 name=class_name, available=", ".join(available) or "none")
    methods = {n.name: n for n in owner.body
               if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}
    if method not in methods:
        raise TargetLoadError.of(messages.TARGET_METHOD_MISSING, spec, path=filename,
                                 name=class_name, method=method,
                                 available=", ".join(sorted(methods)) or "none")
    node = copy.deepcopy(methods[method])
    if any(isinstance(d, ast.Name) and d.id in ("staticmethod", "classmethod")
           for d in node.decorator_list):
        raise TargetLoadError.of(messages.TARGET_METHOD_KIND, spec, name=dotted)
    key = method if method not in defs else f"_stagecheck_method_{method}"
    node.name = key
    defs[key] = node
    return key


# ------------------------------------------------------------------ trust (replay files)

def repository_root(folder: str | None = None) -> str:
    """The git top level of ``folder`` (default: the current folder), else the folder
    itself: what a replay file may name code inside of."""
    folder = os.path.realpath(folder or os.getcwd())
    try:
        top = _git("rev-parse", "--show-toplevel", cwd=folder)
    except OSError:           # no git on this machine
        return folder
    return os.path.realpath(top.stdout.strip()) if top.returncode == 0 and \
        top.stdout.strip() else folder


def _inside(path: str, top: str) -> bool:
    real = os.path.realpath(path)
    return real == top or real.startswith(top.rstrip(os.sep) + os.sep)


def trusted_spec(spec: Any, top: str) -> bool:
    """Whether a target spec read from a file (a replay file) may run without the user
    naming it: a builtin, or a file (or ``git:REV:`` file) whose path is inside ``top``.
    A module target is not: importing a module runs code chosen by whoever made the
    file, wherever the module lies."""
    if not isinstance(spec, str):
        return False
    if spec in BUILTINS:
        return True
    if is_file_spec(spec):
        try:
            path = _split_git(spec)[1] if spec.startswith("git:") else _split_file(spec, spec)[0]
        except TargetLoadError:
            return True           # not a loadable spec: loading it says what is wrong
        return _inside(path, top)
    return not _is_module_spec(spec)   # neither form: loading it says what is wrong


def trusted_path(path: Any, top: str) -> bool:
    """Whether a shim or schema file named by a replay file lies inside ``top``."""
    return isinstance(path, str) and _inside(path, top)
