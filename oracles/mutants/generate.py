"""Mutant generation: every operator applied at every site of a target's source."""

from __future__ import annotations

import ast
import copy
import dataclasses
import difflib
import os
from dataclasses import dataclass
from typing import Callable, Sequence

from stagecheck.oracles import messages
from stagecheck.oracles.errors import TargetLoadError, UsageError
from stagecheck.oracles.mutants.catalog import CATALOG, OPERATORS
from stagecheck.oracles.mutants.mutation import Location, Scope
from stagecheck.oracles.targets import load_function_from_source

__all__ = ["Mutant", "functions_in_scope", "generate_mutants", "method_node", "require_mutants"]


@dataclass
class Mutant:
    id: str
    operator: str
    location: Location
    description: str
    source: str                  # the whole module, mutated, as ast.unparse writes it
    diff: str                    # unified diff against the unmutated unparsed source
    filename: str                # where the target's source came from
    function: str                # the staging function to load from ``source``
    equivalent_reason: str | None = None

    @property
    def load_name(self) -> str:
        return f"<stagecheck mutant {self.id} of {self.filename}>"

    def load(self, shims: dict | None = None) -> Callable:
        """The mutated function (``shims``: from ``targets.load_shims``)."""
        return load_function_from_source(self.source, self.load_name, self.function,
                                         spec=f"{self.filename}::{self.function}@{self.id}",
                                         shims=shims)

    def to_dict(self, with_source: bool = False) -> dict:
        data = {"id": self.id, "operator": self.operator,
                "location": dataclasses.asdict(self.location), "description": self.description,
                "diff": self.diff, "equivalent_reason": self.equivalent_reason}
        if with_source:
            data["source"] = self.source
        return data


def method_node(tree: ast.Module, dotted: str) -> ast.FunctionDef | None:
    """The method ``Class.method`` of ``tree``'s module-level class, or None."""
    owner, _, method = dotted.partition(".")
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.name == owner:
            return next((item for item in node.body
                         if isinstance(item, ast.FunctionDef) and item.name == method), None)
    return None


def functions_in_scope(tree: ast.Module, name: str) -> tuple[str, ...]:
    """``name`` and the module-level functions it calls, transitively (source order);
    ``name`` may be a method, ``Class.method`` (a method target)."""
    defs: dict[str, ast.FunctionDef] = {n.name: n for n in tree.body
                                        if isinstance(n, ast.FunctionDef)}
    method = method_node(tree, name) if "." in name else None
    if method is not None:
        defs[name] = method
    seen, queue = set(), [name]
    while queue:
        current = queue.pop()
        if current in seen or current not in defs:
            continue
        seen.add(current)
        for node in ast.walk(defs[current]):
            if isinstance(node, ast.Name) and node.id in defs:
                queue.append(node.id)
    owner = name.partition(".")[0] if method is not None else None
    return tuple(name if isinstance(n, ast.ClassDef) else n.name for n in tree.body
                 if (isinstance(n, ast.FunctionDef) and n.name in seen)
                 or (isinstance(n, ast.ClassDef) and n.name == owner))


def _with_prelude(tree: ast.Module, prelude: str) -> ast.Module:
    """``tree`` with the operator's ``prelude`` (helpers it calls) after the docstring and
    ``__future__`` imports, where the mutation uses a name the prelude defines."""
    if not prelude:
        return tree
    defined = {node.name for node in ast.parse(prelude).body
               if isinstance(node, (ast.FunctionDef, ast.ClassDef))}
    if defined and not any(isinstance(node, ast.Name) and node.id in defined
                           for node in ast.walk(tree)):
        return tree
    at = 0
    for k, node in enumerate(tree.body):
        doc = (k == 0 and isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)
               and isinstance(node.value.value, str))
        future = isinstance(node, ast.ImportFrom) and node.module == "__future__"
        if doc or future:
            at = k + 1
    tree.body[at:at] = ast.parse(prelude).body
    return tree


def _is_async(tree: ast.Module, name: str) -> bool:
    """Whether ``name`` (``f`` or ``Class.method``) is an ``async def`` of ``tree``."""
    owner, _, method = name.rpartition(".")
    body = next((n.body for n in tree.body if isinstance(n, ast.ClassDef)
                 and n.name == owner), []) if owner else tree.body
    return any(isinstance(n, ast.AsyncFunctionDef) and n.name == (method or name)
               for n in body)


def generate_mutants(source: str, filename: str, function: str, profile=None,
                     operators: Sequence[str] | None = None) -> list[Mutant]:
    """Every mutant of ``function`` (and its helpers) in ``source``, catalog order."""
    tree = ast.parse(source, filename)
    scope = Scope.of(functions_in_scope(tree, function), profile)
    if function not in scope.functions and _is_async(tree, function):
        raise TargetLoadError.of(messages.MUTANTS_ASYNC_TARGET, function, path=filename)
    if function not in scope.functions:
        raise TargetLoadError.of(messages.TARGET_FUNCTION_MISSING, function, path=filename,
                                 name=function, available=", ".join(scope.functions) or "none",
                                 classes="")
    original = ast.unparse(tree)
    chosen = [OPERATORS[name] for name in operators] if operators else list(CATALOG)
    out: list[Mutant] = []
    seen = {original}
    for op_class in chosen:
        finder = op_class(scope)
        finder.run(copy.deepcopy(tree))
        for site in finder.sites:
            applier = op_class(scope, target=site.index)
            mutated = applier.run(copy.deepcopy(tree))
            if applier.applied is None:
                continue
            mutated = _with_prelude(mutated, op_class.prelude)
            ast.fix_missing_locations(mutated)
            text = ast.unparse(mutated)
            if text in seen:
                continue
            seen.add(text)
            loc = site.location
            reason = site.equivalent_reason
            mid = f"m{len(out) + 1:02d}"
            diff = "".join(difflib.unified_diff(      # every line ends with its newline
                (original.rstrip("\n") + "\n").splitlines(True),
                (text.rstrip("\n") + "\n").splitlines(True),
                fromfile=f"{os.path.basename(filename)}", tofile=f"{mid}", n=2))
            out.append(Mutant(mid, op_class.name, loc, site.description, text, diff, filename,
                              function, reason))
    return out


def require_mutants(mutants: list[Mutant], target: str, operators: Sequence[str] | None,
                    every: Callable[[], list[Mutant]]) -> None:
    """A ``UsageError`` when ``mutants`` is empty: a run of no mutant checks nothing, never
    a clean verdict. With ``operators`` it names them and the operators that would apply
    (``every``: the mutants of the whole catalog), said of ``--operators``; without, of
    the target."""
    if mutants:
        return
    if not operators:
        raise UsageError.of(messages.NO_MUTANTS, target)
    others = list(dict.fromkeys(m.operator for m in every()))
    fix = (messages.NO_MUTANTS_OTHERS.format(others=", ".join(others)) if others
           else messages.NO_MUTANTS_NONE)
    raise UsageError.of(messages.NO_MUTANTS_OF_OPERATORS, ", ".join(operators), "operators",
                        target=target, fix=fix)
