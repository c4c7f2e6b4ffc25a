"""A staging scenario as plain data: everything one staging call sees.

The shape is the same for every staging function: a batch of ``capacity`` slots, the
first ``num_reqs`` live, ``req_ids`` in batch order (possibly longer than
``num_reqs``: padded entries must not be read), the function's inputs by name, and
the contents of every buffer before the call. What the inputs are (per-request
tables, per-slot arrays, id sets, flags, numbers) is declared by the function's
schema (``spec/schema.py``); the scenario holds their values as ints, strings,
lists and dicts, so it prints, saves as JSON, shrinks and replays anywhere.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from typing import Any

__all__ = ["MISSING", "RequestView", "StagingScenario"]

#: The seed function's inputs, as replay files of earlier versions stored them at the
#: top level of the scenario (read back into ``inputs``).
_LEGACY_KEYS = ("num_scheduled_tokens", "spec_decode_tokens", "num_computed_tokens",
                "num_prompt_tokens", "mamba_state_idx", "run_prefix_state_migration",
                "omit_state_idx_buf")


@dataclass
class StagingScenario:
    """Everything one staging call sees, as plain data.

    ``inputs`` maps each input the schema declares to its value: a dict
    ``req_id -> value`` for a per-request table (an id that is absent is absent from
    the engine's dict too), a list of ``capacity`` values for a per-slot array, a list
    of ids for an id set, a bool for a flag, an int for a number. ``initial_cpu`` and
    ``initial_gpu`` hold every buffer's contents before the call, one list of
    ``capacity`` values per buffer, tails included.
    """

    capacity: int
    num_reqs: int
    req_ids: list[str]
    inputs: dict[str, Any] = field(default_factory=dict)
    initial_cpu: dict[str, list] = field(default_factory=dict)
    initial_gpu: dict[str, list] = field(default_factory=dict)
    schema: str = "mamba-postprocess"

    @property
    def live_ids(self) -> list[str]:
        return list(self.req_ids[: max(self.num_reqs, 0)])

    def __getattr__(self, name: str) -> Any:
        """An input by name (``s.mamba_state_idx``), for readable schemas and tests."""
        if name.startswith("_") or name in ("inputs", "capacity", "num_reqs", "req_ids"):
            raise AttributeError(name)
        try:
            return self.__dict__["inputs"][name]
        except KeyError:
            raise AttributeError(f"scenario of {self.schema!r} has no input {name!r}") from None

    def __reduce__(self):
        # pickled field by field (a worker receives thousands): no attribute lookups
        # that ``__getattr__`` would answer with an exception
        return (StagingScenario, (self.capacity, self.num_reqs, self.req_ids, self.inputs,
                                  self.initial_cpu, self.initial_gpu, self.schema))

    def to_dict(self) -> dict:
        """Plain data (a deep copy of every container)."""
        return {"capacity": self.capacity, "num_reqs": self.num_reqs,
                "req_ids": list(self.req_ids), "inputs": _copy(self.inputs),
                "initial_cpu": _copy(self.initial_cpu), "initial_gpu": _copy(self.initial_gpu),
                "schema": self.schema}

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), sort_keys=True)

    @classmethod
    def from_dict(cls, data: dict) -> "StagingScenario":
        if not isinstance(data, dict):
            raise TypeError(f"a scenario is a JSON object, got {type(data).__name__}")
        data = dict(data)
        if "inputs" not in data and any(k in data for k in _LEGACY_KEYS):
            data["inputs"] = {k: data.pop(k) for k in _LEGACY_KEYS if k in data}
        names = {f.name for f in dataclasses.fields(cls)}
        unknown = set(data) - names
        if unknown:
            raise ValueError(f"unknown scenario keys {sorted(unknown)}; expected {sorted(names)}")
        return cls(**data)


def _copy(value: Any) -> Any:
    if type(value) is dict:
        return {k: _copy(v) for k, v in value.items()}
    if type(value) is list:
        return [_copy(v) for v in value]
    return value


class _Missing:
    def __repr__(self) -> str:
        return "MISSING"


#: What a ``RequestView`` gives for an input its request lacks (with a default asked for).
MISSING = _Missing()


class RequestView:
    """One live slot ``i`` and its request ``r = req_ids[i]``, as a schema's derivation
    sees them: ``q.num_computed_tokens`` is ``inputs["num_computed_tokens"][r]`` (a
    ``KeyError`` when the request lacks it), ``q.get(name, default)`` allows absence,
    ``q.slot_value(name)`` reads a per-slot array at ``i``, ``q.input(name)`` a whole input.
    """

    __slots__ = ("scenario", "slot", "id")

    def __init__(self, scenario: StagingScenario, slot: int, req_id: str) -> None:
        self.scenario, self.slot, self.id = scenario, slot, req_id

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        return self._input(name)[self.id]

    def _input(self, name: str) -> Any:
        # a name that is not an input is the schema's mistake, never "the request lacks
        # it" (KeyError): a misspelt name would otherwise leave every slot unchecked
        try:
            return self.scenario.inputs[name]
        except KeyError:
            raise UnknownInput(name, sorted(self.scenario.inputs)) from None

    def get(self, name: str, default: Any = MISSING) -> Any:
        return self._input(name).get(self.id, default)

    def has(self, name: str) -> bool:
        return self.id in self._input(name)

    def slot_value(self, name: str) -> Any:
        """The per-slot input ``name`` at this slot; ``KeyError`` (no value, as for a
        request that lacks an input) at a slot past the list, which only a batch larger
        than its buffers (out of contract) reaches."""
        values = self._input(name)
        if not 0 <= self.slot < len(values):
            raise KeyError(name)
        return values[self.slot]

    def input(self, name: str) -> Any:
        return self._input(name)


class UnknownInput(AttributeError):
    """A derivation asked for an input the schema does not declare."""

    def __init__(self, name: str, declared: list[str]) -> None:
        super().__init__(f"no input named {name!r} (the inputs are: {', '.join(declared)})")
        self.name, self.declared = name, declared
