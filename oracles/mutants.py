"""Oracle strength: a mutation catalog specific to staging code, and the kill matrix.

Each operator rewrites the AST of the staging function (and of the module-level
helper functions it calls) at one site, the way a refactor of such code goes wrong:
a loop over the padded ``req_ids``, a copy length off by one, an upload hoisted above
the fill, an assertion dropped or re-typed, ``.get`` for ``[k]``, swapped views, a
value carried over from the previous slot, a narrower dtype, the post-step count...
Every mutant keeps its operator, location, description, the whole mutated module
source (``ast.unparse``; loadable with ``oracles.targets.load_function_from_source``)
and a unified diff against the unmutated source, unparsed the same way.

``run_mutants`` runs every oracle on every mutant: ``spec`` (the spec alone),
``differential`` (against the unmutated target), ``kernel`` (differential findings
that reach the postprocess kernel, once the differential runner reports
``kernel_impact``), ``symbolic`` (``oracles.symbolic.run_symbolic``) and
``upstream``: the example-based test pair written the way upstream tests such a
refactor, as the baseline stagecheck is measured against. A mutant is killed by an
oracle when the oracle reports at least one error finding (upstream: a test fails).

A survivor is labeled equivalent only with a reason: given by the operator that
knows it (e.g. a blocking copy is invisible on the CPU) or listed in
``EQUIVALENT_MUTANTS``. A mutant with a reason that some oracle kills is not
equivalent, and the report says the reason was withdrawn.
"""

from __future__ import annotations

import argparse
import ast
import copy
import dataclasses
import difflib
import importlib
import inspect
import json
import os
import sys
import time
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Callable, Iterable, Sequence

from oracles.differential import preload_project_modules
from oracles.errors import StagecheckError, UsageError

__all__ = [
    "CATALOG", "EQUIVALENT_MUTANTS", "ORACLES", "STAGECHECK_ORACLES", "Location", "Mutant",
    "MutantResult", "MutationOperator", "MutationReport", "OracleOutcome", "format_kill_matrix",
    "generate_mutants", "mutants_command", "parse_oracles", "run_mutants", "target_source",
    "upstream_example_test", "upstream_missing_index_test",
]

#: Oracle names, in kill-matrix column order; ``upstream`` is the baseline.
ORACLES = ("spec", "differential", "kernel", "symbolic", "upstream")
STAGECHECK_ORACLES = ("spec", "differential", "kernel", "symbolic")
DEFAULT_BUDGET = 300
DEFAULT_SYMBOLIC_TIMEOUT = 10.0
SYMBOLIC_MAX_CAPACITY = 4

_CARRY = "_stagecheck_carried"
_NP = "_stagecheck_np"
_BLOCKING_COPY = "_stagecheck_blocking_copy"


# ======================================================================================
# Mutants
# ======================================================================================

@dataclass(frozen=True)
class Location:
    function: str
    line: int        # line and column in the target's own source
    col: int

    def __str__(self) -> str:
        return f"{self.function}:{self.line}"


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

    def load(self) -> Callable:
        from oracles.targets import load_function_from_source
        return load_function_from_source(self.source, self.load_name, self.function,
                                         spec=f"{self.filename}::{self.function}@{self.id}")

    def to_dict(self, with_source: bool = False) -> dict:
        data = {"id": self.id, "operator": self.operator,
                "location": dataclasses.asdict(self.location), "description": self.description,
                "diff": self.diff, "equivalent_reason": self.equivalent_reason}
        if with_source:
            data["source"] = self.source
        return data


@dataclass(frozen=True)
class Site:
    operator: str
    index: int
    location: Location
    description: str
    equivalent_reason: str | None = None


@dataclass
class Scope:
    """What the operators know about the module being mutated."""

    functions: tuple[str, ...]        # the staging function and the helpers it calls
    takes_flag: bool = False          # later generation: ctx may lack the state-index buffer


# --------------------------------------------------------------------------------------
# Reasons an operator gives for mutants it knows to be equivalent
# --------------------------------------------------------------------------------------

REASON_NONE_CHECK = (
    "equivalent within the contract: a target of this generation always gets the four "
    "buffers (only the later generation may be called with mamba_state_idx_buf=None, and "
    "only with run_prefix_state_migration=False), so this None check never fires on an "
    "input that can happen; without it a None buffer would fail with AttributeError instead")
REASON_BLOCKING = (
    "equivalent on CPU: copies are synchronous; the mutant makes the upload blocking "
    "(non_blocking=False), which on CUDA only closes the write-after-copy window (slower, "
    "never other values). The CUDA hazard detector (issue 7) is the oracle for the "
    "opposite toggle")
REASON_NONBLOCKING_ON = (
    "equivalent on CPU: copies are synchronous; the CUDA hazard detector (issue 7) is the "
    "oracle for it")
REASON_COMPLETE_DICT = (
    "equivalent within the contract: every live request is in {what} on an input that can "
    "happen, so the lookup never misses; it differs only on inputs that should not happen "
    "(a request missing from {what}), where a difference is an info finding")
REASON_GUARDED = (
    "equivalent: the assertion '{guard}' at line {line} runs first in the same iteration, "
    "so a missing key never reaches this lookup")
REASON_BOUNDED_LEN = (
    "equivalent on every input the engine produces: the value is a count of one request's "
    "draft tokens, bounded by num_speculative_tokens (single digits upstream; the "
    "generators draw at most 4), so int16 never wraps; it differs only for a request with "
    "more than 32,767 draft tokens")

#: Dictionaries the contract guarantees to hold every live request (by the last name of
#: the expression), with the words the reason uses for them.
CONTRACT_COMPLETE = {
    "num_scheduled_tokens": "scheduler_output.num_scheduled_tokens",
    "requests": "requests",
}

#: Equivalent mutants no operator can recognise on its own:
#: (operator, function, line) -> reason. Lines are those of the target's source.
EQUIVALENT_MUTANTS: dict[tuple[str, str, int], str] = {}


# --------------------------------------------------------------------------------------
# The operator base class
# --------------------------------------------------------------------------------------

def _is_copy_call(node: ast.AST) -> bool:
    return (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
            and node.func.attr == "copy_to_gpu")


def _is_copy_stmt(node: ast.stmt) -> bool:
    return isinstance(node, ast.Expr) and _is_copy_call(node.value)


def _is_none_check(node: ast.Assert) -> bool:
    t = node.test
    return (isinstance(t, ast.Compare) and len(t.ops) == 1 and isinstance(t.ops[0], ast.IsNot)
            and isinstance(t.comparators[0], ast.Constant) and t.comparators[0].value is None)


def _src(node: ast.AST) -> str:
    return ast.unparse(node)


def _last_name(node: ast.AST) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    return None


def _params(fn: ast.FunctionDef) -> set[str]:
    a = fn.args
    return {p.arg for p in (*a.posonlyargs, *a.args, *a.kwonlyargs)}


def _index_names(fn: ast.FunctionDef) -> set[str]:
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
    motivation = ""
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
                self.fn = node
                self.index_names = _index_names(node)
                tree.body[k] = self.visit(node)
        return tree

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


def _prefix_slice(node: ast.AST) -> bool:
    """``X[:E]`` read from a name or attribute."""
    return (isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Load)
            and isinstance(node.slice, ast.Slice) and node.slice.lower is None
            and node.slice.upper is not None and node.slice.step is None
            and isinstance(node.value, (ast.Name, ast.Attribute)))


def _range_call(node: ast.AST) -> bool:
    return (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
            and node.func.id == "range" and len(node.args) == 1 and not node.keywords)


def _shift(expr: ast.expr, delta: int) -> ast.expr:
    op = ast.Add() if delta > 0 else ast.Sub()
    return ast.BinOp(left=copy.deepcopy(expr), op=op, right=ast.Constant(abs(delta)))


# --------------------------------------------------------------------------------------
# The catalog
# --------------------------------------------------------------------------------------

