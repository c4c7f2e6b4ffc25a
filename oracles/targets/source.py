"""Compiling a staging function from source text, with shims, without running its module.

The named function, and the module-level functions and constants it uses (transitively),
are compiled without running the module's imports, so a staging function from an
engine checkout at any revision runs without the engine installed.

Every global name the compiled code uses is resolved at load time, never at run time
(a ``NameError`` inside a run would be reported as a difference of the code under
test): imports of the standard library, numpy and torch are honoured; a name imported
from another module is taken from a *shim* (the ones shipped in
``stagecheck.impl.shims.vllm`` for vLLM's small pure helpers, applied when the import
names the module they stand for, then the user's ``--shim FILE.py`` modules); any
other name is a ``TargetLoadError`` that names it, the module it comes from and the fix.
"""

from __future__ import annotations

import ast
import builtins
import copy
import hashlib
import importlib
import importlib.machinery
import importlib.util
import inspect
import linecache
import os
import symtable
import sys
import traceback
import types
from dataclasses import dataclass
from typing import Any, Callable

from stagecheck.oracles import messages
from stagecheck.oracles.errors import ShimError, TargetLoadError
from stagecheck.oracles.kernel import use_interpreter_without_gpu
from stagecheck.oracles.paths import require_file
from stagecheck.oracles.text import did_you_mean

__all__ = ["BUILTIN_SHIMS", "MAX_SOURCE_BYTES", "MODULE_ALIASES", "Shim", "decode_source",
           "load_function_from_source", "load_shims"]

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


_HONOURED_TOP = {"numpy", "torch", "triton"}

#: engine modules that only re-export an honoured one: ``(module, name)`` -> the module
#: the name stands for (vLLM imports Triton through ``vllm.triton_utils``)
MODULE_ALIASES = {("vllm.triton_utils", "triton"): "triton",
                  ("vllm.triton_utils", "tl"): "triton.language"}


def _honoured(module: str) -> bool:
    top = module.split(".")[0]
    return top in _HONOURED_TOP or top in sys.stdlib_module_names


def _import_honoured(module: str):
    """Import an honoured module; Triton's mode (compiled, or its interpreter where torch
    sees no GPU) is decided first, by the kernel oracle's one function for it."""
    if module.split(".")[0] == "triton":
        use_interpreter_without_gpu()
    return importlib.import_module(module)


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
    """The names the shim modules at ``paths`` offer: the names in a module's ``__all__``
    (modules included) where it has one, else its top-level functions, classes and
    constants, private ``_names`` included (not dunders, not the modules it imports).
    A later file wins a name."""
    offered: dict[str, Shim] = {}
    for path in paths or ():
        require_file(path, "shim", messages.SHIM_MISSING, ShimError, cwd=os.getcwd())
        path = os.path.abspath(path)
        digest = hashlib.sha1(path.encode()).hexdigest()[:12]
        name = f"stagecheck_shim_{digest}"
        # its loader given: a shim file whose name does not end in .py is read as Python too
        spec = importlib.util.spec_from_file_location(
            name, path, loader=importlib.machinery.SourceFileLoader(name, path))
        module = importlib.util.module_from_spec(spec)
        try:
            spec.loader.exec_module(module)
        except Exception as exc:
            raise ShimError.of(messages.SHIM_BROKEN, path,
                               error=f"{type(exc).__name__}: {exc}") from None
        listed = vars(module).get("__all__")
        for name, value in vars(module).items():
            if listed is not None and name not in listed:
                continue
            if listed is None and (name.startswith("__") or inspect.ismodule(value)):
                continue
            offered[name] = Shim(name, value, path)
    return offered


