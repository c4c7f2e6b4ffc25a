"""Staging schemas: what one staging function must do, declared once.

A ``StagingSchema`` declares, for one staging function (and every generation of it):

- its **inputs** (``Input``): per-request tables, per-slot arrays, id sets, flags and
  numbers, with their value ranges and whether a live request may lack them;
- how to **call** it from a scenario (``build``: an adapter that makes its arguments,
  context objects, scheduler output, input batch, dicts, flags, from a ``Builder``);
- each **staged buffer** (``Field``): dtype, the value of live slot ``i`` derived from
  the inputs for ``r = req_ids[i]`` (a function, and the same in prose), its tail
  policy (untouched, filled with a value, or free), its copy policy (the live range,
  the whole buffer, or none) and what happens when the request lacks the input it
  derives from (an assertion naming the id, a default, an exception);
- the inputs it may change, and how (``mutations``); all others stay unchanged;
- optional hooks: a custom input space (``generate``), extra contract breaches, a
  deterministic scenario of a given size for ``bench``, and a consumer (a kernel with
  a reference) that tells whether a difference in the staged values matters.

The invariants (``spec/invariants.py``) are stated once for every schema and read
these policies; the generators (``spec/space.py``) derive the in-contract and
out-of-contract scenario streams from the inputs; ``contract_breaches`` says which
scenarios are out of contract. Nothing here imports the machinery: a schema's
``build`` receives the builder as an argument.
"""

from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Callable, Protocol

from stagecheck.spec.scenario import RequestView, StagingScenario
# named in __all__: a user schema derives its stand-ins from stagecheck.spec.schema.StandIn
from stagecheck.spec.schema_mistakes import StandIn, StandInUnsupported

__all__ = [
    "COPY_LIVE", "COPY_NONE", "COPY_WHOLE", "Call", "Consumer", "CopyPolicy", "Field", "FLAG",
    "ID_SET",
    "INT32_MAX", "INT32_MIN", "Input", "MAY_MISS", "MissingPolicy", "NUMBER", "OPTIONAL",
    "PER_REQUEST", "PER_SLOT", "REQUIRED", "Signature", "StagingSchema", "StandIn",
    "StandInUnsupported",
    "TAIL_FREE", "TAIL_UNTOUCHED",
    "TailPolicy", "TargetProfile", "Values", "always", "contract_breaches", "offered_always",
    "tail_fill",
]

INT32_MIN = -(2**31)
INT32_MAX = 2**31 - 1

# kinds of input
PER_REQUEST = "per-request"   # dict req_id -> value
PER_SLOT = "per-slot"         # list of capacity values, indexed by slot
ID_SET = "id-set"             # a set of request ids (a list in the scenario)
FLAG = "flag"                 # a bool
NUMBER = "number"             # an int

# presence of a per-request input for a live request
REQUIRED = "required"         # every live request has it; lacking it is out of contract
OPTIONAL = "optional"         # may be absent (absent has a meaning, e.g. no drafts)
MAY_MISS = "may-miss"         # may be absent in contract: the function's failure path


@dataclass(frozen=True)
class Values:
    """How the generators draw an int: mostly small, over the whole range, and on purpose
    the values in ``special``. In contract, values lie in ``[low, high]``."""

    low: int = 0
    high: int = INT32_MAX
    small: int | None = 16
    special: tuple[int, ...] = ()


@dataclass(frozen=True)
class Input:
    """One input of the staging function, as the scenario holds it (``inputs[name]``)."""

    name: str
    kind: str = PER_REQUEST
    dtype: str = "int"            # "int", "int-list" (a list of ints per request), "bool"
    values: Values = Values()
    presence: str = REQUIRED      # per-request inputs only
    stale: bool = True            # padded ids may hold stale entries (per-request inputs)
    length: tuple[int, int] = (0, 4)   # "int-list": how many items
    drafts: bool = False          # "int-list": a list of draft tokens, whose length bound
                                  # (``length[1]``) ``--max-drafts`` may change
    group: str | None = None      # per-request inputs of one group share their keys: one
                                  # object per request carries them all (e.g. "requests")
    default: Any = False          # flags: the value a shrunk scenario has
    doc: str = ""

    @property
    def in_int32(self) -> bool:
        return self.dtype in ("int", "int-list") and self.values.high <= INT32_MAX \
            and self.values.low >= INT32_MIN


