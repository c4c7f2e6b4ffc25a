"""How the inputs of one call are made from a scenario, and read back after it.

A schema's ``build`` receives a ``Builder``: it makes each object the staging function
takes (``req_ids``, tables, per-request objects, arrays, the staged buffers on a
``Backend``) and registers it, so that what the call left in it is read back as plain
data (``inputs_after``; ``plain.py`` says how a value reads back).
"""

from __future__ import annotations

import operator
from itertools import repeat
from types import SimpleNamespace
from typing import Any, Callable, Protocol

from stagecheck.oracles import messages
from stagecheck.oracles.errors import SchemaError
from stagecheck.oracles.observe.plain import ATOMS, KEYS, SELF_REFERENCING, in_few_words, plain
from stagecheck.spec.contents import initial_values
from stagecheck.spec.scenario import StagingScenario
from stagecheck.spec.schema import (FLAG, ID_SET, NUMBER, PER_REQUEST, PER_SLOT, Call,
                                    TargetProfile)

__all__ = ["KEPT", "SHARES_GIVEN", "Backend", "Builder", "BuilderRefused", "RecordingList",
           "build_inputs", "keep"]


class Backend(Protocol):
    """How the buffers of one call are made, and which exceptions are not the target's."""

    def make_buffer(self, name: str, dtype: str, cpu: list, gpu: list, events: list): ...

    def passes_through(self, exc: BaseException) -> bool:
        """True for an exception that belongs to the machinery, not to the target."""


class BuilderRefused(SchemaError):
    """A schema's ``build`` asked the builder for something it does not make: the
    message names the call and the fix (a mistake of the schema, exit 2)."""


class RecordingList(list):
    """``req_ids`` that records which indices the staging code reads."""

    def __init__(self, items, reads: list[int]) -> None:
        super().__init__(items)
        self.reads = reads
        self.recording = True

    def __getitem__(self, key):
        if self.recording:
            if isinstance(key, slice):
                self.reads.extend(range(len(self))[key])
            elif isinstance(key, int):
                self.reads.append(key + len(self) if key < 0 else key)
        return super().__getitem__(key)

    def __iter__(self):
        for i in range(len(self)):
            if self.recording:
                self.reads.append(i)
            yield list.__getitem__(self, i)