class _StripAnnotations(ast.NodeTransformer):
    """Drop annotations, and the decorators that ``keep`` and ``plain`` refuse: they may
    name engine types we never import (a decorator of an honoured module, ``@triton.jit``,
    stays, with the function's annotations; so does a builtin ``@staticmethod`` or
    ``@classmethod``, ``plain``, without them: a class's method is called as written)."""

    def __init__(self, keep: Callable[[ast.expr], bool] = lambda decorator: False,
                 plain: Callable[[ast.expr], bool] = lambda decorator: False) -> None:
        self.keep, self.plain = keep, plain

    def visit_FunctionDef(self, node):
        self.generic_visit(node)
        meaning = [d for d in node.decorator_list if self.keep(d)]
        node.decorator_list = [d for d in node.decorator_list if self.keep(d) or self.plain(d)]
        if meaning:     # a Triton kernel: ``BLOCK: tl.constexpr`` is meaning
            return node
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


#: what ``_resolve_import`` gives for a name it cannot resolve (a shim's value may be None)
UNRESOLVED = object()


def _resolve_import(local: str, module_name: str, attr: str | None,
                    builtin: dict[str, Shim]):
    """``(value, note)`` for an imported name: ``note`` is None for an honoured import, the
    shim's note for a shipped shim; ``(UNRESOLVED, why)`` when unresolved (``why``: the
    error of an honoured import that fails, else None). The user's shims come first, in
    the caller."""
    alias = MODULE_ALIASES.get((module_name, attr)) if attr else None
    if alias is not None or _honoured(module_name):
        try:
            if alias is not None:
                return _import_honoured(alias), None
            mod = _import_honoured(module_name)
            return (getattr(mod, attr) if attr else mod), None
        except Exception as exc:
            why = f"{type(exc).__name__}: {exc}"
            if (alias or module_name).split(".")[0] == "triton":
                why += f"; for Triton install the kernel extra: {messages.KERNEL_EXTRA}"
            return UNRESOLVED, why
    shim = builtin.get(attr or local)
    if attr and shim is not None and module_name in shim.stands_for:
        return shim.value, f"{local} from {shim.origin} (for {module_name}.{attr})"
    return UNRESOLVED, None