@dataclass(frozen=True)
class TailPolicy:
    """What slots ``>= num_reqs`` of a buffer may become: ``untouched`` (bit-identical,
    on success and on failure), ``fill`` (every CPU tail slot holds ``value`` after a
    successful call) or ``free`` (anything)."""

    kind: str
    value: Any = None

    def describe(self) -> str:
        return {"untouched": "untouched", "free": "unconstrained",
                "fill": f"filled with {self.value!r}"}[self.kind]


TAIL_UNTOUCHED = TailPolicy("untouched")
TAIL_FREE = TailPolicy("free")


def tail_fill(value: Any) -> TailPolicy:
    return TailPolicy("fill", value)


@dataclass(frozen=True)
class CopyPolicy:
    """How a staged buffer reaches the device: once over ``[0, num_reqs)`` (``live``), once
    over the whole buffer (``whole``), or not at all (``none``); with ``skip_when_empty``
    a batch of no requests may skip the copy."""

    kind: str
    skip_when_empty: bool = False

    def describe(self) -> str:
        text = {"live": "once over [0, num_reqs)", "whole": "once, the whole buffer",
                "none": "never"}[self.kind]
        return text + (" (none for an empty batch)" if self.skip_when_empty else "")


COPY_LIVE = CopyPolicy("live")
COPY_WHOLE = CopyPolicy("whole")
COPY_NONE = CopyPolicy("none")


@dataclass(frozen=True)
class MissingPolicy:
    """What a live request that lacks ``input`` makes the call do.

    ``assertion``: raise ``AssertionError`` whose message names the request id, before
    any copy of the field's buffer; ``raises``: raise ``exception``. (A default value
    is no policy: the field's derivation gives it, e.g. ``q.get(name, -1)``.)

    ``applies`` (a function of the ``RequestView``) narrows the policy to the requests
    that lack ``input`` *and* for which it holds, the others being served without it
    (e.g. a prompt given as embeddings raises only when a prompt token id is needed);
    ``applies_prose`` says the same in words. None: every request that lacks it.
    """

    input: str
    kind: str = "assertion"
    exception: str = "AssertionError"
    applies: Callable[[Any], bool] | None = None
    applies_prose: str = ""

    def applies_to(self, scenario: Any, slot: int, req_id: str) -> bool:
        """Whether live request ``req_id`` at ``slot`` gets this policy on ``scenario``."""
        if req_id in scenario.inputs.get(self.input, {}):
            return False
        if self.applies is None:
            return True
        try:
            return bool(self.applies(RequestView(scenario, slot, req_id)))
        except KeyError:    # the request lacks what the condition reads: out of contract
            return False

    def describe(self) -> str:
        when = f" {self.applies_prose}" if self.applies_prose else ""
        if self.kind == "assertion":
            return (f"a live request without {self.input}{when} raises AssertionError naming "
                    "its id, before any copy of this buffer")
        return f"a live request without {self.input}{when} raises {self.exception}"


def always(profile: "TargetProfile", scenario: Any) -> bool:
    return True


def offered_always(profile: "TargetProfile") -> bool:
    return True


@dataclass(frozen=True)
class Field:
    """One staged buffer: how it is passed, its element type and what each slot holds."""

    name: str                          # short name used in reports
    buffer: str                        # the buffer's name (ctx attribute or argument)
    dtype: str                         # "int32", "int64" or "bool"
    derive: Callable[[Any], Any] | None   # RequestView -> value of the slot; None: not checked
    derivation: str                    # the same, in prose
    tail: TailPolicy = TAIL_UNTOUCHED
    copy: CopyPolicy = COPY_LIVE
    missing: MissingPolicy | None = None
    when: Callable[["TargetProfile", Any], bool] = always   # staged on this call?
    offered: Callable[["TargetProfile"], bool] = offered_always  # given to this target?
    read_by_consumer: bool = False
    when_prose: str = "on every call"   # ``when`` (and ``offered``), in prose
    nullable: Callable[["TargetProfile"], bool] = lambda profile: False   # may the adapter
                                        # pass None instead of the buffer to this target?
    # ``derive`` for all live requests at once, a shortcut for large batches:
    # (scenario inputs, live request ids) -> one value per id, MISSING where ``derive``
    # raises KeyError; ``schema check`` compares it with ``derive`` slot by slot
    column: Callable[[Any, list], list] | None = None


