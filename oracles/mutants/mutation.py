"""What a mutation operator is: the sites it finds (``Location``, ``Site``), what it knows
of the module it mutates (``Scope``, from the target's schema), and the base class
(``MutationOperator``) that walks a staging function's AST, counting every site of its
kind and applying the one asked for. The operators themselves are the catalog in
``operators.py``.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field

from stagecheck.spec.schema import PER_REQUEST, REQUIRED

__all__ = ["Location", "MutationOperator", "Scope", "Site", "index_names"]


@dataclass(frozen=True)
class Location:
    function: str
    line: int        # line and column in the target's own source
    col: int

    def __str__(self) -> str:
        return f"{self.function}:{self.line}"


@dataclass(frozen=True)
class Site:
    operator: str
    index: int
    location: Location
    description: str
    equivalent_reason: str | None = None


@dataclass
class Scope:
    """What the operators know about the module being mutated, and from its schema."""

    functions: tuple[str, ...]        # the staging function and the helpers it calls
    nullable: bool = False            # a buffer may be None (e.g. the later generation's
                                      # state-index buffer with its flag False)
    complete: dict[str, str] = field(default_factory=dict)   # dicts the contract fills
                                      # for every live request: name -> how to say it
    whole_batch: bool = False         # num_reqs is len(req_ids) (no padded ids drawn)

    @classmethod
    def of(cls, functions: tuple[str, ...], profile) -> "Scope":
        """The scope of a target with ``profile`` (``None``: nothing known)."""
        if profile is None:
            return cls(functions)
        complete = {}
        for inp in profile.schema.inputs:
            if inp.kind == PER_REQUEST and inp.presence == REQUIRED:
                complete[inp.group or inp.name] = inp.group or inp.name
        nullable = any(f.nullable(profile) for f in profile.schema.fields)
        return cls(functions, nullable, complete, profile.schema.num_reqs_is_len)


def index_names(fn: ast.FunctionDef) -> set[str]:
    """Names bound to integer slot indices by the loops of ``fn``."""
    out: set[str] = set()
    for node in ast.walk(fn):
        if not isinstance(node, (ast.For, ast.comprehension)):
            continue
        it, target = node.iter, node.target
        if isinstance(it, ast.Call) and isinstance(it.func, ast.Name):
            if it.func.id == "range" and isinstance(target, ast.Name):
                out.add(target.id)
            elif it.func.id in ("enumerate", "zip") and isinstance(target, ast.Tuple) \
                    and target.elts and isinstance(target.elts[0], ast.Name):
                first = it.args[0] if it.args else None
                if it.func.id == "enumerate" or (
                        isinstance(first, ast.Call) and isinstance(first.func, ast.Name)
                        and first.func.id == "range"):
                    out.add(target.elts[0].id)
    return out


class MutationOperator(ast.NodeTransformer):
    """Finds every site of one kind of mutation; with ``target`` set, applies one.

    Enumeration and application walk identical trees in the same order, so site
    ``k`` of the enumeration is the site mutated by ``Operator(scope, target=k)``.
    Expression operators override ``visit_*``; statement operators override
    ``block(owner, stmts)``, called for every statement list after its children.
    """

    name = ""
    summary = ""
    prelude = ""       # module-level source a mutant of this operator needs

    def __init__(self, scope: Scope, target: int | None = None) -> None:
        self.scope = scope
        self.target = target
        self.count = 0
        self.sites: list[Site] = []
        self.applied: Site | None = None
        self.fn: ast.FunctionDef | None = None
        self.index_names: set[str] = set()

    # -- driving ------------------------------------------------------------------
    def run(self, tree: ast.Module) -> ast.Module:
        for k, node in enumerate(tree.body):
            if isinstance(node, ast.FunctionDef) and node.name in self.scope.functions:
                tree.body[k] = self._visit_function(node)
            elif isinstance(node, ast.ClassDef):     # a method target: Class.method
                for j, item in enumerate(node.body):
                    if isinstance(item, ast.FunctionDef) \
                            and f"{node.name}.{item.name}" in self.scope.functions:
                        node.body[j] = self._visit_function(item)
        return tree

    def _visit_function(self, node: ast.FunctionDef) -> ast.AST:
        self.fn = node
        self.index_names = index_names(node)
        return self.visit(node)

    def hit(self, node: ast.AST, description: str, equivalent: str | None = None) -> bool:
        """Count one site; True when it is the one to apply."""
        index = self.count
        self.count += 1
        site = Site(self.name, index, Location(self.fn.name, getattr(node, "lineno", 0),
                                               getattr(node, "col_offset", 0)),
                    description, equivalent)
        if self.target is None:
            self.sites.append(site)
            return False
        if index == self.target:
            self.applied = site
            return True
        return False

    # -- statement lists ----------------------------------------------------------
    def _visit_owner(self, node):
        self.generic_visit(node)
        for name in ("body", "orelse", "finalbody"):
            stmts = getattr(node, name, None)
            if isinstance(stmts, list) and stmts:
                new = self.block(node, stmts)
                setattr(node, name, new if new else [ast.Pass()])
        return node

    visit_FunctionDef = visit_For = visit_While = visit_If = visit_With = visit_Try = _visit_owner

    def block(self, owner: ast.AST, stmts: list[ast.stmt]) -> list[ast.stmt]:
        return stmts
