"""Reference implementation of the Mamba postprocess kernel (domain.md section 3).

A plain Python loop over requests and state tensors, using tensor slicing: slow, but
obviously right by reading. It is the oracle the Triton kernel in
``impl/postprocess.py`` must match bit for bit. It imports neither triton nor anything
from ``oracles``.

The decision math lives in :func:`kernel_decisions` (pure Python ints) so that other
oracles can predict what the kernel will do with a set of staged values.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, NamedTuple, Sequence

import torch

StateKind = Literal["conv", "temporal"]
STATE_KINDS: tuple[str, ...] = ("conv", "temporal")


@dataclass(frozen=True)
class MambaStateSpec:
    """One state tensor served by the postprocess kernel.

    ``tensor`` is laid out ``[num_blocks, ...]`` and must be contiguous in its trailing
    dims (the block stride may be larger than a block: states may be views into a
    shared page). ``kind`` is ``"conv"`` (``[num_blocks, conv_width, inner]``, the
    window is shifted) or ``"temporal"`` (any trailing shape, a whole block is copied).
    ``group`` indexes the list of block tables: the group this state belongs to.
    """

    tensor: torch.Tensor
    kind: StateKind
    group: int


class KernelDecision(NamedTuple):
    """What the kernel does for one request (a tuple, so it prints and compares as one).

    ``src``: block column of the running state; ``dest``: block column to save into;
    ``bias``: which accepted position holds the state to save; ``copy``: whether any
    state is copied; ``normalize_accepted``: whether ``num_accepted[i]`` becomes 1.
    """

    src: int
    dest: int
    bias: int
    copy: bool
    normalize_accepted: bool


def kernel_decisions(state_idx: Sequence[int] | torch.Tensor,
                     num_scheduled: Sequence[int] | torch.Tensor,
                     num_computed: Sequence[int] | torch.Tensor,
                     num_draft: Sequence[int] | torch.Tensor,
                     num_accepted: Sequence[int] | torch.Tensor,
                     num_reqs: int,
                     block_size: int) -> list[KernelDecision | None]:
    """Per request ``i < num_reqs``: the kernel's decision, or None when it does nothing.

    Pure integer math in Python ints (``//`` floors, as in the spec). Only the first
    ``num_reqs`` slots of each array are read; the rest may hold anything.
    """
    if block_size <= 0:
        raise ValueError(f"block_size must be > 0, got {block_size}")

    def head(values: Sequence[int] | torch.Tensor) -> list[int]:
        if isinstance(values, torch.Tensor):
            return [int(v) for v in values[:num_reqs].tolist()]
        return [int(v) for v in values[:num_reqs]]

    idx, sched, comp, draft, acc = (head(v) for v in
                                    (state_idx, num_scheduled, num_computed, num_draft, num_accepted))
    decisions: list[KernelDecision | None] = []
    for i in range(num_reqs):
        running = comp[i] + sched[i] - draft[i]
        new = running + acc[i] - 1
        aligned = (new // block_size) * block_size
        if aligned < running:
            decisions.append(None)
            continue
        bias = aligned - running
        dest = aligned // block_size - 1
        src = idx[i]
        decisions.append(KernelDecision(src=src, dest=dest, bias=bias,
                                        copy=not (src == dest and bias == 0),
                                        normalize_accepted=src == dest))
    return decisions


def _physical_block(block_table: torch.Tensor, req: int, column: int, num_blocks: int) -> int | None:
    """``block_table[req, column]``, or None when the column or the block is out of range.

    Out-of-range indices are out of contract; the kernel skips such copies instead of
    touching memory it does not own, and so does the reference.
    """
    if not 0 <= column < block_table.shape[1]:
        return None
    block = int(block_table[req, column])
    return block if 0 <= block < num_blocks else None


def apply_state_copy(spec: MambaStateSpec, block_table: torch.Tensor, req: int,
                     decision: KernelDecision) -> None:
    """Do one (request, state) copy of a decision that has ``copy`` set."""
    state = spec.tensor
    src, dest, bias = decision.src, decision.dest, decision.bias
    num_blocks = state.shape[0]
    if spec.kind == "conv":
        conv_width = state.shape[1]
        if bias >= conv_width:
            return
        src_block = _physical_block(block_table, req, src, num_blocks)
        dest_block = _physical_block(block_table, req, dest, num_blocks)
        if src_block is None or dest_block is None:
            return
        # clone() first: when both columns map to one block this is a memmove.
        window = state[src_block, bias:].clone()
        state[dest_block, :conv_width - bias] = window
    else:
        src_block = _physical_block(block_table, req, src + bias, num_blocks)
        dest_block = _physical_block(block_table, req, dest, num_blocks)
        if src_block is None or dest_block is None:
            return
        state[dest_block] = state[src_block].clone()


def _check_state(spec: MambaStateSpec, index: int, num_groups: int) -> None:
    if spec.kind not in STATE_KINDS:
        raise ValueError(f"states[{index}].kind must be one of {STATE_KINDS}, got {spec.kind!r}")
    if not 0 <= spec.group < num_groups:
        raise ValueError(f"states[{index}].group is {spec.group}, but there are {num_groups} "
                         f"block tables")
    tensor = spec.tensor
    if spec.kind == "conv" and tensor.dim() != 3:
        raise ValueError(f"states[{index}] is a conv state and must be "
                         f"[num_blocks, conv_width, inner], got shape {tuple(tensor.shape)}")
    if spec.kind == "temporal" and tensor.dim() < 1:
        raise ValueError(f"states[{index}] is a temporal state and must be [num_blocks, ...], "
                         f"got shape {tuple(tensor.shape)}")
    expected = 1
    for dim in range(tensor.dim() - 1, 0, -1):
        if tensor.shape[dim] != 1 and tensor.stride(dim) != expected:
            raise ValueError(f"states[{index}] must be contiguous in its trailing dims, got "
                             f"shape {tuple(tensor.shape)} strides {tensor.stride()}")
        expected *= tensor.shape[dim]


def check_inputs(states: Sequence[MambaStateSpec], block_tables: Sequence[torch.Tensor],
                  staged: dict[str, torch.Tensor], num_reqs: int, block_size: int) -> torch.device:
    """Validate everything the kernel relies on; return the common device."""
    if num_reqs < 0:
        raise ValueError(f"num_reqs must be >= 0, got {num_reqs}")
    if block_size <= 0:
        raise ValueError(f"block_size must be > 0, got {block_size}")
    tensors: list[tuple[str, torch.Tensor]] = list(staged.items())
    for name, tensor in staged.items():
        if tensor.dtype != torch.int32 or tensor.dim() != 1 or tensor.stride(0) != 1:
            raise ValueError(f"{name} must be a contiguous 1-D int32 tensor, got dtype "
                             f"{tensor.dtype} shape {tuple(tensor.shape)} strides {tensor.stride()}")
        if tensor.shape[0] < num_reqs:
            raise ValueError(f"{name} has {tensor.shape[0]} slots, fewer than num_reqs={num_reqs}")
    for g, table in enumerate(block_tables):
        if table.dtype != torch.int32 or table.dim() != 2:
            raise ValueError(f"block_tables[{g}] must be a 2-D int32 tensor, got dtype "
                             f"{table.dtype} shape {tuple(table.shape)}")
        if table.shape[0] < num_reqs:
            raise ValueError(f"block_tables[{g}] has {table.shape[0]} rows, fewer than "
                             f"num_reqs={num_reqs}")
        tensors.append((f"block_tables[{g}]", table))
    for s, spec in enumerate(states):
        _check_state(spec, s, len(block_tables))
        tensors.append((f"states[{s}].tensor", spec.tensor))
    device = staged["num_accepted"].device
    for name, tensor in tensors:
        if tensor.device != device:
            raise ValueError(f"all tensors must be on one device: num_accepted is on {device}, "
                             f"{name} on {tensor.device}")
    return device


def mamba_postprocess_reference(states: Sequence[MambaStateSpec],
                                block_tables: Sequence[torch.Tensor],
                                num_accepted: torch.Tensor,
                                state_idx: torch.Tensor,
                                num_scheduled: torch.Tensor,
                                num_computed: torch.Tensor,
                                num_draft: torch.Tensor,
                                num_reqs: int,
                                block_size: int) -> None:
    """Do what the kernel does, one request and one state at a time.

    Same arguments and effects as :func:`impl.postprocess.mamba_postprocess`: copies
    states in place and sets ``num_accepted[i] = 1`` where ``src == dest``. All
    decisions are taken from ``num_accepted`` as it was on entry (a snapshot). Malformed
    inputs are refused with a ValueError, as the kernel's host wrapper refuses them.
    """
    staged = {"num_accepted": num_accepted, "state_idx": state_idx, "num_scheduled": num_scheduled,
              "num_computed": num_computed, "num_draft": num_draft}
    check_inputs(states, block_tables, staged, num_reqs, block_size)
    decisions = kernel_decisions(state_idx, num_scheduled, num_computed, num_draft,
                                 num_accepted, num_reqs, block_size)
    for req, decision in enumerate(decisions):
        if decision is None:
            continue
        if decision.normalize_accepted:
            num_accepted[req] = 1
        if decision.copy:
            for spec in states:
                apply_state_copy(spec, block_tables[spec.group], req, decision)
