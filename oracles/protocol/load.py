"""Protocols by name or file, checked before anything runs.

``load_protocol(spec)`` resolves a built-in protocol name (``input-prep-event``), the
one-step protocol of a staging schema (``single-call:mamba-postprocess``), or a Python
file declaring one (``path/to/protocol.py``: its ``PROTOCOL``; ``path.py:NAME``: another
module-level name), and checks it (``check_protocol``): every problem is a
``SchemaError`` naming the part of the declaration, the value and the fix (exit 2 in the
command line). ``protocol_for_target`` chooses the built-in protocol a target's name
implies; ``protocol_spec`` says how a worker loads the same protocol again.
"""

from __future__ import annotations

import importlib.util
import keyword
import os
from typing import Any

from stagecheck.oracles import messages
from stagecheck.oracles.errors import SchemaError
from stagecheck.oracles.paths import require_file
from stagecheck.oracles.schemas import load_schema
from stagecheck.spec.protocol import Operation, Protocol, ProtocolCheck, StepSpace
from stagecheck.spec.protocols import BUILTIN_PROTOCOLS, protocol_for_function, single_call
from stagecheck.spec.schemas import BUILTIN_SCHEMAS

__all__ = ["check_protocol", "load_protocol", "protocol_for_target", "protocol_spec"]

SINGLE_CALL = "single-call:"
_SPECS: dict[int, str] = {}        # id(protocol) -> the spec it was loaded from


def load_protocol(spec: Any, checked: bool = True) -> Protocol:
    """The protocol ``spec`` names (see the module doc); ``SchemaError`` when it cannot be
    found or (``checked``) is not right. ``checked=False``: whatever the file declares
    under the name, for ``check_protocol`` to list every problem (``protocol check``)."""
    if isinstance(spec, Protocol):
        if checked:
            _raise_problems(spec, spec.name)
        return spec
    if not isinstance(spec, str) or not spec.strip():
        raise SchemaError.of(messages.PROTOCOL_EMPTY, spec,
                             builtins=", ".join(BUILTIN_PROTOCOLS))
    if spec in BUILTIN_PROTOCOLS:
        return BUILTIN_PROTOCOLS[spec]
    if spec.startswith(SINGLE_CALL):
        protocol = single_call(load_schema(spec[len(SINGLE_CALL):]))
        _SPECS[id(protocol)] = spec
        return protocol
    path, _, name = spec.partition(":") if not spec.endswith(".py") else (spec, "", "")
    if not path.endswith(".py"):
        raise SchemaError.of(messages.PROTOCOL_UNKNOWN, spec,
                             builtins=", ".join(BUILTIN_PROTOCOLS))
    require_file(path, "protocol file", messages.PROTOCOL_FILE_MISSING, SchemaError, spec,
                 path=path)      # a FIFO or a device is named as such, never imported
    module = _import(path, spec)
    name = name or "PROTOCOL"
    protocol = getattr(module, name, None)
    if protocol is None or (checked and not isinstance(protocol, Protocol)):
        found = sorted(n for n, v in vars(module).items() if isinstance(v, Protocol))
        raise SchemaError.of(messages.PROTOCOL_NOT_DECLARED, spec, name=name, path=path,
                             found=", ".join(found) or "none")
    if not checked:
        return protocol
    _raise_problems(protocol, spec)
    _SPECS[id(protocol)] = os.path.abspath(path) + (f":{name}" if name != "PROTOCOL" else "")
    return protocol


def _import(path: str, spec: str):
    module_name = "stagecheck_protocol_" + str(abs(hash(os.path.abspath(path))))
    try:
        loader_spec = importlib.util.spec_from_file_location(module_name, path)
        module = importlib.util.module_from_spec(loader_spec)
        loader_spec.loader.exec_module(module)
    except SchemaError:
        raise
    except BaseException as exc:     # the user's file failed to import: say so, exit 2
        raise SchemaError.of(messages.PROTOCOL_IMPORT, spec,
                             error=f"{type(exc).__name__}: {exc}") from None
    return module


def protocol_spec(protocol: Protocol) -> str:
    """How a worker loads ``protocol`` again (a built-in name, or the file it came from)."""
    if BUILTIN_PROTOCOLS.get(protocol.name) is protocol:
        return protocol.name
    if protocol.staging and protocol.name == f"{SINGLE_CALL}{protocol.staging}":
        return _SPECS.get(id(protocol), protocol.name)
    spec = _SPECS.get(id(protocol))
    if spec is None:
        raise SchemaError.of(messages.PROTOCOL_NOT_LOADABLE, protocol.name)
    return spec


def protocol_for_target(target: str) -> Protocol | None:
    """The built-in protocol a target spec's function (or class) name implies, if one."""
    name = target.rsplit("::", 1)[-1] if "::" in target else target.rsplit(":", 1)[-1]
    return protocol_for_function(name)


def _raise_problems(protocol: Protocol, spec: str) -> None:
    problems = check_protocol(protocol)
    if problems:
        raise SchemaError.of(messages.PROTOCOL_INVALID, spec, count=len(problems),
                             problems="; ".join(problems))


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
    if not isinstance(p.functions, tuple) or not all(isinstance(f, str) and f
                                                     for f in p.functions):
        problem(messages.PROTOCOL_PROBLEM_FUNCTIONS, value=p.functions)
    if not callable(p.build):
        problem(messages.PROTOCOL_PROBLEM_CALLABLE, part="build", value=p.build)
    if p.observe is not None and not callable(p.observe):
        problem(messages.PROTOCOL_PROBLEM_CALLABLE, part="observe", value=p.observe)
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
        twice = sorted({n for n in names if names.count(n) > 1})
        if twice:
            problem(messages.PROTOCOL_PROBLEM_DUPLICATE, names=", ".join(map(str, twice)))
    if not isinstance(p.device_work, tuple) or not all(_identifier_path(w)
                                                       for w in p.device_work):
        problem(messages.PROTOCOL_PROBLEM_DEVICE_WORK, value=p.device_work)
    if p.row_order and not _identifier_path(p.row_order):
        problem(messages.PROTOCOL_PROBLEM_PATH, part="row_order", value=p.row_order)
    out += _space_problems(p.space)
    for k, check in enumerate(p.checks if isinstance(p.checks, tuple) else (None,)):
        if not isinstance(check, ProtocolCheck) or not callable(check.check) \
                or not isinstance(check.id, str) or not check.statement:
            problem(messages.PROTOCOL_PROBLEM_CHECK, k=k, value=check)
    if p.staging is not None:
        if not isinstance(p.staging, str) or (p.staging not in BUILTIN_SCHEMAS
                                              and not p.staging.endswith(".py")
                                              and ".py:" not in p.staging):
            problem(messages.PROTOCOL_PROBLEM_STAGING, value=p.staging,
                    schemas=", ".join(BUILTIN_SCHEMAS))
    elif not p.component:
        problem(messages.PROTOCOL_PROBLEM_NO_STATE)
    return out


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
        if not isinstance(value, int) or isinstance(value, bool) or not low <= value <= 4096:
            out.append(messages.PROTOCOL_PROBLEM_NUMBER.format(part=f"space.{part}",
                                                               value=value, low=low))
    if not isinstance(space.params, dict) or not all(
            isinstance(k, str) and isinstance(v, tuple) and v for k, v in space.params.items()):
        out.append(messages.PROTOCOL_PROBLEM_PARAMS.format(value=space.params))
    if not isinstance(space.temperatures, tuple) or not space.temperatures:
        out.append(messages.PROTOCOL_PROBLEM_PARAMS.format(value=space.temperatures))
    return out