class FullReqIds(MutationOperator):
    name = "full_req_ids"
    summary = "loops over the whole (padded) list: `req_ids` for `req_ids[:num_reqs]`, " \
              "`range(len(req_ids))` for `range(num_reqs)`"
    motivation = "persistent batches keep trailing ids; a refactor that drops the slice " \
                 "writes tail slots or asserts on a finished request"

    def visit_Subscript(self, node):
        self.generic_visit(node)
        if _prefix_slice(node) and self.hit(
                node, f"iterates over all of {_src(node.value)} instead of {_src(node)}"):
            return node.value
        return node

    def visit_Call(self, node):
        self.generic_visit(node)
        if _range_call(node) and "req_ids" in _params(self.fn) and self.hit(
                node, f"range(len(req_ids)) instead of {_src(node)}"):
            node.args = [ast.Call(ast.Name("len", ast.Load()), [ast.Name("req_ids", ast.Load())],
                                  [])]
        return node


class LoopBoundOffByOne(MutationOperator):
    name = "loop_bound_off_by_one"
    summary = "the batch bound of a loop one short or one long: `req_ids[:num_reqs - 1]`, " \
              "`range(num_reqs + 1)`"
    motivation = "the classic fencepost slip when a loop is rewritten from enumerate to " \
                 "range or zip"

    def _bound(self, node: ast.AST, get, put) -> ast.AST:
        for delta in (-1, +1):
            new = _shift(get(), delta)
            if self.hit(node, f"loop bound {_src(get())} becomes {_src(new)} in {_src(node)}"):
                put(new)
                return node
        return node

    def visit_Subscript(self, node):
        self.generic_visit(node)
        if _prefix_slice(node):
            def put(v):
                node.slice.upper = v
            return self._bound(node, lambda: node.slice.upper, put)
        return node

    def visit_Call(self, node):
        self.generic_visit(node)
        if _range_call(node):
            def put(v):
                node.args = [v]
            return self._bound(node, lambda: node.args[0], put)
        return node


class _CopyArgOperator(MutationOperator):
    def _copy_arg(self, node: ast.Call) -> ast.expr | None:
        if node.args:
            return node.args[0]
        for kw in node.keywords:
            if kw.arg == "n":
                return kw.value
        return None

    def _set_copy_arg(self, node: ast.Call, value: ast.expr | None) -> None:
        node.keywords = [kw for kw in node.keywords if kw.arg != "n"]
        node.args = [] if value is None else [value]


class CopyLengthOffByOne(_CopyArgOperator):
    name = "copy_length_off_by_one"
    summary = "`copy_to_gpu(num_reqs - 1)` / `copy_to_gpu(num_reqs + 1)`"
    motivation = "a copy one slot short leaves a stale mirror slot the kernel reads; one " \
                 "slot long overwrites the device tail"

    def visit_Call(self, node):
        self.generic_visit(node)
        arg = self._copy_arg(node) if _is_copy_call(node) else None
        if arg is not None:
            for delta in (-1, +1):
                new = _shift(arg, delta)
                if self.hit(node, f"{_src(node.func.value)} copied with length {_src(new)}"):
                    self._set_copy_arg(node, new)
                    return node
        return node


class CopyLengthPadded(_CopyArgOperator):
    name = "copy_length_padded"
    summary = "`copy_to_gpu(len(req_ids))`: the copy length taken from the padded list"
    motivation = "`len(req_ids)` and `num_reqs` agree in most tests; with a persistent " \
                 "batch the copy reaches padded slots"

    def visit_Call(self, node):
        self.generic_visit(node)
        arg = self._copy_arg(node) if _is_copy_call(node) else None
        if arg is not None and "req_ids" in _params(self.fn) and self.hit(
                node, f"{_src(node.func.value)} copied with length len(req_ids)"):
            self._set_copy_arg(node, ast.Call(ast.Name("len", ast.Load()),
                                              [ast.Name("req_ids", ast.Load())], []))
        return node


class WholeBufferCopy(_CopyArgOperator):
    name = "whole_buffer_copy"
    summary = "`copy_to_gpu()` without a length: every slot is uploaded"
    motivation = "`copy_to_gpu()` looks harmless and passes value tests of the live " \
                 "slots, but overwrites the device tail with host garbage"

    def visit_Call(self, node):
        self.generic_visit(node)
        if _is_copy_call(node) and self._copy_arg(node) is not None and self.hit(
                node, f"{_src(node.func.value)} copied whole (copy_to_gpu())"):
            self._set_copy_arg(node, None)
        return node


class CopyHoisted(MutationOperator):
    name = "copy_hoisted"
    summary = "an upload moved above the loop that fills its buffer"
    motivation = "reordering statements while merging helpers: the device then sees the " \
                 "previous step's values"

    def block(self, owner, stmts):
        for j, stmt in enumerate(stmts):
            if not _is_copy_stmt(stmt):
                continue
            loops = [k for k in range(j) if isinstance(stmts[k], (ast.For, ast.While))]
            if loops and self.hit(stmt, f"{_src(stmt.value.func.value)}.copy_to_gpu hoisted "
                                        f"above the loop at line {stmts[loops[-1]].lineno}"):
                k = loops[-1]
                return stmts[:k] + [stmt] + stmts[k:j] + stmts[j + 1:]
        return stmts


class CopyDropped(MutationOperator):
    name = "copy_dropped"
    summary = "an upload deleted"
    motivation = "a helper merged away with one of its copies forgotten (the mirror keeps " \
                 "last step's values)"

    def block(self, owner, stmts):
        for j, stmt in enumerate(stmts):
            if _is_copy_stmt(stmt) and self.hit(
                    stmt, f"{_src(stmt.value.func.value)}.copy_to_gpu removed"):
                return stmts[:j] + stmts[j + 1:]
        return stmts


class CopyDuplicated(MutationOperator):
    name = "copy_duplicated"
    summary = "an upload issued twice"
    motivation = "a half-done merge that still calls the old helper: a second transfer on " \
                 "every step"

    def block(self, owner, stmts):
        for j, stmt in enumerate(stmts):
            if _is_copy_stmt(stmt) and self.hit(
                    stmt, f"{_src(stmt.value.func.value)}.copy_to_gpu issued twice"):
                return stmts[:j + 1] + [copy.deepcopy(stmt)] + stmts[j + 1:]
        return stmts


class _AssertOperator(MutationOperator):
    def can_fire(self, node: ast.Assert) -> bool:
        """Whether the assertion can fail on an input that can happen."""
        return not _is_none_check(node) or self.scope.takes_flag


class AssertDropped(_AssertOperator):
    name = "assert_dropped"
    summary = "an assertion deleted"
    motivation = "\"the dict lookup raises anyway\": the missing-index error becomes a " \
                 "KeyError without the request's story"

    def block(self, owner, stmts):
        for j, stmt in enumerate(stmts):
            if isinstance(stmt, ast.Assert):
                reason = None if self.can_fire(stmt) else REASON_NONE_CHECK
                if self.hit(stmt, f"assert {_src(stmt.test)} removed", reason):
                    return stmts[:j] + stmts[j + 1:]
        return stmts


class AssertWeakened(_AssertOperator):
    name = "assert_weakened"
    summary = "an assertion's message no longer names the request (f-string placeholders " \
              "dropped)"
    motivation = "messages get shortened in refactors; logs and on-call then lose the " \
                 "request id"

    def visit_Assert(self, node):
        self.generic_visit(node)
        msg = node.msg
        if isinstance(msg, ast.JoinedStr) and any(isinstance(v, ast.FormattedValue)
                                                  for v in msg.values):
            named = ", ".join(_src(v.value) for v in msg.values
                              if isinstance(v, ast.FormattedValue))
            if self.hit(node, f"message of assert {_src(node.test)} no longer names {named}"):
                text = "".join(v.value for v in msg.values if isinstance(v, ast.Constant))
                node.msg = ast.Constant(" ".join(text.split()))
        return node