class Builder:
    """Makes the objects of one call from a scenario (what a schema's ``build`` uses),
    and reads each one back after the call as plain data, by input name.

    One input is one object: asking for an input again the same way gives back the
    object made first (the function sees the same engine object in two places); asking
    for it another way (another dtype, another kind of object) is a ``BuilderRefused``
    naming both calls, as is an input that is not declared or a call that does not
    make the input's kind. An input the adapter passes as None on a call need not go
    through the builder on that call."""

    def __init__(self, scenario: StagingScenario, profile: TargetProfile, backend: "Backend"
                 ) -> None:
        self.scenario, self.profile, self.backend = scenario, profile, backend
        self.events: list = []
        self.reads: list[int] = []
        self.buffers: dict[str, Any] = {}
        self._readers: dict[str, Callable[[], Any]] = {}
        self._ids: RecordingList | None = None
        self._made: dict[str, tuple[str, Any]] = {}    # input -> (the call, the object)
        #: (label, holder, attribute, what it held, what that is) for ``place``
        self._placed: list[tuple[str, Any, str, Any, str]] = []
        self._names: dict[int, str] = {}        # id of what the builder made -> its name
        #: an input the call left as given reads back as the scenario's own object, not a
        #: copy (``SHARES_GIVEN``)
        self._shares = getattr(backend, SHARES_GIVEN, False)

    @property
    def device(self) -> str:
        """The device the buffers of this call live on: "cpu" or "cuda" (``--device``);
        the list model of the symbolic oracle and the schema check is "cpu"."""
        return getattr(self.backend, "device", "cpu")

    def req_ids(self) -> RecordingList:
        if self._ids is None:
            given = self.scenario.req_ids
            ids = self._ids = RecordingList(given, self.reads)
            shares = self._shares

            def read():
                ids.recording = False
                # unchanged (compared in C, reading nothing): a copy, not item by item
                if list.__eq__(ids, given) is True:
                    return given if shares else list(given)
                return plain(list(ids))
            self._readers["req_ids"] = read
        return self._ids

    def _input(self, call: str, name: Any, kinds: tuple[str, ...]):
        """The declaration of input ``name`` for ``call``, refused unless its kind is one
        of ``kinds``."""
        schema = self.profile.schema
        try:
            declared = schema.input(name)
        except (KeyError, TypeError):
            raise BuilderRefused.of(messages.BUILDER_UNKNOWN_INPUT, name, call=call,
                                    inputs=", ".join(i.name for i in schema.inputs) or "none"
                                    ) from None
        if declared.kind not in kinds:
            right = {PER_REQUEST: f"b.table({name!r}) (or b.objects(attr={name!r}) for an "
                                  "attribute of per-request objects)",
                     PER_SLOT: f"b.array({name!r}, dtype)", ID_SET: f"b.id_set({name!r})"
                     }.get(declared.kind, f"b.value({name!r})")
            raise BuilderRefused.of(messages.BUILDER_WRONG_KIND, name, call=call,
                                    kind=declared.kind, right=right)
        return declared

    def _again(self, call: str, name: str) -> Any:
        """The object made for ``name`` by the same ``call`` before (None: not made yet);
        refused when another call made it."""
        made = self._made.get(name)
        if made is None:
            return None
        first, obj = made
        if first != call:
            raise BuilderRefused.of(messages.BUILDER_MADE_OTHERWISE, name, call=call,
                                    first=first)
        return obj

    def table(self, name: str) -> dict:
        call = f"b.table({name!r})"
        self._input(call, name, (PER_REQUEST,))
        made = self._again(call, name)
        if made is None:
            given = self.scenario.inputs[name]
            kept = getattr(self.backend, "kept", None)
            made = _left_as_given(kept, ("table", id(given)), given)
            if made is None:
                made = _own_copy(given)
            values = _values_of(made) if kept is not None and len(made) > _FEW else None
            shares = self._shares
            self._made[name] = (call, made)
            self._readers[name] = lambda: _read_table(made, given, kept, values, shares)
        return made

    def objects(self, **attributes: str) -> dict:
        """One object per request of the given per-request inputs (``attr=input name``),
        for every id that any of them holds."""
        call = "b.objects(" + ", ".join(f"{a}={n!r}" for a, n in attributes.items()) + ")"
        if not attributes:
            raise BuilderRefused.of(messages.BUILDER_NO_ATTRIBUTES, call, call=call)
        for name in attributes.values():
            self._input(call, name, (PER_REQUEST,))
        for name in attributes.values():
            again = self._again(call, name)     # the same call made them all, or none
            if again is not None:
                return again
        tables = {attr: self.scenario.inputs[name] for attr, name in attributes.items()}
        if max(map(len, tables.values())) <= _FEW:   # a small batch: one by one is cheaper
            ids = dict.fromkeys(r for table in tables.values() for r in table)
            made = {r: SimpleNamespace(**{attr: _own(table[r]) for attr, table in tables.items()
                                          if r in table}) for r in ids}
            for attr, name in attributes.items():
                self._made[name] = (call, made)
                self._readers[name] = (lambda a: lambda: {r: plain(getattr(o, a)) for r, o
                                                          in made.items() if hasattr(o, a)})(attr)
            return made
        made, unchanged = _request_objects(tables, getattr(self.backend, "kept", None))
        as_given = (lambda table: table) if self._shares else dict
        for attr, name in attributes.items():
            self._made[name] = (call, made)
            self._readers[name] = (lambda a: lambda: as_given(tables[a]) if unchanged() else
                                   {r: plain(getattr(o, a)) for r, o in made.items()
                                    if hasattr(o, a)})(attr)
        return made

    def id_set(self, name: str) -> set:
        call = f"b.id_set({name!r})"
        self._input(call, name, (ID_SET,))
        made = self._again(call, name)
        if made is None:
            made = set(self.scenario.inputs[name])
            self._made[name] = (call, made)
            self._readers[name] = lambda: plain(made)
        return made

    def array(self, name: str, dtype: str):
        import numpy as np  # only for an array: the list backend runs without numpy
        call = f"b.array({name!r}, {dtype!r})"
        self._input(call, name, (PER_SLOT,))
        made = self._again(call, name)
        if made is None:
            try:
                kind = np.dtype(dtype)
            except TypeError:
                raise BuilderRefused.of(messages.BUILDER_BAD_DTYPE, dtype, call=call) from None
            made = np.array(self.scenario.inputs[name], dtype=kind)
            self._made[name] = (call, made)
            self._readers[name] = lambda: plain(made)
        return made

    def value(self, name: str) -> Any:
        self._input(f"b.value({name!r})", name, (FLAG, NUMBER))
        return self.scenario.inputs[name]

    def dtype(self, name: str):
        """The torch dtype called ``name`` ("bool", "int32", "int64", ...: ``torch.bool``
        for "bool"), for a stand-in the function compares with torch dtypes or hands to
        torch; the schema module itself imports no torch."""
        import torch            # heavy: only a schema that asks for a torch dtype loads it
        found = getattr(torch, name, None) if isinstance(name, str) else None
        if not isinstance(found, torch.dtype):
            raise BuilderRefused.of(messages.BUILDER_BAD_TORCH_DTYPE, name,
                                    call=f"b.dtype({name!r})")
        return found

    def buffer(self, name: str):
        made = self.buffers.get(name)
        if made is None:
            s, schema = self.scenario, self.profile.schema
            declared = schema.field_of_buffer(name)
            if declared is None:
                raise BuilderRefused.of(messages.BUILDER_UNKNOWN_BUFFER, name,
                                        call=f"b.buffer({name!r})",
                                        buffers=", ".join(sorted(f.buffer for f in
                                                                 schema.fields)) or "none")
            cpu, gpu = s.initial_cpu.get(name), s.initial_gpu.get(name)
            if cpu is None or gpu is None:
                cpu = initial_values(s, schema, name, "cpu")
                gpu = initial_values(s, schema, name, "gpu")
            made = self.buffers[name] = self.backend.make_buffer(
                name, declared.dtype, cpu, gpu, self.events)
        return made

    def made(self) -> dict[str, str]:
        """The builder call that made each input so far (input name -> call)."""
        return {name: call for name, (call, _) in self._made.items()}

    def inputs_after(self) -> dict:
        after = {}
        for name, read in self._readers.items():
            try:
                after[name] = read()
            except RecursionError:     # a value that holds itself (d["d"] = d)
                after[name] = SELF_REFERENCING
        for label, holder, attr, made, what in self._placed:
            now = getattr(holder, attr, _GONE)
            if now is not made:     # the holder of an input or a buffer no longer holds it
                other = self._names.get(id(now))
                after[f"{label}.{attr}"] = ("deleted" if now is _GONE else
                                            f"replaced by {other or in_few_words(now)}") + \
                    f" by the call (it held {what})"
        return after

    def place(self, call: "Call") -> None:
        """Note where the call's plain holder objects (a ``SimpleNamespace`` scheduler
        output, the buffers' owner) hold an input or a buffer the builder made, so that a
        call that replaces or deletes that attribute (``scheduler_output.x = None``,
        ``del ctx.buf``) is seen: the engine's next step would read what it left."""
        made = {id(obj): f"the input {name}" for name, (_, obj) in self._made.items()}
        made.update((id(b), f"the buffer {name}") for name, b in self.buffers.items())
        if self._ids is not None:
            made[id(self._ids)] = "req_ids"
        self._names = made
        names = self.profile.parameters
        labelled = [(names[k] if k < len(names) else f"argument {k}", v)
                    for k, v in enumerate(call.args)] + list(call.kwargs.items())
        for label, holder in labelled:
            if id(holder) in made:
                continue
            attrs = getattr(holder, "__dict__", None)
            if type(attrs) is not dict:
                continue
            for attr, value in list(attrs.items()):
                if id(value) in made:
                    self._placed.append((label, holder, attr, value, made[id(value)]))


