"""The staged fields, declared once.

Each field names the buffer attribute on ``ctx``, the element type, and how the
value of slot ``i`` derives from the inputs for ``r = req_ids[i]``. Which fields a
target stages depends on its generation: a target that takes the keyword
``run_prefix_state_migration`` is of the later generation and also stages
``is_prefilling``; with that flag False it does not stage ``state_idx``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

INT32_MIN = -(2**31)
INT32_MAX = 2**31 - 1

#: Keyword that marks the later generation.
FLAG = "run_prefix_state_migration"


@dataclass(frozen=True)
class StagedField:
    name: str                       # short name used in reports
    buffer: str                     # attribute of ctx holding the CpuGpuBuffer
    dtype: str                      # numpy/torch dtype name
    derivation: str                 # prose: the value of slot i for r = req_ids[i]
    derive: Callable[[Any, str], Any]   # (scenario, req_id) -> value; KeyError if absent
    later_generation_only: bool = False
    needs_flag: bool = False        # staged only when run_prefix_state_migration is True
    read_by_kernel: bool = True


STATE_IDX = StagedField(
    "state_idx", "mamba_state_idx_buf", "int32", "mamba_state_idx[r]",
    lambda s, r: s.mamba_state_idx[r], needs_flag=True)
SCHEDULED = StagedField(
    "scheduled", "num_scheduled_tokens_buf", "int32",
    "scheduler_output.num_scheduled_tokens[r]",
    lambda s, r: s.num_scheduled_tokens[r])
COMPUTED = StagedField(
    "computed", "num_computed_tokens_buf", "int32", "requests[r].num_computed_tokens",
    lambda s, r: s.num_computed_tokens[r])
DRAFT = StagedField(
    "draft", "num_draft_tokens_buf", "int32",
    "len(scheduler_output.scheduled_spec_decode_tokens.get(r, []))",
    lambda s, r: len(s.spec_decode_tokens.get(r, [])))
IS_PREFILLING = StagedField(
    "is_prefilling", "is_prefilling_buf", "bool",
    "requests[r].num_computed_tokens < requests[r].num_prompt_tokens",
    lambda s, r: s.num_computed_tokens[r] < s.num_prompt_tokens[r],
    later_generation_only=True, read_by_kernel=False)

FIELDS: tuple[StagedField, ...] = (STATE_IDX, SCHEDULED, COMPUTED, DRAFT, IS_PREFILLING)
FIELDS_BY_NAME = {f.name: f for f in FIELDS}
FIELDS_BY_BUFFER = {f.buffer: f for f in FIELDS}


@dataclass(frozen=True)
class TargetProfile:
    """What the spec needs to know about a target: whether it is of the later generation."""

    takes_flag: bool = False

    def staged_fields(self, flag: bool) -> tuple[StagedField, ...]:
        """The fields this target must stage when called with ``flag``."""
        out = []
        for f in FIELDS:
            if f.later_generation_only and not self.takes_flag:
                continue
            if f.needs_flag and self.takes_flag and not flag:
                continue
            out.append(f)
        return tuple(out)

    def requires_state_idx(self, flag: bool) -> bool:
        return STATE_IDX in self.staged_fields(flag)

    def buffers(self) -> tuple[str, ...]:
        """Every buffer attribute the target's ctx carries."""
        return tuple(f.buffer for f in FIELDS if self.takes_flag or not f.later_generation_only)