class AssertMoved(_AssertOperator):
    name = "assert_moved"
    summary = "an assertion moved below the statement after it"
    motivation = "validation placed after the write it guards: the lookup fails first, " \
                 "with another exception"

    def block(self, owner, stmts):
        for j, stmt in enumerate(stmts):
            if not isinstance(stmt, ast.Assert) or not self.can_fire(stmt):
                continue
            nxt = next((k for k in range(j + 1, len(stmts))
                        if not isinstance(stmts[k], ast.Assert)), None)
            if nxt is not None and self.hit(
                    stmt, f"assert {_src(stmt.test)} moved below line {stmts[nxt].lineno}"):
                return stmts[:j] + stmts[j + 1:nxt + 1] + [stmt] + stmts[nxt + 1:]
        return stmts


class ExceptionType(_AssertOperator):
    name = "exception_type"
    summary = "`assert C, msg` becomes `if not C: raise RuntimeError(msg)` (or KeyError)"
    motivation = "assertions rewritten as explicit raises (asserts vanish under -O) with " \
                 "another exception type than callers catch"

    def block(self, owner, stmts):
        for j, stmt in enumerate(stmts):
            if not isinstance(stmt, ast.Assert) or not self.can_fire(stmt):
                continue
            for exc in ("RuntimeError", "KeyError"):
                if self.hit(stmt, f"assert {_src(stmt.test)} raises {exc} instead of "
                                  "AssertionError"):
                    args = [stmt.msg] if stmt.msg is not None else []
                    new = ast.If(test=ast.UnaryOp(ast.Not(), stmt.test),
                                 body=[ast.Raise(ast.Call(ast.Name(exc, ast.Load()), args, []),
                                                 None)], orelse=[])
                    return stmts[:j] + [ast.copy_location(new, stmt)] + stmts[j + 1:]
        return stmts


def _is_get(node: ast.AST) -> bool:
    return (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
            and node.func.attr == "get" and 1 <= len(node.args) <= 2 and not node.keywords)


def _complete_dict_reason(dict_expr: ast.AST) -> str | None:
    what = CONTRACT_COMPLETE.get(_last_name(dict_expr) or "")
    return REASON_COMPLETE_DICT.format(what=what) if what else None


class GetToIndex(MutationOperator):
    name = "get_to_index"
    summary = "`d[k]` for `d.get(k, default)`"
    motivation = "\"every request has an entry\": not so for scheduled_spec_decode_tokens, " \
                 "where a request without drafts is absent"

    def visit_Call(self, node):
        self.generic_visit(node)
        if _is_get(node) and self.hit(node, f"{_src(node.func.value)}[{_src(node.args[0])}] "
                                            f"instead of {_src(node)}",
                                      _complete_dict_reason(node.func.value)):
            return ast.Subscript(node.func.value, node.args[0], ast.Load())
        return node


class IndexToGet(MutationOperator):
    name = "index_to_get"
    summary = "`d.get(k, 0)` (or `d.get(k)` before an attribute) for `d[k]`"
    motivation = "a lookup softened to a default: a missing entry silently stages 0"

    def __init__(self, scope, target=None):
        super().__init__(scope, target)
        self.guards: list[tuple[str, str, int, str]] = []   # (key, dict, line, text)
        self.parents: dict[int, ast.AST] = {}

    def run(self, tree):
        for node in ast.walk(tree):
            for child in ast.iter_child_nodes(node):
                self.parents[id(child)] = node
        return super().run(tree)

    def visit_For(self, node):
        pushed = 0
        for stmt in node.body:
            t = getattr(stmt, "test", None) if isinstance(stmt, ast.Assert) else None
            if isinstance(t, ast.Compare) and len(t.ops) == 1 and isinstance(t.ops[0], ast.In):
                self.guards.append((ast.dump(t.left), ast.dump(t.comparators[0]), stmt.lineno,
                                    _src(t)))
                pushed += 1
        try:
            return self._visit_owner(node)
        finally:
            del self.guards[len(self.guards) - pushed:]

    def visit_Subscript(self, node):
        parent = self.parents.get(id(node))
        self.generic_visit(node)
        key, value = node.slice, node.value
        if (not isinstance(node.ctx, ast.Load) or not isinstance(key, ast.Name)
                or key.id in self.index_names or _last_name(value) in ("np", "cpu", "gpu")):
            return node
        reason = _complete_dict_reason(value)
        for k, d, line, text in self.guards:
            if k == ast.dump(key) and d == ast.dump(value) and line < node.lineno:
                reason = REASON_GUARDED.format(guard=text, line=line)
        default = None if isinstance(parent, ast.Attribute) else 0
        call = ast.Call(ast.Attribute(value, "get", ast.Load()),
                        [key] + ([ast.Constant(default)] if default is not None else []), [])
        if self.hit(node, f"{_src(call)} instead of {_src(node)}", reason):
            return call
        return node


class GetToPop(MutationOperator):
    name = "get_to_pop"
    summary = "`d.pop(k, default)` for `d.get(k, default)`: the input is consumed"
    motivation = "\"the drafts are used once\": popping mutates the scheduler output that " \
                 "later stages read"

    def visit_Call(self, node):
        self.generic_visit(node)
        if _is_get(node) and self.hit(node, f"{_src(node.func.value)}.pop(...) instead of "
                                            f"{_src(node)}"):
            node.func.attr = "pop"
        return node


def _ctx_chain(node: ast.AST) -> bool:
    while isinstance(node, ast.Attribute):
        node = node.value
    return isinstance(node, ast.Name) and node.id == "ctx"


class SwappedViews(MutationOperator):
    name = "swapped_views"
    summary = "two buffer aliases bound to each other's buffer (`scheduled = ctx." \
              "num_computed_tokens_buf...`)"
    motivation = "copy-paste when the helper binds its local aliases; every slot then " \
                 "holds another field's value"

    def block(self, owner, stmts):
        aliases = [j for j, s in enumerate(stmts)
                   if isinstance(s, ast.Assign) and len(s.targets) == 1
                   and isinstance(s.targets[0], ast.Name) and isinstance(s.value, ast.Attribute)
                   and _ctx_chain(s.value)]
        for a in range(len(aliases)):
            for b in range(a + 1, len(aliases)):
                x, y = stmts[aliases[a]], stmts[aliases[b]]
                if ast.dump(x.value) == ast.dump(y.value):
                    continue
                if self.hit(x, f"{x.targets[0].id} and {y.targets[0].id} swap buffers "
                               f"({_src(x.value)} <-> {_src(y.value)})"):
                    x.value, y.value = y.value, x.value
                    return stmts
        return stmts


def _slot_write(stmt: ast.stmt, index_names: set[str]) -> bool:
    """``V[i] = E`` with ``i`` a slot index."""
    return (isinstance(stmt, ast.Assign) and len(stmt.targets) == 1
            and isinstance(stmt.targets[0], ast.Subscript)
            and isinstance(stmt.targets[0].slice, ast.Name)
            and stmt.targets[0].slice.id in index_names)


class CarriedOver(MutationOperator):
    name = "carried_over"
    summary = "a slot's value kept in a variable refreshed only when non-zero, so slot " \
              "i inherits slot i-1's value"
    motivation = "`if req_id in spec_tokens: n = len(...)` with `n` set before the loop: " \
                 "a request without drafts gets the previous request's count"

    def block(self, owner, stmts):
        for k, loop in enumerate(stmts):
            if not isinstance(loop, ast.For):
                continue
            for m, stmt in enumerate(loop.body):
                if not _slot_write(stmt, self.index_names):
                    continue
                if self.hit(stmt, f"{_src(stmt.targets[0])} keeps the previous slot's value "
                                  f"when {_src(stmt.value)} is 0"):
                    carry = ast.Name(_CARRY, ast.Store())
                    refresh = ast.Assign([carry], ast.BoolOp(ast.Or(), [
                        stmt.value, ast.Name(_CARRY, ast.Load())]))
                    write = ast.Assign(stmt.targets, ast.Name(_CARRY, ast.Load()))
                    loop.body = loop.body[:m] + [refresh, write] + loop.body[m + 1:]
                    init = ast.Assign([ast.Name(_CARRY, ast.Store())], ast.Constant(0))
                    return stmts[:k] + [init] + stmts[k:]
        return stmts