#: a backend with this attribute true (the worker's, which only sends what a call read
#: back: ``Observation.to_wire`` sends an input left as given by name) lets an input the
#: call left as given read back as the scenario's own table or list instead of a copy of
#: it; no call is ever given that object (only copies, or the objects made from it)
SHARES_GIVEN = "shares_given"

#: a table of at most this many entries is copied and read back entry by entry (the
#: comparisons in C pay off on larger ones)
_FEW = 32


def _own_copy(table: dict) -> dict:
    """A per-request table the call may change without changing the scenario: its lists
    copied (a table of plain values in one C call)."""
    if len(table) > _FEW:
        kinds = set(map(type, table.values()))
        if list not in kinds:
            return dict(table)
        if kinds == {list}:         # a table of lists: each list copied, in one C loop
            return dict(zip(table, map(list, table.values())))
    return {k: list(v) if isinstance(v, list) else v for k, v in table.items()}


def _read_table(made: dict, given: dict, kept: dict | None = None,
                values: list | None = None, shares: bool = False) -> dict:
    """What the call left in a table it was given (``given``: the scenario's), as plain
    data: compared in C first, copied value by value only where the call changed it
    (left as given: ``given`` itself where the read-back ``shares`` it, else a copy).
    A table of lists the call left as given, holding the very lists it was given
    (``values``, by identity), is kept (``kept``) for the next call on the same scenario
    (``_left_as_given``)."""
    if len(made) <= _FEW:
        return plain(made)
    kinds = set(map(type, made.values()))
    if kinds <= ATOMS and KEYS.issuperset(map(type, made)):
        return dict(made)
    if float in kinds:              # 5.0 == 5: compared as text, never as equal
        return plain(made)
    try:
        unchanged = made == given
    except Exception:       # a value that does not compare (an array): read it out
        unchanged = False
    if unchanged is True:
        if values is not None and len(made) == len(values) \
                and all(map(operator.is_, made.values(), values)):
            keep(kept, ("table", id(given)), (given, made))
        return given if shares else _own_copy(given)
    return plain(made)


