"""A staging scenario as plain data, and the contract that says which inputs can happen."""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field

from stagecheck.spec.schema import FIELDS, INT32_MAX, INT32_MIN, TargetProfile


@dataclass
class StagingScenario:
    """Everything one staging call sees, as ints, strings, lists and dicts.

    ``num_computed_tokens`` and ``num_prompt_tokens`` describe ``requests``: a
    request id present in them is present in ``requests``. ``initial_cpu`` and
    ``initial_gpu`` hold every buffer's contents before the call, one list of
    ``capacity`` values per buffer attribute, tails included.
    """

    capacity: int
    num_reqs: int
    req_ids: list[str]
    num_scheduled_tokens: dict[str, int]
    spec_decode_tokens: dict[str, list[int]]
    num_computed_tokens: dict[str, int]
    num_prompt_tokens: dict[str, int]
    mamba_state_idx: dict[str, int]
    initial_cpu: dict[str, list] = field(default_factory=dict)
    initial_gpu: dict[str, list] = field(default_factory=dict)
    run_prefix_state_migration: bool = True
    omit_state_idx_buf: bool = False   # with the flag False: ctx.mamba_state_idx_buf is None

    @property
    def live_ids(self) -> list[str]:
        return list(self.req_ids[: max(self.num_reqs, 0)])

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), sort_keys=True)

    @classmethod
    def from_dict(cls, data: dict) -> "StagingScenario":
        names = {f.name for f in dataclasses.fields(cls)}
        unknown = set(data) - names
        if unknown:
            raise ValueError(f"unknown scenario keys {sorted(unknown)}; expected {sorted(names)}")
        return cls(**data)


def contract_breaches(s: StagingScenario) -> list[str]:
    """Why ``s`` is an input that should not happen; empty for an in-contract input.

    A live request without a state index IS in contract: the contract's answer
    to it is an ``AssertionError`` (see ``missing_index_assertion``).
    """
    out: list[str] = []
    if not 0 <= s.num_reqs <= s.capacity:
        out.append(f"num_reqs={s.num_reqs} outside [0, capacity={s.capacity}]")
    if len(s.req_ids) < s.num_reqs:
        out.append(f"req_ids has {len(s.req_ids)} entries, fewer than num_reqs={s.num_reqs}")
    if len(s.req_ids) > s.capacity:
        out.append(f"req_ids has {len(s.req_ids)} entries, more than capacity={s.capacity}")
    live = s.live_ids
    if len(set(live)) != len(live):
        out.append("a request id appears twice among the live slots")
    for r in live:
        if r not in s.num_scheduled_tokens:
            out.append(f"live request {r!r} missing from num_scheduled_tokens")
        if r not in s.num_computed_tokens or r not in s.num_prompt_tokens:
            out.append(f"live request {r!r} missing from requests")
    for name, table in (("num_scheduled_tokens", s.num_scheduled_tokens),
                        ("num_computed_tokens", s.num_computed_tokens),
                        ("mamba_state_idx", s.mamba_state_idx)):
        for r in live:
            v = table.get(r)
            if v is not None and not INT32_MIN <= v <= INT32_MAX:
                out.append(f"{name}[{r!r}]={v} does not fit int32")
    return out


def malformed(s: StagingScenario) -> list[str]:
    """Why ``s`` cannot be built at all (unlike a contract breach, which can be run)."""
    out: list[str] = []
    if not isinstance(s.capacity, int) or s.capacity < 1:
        out.append(f"capacity={s.capacity!r} is not a whole number >= 1")
        return out
    for view, table in (("initial_cpu", s.initial_cpu), ("initial_gpu", s.initial_gpu)):
        for buffer, values in table.items():
            field = next((f for f in FIELDS if f.buffer == buffer), None)
            if field is None:
                out.append(f"{view} names {buffer!r}, which is not a staged buffer")
            elif len(values) != s.capacity:
                out.append(f"{view}[{buffer!r}] has {len(values)} values, capacity is "
                           f"{s.capacity}")
            elif field.dtype == "int32" and not all(
                    isinstance(v, int) and INT32_MIN <= v <= INT32_MAX for v in values):
                out.append(f"{view}[{buffer!r}] holds values that are not int32")
    return out


def first_missing_state_index(s: StagingScenario, profile: TargetProfile) -> tuple[int, str] | None:
    """The first live (slot, request id) without a state index, when the target needs one."""
    if not profile.requires_state_idx(s.run_prefix_state_migration):
        return None
    for i, r in enumerate(s.live_ids):
        if r not in s.mamba_state_idx:
            return i, r
    return None


def initial_values(s: StagingScenario, buffer: str, view: str) -> list:
    """Initial contents of one view, zeros where the scenario does not say."""
    table = s.initial_cpu if view == "cpu" else s.initial_gpu
    values = table.get(buffer)
    if values is None:
        dtype = next(f.dtype for f in FIELDS if f.buffer == buffer)
        return [False if dtype == "bool" else 0] * s.capacity
    return list(values)