class DtypeNarrowing(MutationOperator):
    name = "dtype_narrowing"
    summary = "a slot value passed through an int16 temporary (wraps above 32,767)"
    motivation = "\"token counts of a step fit in 16 bits\": long-context counts and " \
                 "large state indices then wrap"
    prelude = f"import numpy as {_NP}"

    def visit_Assign(self, node):
        self.generic_visit(node)
        if _slot_write(node, self.index_names):
            v = node.value
            reason = (REASON_BOUNDED_LEN if isinstance(v, ast.Call) and isinstance(
                v.func, ast.Name) and v.func.id == "len" else None)
            if self.hit(node, f"{_src(node.targets[0])} = {_src(v)} through int16", reason):
                np_ = ast.Name(_NP, ast.Load())
                arr = ast.Call(ast.Attribute(np_, "asarray", ast.Load()), [v], [
                    ast.keyword("dtype", ast.Attribute(ast.Name(_NP, ast.Load()), "int64",
                                                       ast.Load()))])
                narrow = ast.Call(ast.Attribute(arr, "astype", ast.Load()),
                                  [ast.Attribute(ast.Name(_NP, ast.Load()), "int16",
                                                 ast.Load())], [])
                node.value = ast.Call(ast.Name("int", ast.Load()), [narrow], [])
        return node


class PostStepCount(MutationOperator):
    name = "post_step_count"
    summary = "`computed` staged from the post-step count `num_computed_tokens + " \
              "num_scheduled_tokens[r]`"
    motivation = "the request state is updated in the same step; reading it after the " \
                 "update gives the post-step count, which the kernel adds again"

    def visit_Attribute(self, node):
        self.generic_visit(node)
        if (node.attr == "num_computed_tokens" and isinstance(node.ctx, ast.Load)
                and isinstance(node.value, ast.Subscript)
                and "scheduler_output" in _params(self.fn)):
            key = node.value.slice
            sched = ast.Subscript(ast.Attribute(ast.Name("scheduler_output", ast.Load()),
                                                "num_scheduled_tokens", ast.Load()),
                                  copy.deepcopy(key), ast.Load())
            if self.hit(node, f"{_src(node)} + {_src(sched)} (post-step count)"):
                return ast.BinOp(node, ast.Add(), sched)
        return node


class NonBlockingToggled(MutationOperator):
    name = "non_blocking_toggled"
    summary = "`non_blocking` flipped: an explicit `non_blocking=` keyword, or an upload " \
              "made blocking (`copy_to_gpu` then wait for the copy)"
    motivation = "toggled to debug a race or to 'be safe'; on CUDA one direction costs a " \
                 "sync, the other opens a write-after-copy hazard"
    prelude = (f"import torch as _stagecheck_torch\n\n"
               f"def {_BLOCKING_COPY}(buffer, *args, **kwargs):\n"
               f"    out = buffer.copy_to_gpu(*args, **kwargs)\n"
               f"    if _stagecheck_torch.cuda.is_available():\n"
               f"        _stagecheck_torch.cuda.synchronize()\n"
               f"    return out\n")

    def visit_Call(self, node):
        self.generic_visit(node)
        for kw in node.keywords:
            if kw.arg == "non_blocking" and isinstance(kw.value, ast.Constant) \
                    and isinstance(kw.value.value, bool):
                now = not kw.value.value
                if self.hit(node, f"non_blocking={now} in {_src(node)}",
                            REASON_NONBLOCKING_ON if now else REASON_BLOCKING):
                    kw.value = ast.Constant(now)
                    return node
        if _is_copy_call(node) and self.hit(
                node, f"{_src(node)} made blocking (non_blocking=False)", REASON_BLOCKING):
            return ast.Call(ast.Name(_BLOCKING_COPY, ast.Load()),
                            [node.func.value, *node.args], node.keywords)
        return node


class EarlyReturn(MutationOperator):
    name = "early_return"
    summary = "`if num_reqs == 0: return` added at the top of a function"
    motivation = "an 'optimisation' for empty batches that skips the (empty) uploads the " \
                 "contract requires"

    def visit_FunctionDef(self, node):
        node = self._visit_owner(node)
        if "num_reqs" in _params(node) and self.hit(
                node, f"{node.name} returns early when num_reqs == 0"):
            start = 1 if (node.body and isinstance(node.body[0], ast.Expr)
                          and isinstance(node.body[0].value, ast.Constant)
                          and isinstance(node.body[0].value.value, str)) else 0
            guard = ast.If(ast.Compare(ast.Name("num_reqs", ast.Load()), [ast.Eq()],
                                       [ast.Constant(0)]), [ast.Return(None)], [])
            node.body = node.body[:start] + [guard] + node.body[start:]
        return node


#: The catalog, in report order.
CATALOG: tuple[type[MutationOperator], ...] = (
    FullReqIds, LoopBoundOffByOne, CopyLengthOffByOne, CopyLengthPadded, WholeBufferCopy,
    CopyHoisted, CopyDropped, CopyDuplicated, AssertDropped, AssertWeakened, AssertMoved,
    ExceptionType, GetToIndex, IndexToGet, GetToPop, SwappedViews, CarriedOver,
    DtypeNarrowing, PostStepCount, NonBlockingToggled, EarlyReturn,
)
OPERATORS = {op.name: op for op in CATALOG}


# --------------------------------------------------------------------------------------
# Sources and generation
# --------------------------------------------------------------------------------------

def target_source(spec: str, arg: str = "TARGET") -> tuple[str, str, str]:
    """``(source, filename, function name)`` of a target specification.

    Builtin names and ``package.module:function`` read the module's file; file targets
    read the file; ``git:REV:file.py::f`` reads the file at that revision.
    """
    from oracles import messages
    from oracles.errors import TargetLoadError
    from oracles.targets import BUILTINS, read_file_target
    if spec in BUILTINS or (":" in spec and "::" not in spec and not spec.startswith("git:")
                            and not spec.endswith(".py")):
        dotted = BUILTINS.get(spec, spec)
        module_name, _, name = dotted.partition(":")
        try:
            module = importlib.import_module(module_name)
        except Exception as exc:
            raise TargetLoadError(messages.TARGET_MODULE_MISSING.format(
                arg=arg, module=module_name, value=spec, error=f"{type(exc).__name__}: {exc}",
                name=name)) from None
        filename = inspect.getsourcefile(module)
        if filename is None or "." in name:
            raise TargetLoadError(
                f"argument {arg}: {spec!r} has no Python source file with a module-level "
                f"function {name!r} to mutate; give 'path/to/file.py::function'")
        with open(filename, encoding="utf-8") as fh:
            return fh.read(), filename, name
    if spec.startswith("git:") or "::" in spec:
        source, filename, name, _ = read_file_target(spec, arg)
        return source, filename, name
    from oracles.targets import load_target
    load_target(spec, arg)   # raises the usual message for anything else
    raise TargetLoadError(f"argument {arg}: cannot read the source of {spec!r}")


def functions_in_scope(tree: ast.Module, name: str) -> tuple[str, ...]:
    """``name`` and the module-level functions it calls, transitively (source order)."""
    defs = {n.name: n for n in tree.body if isinstance(n, ast.FunctionDef)}
    seen, queue = set(), [name]
    while queue:
        current = queue.pop()
        if current in seen or current not in defs:
            continue
        seen.add(current)
        for node in ast.walk(defs[current]):
            if isinstance(node, ast.Name) and node.id in defs:
                queue.append(node.id)
    return tuple(n.name for n in tree.body if isinstance(n, ast.FunctionDef) and n.name in seen)


