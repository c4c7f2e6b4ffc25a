"""Resolve a target specification to a staging function.

A target is a builtin name, ``package.module:function``, ``path/to/file.py::function``
or ``git:REV:path/to/file.py::function``; in a file target, ``Class.method`` names one
method of a module-level class, loaded as a function whose first parameter is ``self``
(the schema's adapter makes a stand-in for it). File targets are parsed, not imported: the
named function, and the module-level functions and constants it uses (transitively),
are compiled without running the module's imports, so a staging function from an
engine checkout at any revision runs without the engine installed. Imports of the
standard library, numpy and torch are honoured; any other imported name is bound to
a placeholder that raises when used.
"""

from __future__ import annotations

import ast
import builtins
import copy
import hashlib
import importlib
import inspect
import linecache
import os
import subprocess
import sys
from dataclasses import dataclass
from typing import Callable

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
    """How a worker process loads a target: a target spec, or (for mutants) a module's
    source text with the function to take from it."""

    spec: str
    schema: str | None = None           # a schema spec; None: chosen by the function name
    source: str | None = None           # with ``filename`` and ``function``: load from text
    filename: str | None = None
    function: str | None = None


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

    @property
    def schema(self) -> StagingSchema:
        return self.profile.schema


def _is_module_spec(spec: str) -> bool:
    return ":" in spec and "::" not in spec and not spec.startswith("git:") \
        and not spec.endswith(".py")


def load_target(spec: str, schema: StagingSchema | None = None) -> Target:
    """Resolve ``spec`` (against ``schema``, else the built-in schema its function's name
    chooses); raise ``TargetLoadError`` naming the value and the fix."""
    names = ", ".join(BUILTINS)
    if not isinstance(spec, str) or not spec.strip():
        raise TargetLoadError.of(messages.TARGET_EMPTY, spec, builtins=names)
    ref = TargetRef(spec, schema_spec(schema))
    if spec in BUILTINS:
        func = _load_module_function(BUILTINS[spec], spec)
        return _finish(spec, func, f"builtin {spec} ({BUILTINS[spec]})", schema, ref)
    if spec.startswith("git:") or "::" in spec:
        source, filename, name, origin = read_file_target(spec)
        func = load_function_from_source(source, filename, name, spec)
        return _finish(spec, func, origin, schema, ref)
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


def read_file_target(spec: str) -> tuple[str, str, str, str]:
    """``(source, filename, function name, origin)`` of a file or revision target."""
    if spec.startswith("git:"):
        rev, path, name = _split_git(spec)
        return _git_show(rev, path, spec), f"git:{rev}:{path}", name, \
            f"{path} at revision {rev}"
    path, name = _split_file(spec, spec)
    if not os.path.isfile(path):
        raise TargetLoadError.of(messages.TARGET_FILE_MISSING, spec, path=path, cwd=os.getcwd())
    with open(path, encoding="utf-8") as fh:
        return fh.read(), os.path.abspath(path), name, f"file {path}"


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
        with open(filename, encoding="utf-8") as fh:
            return fh.read(), filename, name
    if spec.startswith("git:") or "::" in spec:
        source, filename, name, _ = read_file_target(spec)
        return source, filename, name
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


def _git(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["git", *args], capture_output=True, text=True)


def _git_show(rev: str, path: str, spec: str) -> str:
    top = _git("rev-parse", "--show-toplevel")
    if top.returncode != 0:
        raise TargetLoadError.of(messages.GIT_NOT_REPO, spec, cwd=os.getcwd())
    if _git("rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}").returncode != 0:
        raise TargetLoadError.of(messages.GIT_BAD_REVISION, spec, rev=rev)
    prefix = _git("rev-parse", "--show-prefix").stdout.strip()
    rel = os.path.normpath(os.path.join(prefix, path)).replace(os.sep, "/")
    shown = _git("show", f"{rev}:{rel}")
    if shown.returncode != 0:
        raise TargetLoadError.of(messages.GIT_PATH_MISSING, spec, path=rel, rev=rev)
    return shown.stdout


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


class _Unavailable:
    """Stands for a name imported from a module stagecheck does not import."""

    def __init__(self, name: str, module: str) -> None:
        self._name, self._module = name, module

    def _fail(self, *args, **kwargs):
        raise NameError(f"{self._name!r} comes from module {self._module!r}, which stagecheck "
                        "does not import when loading a file target")

    __call__ = _fail

    def __getattr__(self, attr):
        if attr.startswith("__"):
            raise AttributeError(attr)
        self._fail()

    def __repr__(self) -> str:
        return f"<unavailable {self._module}.{self._name}>"


def _honoured(module: str) -> bool:
    top = module.split(".")[0]
    return top in _HONOURED_TOP or top in sys.stdlib_module_names


class _Names(ast.NodeVisitor):
    def __init__(self) -> None:
        self.names: set[str] = set()

    def visit_Name(self, node: ast.Name) -> None:
        self.names.add(node.id)


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


def load_function_from_source(source: str, filename: str, name: str, spec: str = "") -> Callable:
    """Compile ``name`` and what it uses from ``source`` without running the module."""
    spec = spec or f"{filename}::{name}"
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

    wanted, queue, needed_imports = set(), [name], set()
    while queue:
        current = queue.pop()
        if current in wanted:
            continue
        wanted.add(current)
        visitor = _Names()
        visitor.visit(_StripAnnotations().visit(copy.deepcopy(defs[current])))
        for used in visitor.names:
            if used in defs and used not in wanted:
                queue.append(used)
            elif used in imports:
                needed_imports.add(used)
    chosen = {id(defs[w]) for w in wanted}
    in_tree = {id(n) for n in tree.body}
    body = [_StripAnnotations().visit(n) for n in tree.body if id(n) in chosen]
    if id(defs[name]) not in in_tree:     # a method, compiled as a module-level function
        body.append(_StripAnnotations().visit(defs[name]))
    module = ast.Module(body=body, type_ignores=[])
    ast.fix_missing_locations(module)
    digest = hashlib.sha1(source.encode()).hexdigest()[:12]
    namespace: dict = {"__name__": f"stagecheck_target_{digest}", "__builtins__": builtins,
                       "__file__": filename}
    for local in sorted(needed_imports):
        module_name, attr = imports[local]
        if not _honoured(module_name):
            namespace[local] = _Unavailable(attr or local, module_name)
            continue
        try:
            mod = importlib.import_module(module_name)
            namespace[local] = getattr(mod, attr) if attr else mod
        except Exception:
            namespace[local] = _Unavailable(attr or local, module_name)
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    try:
        exec(compile(module, filename, "exec"), namespace)
    except Exception as exc:
        raise TargetLoadError.of(messages.TARGET_COMPILE, spec,
                                 error=f"{type(exc).__name__}: {exc}") from None
    func = namespace[name]
    if dotted != name:        # a method: named as in its class
        func.__name__, func.__qualname__ = dotted.rpartition(".")[2], dotted
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
