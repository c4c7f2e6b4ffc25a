"""What is wrong with a protocol declaration, before anything of it runs against a target.

``check_protocol`` checks the declaration's shape (every part, each problem naming the
part, the value and the fix); ``dry_run_problems`` draws step sequences from its space
and asks each operation's ``when`` about every step (``protocol check``, and a file's
probe in a worker: ``load.py``). Both return plain lists of messages: empty, it is right.
"""

from __future__ import annotations

import dataclasses
import inspect
import keyword
import re
from typing import Any

from stagecheck.oracles import messages
from stagecheck.oracles.errors import StagecheckError
from stagecheck.oracles.protocol.generate import sample_sequence
from stagecheck.oracles.text import short_text
from stagecheck.spec.protocol import CHECK_ID, Operation, Protocol, ProtocolCheck, StepSpace
from stagecheck.spec.schemas import BUILTIN_SCHEMAS
from stagecheck.spec.steps import BOUNDS, unfold

__all__ = ["CHECK_SEQUENCES", "NAME", "check_protocol", "drawable", "dry_run_problems",
           "unchosen", "when_problem"]

#: step sequences the dry run draws (``protocol check``, and a file's probe in a worker)
CHECK_SEQUENCES = 30
#: what a protocol's name may be (reports, replay files, the pytest fixture's reproduce
#: line and ``--protocol`` carry it): letters, digits, ``-``, ``_``, ``.`` and ``:``
#: (``single-call:SCHEMA``), starting with a letter or a digit, no ``..``, at most
#: ``NAME_CHARS`` characters; never a path
NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.:-]*")
NAME_CHARS = 100


def _twice(values, shown=str) -> str:
    """The values ``values`` holds more than once, sorted and shown (empty: none)."""
    return ", ".join(map(shown, sorted({v for v in values if values.count(v) > 1}, key=str)))


def _identifier_path(text: Any) -> bool:
    return isinstance(text, str) and bool(text) and all(
        part.isidentifier() and not keyword.iskeyword(part) for part in text.split("."))