def _with_prelude(tree: ast.Module, prelude: str) -> ast.Module:
    if not prelude:
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


def generate_mutants(source: str, filename: str, function: str, takes_flag: bool = False,
                     operators: Sequence[str] | None = None) -> list[Mutant]:
    """Every mutant of ``function`` (and its helpers) in ``source``, catalog order."""
    tree = ast.parse(source, filename)
    scope = Scope(functions_in_scope(tree, function), takes_flag)
    if function not in scope.functions:
        raise UsageError(f"argument TARGET: {filename!r} has no module-level function "
                         f"{function!r} to mutate")
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
            reason = site.equivalent_reason or EQUIVALENT_MUTANTS.get(
                (op_class.name, loc.function, loc.line))
            mid = f"m{len(out) + 1:02d}"
            diff = "".join(difflib.unified_diff(
                original.splitlines(True), text.splitlines(True),
                fromfile=f"{os.path.basename(filename)}", tofile=f"{mid}", n=2))
            out.append(Mutant(mid, op_class.name, loc, site.description, text, diff, filename,
                              function, reason))
    return out


# ======================================================================================
# The upstream-style baseline: two example-based tests
# ======================================================================================

_FOUR = ("mamba_state_idx_buf", "num_scheduled_tokens_buf", "num_computed_tokens_buf",
         "num_draft_tokens_buf")


class UpstreamTestFailure(AssertionError):
    """One of the upstream-style tests failed (as a pytest assertion would)."""


def _upstream_inputs(capacity: int = 8, takes_flag: bool = False):
    import torch

    from impl.buffer import CpuGpuBuffer
    ctx = SimpleNamespace()
    for name in _FOUR:
        buf = CpuGpuBuffer(capacity, torch.int32)
        buf.cpu.fill_(-1)          # negative sentinel: untouched slots show
        buf.gpu.fill_(-1)
        setattr(ctx, name, buf)
    if takes_flag:
        ctx.is_prefilling_buf = CpuGpuBuffer(capacity, torch.bool)
    req_ids = ["req-0", "req-1", "req-2", "req-pad"]      # one trailing padded id
    scheduler_output = SimpleNamespace(
        num_scheduled_tokens={"req-0": 3, "req-1": 1, "req-2": 2},
        scheduled_spec_decode_tokens={"req-0": [101, 102], "req-2": [103]})   # req-1: none
    requests = {r: SimpleNamespace(num_computed_tokens=c, num_prompt_tokens=5)
                for r, c in (("req-0", 10), ("req-1", 20), ("req-2", 30))}
    mamba_state_idx = {"req-0": 2, "req-1": 5, "req-2": 7}
    return ctx, scheduler_output, req_ids, 3, requests, mamba_state_idx


def _call(func, args, takes_flag: bool):
    kwargs = {"run_prefix_state_migration": True} if takes_flag else {}
    return func(*args, **kwargs)


def upstream_example_test(func: Callable, takes_flag: bool = False) -> None:
    """Stage three requests (one without drafts) plus a padded id into sentinel buffers.

    Checks the live slots of the four buffers, that the CPU tails keep the sentinel,
    and the GPU mirrors of the state-index and scheduled-token buffers. Raises
    (``UpstreamTestFailure`` or whatever the staging call raised) when it fails.
    """
    import torch
    args = _upstream_inputs(takes_flag=takes_flag)
    ctx = args[0]
    _call(func, args, takes_flag)
    expected = {"mamba_state_idx_buf": [2, 5, 7], "num_scheduled_tokens_buf": [3, 1, 2],
                "num_computed_tokens_buf": [10, 20, 30], "num_draft_tokens_buf": [2, 0, 1]}
    for name, want in expected.items():
        buf = getattr(ctx, name)
        if buf.np[:3].tolist() != want:
            raise UpstreamTestFailure(f"{name} live slots {buf.np[:3].tolist()} != {want}")
        if (buf.np[3:] != -1).any():
            raise UpstreamTestFailure(f"{name} CPU tail {buf.np[3:].tolist()} lost the sentinel")
    for name in ("mamba_state_idx_buf", "num_scheduled_tokens_buf"):
        buf = getattr(ctx, name)
        want = torch.tensor(expected[name], dtype=torch.int32)
        if not torch.equal(buf.gpu[:3].cpu(), want):
            raise UpstreamTestFailure(f"{name} GPU mirror {buf.gpu[:3].tolist()} != "
                                      f"{want.tolist()}")


def upstream_missing_index_test(func: Callable, takes_flag: bool = False) -> None:
    """A live request without a state index must raise AssertionError."""
    args = list(_upstream_inputs(takes_flag=takes_flag))
    del args[5]["req-1"]
    try:
        _call(func, args, takes_flag)
    except AssertionError:
        return
    except Exception as exc:
        raise UpstreamTestFailure(f"expected AssertionError, got {type(exc).__name__}: "
                                  f"{exc}") from None
    raise UpstreamTestFailure("DID NOT RAISE AssertionError for a missing state index")


UPSTREAM_TESTS = (("example", upstream_example_test), ("missing-index",
                                                       upstream_missing_index_test))


# ======================================================================================
# Running the oracles
# ======================================================================================

@dataclass
class OracleOutcome:
    status: str                      # killed | survived | n/a | inconclusive | error
    examples: int | None = None      # examples until the first error finding
    seconds: float = 0.0             # wall time of this oracle on this mutant
    kill_seconds: float | None = None   # symbolic: seconds to the first counterexample
    finding: str | None = None       # what killed it
    infos: list[str] = field(default_factory=list)   # info findings seen (survivors)
    note: str | None = None

    @property
    def killed(self) -> bool:
        return self.status == "killed"

    def cell(self) -> str:
        if self.status == "killed":
            if self.examples is not None:
                return f"✓ {self.examples}ex"
            if self.kill_seconds is not None:
                return f"✓ {self.kill_seconds:.1f}s"
            return f"✓ {self.note}" if self.note else "✓"
        return {"survived": "-", "n/a": "n/a", "inconclusive": "?", "error": "err"}[self.status]

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)


@dataclass
class MutantResult:
    mutant: Mutant
    outcomes: dict[str, OracleOutcome] = field(default_factory=dict)
    load_error: str | None = None

    def killed_by(self, oracles: Iterable[str]) -> list[str]:
        return [o for o in oracles if o in self.outcomes and self.outcomes[o].killed]

    @property
    def killed_by_stagecheck(self) -> bool:
        return bool(self.killed_by(STAGECHECK_ORACLES))

    @property
    def killed_by_any(self) -> bool:
        return bool(self.killed_by(ORACLES))

    @property
    def equivalent(self) -> bool:
        """Labeled equivalent (with a reason) and killed by no oracle."""
        return bool(self.mutant.equivalent_reason) and not self.killed_by_any

    @property
    def reason_withdrawn(self) -> bool:
        return bool(self.mutant.equivalent_reason) and self.killed_by_any

    def to_dict(self) -> dict:
        return {**self.mutant.to_dict(), "outcomes": {k: v.to_dict()
                                                      for k, v in self.outcomes.items()},
                "killed_by": self.killed_by(ORACLES), "equivalent": self.equivalent,
                "load_error": self.load_error}