def _values_of(table: dict) -> list:
    """The objects ``table`` holds, by identity (its lists, not copies of them)."""
    return list(table.values())


def _left_as_given(kept: dict | None, key: tuple, given: dict):
    """The table the previous call on the same scenario was given and left as given, to
    give to the next call in place of a fresh copy (None when there is none). Its
    read-back found, after that call, the same keys, the very lists it was made with
    (no entry replaced, none shared with another) and values equal to the scenario's:
    what a fresh copy would hold, and nothing of the target runs between that read-back
    and this call. The two sides of an example are given the same inputs: at 1,024
    requests a copy of a table of lists costs more than the comparison that allows its
    reuse."""
    found = kept.pop(key, None) if kept is not None else None
    if found is None or found[0] is not given:
        return None
    return found[1]


def keep(kept: dict | None, key: tuple, entry: tuple) -> None:
    """``kept[key] = entry`` in a backend's ``kept`` (none: nothing), at most ``KEPT``
    entries: the oldest goes."""
    if kept is None:
        return
    if len(kept) >= KEPT and key not in kept:
        del kept[next(iter(kept))]
    kept[key] = entry


def _request_objects(tables: dict[str, dict], kept: dict | None = None
                     ) -> tuple[dict, "_Unchanged"]:
    """One ``SimpleNamespace`` per request id any of ``tables`` (attribute -> table) holds,
    with an attribute for each table that holds the id; and whether the call left them
    as made (``_Unchanged``).

    ``kept`` (a backend's, for the calls of one batch): the ids and each object's
    attributes as made for another call on the same tables (both sides of an example
    take the same), reused to make fresh objects: each call gets objects of its own."""
    attrs = tuple(tables)
    columns = tuple(tables.values())
    key = ("objects", attrs, tuple(map(id, columns)))
    found = kept.get(key) if kept is not None else None
    if found is not None and all(map(operator.is_, found[0], columns)):
        keys, rows, listed = found[1], found[2], found[3]
        last = kept.pop(("objects made",) + key, None)
        if last is not None and last[1].answer is True:
            # the previous call on these tables left its objects as made (the read-back
            # found the same ids, the very objects, each with the attributes it was made
            # with): they are what fresh objects would be, and nothing of the target
            # runs between that read-back and this call
            unchanged = _Unchanged(last[0], attrs, rows=rows)
            keep(kept, ("objects made",) + key, (last[0], unchanged))
            return last[0], unchanged
    else:
        first = columns[0] if columns else {}
        if all(t.keys() == first.keys() for t in columns[1:]):   # the usual case: one id set
            keys = list(first)
            rows = _rows(attrs, [list(map(table.__getitem__, keys)) for table in columns])
        else:
            keys = list(dict.fromkeys(r for table in columns for r in table))
            rows = [{attr: table[r] for attr, table in tables.items() if r in table}
                    for r in keys]
        # the attributes that hold lists somewhere (copied for each call's objects)
        listed = [a for a, table in tables.items()
                  if any(type(v) is list for v in table.values())]
        keep(kept, key, (columns, keys, rows, listed))   # the tables held: ids stay theirs
    made = dict(zip(keys, [SimpleNamespace(**row) for row in rows]))
    if listed:          # a list the call appends to is its own, never the scenario's
        for o in made.values():
            held = o.__dict__
            for a in listed:
                if a in held:
                    held[a] = _own(held[a])
    unchanged = _Unchanged(made, attrs, rows=rows)
    keep(kept, ("objects made",) + key, (made, unchanged))
    return made, unchanged