def load_function_from_source(source: str, filename: str, name: str, spec: str = "",
                              shims: dict[str, Shim] | None = None,
                              shown: str | None = None) -> Callable:
    """Compile ``name`` and what it uses from ``source`` without running the module.

    Every global name the compiled code reads must resolve now: to a definition in
    the compiled part, a builtin, an honoured import (standard library, numpy, torch),
    or a shim (``shims``, from ``load_shims``, then the builtin ones for the modules
    they stand for). Otherwise ``TargetLoadError`` (``TARGET_UNRESOLVED``) names each
    missing name, who uses it, the module it comes from, and the fix. The function
    gets ``__stagecheck_shimmed__``: the names shims gave it. ``shown``: the name its
    load errors give it (an accessor compiled in the place of a class: the class's).
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
    dotted, bound_to = name, None
    if "." in name:
        name, bound_to = _method_as_function(defs, name, filename, spec)
    node = defs.get(name)
    if node is None or not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
        if isinstance(node, ast.ClassDef):
            raise TargetLoadError.of(messages.TARGET_NOT_FUNCTION, spec, name=name, kind="class")
        available = sorted(n for n, d in defs.items() if isinstance(d, ast.FunctionDef))
        if node is not None:        # an alias or a lambda: 'stage = _impl'
            raise _assigned(node, name, spec, filename, defs, available)
        classes = _classes(defs)
        # a class of the file with a method of that name: the Class.method form checks it
        # as a function (was: pointed to --protocol only)
        owner = next((c for c in classes if name in _methods(defs[c])), None)
        if owner is not None:
            file = spec.rpartition("::")[0] or filename
            more = messages.TARGET_METHOD_THERE.format(owner=owner, name=name,
                                                       spec=f"{file}::{owner}.{name}")
        elif classes:
            more = messages.TARGET_CLASSES_THERE.format(classes=", ".join(classes))
        else:
            more = ""
        raise TargetLoadError.of(messages.TARGET_FUNCTION_MISSING, spec, path=filename, name=name,
                                 available=", ".join(available) or "none",
                                 classes=did_you_mean(name, available) + more)

    # a user's shim replaces any module-level name the function uses (its own
    # definitions, private ones included, and its imports), never the function itself
    replaced = {n for n in shims if n != name}

    def triton_decorator(decorator: ast.expr) -> bool:
        root = _root_name(decorator)
        if root is None or root not in imports or root in replaced:
            return False
        module_name, attr = imports[root]
        module_name = MODULE_ALIASES.get((module_name, attr), module_name)
        return module_name.split(".")[0] == "triton"

    def method_kind(decorator: ast.expr) -> bool:
        return isinstance(decorator, ast.Name) and decorator.id in _METHOD_KINDS and not (
            decorator.id in imports or decorator.id in defs or decorator.id in replaced)

    # the function and, transitively, every module-level definition it reads (and the
    # class a class method is bound to)
    wanted, queue = set(), [name, *([bound_to] if bound_to else [])]
    uses: dict[str, set[str]] = {}        # global name -> the definitions that read it
    stripped: dict[str, ast.stmt] = {}
    strip = _StripAnnotations(triton_decorator, method_kind)
    while queue:
        current = queue.pop()
        if current in wanted:
            continue
        wanted.add(current)
        stmt = stripped.setdefault(id(defs[current]), strip.visit(copy.deepcopy(defs[current])))
        for used in _global_uses(stmt):
            uses.setdefault(used, set()).update(_statement_names(defs[current]) or [current])
            if used in defs and used not in wanted and used not in replaced:
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
        own = used in defs or used in imports
        if used in replaced and (own or not hasattr(builtins, used)):
            namespace[used] = shims[used].value
            shimmed.append(f"{used} from {shims[used].origin}"
                           + (" (replacing the file's own)" if used in defs else ""))
            continue
        if used in defined or hasattr(builtins, used) or used in ("__file__", "__name__"):
            continue
        users = ", ".join(sorted(uses[used]))
        if used in imports:
            module_name, attr = imports[used]
            value, note = _resolve_import(used, module_name, attr, builtin)
            if value is not UNRESOLVED:
                namespace[used] = value
                if note:
                    shimmed.append(note)
                continue
            missing.append(f"{used!r} (used by {users}) from module {module_name!r}"
                           + (f", which fails to import ({note})" if note else ""))
        else:
            missing.append(f"{used!r} (used by {users}), not defined by a module-level def, "
                           "class or NAME = ... statement (the ones stagecheck compiles)")
    if missing:
        raise TargetLoadError.of(messages.TARGET_UNRESOLVED, spec, count=len(missing),
                                 names="; ".join(missing), function=shown or dotted)

    module = ast.Module(body=body, type_ignores=[])
    ast.fix_missing_locations(module)
    digest = hashlib.sha1(source.encode()).hexdigest()[:12]
    namespace.update({"__name__": f"stagecheck_target_{digest}", "__builtins__": builtins,
                      "__file__": filename})
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    try:
        exec(compile(module, filename, "exec", dont_inherit=True), namespace)
    except Exception as exc:
        raise TargetLoadError.of(messages.TARGET_COMPILE, spec,
                                 error=f"{type(exc).__name__}: {exc}",
                                 where=_failing_statement(exc, filename, body)) from None
    func = namespace[name]
    if dotted != name:        # a method: named as in its class
        func.__name__, func.__qualname__ = dotted.rpartition(".")[2], dotted
    try:
        func.__stagecheck_shimmed__ = tuple(shimmed)
    except AttributeError:
        pass
    if bound_to is not None:      # a class method: called with the class compiled here
        func = types.MethodType(func, namespace[bound_to])
    return func


def _root_name(expr: ast.expr) -> str | None:
    """The name an expression such as ``triton.jit`` or ``triton.autotune(...)`` starts at."""
    while isinstance(expr, (ast.Call, ast.Attribute, ast.Subscript)):
        expr = expr.func if isinstance(expr, ast.Call) else expr.value
    return expr.id if isinstance(expr, ast.Name) else None


def _failing_statement(exc: BaseException, filename: str, body: list[ast.stmt]) -> str:
    """The module-level name whose statement raised ``exc`` while the compiled part ran
    (``"the module-level statement of NAME"``), for the message's fix."""
    lines = [frame.lineno for frame in traceback.extract_tb(exc.__traceback__)
             if frame.filename == filename and frame.lineno is not None]
    for stmt in body:
        names = _statement_names(stmt)
        if names and lines and stmt.lineno <= lines[0] <= (stmt.end_lineno or stmt.lineno):
            return f"the module-level statement of {names[0]!r}"
    return "a module-level statement"