def check_protocol(protocol: Any) -> list[str]:
    """Every problem of a protocol declaration, each naming the part and the fix (empty:
    it is right). Checks the declaration's shape only; running it is the campaign's."""
    if not isinstance(protocol, Protocol):
        return [messages.PROTOCOL_PROBLEM_TYPE.format(kind=type(protocol).__name__)]
    p, out = protocol, []

    def problem(template: str, **fields) -> None:
        out.append(template.format(**fields))

    if not isinstance(p.name, str) or not p.name.strip():
        problem(messages.PROTOCOL_PROBLEM_NAME, value=p.name)
    elif not NAME.fullmatch(p.name) or ".." in p.name or len(p.name) > NAME_CHARS:
        problem(messages.PROTOCOL_PROBLEM_NAME_CHARS, most=NAME_CHARS, value=p.name if len(
            p.name) <= NAME_CHARS else p.name[:NAME_CHARS] + "...")
    if not isinstance(p.summary, str):
        problem(messages.PROTOCOL_PROBLEM_SUMMARY, value=p.summary)
    if not isinstance(p.functions, tuple) or not all(isinstance(f, str) and f
                                                     for f in p.functions):
        problem(messages.PROTOCOL_PROBLEM_FUNCTIONS, value=p.functions)
    elif not p.functions:
        problem(messages.PROTOCOL_PROBLEM_FUNCTIONS_EMPTY, value=p.functions)
    if not callable(p.build):
        problem(messages.PROTOCOL_PROBLEM_CALLABLE, part="build", value=p.build)
    if p.observe is not None and not callable(p.observe):
        problem(messages.PROTOCOL_PROBLEM_CALLABLE, part="observe", value=p.observe)
    for part, func in (("build", p.build), ("observe", p.observe)):
        out += _arity_problems(part, func, 1, "the step context (ctx)", f"{part}(ctx): ...")
    if p.component and (not _identifier_path(p.component) or "." in p.component):
        problem(messages.PROTOCOL_PROBLEM_COMPONENT, value=p.component)
    if not isinstance(p.operations, tuple) or not p.operations:
        problem(messages.PROTOCOL_PROBLEM_OPERATIONS, value=p.operations)
    else:
        names = []
        for k, op in enumerate(p.operations):
            if not isinstance(op, Operation):
                problem(messages.PROTOCOL_PROBLEM_OPERATION, k=k, value=op)
                continue
            names.append(op.name)
            if not isinstance(op.name, str) or not op.name:
                problem(messages.PROTOCOL_PROBLEM_OPERATION_NAME, k=k, value=op.name)
            for part in ("run", "when"):
                if not callable(getattr(op, part)):
                    problem(messages.PROTOCOL_PROBLEM_CALLABLE,
                            part=f"operations[{k}].{part}", value=getattr(op, part))
            out += _arity_problems(f"operations[{k}].run", op.run, 1,
                                   "the step context (ctx)", "run(ctx): ...")
        if _twice(names):
            problem(messages.PROTOCOL_PROBLEM_DUPLICATE, names=_twice(names))
    if not isinstance(p.device_work, tuple) or not all(_identifier_path(w)
                                                       for w in p.device_work):
        problem(messages.PROTOCOL_PROBLEM_DEVICE_WORK, value=p.device_work)
    else:
        if _twice(p.device_work, repr):
            problem(messages.PROTOCOL_PROBLEM_DEVICE_WORK_TWICE,
                    names=_twice(p.device_work, repr))
    if p.row_order and not _identifier_path(p.row_order):
        problem(messages.PROTOCOL_PROBLEM_PATH, part="row_order", value=p.row_order)
    out += _space_problems(p.space)
    if not isinstance(p.checks, tuple):
        problem(messages.PROTOCOL_PROBLEM_CHECKS, value=p.checks)
    for k, check in enumerate(p.checks if isinstance(p.checks, tuple) else ()):
        if not isinstance(check, ProtocolCheck) or not callable(check.check) \
                or not isinstance(check.id, str) or not check.id.strip():
            problem(messages.PROTOCOL_PROBLEM_CHECK, k=k, value=check)
        elif not CHECK_ID.fullmatch(check.id):
            problem(messages.PROTOCOL_PROBLEM_CHECK_ID, k=k, value=check.id)
        elif not isinstance(check.statement, str) or not check.statement.strip():
            problem(messages.PROTOCOL_PROBLEM_CHECK_STATEMENT, k=k, value=check.statement,
                    id=check.id)
    ids = [c.id for c in p.checks if isinstance(c, ProtocolCheck) and isinstance(c.id, str)] \
        if isinstance(p.checks, tuple) else []
    if _twice(ids, repr):
        problem(messages.PROTOCOL_PROBLEM_CHECK_TWICE, ids=_twice(ids, repr))
    if p.staging is not None and p.component:
        problem(messages.PROTOCOL_PROBLEM_BOTH_STATES, component=p.component, staging=p.staging)
    elif p.staging is not None:
        if not isinstance(p.staging, str) or (p.staging not in BUILTIN_SCHEMAS
                                              and not p.staging.endswith(".py")
                                              and ".py:" not in p.staging):
            problem(messages.PROTOCOL_PROBLEM_STAGING, value=p.staging,
                    schemas=", ".join(BUILTIN_SCHEMAS))
    elif not p.component:
        problem(messages.PROTOCOL_PROBLEM_NO_STATE)
    return out


def _arity_problems(part: str, func: Any, count: int, what: str, example: str) -> list[str]:
    """The problem of a protocol function ``func`` that cannot take ``count`` positional
    arguments (none where it can, or where Python cannot tell: a builtin)."""
    if not callable(func):
        return []
    try:
        signature = inspect.signature(func)
    except (TypeError, ValueError):
        return []
    try:
        signature.bind(*[None] * count)
    except TypeError:
        name = getattr(func, "__name__", type(func).__name__)
        return [messages.PROTOCOL_PROBLEM_ARITY.format(
            part=part, name="" if name == "<lambda>" else f" {name}",
            signature=str(signature) if name != "<lambda>" else f" lambda{signature}",
            what=what, example=example)]
    return []


def _space_problems(space: Any) -> list[str]:
    if not isinstance(space, StepSpace):
        return [messages.PROTOCOL_PROBLEM_SPACE.format(value=space)]
    out = []
    for part in ("capacity", "steps"):
        value = getattr(space, part)
        if not (isinstance(value, tuple) and len(value) == 2
                and all(isinstance(v, int) and not isinstance(v, bool) for v in value)
                and 1 <= value[0] <= value[1] <= 1024):
            out.append(messages.PROTOCOL_PROBLEM_RANGE.format(part=f"space.{part}",
                                                              value=value))
    for part, low in (("max_prompt", 1), ("max_drafts", 0)):
        value = getattr(space, part)
        high = BOUNDS["prompt" if part == "max_prompt" else "drafts"][1]
        if not isinstance(value, int) or isinstance(value, bool) or not low <= value <= high:
            out.append(messages.PROTOCOL_PROBLEM_NUMBER.format(part=f"space.{part}",
                                                               value=value, low=low, high=high))
    for part in ("dummy", "preemption"):
        if not isinstance(getattr(space, part), bool):
            out.append(messages.PROTOCOL_PROBLEM_FLAG.format(part=part,
                                                             value=getattr(space, part)))
    if not isinstance(space.params, dict):
        out.append(messages.PROTOCOL_PROBLEM_PARAMS.format(value=space.params))
    else:
        for name, values in space.params.items():
            if not isinstance(name, str) or not name.isidentifier():
                out.append(messages.PROTOCOL_PROBLEM_PARAM_NAME.format(value=name))
            elif not isinstance(values, tuple) or not values or not all(
                    isinstance(v, _PARAM_TYPES) and v == v for v in values):
                out.append(messages.PROTOCOL_PROBLEM_PARAM_VALUES.format(name=name,
                                                                         value=values))
    if not isinstance(space.temperatures, tuple) or not space.temperatures or not all(
            isinstance(t, (int, float)) and not isinstance(t, bool) and 0 <= t < float("inf")
            for t in space.temperatures):
        out.append(messages.PROTOCOL_PROBLEM_TEMPERATURES.format(value=space.temperatures))
    return out