def _own(value):
    """A request object's attribute: a list copied (the call may change it in place; the
    scenario's stays as drawn), anything else as it is."""
    return list(value) if type(value) is list else value


def _rows(attrs: tuple, values: list) -> list[dict]:
    """Each request's attributes (``attrs``, in order) from one column of values per
    attribute: the usual one or two attributes as dict displays (a third of the time of
    building each dict from pairs), more in C loops."""
    if len(attrs) == 1:
        (a,), (xs,) = attrs, values
        return [{a: x} for x in xs]
    if len(attrs) == 2:
        (a, b), (xs, ys) = attrs, values
        return [{a: x, b: y} for x, y in zip(xs, ys)]
    return list(map(dict, zip(*[zip(repeat(attr), column)
                                for attr, column in zip(attrs, values)])))


#: entries a backend keeps of what it made for one call, for the next (an example's
#: buffers, objects and tables: ``keep``)
KEPT = 16


class _Unchanged:
    """Whether the call left the request objects as it was given them (the same objects
    under the same ids, each with exactly the attributes it had, of equal values): a few
    C-level comparisons, made once for every attribute read back. ``rows``: each
    object's attributes as made."""

    def __init__(self, made: dict, attrs: tuple, rows: list) -> None:
        self.made, self.attrs, self.rows = made, attrs, rows
        self.keys, self.objects = list(made), list(made.values())
        self.answer: bool | None = None

    def __call__(self) -> bool:
        if self.answer is None:
            try:
                objects = list(self.made.values())
                self.answer = (list(self.made) == self.keys
                               and all(map(operator.is_, objects, self.objects))
                               and list(map(vars, objects)) == self.rows)
            except Exception:       # anything unusual: read it attribute by attribute
                self.answer = False
        return self.answer


def build_inputs(s: StagingScenario, profile: TargetProfile, backend: "Backend"
                 ) -> tuple[Builder, Call]:
    """Fresh arguments for one call of a target with ``profile`` on ``s``."""
    builder = Builder(s, profile, backend)
    call = profile.build(builder)
    builder.place(call)
    return builder, call


#: an attribute the call deleted
_GONE = object()