@dataclass(frozen=True)
class Signature:
    """Another release's parameters of the function a schema describes, and the adapter
    that calls it: a target whose positional parameters are exactly ``parameters`` gets
    this ``build`` instead of the schema's (fields can tell the two apart through
    ``TargetProfile.parameters``, e.g. ``offered=lambda p: "align_ctx" in p.parameters``).
    ``releases`` and ``note`` say where it comes from and what its adapter passes."""

    parameters: tuple[str, ...]
    build: Callable[["Builder", "TargetProfile"], "Call"]
    releases: str = ""
    note: str = ""


@dataclass(frozen=True)
class TargetProfile:
    """What the spec needs to know about one target: its schema, the optional keywords
    it takes (a generation that adds one, e.g. ``run_prefix_state_migration``), and which
    of the schema's signatures it has (None: the schema's own ``parameters``)."""

    schema: "StagingSchema"
    keywords: frozenset[str] = frozenset()
    signature: Signature | None = None

    def takes(self, keyword: str) -> bool:
        return keyword in self.keywords

    @property
    def parameters(self) -> tuple[str, ...]:
        """The target's positional parameters, as its signature names them."""
        return self.signature.parameters if self.signature else self.schema.parameters

    def build(self, builder: "Builder") -> "Call":
        """The call's arguments, made by the adapter of this target's signature."""
        return (self.signature.build if self.signature else self.schema.build)(builder, self)

    def memo(self, scenario: Any, key: str, compute: Callable[["TargetProfile", Any], Any],
             per_schema: bool = False):
        """``compute(self, scenario)``; inside ``one_scenario(scenario)`` computed once
        (every invariant asks the same things of one scenario in turn), once for every
        profile of the schema where ``per_schema`` (the answer does not depend on the
        keywords)."""
        if not _SCOPES or _SCOPES[-1][0] is not scenario:
            return compute(self, scenario)
        table = _SCOPES[-1][1]
        slot = (id(self.schema) if per_schema else id(self), key)
        if slot not in table:
            table[slot] = compute(self, scenario)
        return table[slot]

    def breaches(self, scenario: Any) -> list[str]:
        """``spec.space.contract_breaches`` of ``scenario`` (kept, as ``memo`` says)."""
        return self.memo(scenario, "breaches", _breaches, per_schema=True)

    def staged_fields(self, scenario: Any) -> tuple[Field, ...]:
        """The fields this target must stage on ``scenario``."""
        return self.memo(scenario, "staged", _staged_fields)

    def buffers(self) -> tuple[str, ...]:
        """Every buffer this target is given (staged on a given call or not)."""
        kept = self.__dict__.get("_buffers")
        if kept is None:
            kept = tuple(f.buffer for f in self.schema.fields if f.offered(self))
            object.__setattr__(self, "_buffers", kept)
        return kept

    def first_missing(self, s: Any) -> tuple[int, str, Field] | None:
        """The first live (slot, request id, field) whose missing-input policy applies."""
        return self.memo(s, "missing", _first_missing)

    def _first_missing(self, s: Any) -> tuple[int, str, Field] | None:
        policed = [f for f in self.staged_fields(s) if f.missing is not None]
        if policed and all(f.missing.applies is None for f in policed):
            # every request that lacks the input gets the policy: the first live id
            # missing from any policed input, found by set lookups
            tables = [(f, s.inputs.get(f.missing.input, {})) for f in policed]
            live = s.live_ids
            if all(all(map(table.__contains__, live)) for _, table in tables):
                return None         # the usual case, in one C loop per table
            for i, r in enumerate(live):
                for f, table in tables:
                    if r not in table:
                        return i, r, f
            return None
        for i, r in enumerate(s.live_ids if policed else ()):
            for f in policed:
                if f.missing.applies_to(s, i, r):
                    return i, r, f
        return None


