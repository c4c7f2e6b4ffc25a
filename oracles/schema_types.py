"""The types of a staging schema's parts, checked before anything reads them.

``check_declarations`` (``oracles/schemas.py``) reads each part as the type it is declared
with (``f.copy.kind``, ``i.values.low > i.values.high``, a field's dtype as a key): a part of
another type would raise inside stagecheck, or be read as something else (a string given
for a tuple of names is a tuple of its letters). ``type_problems`` names each such part,
its value and the fix first; the other checks run only on a schema whose types are right.
"""

from __future__ import annotations

from typing import Any

from stagecheck.oracles import messages
from stagecheck.spec.schema import (CopyPolicy, Field, Input, MissingPolicy, Signature,
                                    StagingSchema, TailPolicy, Values)

__all__ = ["type_problems"]

#: field parts that are policies: (attribute, class, an example of a right value)
_POLICIES = (("tail", TailPolicy, "tail_fill(-1)"), ("copy", CopyPolicy, "COPY_WHOLE"))


def _whole(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _names(value: Any) -> bool:
    return isinstance(value, tuple) and all(isinstance(v, str) and v for v in value)


def type_problems(schema: StagingSchema) -> list[str]:
    """Every part of ``schema`` whose type is wrong, each naming the part, its value and
    the fix (empty: every part has its type)."""
    out: list[str] = []
    if not isinstance(schema.name, str) or not schema.name.strip():
        out.append(messages.SCHEMA_TYPE_TEXT.format(part="name", value=schema.name))
    if not isinstance(schema.summary, str):
        out.append(messages.SCHEMA_TYPE_TEXT.format(part="summary", value=schema.summary))
    for part in ("functions", "parameters", "keywords"):
        if not _names(getattr(schema, part)):
            out.append(messages.SCHEMA_TYPE_NAMES.format(part=part, value=getattr(schema, part)))
    for part, kind in (("inputs", Input), ("fields", Field), ("signatures", Signature)):
        value = getattr(schema, part)
        if not isinstance(value, tuple) or not all(isinstance(v, kind) for v in value):
            out.append(messages.SCHEMA_TYPE_TUPLE.format(
                part=part, kind=kind.__name__, value=type(value).__name__ if not isinstance(
                    value, tuple) else "tuple holding " + ", ".join(
                        sorted({type(v).__name__ for v in value if not isinstance(v, kind)}))))
    if out:
        return out
    for i in schema.inputs:
        out += _input_problems(i)
    for f in schema.fields:
        out += _field_problems(f)
    return out


def _input_problems(i: Input) -> list[str]:
    if not isinstance(i.name, str) or not i.name:
        return [messages.SCHEMA_TYPE_TEXT.format(part="input name", value=i.name)]
    where, out = f"input {i.name!r}", []
    if not isinstance(i.values, Values):
        out.append(messages.SCHEMA_TYPE_POLICY.format(where=where, part="values",
                                                      value=i.values, kind="Values",
                                                      example="Values(0, 2**20)"))
    else:
        for part in ("low", "high"):
            if not _whole(getattr(i.values, part)):
                out.append(messages.SCHEMA_TYPE_VALUES.format(where=where, part=part,
                                                              value=getattr(i.values, part)))
        if i.values.small is not None and not _whole(i.values.small):
            out.append(messages.SCHEMA_TYPE_VALUES.format(where=where, part="small",
                                                          value=i.values.small))
        if not isinstance(i.values.special, tuple) or not all(
                _whole(v) for v in i.values.special):
            out.append(messages.SCHEMA_TYPE_VALUES.format(where=where, part="special",
                                                          value=i.values.special))
    if i.group is not None and (not isinstance(i.group, str) or not i.group):
        out.append(messages.SCHEMA_TYPE_GROUP.format(where=where, value=i.group))
    return out


def _field_problems(f: Field) -> list[str]:
    if not isinstance(f.name, str) or not f.name:
        return [messages.SCHEMA_TYPE_TEXT.format(part="field name", value=f.name)]
    where, out = f"field {f.name!r}", []
    if not isinstance(f.buffer, str) or not f.buffer:
        out.append(messages.SCHEMA_TYPE_TEXT.format(part=f"{where}: buffer", value=f.buffer))
    if not isinstance(f.dtype, str):     # which names: check_declarations
        out.append(messages.SCHEMA_TYPE_TEXT.format(part=f"{where}: dtype", value=f.dtype))
    if not isinstance(f.derivation, str):
        out.append(messages.SCHEMA_TYPE_TEXT.format(part=f"{where}: derivation",
                                                     value=f.derivation))
    for part, kind, example in _POLICIES:
        if not isinstance(getattr(f, part), kind):
            out.append(messages.SCHEMA_TYPE_POLICY.format(where=where, part=part,
                                                          value=getattr(f, part),
                                                          kind=kind.__name__, example=example))
    if f.missing is not None and not isinstance(f.missing, MissingPolicy):
        example = (f"MissingPolicy({f.missing!r})" if isinstance(f.missing, str)
                   else "MissingPolicy('input_name')")
        out.append(messages.SCHEMA_TYPE_POLICY.format(where=where, part="missing",
                                                      value=f.missing, kind="MissingPolicy",
                                                      example=example))
    return out
