"""The code under test of a protocol run, loaded where it runs (a worker process).

A protocol's target names a class, a method or a function of a file, a module or a git
revision (the target forms of ``oracles/targets.py``). What a protocol run needs from it:

- the **component**: the class whose instance is the protocol's state (the class of a
  ``Class.method`` target, a class target itself, else the protocol's ``component`` class
  of the same file);
- **functions** of the same file by name (``StepContext.function``);
- for a one-step protocol of a staging schema, the staging function as a ``Target``.

A file's class is compiled the way a file target's function is (its module-level
definitions, the names it uses resolved at load time, the module's own imports never run):
``load_function_from_source`` of a tiny accessor function appended to the source. The
loader drops decorators (they may name engine code); the accessor applies again those of
the standard library and the builtins (``contextlib.contextmanager``, ``functools.*``,
``staticmethod``, ``classmethod``, ``property``), which change what a method is. Every
load error is a ``TargetLoadError`` naming the target and the fix.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import sys
from typing import Any, Callable

from stagecheck.oracles import messages
from stagecheck.oracles.device.standins import watch_names
from stagecheck.oracles.errors import TargetLoadError
from stagecheck.oracles.targets import (BUILTINS, TargetRef, load_function_from_source,
                                        load_shims, load_target, target_from_callable)

__all__ = ["Code", "classes_in", "load_code"]

_ACCESSOR = "__stagecheck_component__"
_CACHE: dict[tuple, "Code"] = {}


class Code:
    """What a protocol run takes from one target (see the module doc)."""

    def __init__(self, ref: TargetRef, component: str, staging_schema=None) -> None:
        self.ref, self._component_name = ref, component
        self._component = None
        self._functions: dict[str, Callable | None] = {}
        self._staging = None
        self._schema = staging_schema
        self._module = None
        self._shims = None
        self.shimmed: tuple[str, ...] = ()   # "name from module" shims gave the component

    # ---------------------------------------------------------------- where names live
    @property
    def name(self) -> str:
        """The name the target spec gives (``Class.method``, ``Class``, ``function``)."""
        ref = self.ref
        if ref.function is not None:
            return ref.function
        if ":" in ref.spec:
            return ref.spec.rsplit(":", 1)[1]
        return ref.spec

    def _module_object(self):
        if self._module is None:
            if self.ref.spec in BUILTINS:      # not a module: a staging function's name
                raise TargetLoadError.of(messages.PROTOCOL_BUILTIN_TARGET, self.ref.spec,
                                         component=self._component_name or "Class")
            module = self.ref.spec.rsplit(":", 1)[0]
            try:
                self._module = importlib.import_module(module)
            except Exception as exc:
                raise TargetLoadError.of(messages.PROTOCOL_TARGET_IMPORT, self.ref.spec,
                                         module=module, error=f"{type(exc).__name__}: {exc}"
                                         ) from None
            watch_names(vars(self._module))   # ``from torch.cuda import Event`` there
        return self._module

    def _compile(self, name: str, source: str | None = None, shown: str | None = None):
        if self._shims is None:
            self._shims = load_shims(self.ref.shims)
        function = load_function_from_source(source or self.ref.source, self.ref.filename,
                                             name, self.ref.spec, shims=self._shims,
                                             shown=shown)
        namespace = getattr(function, "__globals__", None)
        if isinstance(namespace, dict):     # ``from torch.cuda import Event`` in the file
            watch_names(namespace)
        return function

    # ---------------------------------------------------------------- what a run uses
    def component(self):
        """The component class (see the module doc)."""
        if self._component is not None:
            return self._component
        wanted = self.name.split(".")[0] if "." in self.name else self.name
        if self.ref.source is not None:
            try:
                ast.parse(self.ref.source, self.ref.filename)
            except SyntaxError as exc:   # said as of a function target, not "no class"
                raise TargetLoadError.of(messages.TARGET_FILE_SYNTAX, self.ref.spec,
                                         path=self.ref.filename,
                                         error=f"line {exc.lineno}: {exc.msg}") from None
            classes = _classes(self.ref.source)
            if wanted not in classes and wanted not in _functions(self.ref.source):
                raise TargetLoadError.of(messages.TARGET_CLASS_MISSING, self.ref.spec,
                                         path=self.ref.filename, name=wanted,
                                         available=", ".join(sorted(classes)) or "none")
            if wanted not in classes:     # a function of the file: the protocol's class
                wanted = self._component_name
            if wanted not in classes:
                raise TargetLoadError.of(messages.PROTOCOL_NO_COMPONENT, self.ref.spec,
                                         component=self._component_name or "(none)",
                                         available=", ".join(sorted(classes)) or "none")
            lines = _redecorations(self.ref.source) + [f"return {wanted}"]
            source = (self.ref.source + f"\n\ndef {_ACCESSOR}():\n"
                      + "".join(f"    {line}\n" for line in lines))
            accessor = self._compile(_ACCESSOR, source, shown=wanted)
            self.shimmed = tuple(getattr(accessor, "__stagecheck_shimmed__", ()))
            self._component = accessor()
        else:
            module = self._module_object()
            found = getattr(module, wanted, None)
            if not isinstance(found, type):
                found = getattr(module, self._component_name, None)
            if not isinstance(found, type):
                raise TargetLoadError.of(messages.PROTOCOL_NO_COMPONENT, self.ref.spec,
                                         component=self._component_name or "(none)",
                                         available=", ".join(sorted(
                                             n for n, v in vars(module).items()
                                             if isinstance(v, type))) or "none")
            self._component = found
        self._require_method(self._component)
        return self._component

    def _require_method(self, cls) -> None:
        """A ``Class.method`` target names a method the class has (its own or inherited):
        the method chooses the protocol and says what is checked, so a misspelt one is a
        load error, never a run that drives the class without it."""
        if "." not in self.name:
            return
        method = self.name.split(".", 1)[1]
        if not callable(getattr(cls, method, None)):
            methods = sorted(n for n in dir(cls) if not (n.startswith("__") and n.endswith("__"))
                             and callable(getattr(cls, n, None)))
            raise TargetLoadError.of(messages.TARGET_METHOD_MISSING, self.ref.spec,
                                     path=self.ref.filename or self.ref.spec.rsplit(":", 1)[0],
                                     name=cls.__name__, method=method,
                                     available=", ".join(methods) or "none")

    def function(self, name: str) -> Callable | None:
        """Module-level function ``name`` of the target's file or module (None: none)."""
        if name not in self._functions:
            found = None
            if self.ref.source is not None:
                if name in _functions(self.ref.source):
                    found = self._compile(name)
            else:
                candidate = getattr(self._module_object(), name, None)
                found = candidate if callable(candidate) else None
            self._functions[name] = found
        return self._functions[name]

    def function_names(self) -> list[str]:
        """The module-level functions of the target's file or module, sorted."""
        if self.ref.source is not None:
            return sorted(_functions(self.ref.source))
        module = self._module_object()
        return sorted(n for n, v in vars(module).items()
                      if inspect.isfunction(v) and not n.startswith("__"))

    def staging_target(self):
        """The staging function as a ``Target`` (one-step protocols); a target naming a
        class is said to need a staging function (``PROTOCOL_SINGLE_CALL_CLASS``)."""
        if self._staging is None:
            try:
                self._staging = load_target(self.ref.spec, self._schema, self.ref.shims) \
                    if self.ref.source is None else _target_from_source(self.ref, self._schema)
            except TargetLoadError:
                if not self._names_class():
                    raise
                schema = getattr(self._schema, "name", "SCHEMA")
                functions = getattr(self._schema, "functions", ()) or ("function",)
                raise TargetLoadError.of(messages.PROTOCOL_SINGLE_CALL_CLASS, self.ref.spec,
                                         name=self.name, schema=schema,
                                         function=functions[0]) from None
        return self._staging

    def _names_class(self) -> bool:
        """Whether the target names a class (``FILE::Class``, ``module:Class``)."""
        if "." in self.name:
            return False
        if self.ref.source is not None:
            return self.name in _classes(self.ref.source)
        try:
            return inspect.isclass(getattr(self._module_object(), self.name, None))
        except TargetLoadError:
            return False