def _assigned(node: ast.stmt, name: str, spec: str, filename: str, defs: dict,
              available: list[str]) -> TargetLoadError:
    """The error for a target name the file binds by assignment, not by ``def``: what it
    is bound to, and the function of the file to name instead where it is one."""
    value = node.value
    refers = value.id if isinstance(value, ast.Name) and isinstance(
        defs.get(value.id), ast.FunctionDef) else None
    fix = (messages.TARGET_ASSIGNED_FIX_ALIAS.format(value=spec, refers=refers,
                                                    file=spec.rpartition("::")[0])
           if refers else messages.TARGET_FUNCTION_MISSING[1].format(
               available=", ".join(available) or "none", classes=""))
    problem = messages.TARGET_ASSIGNED.format(
        path=filename, name=name, value=spec, line=node.lineno,
        bound=ast.unparse(value)[:80])
    return TargetLoadError(problem, fix, value=spec)


def _classes(defs: dict) -> list[str]:
    """The names of the module-level classes of ``defs``, sorted."""
    return sorted(n for n, d in defs.items() if isinstance(d, ast.ClassDef))


def _methods(owner: ast.ClassDef) -> dict:
    """The functions a class body defines (its methods), by name."""
    return {n.name: n for n in owner.body
            if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}


def _method_as_function(defs: dict, dotted: str, filename: str, spec: str
                        ) -> tuple[str, str | None]:
    """Put method ``Class.method`` of ``defs`` among them as a module-level function;
    return its key, and the class's name where it is a class method (bound to the class
    when loaded; a static method is a plain function, a plain method one taking
    ``self``). It keeps its name unless a module-level name takes it."""
    class_name, _, method = dotted.partition(".")
    owner = defs.get(class_name)
    if not isinstance(owner, ast.ClassDef):
        raise TargetLoadError.of(messages.TARGET_CLASS_MISSING, spec, path=filename,
                                 name=class_name, available=", ".join(_classes(defs)) or "none")
    methods = _methods(owner)
    if method not in methods:
        raise TargetLoadError.of(messages.TARGET_METHOD_MISSING, spec, path=filename,
                                 name=class_name, method=method,
                                 available=", ".join(sorted(methods)) or "none")
    node = copy.deepcopy(methods[method])
    kinds = {d.id for d in node.decorator_list
             if isinstance(d, ast.Name) and d.id in _METHOD_KINDS}
    if "classmethod" in kinds and not (node.args.posonlyargs or node.args.args
                                       or node.args.vararg):
        raise TargetLoadError.of(messages.TARGET_METHOD_KIND, spec, name=dotted, method=method)
    node.decorator_list = [d for d in node.decorator_list
                           if not (isinstance(d, ast.Name) and d.id in _METHOD_KINDS)]
    key = method if method not in defs else f"_stagecheck_method_{method}"
    node.name = key
    defs[key] = node
    return key, class_name if "classmethod" in kinds else None


#: the builtin decorators that make a class's function a static or a class method
_METHOD_KINDS = ("staticmethod", "classmethod")