#: the scenarios being judged (innermost last), each with its answers so far
_SCOPES: list[tuple[Any, dict]] = []


@contextmanager
def one_scenario(scenario: Any):
    """Judge ``scenario`` (which must not change meanwhile) with each profile's
    answers about it (staged fields, contract breaches, ...) computed once."""
    _SCOPES.append((scenario, {}))
    try:
        yield
    finally:
        _SCOPES.pop()


def _staged_fields(profile: TargetProfile, scenario: Any) -> tuple[Field, ...]:
    return tuple(f for f in profile.schema.fields if f.when(profile, scenario))


def _breaches(profile: TargetProfile, s: Any) -> list[str]:
    return contract_breaches(profile.schema, s)


def _first_missing(profile: TargetProfile, s: Any):
    return profile._first_missing(s)


class Builder(Protocol):
    """What a schema's ``build`` receives (implemented by ``oracles/observe``): fresh
    objects made from the scenario, each registered so it is read back after the call."""

    scenario: Any

    def req_ids(self) -> list: ...
    def table(self, name: str) -> dict: ...
    def objects(self, **attributes: str) -> dict: ...
    def id_set(self, name: str) -> set: ...
    def array(self, name: str, dtype: str) -> Any: ...
    def buffer(self, name: str) -> Any: ...
    def value(self, name: str) -> Any: ...
    def dtype(self, name: str) -> Any: ...
    device: str


@dataclass(frozen=True)
class Call:
    """The arguments of one call, as ``build`` made them."""

    args: tuple
    kwargs: dict = field(default_factory=dict)


@dataclass(frozen=True)
class Consumer:
    """What reads the staged values on the device (a kernel with a reference), for
    kernel-impact triage: ``results_differ(scenario, a, b, backend, device)`` returns the
    differences between its results on two sides' live values (``{field: [values]}``).
    A built-in consumer is named and its implementation registered by the kernel oracle
    (``results_differ`` None); the fields it reads are those with ``read_by_consumer``."""

    name: str
    results_differ: Callable[..., list[str]] | None = None


@dataclass(frozen=True)
class StagingSchema:
    """Everything stagecheck needs to check one staging function (see the module doc)."""

    name: str
    summary: str
    functions: tuple[str, ...]          # function names this schema describes
    parameters: tuple[str, ...]         # the positional parameters, in order
    inputs: tuple[Input, ...]
    fields: tuple[Field, ...]
    build: Callable[[Builder, TargetProfile], Call]
    keywords: tuple[str, ...] = ()      # optional keyword-only parameters (variants)
    num_reqs_is_len: bool = False       # every entry of req_ids is live (no padding)
    mutations: Callable[[Any, dict], dict] | None = None
    mutations_prose: str = ""
    generate: Callable[[Any, Any], None] | None = None   # (draw, scenario) -> None
    breaches: Callable[[Any], list[str]] | None = None
    bench: Callable[[int], Any] | None = None
    consumer: Consumer | None = None
    max_capacity: int = 1024            # the largest batch the engine runs: the default
                                        # bound of drawn capacities (``--max-capacity``)
    signatures: tuple[Signature, ...] = ()   # other releases' parameters, an adapter each
    releases: str = ""                  # the releases whose signature is ``parameters``

    # ------------------------------------------------------------------ lookups
    def input(self, name: str) -> Input:
        for i in self.inputs:
            if i.name == name:
                return i
        raise KeyError(name)

    def field(self, name: str) -> Field:
        for f in self.fields:
            if f.name == name:
                return f
        raise KeyError(name)

    def field_of_buffer(self, buffer: str) -> Field | None:
        by_buffer = self.__dict__.get("_by_buffer")
        if by_buffer is None:
            by_buffer = {f.buffer: f for f in self.fields}
            object.__setattr__(self, "_by_buffer", by_buffer)
        return by_buffer.get(buffer)

    def profile(self, keywords=frozenset(), parameters: tuple[str, ...] | None = None
                ) -> TargetProfile:
        """The profile of a target of this schema that takes ``keywords``, and whose
        positional parameters are ``parameters`` (the signature of that name; None or the
        schema's own: the schema's adapter)."""
        signature = next((g for g in self.signatures if g.parameters == tuple(parameters)),
                         None) if parameters is not None else None
        return TargetProfile(self, frozenset(k for k in keywords if k in self.keywords),
                             signature)

    def profiles(self) -> list[TargetProfile]:
        """A profile of every signature, without and with every keyword (what a dry run
        of the schema builds)."""
        everything = frozenset(self.keywords)
        return [TargetProfile(self, keywords, signature)
                for signature in (None, *self.signatures)
                for keywords in dict.fromkeys((frozenset(), everything))]

    def request_groups(self) -> dict[str, list[Input]]:
        """Per-request inputs by group (inputs of one group share their keys); an input
        without a group is a group of its own, named after it. (Kept on the schema: its
        inputs never change.)"""
        kept = self.__dict__.get("_groups")
        if kept is None:
            kept = {}
            for inp in self.inputs:
                if inp.kind == PER_REQUEST:
                    kept.setdefault(inp.group or inp.name, []).append(inp)
            object.__setattr__(self, "_groups", kept)
        return kept