@dataclass
class MutationReport:
    target: str
    filename: str
    function: str
    oracles: list[str]
    budget: int
    symbolic_timeout: float
    results: list[MutantResult] = field(default_factory=list)
    unavailable: dict[str, str] = field(default_factory=dict)   # oracle -> why n/a
    control: dict[str, str] = field(default_factory=dict)       # oracle -> unmutated verdict
    seconds: float = 0.0

    @property
    def ran(self) -> list[str]:
        return [o for o in self.oracles if o not in self.unavailable]

    @property
    def non_equivalent(self) -> list[MutantResult]:
        return [r for r in self.results if not r.equivalent]

    def score(self, oracles: Iterable[str]) -> tuple[int, int]:
        """(killed by any of ``oracles``, non-equivalent mutants)."""
        oracles = [o for o in oracles if o in self.ran]
        pool = self.non_equivalent
        return sum(1 for r in pool if r.killed_by(oracles)), len(pool)

    @property
    def stagecheck_score(self) -> tuple[int, int]:
        return self.score(STAGECHECK_ORACLES)

    @property
    def upstream_score(self) -> tuple[int, int]:
        return self.score(["upstream"])

    @property
    def survivors(self) -> list[MutantResult]:
        return [r for r in self.results if not r.killed_by_stagecheck]

    def all_killed(self) -> bool:
        killed, total = self.stagecheck_score
        return killed == total

    def to_dict(self) -> dict:
        def pct(pair):
            k, n = pair
            return {"killed": k, "total": n, "score": (k / n if n else 1.0)}
        return {
            "target": self.target, "filename": self.filename, "function": self.function,
            "oracles": self.oracles, "unavailable": self.unavailable, "budget": self.budget,
            "symbolic_timeout": self.symbolic_timeout, "control": self.control,
            "seconds": round(self.seconds, 2), "mutants": len(self.results),
            "equivalent": [r.mutant.id for r in self.results if r.equivalent],
            "scores": {**{o: pct(self.score([o])) for o in self.ran},
                       "stagecheck": pct(self.stagecheck_score),
                       "upstream_baseline": pct(self.upstream_score)},
            "results": [r.to_dict() for r in self.results],
        }


def _config_fields() -> dict:
    from oracles.differential import CampaignConfig
    return {f.name: f for f in dataclasses.fields(CampaignConfig)}


def _kernel_setting(on: bool):
    """The value of ``CampaignConfig.kernel`` that turns the kernel oracle on or off."""
    f = _config_fields().get("kernel")
    if f is None:
        return None
    if isinstance(f.default, bool):
        return on
    return "auto" if on else "off"


def _campaign_config(budget: int, kernel: bool = False, **extra):
    """A campaign of ``budget`` examples per stream; the kernel oracle only when asked."""
    from oracles.differential import CampaignConfig
    names = _config_fields()
    if "kernel" in names:
        extra["kernel"] = _kernel_setting(kernel)
    return CampaignConfig(examples=budget, **{k: v for k, v in extra.items() if k in names})


def kernel_available() -> str | None:
    """None when the kernel column can run, else why not."""
    if "kernel" not in _config_fields():
        return ("the differential runner has no kernel mode yet (CampaignConfig.kernel); "
                "the kernel column counts differential findings with kernel_impact=True")
    return None


def symbolic_available() -> str | None:
    try:
        mod = importlib.import_module("oracles.symbolic")
    except Exception as exc:
        return f"oracles.symbolic cannot be imported ({type(exc).__name__}: {exc})"
    if not hasattr(mod, "run_symbolic"):
        return "oracles.symbolic has no run_symbolic"
    return None


def _first_error(findings) -> str:
    f = findings[0]
    where = f"{f.field}" if f.field else ""
    return f"{f.invariant}{f' ({where})' if where else ''}: {f.message}"[:160]


def _difference_infos(findings) -> list[str]:
    """Info-level differences between the two sides (not either side's own spec infos),
    one per invariant, with why the difference is allowed."""
    seen: dict[str, str] = {}
    for f in findings:
        if f.severity != "error" and f.side == "both" and f.invariant not in seen:
            why = f.extra.get("context") or ""
            seen[f.invariant] = f"{f.invariant} ({why[:90]})" if why else f.invariant
    return [seen[k] for k in sorted(seen)]


def _from_campaign(result, started: float, only_kernel: bool = False) -> OracleOutcome:
    errors = result.errors
    if only_kernel:
        errors = [f for f in errors if f.kernel_impact is True]
    seconds = time.perf_counter() - started
    infos = _difference_infos(result.infos) if result.baseline is not None else []
    if not errors:
        return OracleOutcome("survived", seconds=seconds, infos=infos)
    counts = [f.examples_to_find for f in errors if f.examples_to_find is not None]
    return OracleOutcome("killed", examples=min(counts) if counts else None, seconds=seconds,
                         kill_seconds=None if counts else seconds, finding=_first_error(errors))


def _run_spec(original, mutant, budget, out_of_contract=True, **_) -> OracleOutcome:
    from oracles.differential import run_campaign
    started = time.perf_counter()
    config = _campaign_config(budget, out_of_contract=out_of_contract)
    return _from_campaign(run_campaign(None, mutant, config), started)


def _run_differential(original, mutant, budget, out_of_contract=True, **_) -> tuple:
    from oracles.differential import run_campaign
    started = time.perf_counter()
    result = run_campaign(original, mutant,
                          _campaign_config(budget, out_of_contract=out_of_contract))
    return _from_campaign(result, started), result


def _run_kernel(original, mutant, budget, **_) -> OracleOutcome:
    """Differential findings that reach the postprocess kernel (in-contract stream only:
    the kernel's verdict matters where the staging contract holds)."""
    from oracles.differential import run_campaign
    started = time.perf_counter()
    result = run_campaign(original, mutant,
                          _campaign_config(budget, kernel=True, out_of_contract=False))
    return _from_campaign(result, started, only_kernel=True)


def _run_symbolic(original, mutant, budget, symbolic_timeout=DEFAULT_SYMBOLIC_TIMEOUT, **_):
    from oracles import symbolic
    started = time.perf_counter()
    kwargs = {}
    params = inspect.signature(symbolic.run_symbolic).parameters
    if "stop_at_first_error" in params:
        kwargs["stop_at_first_error"] = True
    inconclusive = getattr(symbolic, "SymbolicInconclusive", None)
    note = None
    try:
        result = symbolic.run_symbolic(original, mutant, timeout=symbolic_timeout,
                                       max_capacity=SYMBOLIC_MAX_CAPACITY, **kwargs)
    except Exception as exc:
        if inconclusive is None or not isinstance(exc, inconclusive):
            raise
        result = getattr(exc, "result", None)
        note = str(exc)[:200]
        if result is None or not [f for f in result.findings if f.severity == "error"]:
            return OracleOutcome("inconclusive", seconds=time.perf_counter() - started,
                                 note=note)
    seconds = time.perf_counter() - started
    errors = [f for f in result.findings if f.severity == "error"]
    infos = _difference_infos(result.findings)
    if not errors:
        return OracleOutcome("survived", seconds=seconds, infos=infos, note=note)
    first = getattr(result, "first_counterexample_seconds", None)
    return OracleOutcome("killed", seconds=seconds,
                         kill_seconds=first if first is not None else seconds,
                         finding=_first_error(errors), note=note)


def _run_upstream(original, mutant, budget, **_) -> OracleOutcome:
    from oracles.run import CallTimedOut, time_limit
    started = time.perf_counter()
    takes_flag = mutant.profile.takes_flag
    for label, test in UPSTREAM_TESTS:
        try:
            with time_limit(5.0):
                test(mutant.func, takes_flag)
        except (KeyboardInterrupt, SystemExit):
            raise
        except BaseException as exc:   # a failing test, a crash, or a hang (CallTimedOut)
            what = "hang" if isinstance(exc, CallTimedOut) else f"{type(exc).__name__}: {exc}"
            return OracleOutcome("killed", seconds=time.perf_counter() - started, note=label,
                                 finding=f"test {label} fails: {what}"[:160])
    return OracleOutcome("survived", seconds=time.perf_counter() - started)