def _target_from_source(ref: TargetRef, schema):
    func = load_function_from_source(ref.source, ref.filename, ref.function, ref.spec,
                                     shims=load_shims(ref.shims))
    target = target_from_callable(func, ref.spec, schema)
    target.origin = ref.origin or target.origin
    return target


#: decorators that are always applied again (builtins)
_BUILTIN_DECORATORS = frozenset({"staticmethod", "classmethod", "property"})


def _redecorations(source: str) -> list[str]:
    """Statements that apply again the standard-library and builtin decorators the loader
    dropped, innermost first, to every decorated method and function of ``source``."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return []
    standard = set(_BUILTIN_DECORATORS)
    for node in tree.body:
        if isinstance(node, ast.Import):
            standard |= {(a.asname or a.name).split(".")[0] for a in node.names
                         if a.name.split(".")[0] in sys.stdlib_module_names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module \
                and node.module.split(".")[0] in sys.stdlib_module_names:
            standard |= {a.asname or a.name for a in node.names}

    def root(expr) -> str | None:
        while isinstance(expr, (ast.Call, ast.Attribute)):
            expr = expr.func if isinstance(expr, ast.Call) else expr.value
        return expr.id if isinstance(expr, ast.Name) else None

    def kept(node) -> list:
        return [d for d in reversed(node.decorator_list) if root(d) in standard]

    lines = []
    for node in tree.body:
        if isinstance(node, ast.ClassDef):
            for item in node.body:
                if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    for dec in kept(item):
                        lines.append(f"{node.name}.{item.name} = ({ast.unparse(dec)})"
                                     f"({node.name}.__dict__[{item.name!r}])")
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            for dec in kept(node):
                lines.append(f"globals()[{node.name!r}] = ({ast.unparse(dec)})"
                             f"(globals()[{node.name!r}])")
    return lines


def _classes(source: str) -> set[str]:
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return set()
    return {n.name for n in tree.body if isinstance(n, ast.ClassDef)}


def classes_in(path: str) -> set[str]:
    """The module-level classes of the file at ``path`` (none where it cannot be read)."""
    try:
        with open(path, encoding="utf-8") as f:
            return _classes(f.read())
    except (OSError, UnicodeDecodeError):
        return set()


def _functions(source: str) -> set[str]:
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return set()
    return {n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}


def load_code(ref: TargetRef, component: str, schema: Any = None) -> Code:
    """The code of ``ref`` for a protocol whose component class is ``component`` (kept for
    the worker's life: every sequence of a campaign uses the same classes)."""
    key = (ref, component, getattr(schema, "name", None))
    code = _CACHE.get(key)
    if code is None:
        code = _CACHE[key] = Code(ref, component, schema)
    return code
