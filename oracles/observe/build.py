"""How the inputs of one call are made from a scenario, and read back after it.

A schema's ``build`` receives a ``Builder``: it makes each object the staging function
takes (``req_ids``, tables, per-request objects, arrays, the staged buffers on a
``Backend``) and registers it, so that what the call left in it is read back as plain
data (``inputs_after``).
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any, Callable, Protocol

from stagecheck.spec.scenario import StagingScenario
from stagecheck.spec.schema import Call, TargetProfile
from stagecheck.spec.space import initial_values

__all__ = ["Backend", "Builder", "RecordingList", "build_inputs", "plain"]


class Backend(Protocol):
    """How the buffers of one call are made, and which exceptions are not the target's."""

    def make_buffer(self, name: str, dtype: str, cpu: list, gpu: list, events: list): ...

    def passes_through(self, exc: BaseException) -> bool:
        """True for an exception that belongs to the machinery, not to the target."""


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


_ATOMS = frozenset({int, str, bool, float, type(None)})


def plain(value: Any) -> Any:
    """Plain data of what a target left in an input (numpy scalars and arrays included)."""
    kind = type(value)
    if kind in _ATOMS:
        return value
    if kind is dict:
        return {k: v if type(v) in _ATOMS else plain(v) for k, v in value.items()}
    if kind is list or kind is tuple:
        return [v if type(v) in _ATOMS else plain(v) for v in value]
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    if isinstance(value, (set, frozenset)):
        return sorted(plain(v) for v in value)
    tolist = getattr(value, "tolist", None)
    if tolist is not None and kind.__module__.split(".")[0] == "numpy":
        return tolist()
    return value


class Builder:
    """Makes the objects of one call from a scenario (what a schema's ``build`` uses),
    and reads each one back after the call as plain data, by input name."""

    def __init__(self, scenario: StagingScenario, profile: TargetProfile, backend: "Backend"
                 ) -> None:
        self.scenario, self.profile, self.backend = scenario, profile, backend
        self.events: list = []
        self.reads: list[int] = []
        self.buffers: dict[str, Any] = {}
        self._readers: dict[str, Callable[[], Any]] = {}
        self._ids: RecordingList | None = None

    def req_ids(self) -> RecordingList:
        if self._ids is None:
            ids = self._ids = RecordingList(self.scenario.req_ids, self.reads)

            def read():
                ids.recording = False
                return plain(list(ids))
            self._readers["req_ids"] = read
        return self._ids

    def table(self, name: str) -> dict:
        made = {k: list(v) if isinstance(v, list) else v
                for k, v in self.scenario.inputs[name].items()}
        self._readers[name] = lambda: plain(made)
        return made

    def objects(self, **attributes: str) -> dict:
        """One object per request of the given per-request inputs (``attr=input name``),
        for every id that any of them holds."""
        tables = {attr: self.scenario.inputs[name] for attr, name in attributes.items()}
        ids = dict.fromkeys(r for table in tables.values() for r in table)
        made = {r: SimpleNamespace(**{attr: table[r] for attr, table in tables.items()
                                      if r in table}) for r in ids}
        for attr, name in attributes.items():
            self._readers[name] = (lambda a: lambda: {r: plain(getattr(o, a)) for r, o
                                                      in made.items() if hasattr(o, a)})(attr)
        return made

    def id_set(self, name: str) -> set:
        made = set(self.scenario.inputs[name])
        self._readers[name] = lambda: plain(made)
        return made

    def array(self, name: str, dtype: str):
        import numpy as np  # only for an array: the list backend runs without numpy
        made = np.array(self.scenario.inputs[name], dtype=dtype)
        self._readers[name] = lambda: plain(made)
        return made

    def value(self, name: str) -> Any:
        return self.scenario.inputs[name]

    def buffer(self, name: str):
        made = self.buffers.get(name)
        if made is None:
            s, schema = self.scenario, self.profile.schema
            cpu, gpu = s.initial_cpu.get(name), s.initial_gpu.get(name)
            if cpu is None or gpu is None:
                cpu = initial_values(s, schema, name, "cpu")
                gpu = initial_values(s, schema, name, "gpu")
            declared = schema.field_of_buffer(name)
            if declared is None:
                raise ValueError(f"b.buffer({name!r}): no field declares buffer {name!r} "
                                 f"(the buffers are: "
                                 f"{', '.join(sorted(f.buffer for f in schema.fields))})")
            made = self.buffers[name] = self.backend.make_buffer(
                name, declared.dtype, cpu, gpu, self.events)
        return made

    def inputs_after(self) -> dict:
        return {name: read() for name, read in self._readers.items()}


def build_inputs(s: StagingScenario, profile: TargetProfile, backend: "Backend"
                 ) -> tuple[Builder, Call]:
    """Fresh arguments for one call of a target with ``profile`` on ``s``."""
    builder = Builder(s, profile, backend)
    return builder, profile.schema.build(builder, profile)