def evaluate_mutant(original, mutant: Mutant, oracles: Sequence[str], budget: int,
                    symbolic_timeout: float, unavailable: dict[str, str],
                    out_of_contract: bool = True) -> MutantResult:
    """Run every chosen oracle on one mutant."""
    from oracles.targets import Target
    result = MutantResult(mutant)
    try:
        func = mutant.load()
    except StagecheckError as exc:
        result.load_error = str(exc)
        for o in oracles:
            result.outcomes[o] = OracleOutcome("error", note=f"mutant does not load: {exc}")
        return result
    target = Target(f"{original.spec}@{mutant.id}", func, original.profile,
                    f"mutant {mutant.id} ({mutant.operator}) of {original.origin}")
    for oracle in oracles:
        if oracle in unavailable:
            result.outcomes[oracle] = OracleOutcome("n/a", note=unavailable[oracle])
    if "spec" in oracles and "spec" not in unavailable:
        result.outcomes["spec"] = _guard(_run_spec, original, target, budget,
                                         out_of_contract=out_of_contract)
    if "differential" in oracles:
        result.outcomes["differential"] = _guard(
            lambda *a, **k: _run_differential(*a, **k)[0], original, target, budget,
            out_of_contract=out_of_contract)
    if "kernel" in oracles and "kernel" not in unavailable:
        result.outcomes["kernel"] = _guard(_run_kernel, original, target, budget)
    if "symbolic" in oracles and "symbolic" not in unavailable:
        result.outcomes["symbolic"] = _guard(_run_symbolic, original, target, budget,
                                             symbolic_timeout=symbolic_timeout)
    if "upstream" in oracles:
        result.outcomes["upstream"] = _run_upstream(original, target, budget)
    return result


def _guard(fn, *args, **kwargs) -> OracleOutcome:
    started = time.perf_counter()
    try:
        return fn(*args, **kwargs)
    except (KeyboardInterrupt, SystemExit):
        raise
    except Exception as exc:
        return OracleOutcome("error", seconds=time.perf_counter() - started,
                             note=f"{type(exc).__name__}: {exc}"[:200])


_WORKER_TARGETS: dict[str, object] = {}


def _worker(payload) -> MutantResult:
    """Process-pool entry point: one mutant, everything else from the payload."""
    from oracles.targets import load_target
    spec, mutant, oracles, budget, symbolic_timeout, unavailable, out_of_contract = payload
    preload_project_modules()
    if spec not in _WORKER_TARGETS:
        _WORKER_TARGETS[spec] = load_target(spec)
    return evaluate_mutant(_WORKER_TARGETS[spec], mutant, oracles, budget, symbolic_timeout,
                           unavailable, out_of_contract)


def check_oracles(oracles: Sequence[str]) -> list[str]:
    unknown = [o for o in oracles if o not in ORACLES]
    if unknown or not oracles:
        raise UsageError(
            f"option --oracles: {', '.join(unknown) or '(empty)'!s} is not an oracle; choose "
            f"from {', '.join(ORACLES)} (comma-separated, e.g. --oracles spec,differential)")
    return [o for o in ORACLES if o in oracles]


def run_mutants(target_spec: str, oracles: Sequence[str] = ORACLES, budget: int = DEFAULT_BUDGET,
                symbolic_timeout: float = DEFAULT_SYMBOLIC_TIMEOUT,
                progress: Callable[[MutantResult, int, int], None] | None = None,
                operators: Sequence[str] | None = None, jobs: int = 1,
                control: bool = True, out_of_contract: bool = True) -> MutationReport:
    """Apply every operator to ``target_spec`` and run each oracle on each mutant.

    ``budget`` is the examples per stream of the spec and differential campaigns;
    ``symbolic_timeout`` the seconds of symbolic search per mutant. With ``jobs`` > 1
    mutants run in that many worker processes. ``control`` first checks the unmutated
    source (reloaded the way mutants are) against the spec and the original target,
    so a kill is never an artefact of the reloading. ``out_of_contract=False`` skips the
    campaigns' stream of inputs that should not happen: it can only give info findings,
    so kills are the same, but survivors then show no info differences.
    """
    from oracles.targets import Target, load_target
    oracles = check_oracles(list(oracles))
    if budget < 1:
        raise UsageError(f"option --budget: {budget!r} is not a whole number >= 1; give e.g. "
                         f"--budget {DEFAULT_BUDGET}")
    unknown = [o for o in (operators or ()) if o not in OPERATORS]
    if unknown:
        raise UsageError(f"option --operators: {', '.join(unknown)} is not an operator; choose "
                         f"from {', '.join(OPERATORS)}")
    started = time.perf_counter()
    preload_project_modules()
    original = load_target(target_spec)
    source, filename, function = target_source(target_spec)
    mutants = generate_mutants(source, filename, function, original.profile.takes_flag,
                               operators)
    report = MutationReport(target_spec, filename, function, oracles, budget, symbolic_timeout)
    if "kernel" in oracles and (why := kernel_available()):
        report.unavailable["kernel"] = why
    if "symbolic" in oracles and (why := symbolic_available()):
        report.unavailable["symbolic"] = why
    if control:
        from oracles.differential import run_campaign
        from oracles.targets import load_function_from_source
        unparsed = ast.unparse(ast.parse(source))
        func = load_function_from_source(unparsed, f"<stagecheck unmutated {filename}>",
                                         function)
        reloaded = Target(f"{target_spec}@unmutated", func, original.profile, "unmutated")
        if "spec" in oracles:
            r = run_campaign(None, reloaded, _campaign_config(budget))
            report.control["spec"] = (f"{len(r.errors)} error finding(s)" if r.errors
                                      else "clean")
        if "differential" in oracles:
            r = run_campaign(original, reloaded, _campaign_config(budget))
            report.control["differential"] = (f"{len(r.errors)} error finding(s)" if r.errors
                                              else "clean")
        if "upstream" in oracles:
            u = _run_upstream(original, reloaded, budget)
            report.control["upstream"] = "passes" if not u.killed else f"FAILS: {u.finding}"
    total = len(mutants)
    if jobs > 1 and total > 1:
        import multiprocessing
        from concurrent.futures import ProcessPoolExecutor
        ctx = multiprocessing.get_context("spawn")
        payloads = [(target_spec, m, oracles, budget, symbolic_timeout, report.unavailable,
                     out_of_contract) for m in mutants]
        with ProcessPoolExecutor(max_workers=jobs, mp_context=ctx) as pool:
            for k, res in enumerate(pool.map(_worker, payloads), 1):
                report.results.append(res)
                if progress:
                    progress(res, k, total)
    else:
        for k, m in enumerate(mutants, 1):
            res = evaluate_mutant(original, m, oracles, budget, symbolic_timeout,
                                  report.unavailable, out_of_contract)
            report.results.append(res)
            if progress:
                progress(res, k, total)
    report.seconds = time.perf_counter() - started
    return report


# ======================================================================================
# The report
# ======================================================================================

def _pct(pair: tuple[int, int]) -> str:
    k, n = pair
    return f"{k}/{n} = {100.0 * k / n:.0f}%" if n else "0/0"


