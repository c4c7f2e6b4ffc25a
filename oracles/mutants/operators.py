"""The mutation operators: each rewrites the AST of a staging function at one site.

Each operator models a way a refactor of staging code goes wrong: a loop over the
padded ``req_ids``, a copy length off by one, an upload hoisted above the fill, an
assertion dropped or re-typed, ``.get`` for ``[k]``, swapped views, a value carried
over from the previous slot, a narrower dtype, the post-step count... An operator
that knows a mutant of it to be equivalent says why (``Site.equivalent_reason``).
What an operator is (its sites, its scope, the base class that walks the AST) is
``mutation.py``.
"""

from __future__ import annotations

import ast
import copy

from stagecheck.oracles.mutants.mutation import MutationOperator, Scope

__all__ = ["AssertDropped", "AssertMoved", "AssertWeakened", "CarriedOver", "CopyDropped",
           "CopyDuplicated", "CopyHoisted", "CopyLengthOffByOne", "CopyLengthPadded",
           "DtypeNarrowing", "EarlyReturn", "ExceptionType", "FullReqIds", "GetToIndex",
           "GetToPop", "IndexToGet", "LoopBoundOffByOne", "NonBlockingToggled",
           "PostStepCount", "SwappedViews", "WholeBufferCopy"]

_CARRY = "_stagecheck_carried"
_NP = "_stagecheck_np"
_BLOCKING_COPY = "_stagecheck_blocking_copy"


# --------------------------------------------------------------------------------------
# Reasons an operator gives for mutants it knows to be equivalent
# --------------------------------------------------------------------------------------

REASON_NONE_CHECK = (
    "equivalent within the contract: the schema gives a target of this generation every "
    "buffer (none of them may be None for it, unlike e.g. the later generation's "
    "mamba_state_idx_buf with run_prefix_state_migration=False), so this None check never "
    "fires on an input that can happen; without it a None buffer would fail with "
    "AttributeError instead")
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
REASON_WHOLE_BATCH = (
    "equivalent within the contract: the schema's num_reqs is len(req_ids) (no padded ids), "
    "so {sliced} is the whole list and {mutated} takes the same entries")
REASON_GUARDED = (
    "equivalent: the assertion '{guard}' at line {line} runs first in the same iteration, "
    "so a missing key never reaches this lookup")
REASON_BOUNDED_LEN = (
    "equivalent on every input the engine produces: the value is a count of one request's "
    "draft tokens, bounded by num_speculative_tokens (single digits upstream; the "
    "generators draw at most 4), so int16 never wraps; it differs only for a request with "
    "more than 32,767 draft tokens")


# --------------------------------------------------------------------------------------
# What the operators recognise in a function's AST
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


def _prefix_slice(node: ast.AST) -> bool:
    """``X[:E]`` read from a name or attribute."""
    return (isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Load)
            and isinstance(node.slice, ast.Slice) and node.slice.lower is None
            and node.slice.upper is not None and node.slice.step is None
            and isinstance(node.value, (ast.Name, ast.Attribute)))


def _whole_batch(scope, node: ast.Subscript, mutated: ast.AST) -> str | None:
    """The reason a change of the bound of ``req_ids[:E]`` (to ``mutated``, which takes no
    fewer entries) is equivalent, where the schema makes num_reqs the length of req_ids."""
    names = node.value.attr if isinstance(node.value, ast.Attribute) else node.value.id
    if not (scope.whole_batch and names.endswith("req_ids")):
        return None
    return REASON_WHOLE_BATCH.format(sliced=_src(node), mutated=_src(mutated))


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

    def visit_Subscript(self, node):
        self.generic_visit(node)
        if _prefix_slice(node) and self.hit(
                node, f"iterates over all of {_src(node.value)} instead of {_src(node)}",
                _whole_batch(self.scope, node, node.value)):
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

    def _bound(self, node: ast.AST, get, put) -> ast.AST:
        for delta in (-1, +1):
            new = _shift(get(), delta)
            longer = None
            if delta > 0 and isinstance(node, ast.Subscript):
                longer = _whole_batch(self.scope, node, ast.Subscript(
                    node.value, ast.Slice(None, new, None), ast.Load()))
            if self.hit(node, f"loop bound {_src(get())} becomes {_src(new)} in {_src(node)}",
                        longer):
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

    def visit_Call(self, node):
        self.generic_visit(node)
        if _is_copy_call(node) and self._copy_arg(node) is not None and self.hit(
                node, f"{_src(node.func.value)} copied whole (copy_to_gpu())"):
            self._set_copy_arg(node, None)
        return node


class CopyHoisted(MutationOperator):
    name = "copy_hoisted"
    summary = "an upload moved above the loop that fills its buffer"

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

    def block(self, owner, stmts):
        for j, stmt in enumerate(stmts):
            if _is_copy_stmt(stmt) and self.hit(
                    stmt, f"{_src(stmt.value.func.value)}.copy_to_gpu removed"):
                return stmts[:j] + stmts[j + 1:]
        return stmts


class CopyDuplicated(MutationOperator):
    name = "copy_duplicated"
    summary = "an upload issued twice"

    def block(self, owner, stmts):
        for j, stmt in enumerate(stmts):
            if _is_copy_stmt(stmt) and self.hit(
                    stmt, f"{_src(stmt.value.func.value)}.copy_to_gpu issued twice"):
                return stmts[:j + 1] + [copy.deepcopy(stmt)] + stmts[j + 1:]
        return stmts


class _AssertOperator(MutationOperator):
    def can_fire(self, node: ast.Assert) -> bool:
        """Whether the assertion can fail on an input that can happen."""
        return not _is_none_check(node) or self.scope.nullable


class AssertDropped(_AssertOperator):
    name = "assert_dropped"
    summary = "an assertion deleted"

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


def _complete_dict_reason(scope: Scope, dict_expr: ast.AST) -> str | None:
    """Why ``d[k]`` and ``d.get(k)`` agree within the contract, when the schema says the
    dict (named by the expression's last name) holds every live request."""
    what = scope.complete.get(_last_name(dict_expr) or "")
    return REASON_COMPLETE_DICT.format(what=what) if what else None


class GetToIndex(MutationOperator):
    name = "get_to_index"
    summary = "`d[k]` for `d.get(k, default)`"

    def visit_Call(self, node):
        self.generic_visit(node)
        if _is_get(node) and self.hit(node, f"{_src(node.func.value)}[{_src(node.args[0])}] "
                                            f"instead of {_src(node)}",
                                      _complete_dict_reason(self.scope, node.func.value)):
            return ast.Subscript(node.func.value, node.args[0], ast.Load())
        return node


class IndexToGet(MutationOperator):
    name = "index_to_get"
    summary = "`d.get(k, 0)` (or `d.get(k)` before an attribute) for `d[k]`"

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
        reason = _complete_dict_reason(self.scope, value)
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