# --------------------------------------------------------------------------- the contract

def contract_breaches(schema: StagingSchema, s: StagingScenario) -> list[str]:
    """Why ``s`` is an input that should not happen; empty for an in-contract input."""
    out: list[str] = []
    if not 0 <= s.num_reqs <= s.capacity:
        out.append(f"num_reqs={s.num_reqs} outside [0, capacity={s.capacity}]")
    if len(s.req_ids) < s.num_reqs:
        out.append(f"req_ids has {len(s.req_ids)} entries, fewer than num_reqs={s.num_reqs}")
    if len(s.req_ids) > s.capacity:
        out.append(f"req_ids has {len(s.req_ids)} entries, more than capacity={s.capacity}")
    if schema.num_reqs_is_len and len(s.req_ids) != s.num_reqs:
        out.append(f"num_reqs={s.num_reqs} is not len(req_ids)={len(s.req_ids)}")
    live = s.live_ids
    if len(set(live)) != len(live):
        out.append("a request id appears twice among the live slots")
    for key, group in schema.request_groups().items():
        lead = group[0]
        table = s.inputs.get(lead.name, {})
        if lead.presence == REQUIRED and not all(map(table.__contains__, live)):
            for r in live:
                if r not in table:
                    out.append(f"live request {r!r} missing from {key}")
    for inp in schema.inputs:
        if inp.dtype != "int" or inp.kind not in (PER_REQUEST, PER_SLOT):
            continue
        low, high = inp.values.low, inp.values.high
        data = s.inputs.get(inp.name)
        if isinstance(data, (dict, list)) and data:
            # every value at once: ints within the range (the common case) need no more
            values = (_live_values(data, live) if isinstance(data, dict) else data)
            if set(map(type, values)) <= {int} and (
                    not values or (low <= min(values) and max(values) <= high)):
                continue
        items = ([(r, data.get(r)) for r in live] if inp.kind == PER_REQUEST
                 else list(enumerate(data or [])))
        for where, v in items:
            # text (an edited replay file) is no number: a breach, not a TypeError
            if v is not None and not (isinstance(v, bool) or (
                    not isinstance(v, str) and low <= v <= high)):
                place = f"[{where!r}]" if inp.kind == PER_REQUEST else f"[{where}]"
                bound = "int32" if (low, high) == (INT32_MIN, INT32_MAX) else f"[{low}, {high}]"
                out.append(f"{inp.name}{place}={v} does not fit {bound}")
    if schema.breaches is not None:
        out += schema.breaches(s)
    return out


def _live_values(table: dict, live: list) -> list:
    """The values ``table`` holds for the ids of ``live`` that it has, in order (every
    lookup in one C loop where it has them all)."""
    try:
        return list(map(table.__getitem__, live))
    except KeyError:
        return [table[r] for r in live if r in table]
    except TypeError:       # an id that is no key at all (unhashable): as the loop says
        return [table[r] for r in live if r in table]