def format_kill_matrix(report: MutationReport, diffs: bool = True) -> str:
    """The kill matrix, the scores (stagecheck next to the upstream baseline), survivors."""
    lines: list[str] = []
    n = len(report.results)
    lines.append(f"stagecheck mutants {report.target}: {n} mutant(s) of {report.function} "
                 f"and its helpers ({os.path.basename(report.filename)}), "
                 f"{len({r.mutant.operator for r in report.results})} operator(s)")
    lines.append(f"budget {report.budget} examples per stream (spec, differential), "
                 f"symbolic {report.symbolic_timeout:g} s per mutant (capacity <= "
                 f"{SYMBOLIC_MAX_CAPACITY}); {report.seconds:.0f} s in all")
    for o, why in report.unavailable.items():
        lines.append(f"{o}: n/a ({why})")
    if report.control:
        lines.append("control (the unmutated source, reloaded as mutants are): " + ", ".join(
            f"{k} {v}" for k, v in report.control.items()))
    lines.append("cells: ✓ Nex = killed after N generated examples; ✓ N.Ns = seconds to the "
                 "first counterexample; ✓ test = the failing upstream test; - = survived; "
                 "? = inconclusive; n/a = oracle not available")
    lines.append("")
    cols = report.oracles
    header = ["id", "operator", "location"] + cols + ["equiv."]
    rows = []
    for r in report.results:
        m = r.mutant
        rows.append([m.id, m.operator, str(m.location)]
                    + [r.outcomes[o].cell() if o in r.outcomes else "" for o in cols]
                    + ["yes" if r.equivalent else ("withdrawn" if r.reason_withdrawn else "")])
    widths = [max(len(str(x)) for x in col) for col in zip(header, *rows)] if rows else \
        [len(h) for h in header]

    def fmt(row):
        return " | ".join(str(x).ljust(w) for x, w in zip(row, widths)).rstrip()
    lines.append(fmt(header))
    lines.append("-+-".join("-" * w for w in widths))
    lines.extend(fmt(row) for row in rows)
    lines.append("")
    equivalent = [r for r in report.results if r.equivalent]
    lines.append(f"mutation score (killed / non-equivalent; {len(equivalent)} equivalent "
                 "mutant(s) excluded, each with its reason below):")
    sc = [o for o in STAGECHECK_ORACLES if o in report.ran]
    scored = [(o, report.score([o])) for o in sc]
    scored.append(("STAGECHECK (any of " + ", ".join(sc) + ")", report.stagecheck_score))
    if "upstream" in report.ran:
        scored.append(("UPSTREAM BASELINE (the two example tests)", report.upstream_score))
    width = max(len(label) for label, _ in scored)
    for label, pair in scored:
        lines.append(f"  {label:<{width}}  {_pct(pair)}")
    if "upstream" in report.ran:
        only = [r.mutant.id for r in report.non_equivalent
                if r.killed_by_stagecheck and not r.killed_by(["upstream"])]
        rev = [r.mutant.id for r in report.non_equivalent
               if r.killed_by(["upstream"]) and not r.killed_by_stagecheck]
        lines.append(f"  killed by stagecheck, missed by the upstream tests: "
                     f"{', '.join(only) or 'none'}")
        lines.append(f"  killed by the upstream tests, missed by stagecheck: "
                     f"{', '.join(rev) or 'none'}")
    withdrawn = [r for r in report.results if r.reason_withdrawn]
    if withdrawn:
        lines.append("")
        lines.append("equivalence reasons withdrawn (the mutant was killed, so it is not "
                     "equivalent):")
        for r in withdrawn:
            lines.append(f"  {r.mutant.id} killed by {', '.join(r.killed_by(ORACLES))}; "
                         f"claimed: {r.mutant.equivalent_reason}")
    survivors = report.survivors
    lines.append("")
    lines.append(f"survivors of every stagecheck oracle: {len(survivors)}"
                 + (" (all labeled equivalent)" if survivors and all(
                     r.equivalent for r in survivors) else ""))
    for r in survivors:
        m = r.mutant
        lines.append("")
        lines.append(f"{m.id} {m.operator} at {m.location} (col {m.location.col}): "
                     f"{m.description}")
        if r.equivalent:
            lines.append(f"  EQUIVALENT: {m.equivalent_reason}")
        elif r.killed_by(["upstream"]):
            lines.append("  NOT EQUIVALENT: killed by the upstream tests only ("
                         f"{r.outcomes['upstream'].finding})")
        else:
            lines.append("  NOT EQUIVALENT (no reason): a gap in stagecheck's oracles")
        if r.load_error:
            lines.append(f"  load error: {r.load_error}")
        for o, out in r.outcomes.items():
            if out.infos:
                lines.append(f"  {o}: differences seen, info only: " + "; ".join(out.infos))
        for o, out in r.outcomes.items():
            if out.status in ("inconclusive", "error"):
                lines.append(f"  {o}: {out.status}: {out.note}")
        if diffs:
            lines.extend("    " + line for line in m.diff.rstrip("\n").splitlines())
    return "\n".join(lines)


# ======================================================================================
# Command entry points
# ======================================================================================

def _stderr_progress(res: MutantResult, done: int, total: int) -> None:
    cells = " ".join(f"{o}={out.cell()}" for o, out in res.outcomes.items())
    sys.stderr.write(f"[{done}/{total}] {res.mutant.id} {res.mutant.operator} "
                     f"{res.mutant.location}: {cells}\n")
    sys.stderr.flush()


def mutants_command(target: str, oracles: list[str] | None, budget: int, json_path: str | None,
                    symbolic_timeout: float = DEFAULT_SYMBOLIC_TIMEOUT, jobs: int = 1,
                    operators: Sequence[str] | None = None, out=None,
                    progress: bool = True, out_of_contract: bool = True) -> int:
    """``stagecheck mutants``: print the kill matrix; 0 when every non-equivalent mutant
    is killed by some stagecheck oracle, 1 otherwise. Raises ``UsageError`` on bad options."""
    oracles = check_oracles(list(oracles) if oracles else list(ORACLES))
    if json_path:
        try:
            with open(json_path, "a", encoding="utf-8"):
                pass
        except OSError as exc:
            raise UsageError(f"option --json: cannot write {json_path!r} ({exc.strerror}); "
                             "give a path in a writable directory") from None
    if budget is None or budget < 1:
        raise UsageError(f"option --budget: {budget!r} is not a whole number >= 1; give e.g. "
                         f"--budget {DEFAULT_BUDGET}")
    report = run_mutants(target, oracles, budget, symbolic_timeout,
                         _stderr_progress if progress else None, operators, jobs,
                         out_of_contract=out_of_contract)
    print(format_kill_matrix(report), file=out or sys.stdout)
    if json_path:
        with open(json_path, "w", encoding="utf-8") as fh:
            json.dump(report.to_dict(), fh, indent=2, default=repr)
    return 0 if report.all_killed() else 1


def parse_oracles(text: str) -> list[str]:
    """``"spec,differential"`` or ``"spec differential"`` -> ``["spec", "differential"]``."""
    return [o.strip() for part in text.split(",") for o in part.split() if o.strip()]


def main(argv: list[str] | None = None) -> int:
    """``python -m oracles.mutants TARGET [...]`` (the same as ``stagecheck mutants``)."""
    p = argparse.ArgumentParser(prog="python -m oracles.mutants",
                                description="Mutation testing of stagecheck's oracles.")
    p.add_argument("target")
    p.add_argument("--oracles", default=",".join(ORACLES),
                   help=f"comma-separated, from {', '.join(ORACLES)} (default: all)")
    p.add_argument("--budget", type=int, default=DEFAULT_BUDGET,
                   help="examples per stream for spec and differential (default 300)")
    p.add_argument("--symbolic-timeout", type=float, default=DEFAULT_SYMBOLIC_TIMEOUT,
                   help="seconds of symbolic search per mutant (default 10)")
    p.add_argument("--operators", default=None, help="comma-separated subset of the catalog")
    p.add_argument("--jobs", type=int, default=1, help="worker processes (default 1)")
    p.add_argument("--no-out-of-contract", action="store_true",
                   help="skip the campaigns' stream of inputs that should not happen (it "
                        "gives info findings only: same kills, faster, survivors less explained)")
    p.add_argument("--json", metavar="PATH")
    p.add_argument("--list", action="store_true", help="list the mutants and exit")
    args = p.parse_args(argv)
    try:
        if args.list:
            from oracles.targets import load_target
            profile = load_target(args.target).profile
            source, filename, function = target_source(args.target)
            ops = parse_oracles(args.operators) if args.operators else None
            for m in generate_mutants(source, filename, function, profile.takes_flag, ops):
                eq = "  [equivalent: operator reason]" if m.equivalent_reason else ""
                print(f"{m.id} {m.operator:<24} {str(m.location):<36} {m.description}{eq}")
            return 0
        return mutants_command(args.target, parse_oracles(args.oracles), args.budget,
                               args.json, args.symbolic_timeout, args.jobs,
                               parse_oracles(args.operators) if args.operators else None,
                               out_of_contract=not args.no_out_of_contract)
    except StagecheckError as exc:
        print(f"stagecheck: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