#: what a parameter's values may be: plain data a saved step sequence keeps as it is (JSON)
_PARAM_TYPES = (bool, int, float, str, type(None))


def drawable(protocol: Protocol) -> Protocol:
    """``protocol``, or (its step space being wrong, which ``check_protocol`` says) the
    same with the default space: its ``when`` functions are still tried."""
    if _space_problems(protocol.space):
        return dataclasses.replace(protocol, space=StepSpace())
    return protocol


def when_problem(k: int, op: Operation, answer: Any, step: int) -> str:
    """The problem of operation ``k``'s ``when``, which raised or returned ``answer`` (not
    a bool) on step ``step``."""
    if isinstance(answer, StagecheckError):    # the guard's words: a hang, an exit
        return f"{answer.problem} on step {step} of a drawn sequence; {answer.fix}"
    error = (f"raised {type(answer).__name__}: {answer}" if isinstance(answer, BaseException)
             else f"returned {short_text(answer, 60)} (not a bool)")
    return messages.PROTOCOL_CHECK_WHEN.format(k=k, name=op.name, error=error, step=step)


def dry_run_problems(protocol: Protocol, sequences: int = CHECK_SEQUENCES) -> list[str]:
    """Problems that ``sequences`` drawn step sequences show, every one: the space draws,
    every step unfolds, and each operation's ``when`` answers True or False on each step
    (its first failure said; a wrong step space is said by ``check_protocol``, and the
    ``when`` functions are tried on the default one)."""
    operations = [(k, op) for k, op in enumerate(
        protocol.operations if isinstance(protocol.operations, tuple) else ())
        if isinstance(op, Operation) and callable(op.when)]
    if protocol.staging is not None and (not isinstance(protocol.staging, str) or (
            protocol.staging not in BUILTIN_SCHEMAS and not protocol.staging.endswith(".py")
            and ".py:" not in protocol.staging)):
        return []           # check_protocol says what is wrong with it
    if not isinstance(protocol.operations, tuple):
        return []           # likewise (drawing would fail on them, not on the space)
    drawn = drawable(protocol)
    failed: dict[int, str] = {}
    for index in range(sequences):
        try:
            seq = sample_sequence(drawn, 0, index)
            views = unfold(seq)
        except Exception as exc:     # the user's declaration failed: say what and where
            return [messages.PROTOCOL_CHECK_DRAW.format(
                value=protocol.space, error=f"{type(exc).__name__}: {exc}")] + \
                list(failed.values())
        for view in views:
            for k, op in operations:
                if k in failed:
                    continue
                try:
                    answer = op.when(view)
                except KeyboardInterrupt:
                    raise
                except BaseException as exc:    # an exception class of its own too
                    answer = exc
                if not isinstance(answer, bool):
                    failed[k] = when_problem(k, op, answer, view.index)
    return [failed[k] for k in sorted(failed)]


def unchosen(protocol: Protocol, sequences: int = CHECK_SEQUENCES) -> dict | None:
    """The operations whose ``when`` answered True at no step of ``sequences`` drawn step
    sequences, as ``ran.never_ran`` names them (None where drawing or a ``when`` fails:
    ``dry_run_problems`` says so)."""
    chosen, steps = set(), 0
    try:
        drawn = drawable(protocol)
        for index in range(sequences):
            for view in unfold(sample_sequence(drawn, 0, index)):
                steps += 1
                chosen |= {op.name for op in protocol.operations if op.when(view) is True}
    except Exception:
        return None
    return {"operations": [op.name for op in protocol.operations if op.name not in chosen],
            "device_work": [], "sequences": sequences, "steps": steps}
