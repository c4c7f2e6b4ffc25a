"""The fused Mamba postprocess kernel (domain.md section 3) and its host wrapper.

After draft tokens are verified, one launch decides per request whether the running
Mamba state must be saved into a block-aligned slot and does the copies, for every
state tensor of every layer and group at once. The entry point is
:func:`mamba_postprocess`; ``backend="reference"`` runs the Python reference from
``impl/postprocess_ref.py`` instead of the Triton kernel.

Devices: on CUDA the kernel is compiled. On a CPU-only machine it runs in Triton's
interpreter, which is selected by the environment variable ``TRITON_INTERPRET=1``; it
must be set before triton (or this module) is imported. This module never sets it.
The kernel dereferences raw addresses (``tensor.data_ptr()``), so the interpreter can
only serve CPU tensors and the compiled kernel only CUDA tensors; a mismatch is
refused with a RuntimeError.

The kernel copies words of 1, 2, 4 or 8 bytes through integer pointers, so it is
dtype-agnostic and bit-exact (NaN payloads included) for fp16, bf16 and fp32 states.
"""

from __future__ import annotations

import functools
from collections import OrderedDict
from typing import Sequence

import torch
import triton
import triton.language as tl
from triton.runtime.interpreter import InterpretedFunction

from stagecheck.impl.postprocess_ref import (KernelDecision, MambaStateSpec,
                                             StateKind, check_inputs, kernel_decisions,
                                             mamba_postprocess_reference)

__all__ = ["BACKENDS", "KernelDecision", "MambaStateSpec", "StateKind", "kernel_decisions",
           "mamba_postprocess", "mamba_postprocess_reference", "build_state_metadata"]

BACKENDS: tuple[str, ...] = ("triton", "reference")

# Columns of the per-state metadata rows (int64, one row per state tensor). They are
# Triton constexprs so the kernel can use them; on the host they act as ints.
META_BASE = tl.constexpr(0)          # base address of the state tensor in bytes (data_ptr())
META_BLOCK_STRIDE = tl.constexpr(1)  # bytes between consecutive physical blocks
META_NUM_BLOCKS = tl.constexpr(2)    # physical blocks in the tensor (shape[0]); bounds block ids
META_ELEM_SIZE = tl.constexpr(3)     # element size in bytes (informational: the kernel copies words)
META_COPY_BYTES = tl.constexpr(4)    # conv: bytes per conv row (inner * elsize); temporal: per block
META_CONV_WIDTH = tl.constexpr(5)    # rows in the conv window; 0 for a temporal state
META_GROUP = tl.constexpr(6)         # index of the block table (group) the state belongs to
META_KIND = tl.constexpr(7)          # KIND_CONV or KIND_TEMPORAL
META_FIELDS = tl.constexpr(8)

# Columns of the per-group block-table rows (int64, one row per group).
GROUP_BASE = tl.constexpr(0)         # base address of the int32 block table [max_reqs, max_blocks]
GROUP_ROW_STRIDE = tl.constexpr(1)   # elements between rows (requests)
GROUP_COL_STRIDE = tl.constexpr(2)   # elements between columns (block columns)
GROUP_NUM_COLS = tl.constexpr(3)     # max_blocks: valid columns are 0 .. max_blocks - 1
GROUP_FIELDS = tl.constexpr(4)

KIND_CONV = tl.constexpr(0)
KIND_TEMPORAL = tl.constexpr(1)
KIND_CODES: dict[str, int] = {"conv": int(KIND_CONV), "temporal": int(KIND_TEMPORAL)}

_BLOCK = 1024                    # words per loop iteration of one program
_NUM_WARPS = 4
_MIN_PART_BYTES = 16 * 1024      # a temporal copy is split across programs in parts >= this
_TARGET_PROGRAMS_PER_SM = 4
_MAX_WORD = 8


@triton.jit
def _floor_div(a, b):
    """Python-style floor division for b > 0 (Triton's ``//`` truncates toward zero)."""
    q = a // b
    return tl.where(q * b > a, q - 1, q)


@triton.jit
def _word_pointer(address, WORD: tl.constexpr):
    """Turn an int64 byte address into a pointer to WORD-byte integers."""
    if WORD == 8:
        ptr = address.to(tl.pointer_type(tl.int64))
    elif WORD == 4:
        ptr = address.to(tl.pointer_type(tl.int32))
    elif WORD == 2:
        ptr = address.to(tl.pointer_type(tl.int16))
    else:
        ptr = address.to(tl.pointer_type(tl.uint8))
    return ptr


@triton.jit
def _physical_block(group_meta_ptr, group, req, column, num_blocks):
    """Physical block of ``column`` for request ``req`` in ``group``'s table, or -1.

    -1 when the column is outside the table or the stored id outside the state tensor:
    out of contract, and the copy is then skipped rather than touching foreign memory.
    """
    row = group_meta_ptr + group * GROUP_FIELDS
    table = tl.load(row + GROUP_BASE)
    row_stride = tl.load(row + GROUP_ROW_STRIDE)
    col_stride = tl.load(row + GROUP_COL_STRIDE)
    num_cols = tl.load(row + GROUP_NUM_COLS)
    in_table = (column >= 0) & (column < num_cols)
    entry = (table + (req * row_stride + column * col_stride) * 4).to(tl.pointer_type(tl.int32))
    block = tl.load(entry, mask=in_table, other=-1).to(tl.int64)
    return tl.where((block >= 0) & (block < num_blocks), block, -1)


@triton.jit
def _copy_words(src_address, dst_address, lo, hi, WORD: tl.constexpr, BLOCK: tl.constexpr,
                OVERLAP_SAFE: tl.constexpr):
    """Copy words ``[lo, hi)`` from ``src_address`` to ``dst_address``, low to high.

    With OVERLAP_SAFE, a barrier separates each chunk's loads from its stores, so a
    move to a lower address within the same bytes (a left shift) behaves like memmove:
    a later chunk only reads bytes above everything already written.
    """
    src = _word_pointer(src_address, WORD)
    dst = _word_pointer(dst_address, WORD)
    for start in range(lo, hi, BLOCK):
        offsets = start + tl.arange(0, BLOCK)
        mask = offsets < hi
        words = tl.load(src + offsets, mask=mask)
        if OVERLAP_SAFE:
            tl.debug_barrier()
        tl.store(dst + offsets, words, mask=mask)


@triton.jit
def _mamba_postprocess_kernel(
    state_meta_ptr,     # int64 [num_states, META_FIELDS]: per-state metadata rows (META_* columns)
    group_meta_ptr,     # int64 [num_groups, GROUP_FIELDS]: per-group block-table rows (GROUP_* columns)
    accepted_in_ptr,    # int32 [num_reqs]: snapshot of num_accepted taken before launch; only read
    accepted_out_ptr,   # int32 [>= num_reqs]: num_accepted, set to 1 where src == dest
    state_idx_ptr,      # int32 [>= num_reqs]: block column holding each request's running state
    num_scheduled_ptr,  # int32 [>= num_reqs]: tokens scheduled this step
    num_computed_ptr,   # int32 [>= num_reqs]: tokens computed before this step
    num_draft_ptr,      # int32 [>= num_reqs]: draft (speculative) tokens this step
    num_states,         # rows of state_meta; the grid's axis 1 is max(num_states, 1)
    block_size,         # tokens per block, > 0
    CONV_WORD: tl.constexpr,      # bytes per copied word for conv states (1, 2, 4 or 8)
    TEMPORAL_WORD: tl.constexpr,  # bytes per copied word for temporal states
    BLOCK: tl.constexpr,          # words per loop iteration
):
    req = tl.program_id(0)
    state = tl.program_id(1)
    part = tl.program_id(2)
    num_parts = tl.num_programs(2)

    computed = tl.load(num_computed_ptr + req).to(tl.int64)
    scheduled = tl.load(num_scheduled_ptr + req).to(tl.int64)
    draft = tl.load(num_draft_ptr + req).to(tl.int64)
    accepted = tl.load(accepted_in_ptr + req).to(tl.int64)
    src = tl.load(state_idx_ptr + req).to(tl.int64)

    running = computed + scheduled - draft
    new = running + accepted - 1
    aligned_blocks = _floor_div(new, block_size)
    aligned = aligned_blocks * block_size
    if aligned >= running:
        bias = aligned - running
        dest = aligned_blocks - 1
        if (src == dest) & (state == 0) & (part == 0):
            # Once per request: only program (req, 0, 0) writes.
            tl.store(accepted_out_ptr + req, 1)
        if ((src != dest) | (bias != 0)) & (state < num_states):
            meta = state_meta_ptr + state * META_FIELDS
            base = tl.load(meta + META_BASE)
            block_stride = tl.load(meta + META_BLOCK_STRIDE)
            num_blocks = tl.load(meta + META_NUM_BLOCKS)
            copy_bytes = tl.load(meta + META_COPY_BYTES)
            conv_width = tl.load(meta + META_CONV_WIDTH)
            group = tl.load(meta + META_GROUP)
            kind = tl.load(meta + META_KIND)
            if kind == KIND_CONV:
                # Conv: shift the window left by `bias` rows; one program does it all
                # (the move may overlap itself and must stay in order).
                src_block = _physical_block(group_meta_ptr, group, req, src, num_blocks)
                dst_block = _physical_block(group_meta_ptr, group, req, dest, num_blocks)
                if (part == 0) & (bias < conv_width) & (src_block >= 0) & (dst_block >= 0):
                    row_words = copy_bytes // CONV_WORD
                    _copy_words(base + src_block * block_stride + bias * copy_bytes,
                                base + dst_block * block_stride,
                                0, (conv_width - bias) * row_words,
                                CONV_WORD, BLOCK, True)
            else:
                # Temporal: copy the whole block of column src + bias; split across parts.
                src_block = _physical_block(group_meta_ptr, group, req, src + bias, num_blocks)
                dst_block = _physical_block(group_meta_ptr, group, req, dest, num_blocks)
                if (src_block >= 0) & (dst_block >= 0):
                    total = copy_bytes // TEMPORAL_WORD
                    per_part = tl.cdiv(tl.cdiv(total, num_parts), BLOCK) * BLOCK
                    lo = part * per_part
                    hi = tl.minimum(lo + per_part, total)
                    _copy_words(base + src_block * block_stride,
                                base + dst_block * block_stride,
                                lo, hi, TEMPORAL_WORD, BLOCK, False)


_metadata_cache: OrderedDict[tuple, tuple[torch.Tensor, torch.Tensor, int, int, int]] = OrderedDict()
_METADATA_CACHE_SIZE = 32


def _largest_word(values: Sequence[int]) -> int:
    """The largest power of two <= 8 that divides every value (bytes per copied word)."""
    word = _MAX_WORD
    while word > 1 and any(v % word for v in values):
        word //= 2
    return word


def build_state_metadata(states: Sequence[MambaStateSpec], block_tables: Sequence[torch.Tensor],
                         device: torch.device) -> tuple[torch.Tensor, torch.Tensor, int, int, int]:
    """Metadata for one launch: ``(state_meta, group_meta, conv_word, temporal_word, max_temporal_bytes)``.

    ``state_meta`` is int64 ``[num_states, META_FIELDS]``, ``group_meta`` int64
    ``[num_groups, GROUP_FIELDS]``, both on ``device``. The words are the largest
    power-of-two sizes (<= 8 bytes) dividing every address, stride and copy size of
    that kind. Results are cached by everything they depend on (addresses, shapes,
    strides, dtypes), so a repeated launch over the same tensors builds nothing.
    """
    key = (device,
           tuple((s.tensor.data_ptr(), tuple(s.tensor.shape), s.tensor.stride(), s.tensor.dtype,
                  s.kind, s.group) for s in states),
           tuple((t.data_ptr(), tuple(t.shape), t.stride()) for t in block_tables))
    cached = _metadata_cache.get(key)
    if cached is not None:
        _metadata_cache.move_to_end(key)
        return cached
    rows: list[list[int]] = []
    conv_sizes: list[int] = []
    temporal_sizes: list[int] = []
    max_temporal_bytes = 0
    for spec in states:
        tensor = spec.tensor
        elem = tensor.element_size()
        block_stride = tensor.stride(0) * elem
        if spec.kind == "conv":
            copy_bytes = tensor.shape[2] * elem
            conv_width = tensor.shape[1]
            conv_sizes += [tensor.data_ptr(), block_stride, copy_bytes]
        else:
            copy_bytes = tensor[0].numel() * elem if tensor.shape[0] else 0
            conv_width = 0
            temporal_sizes += [tensor.data_ptr(), block_stride, copy_bytes]
            max_temporal_bytes = max(max_temporal_bytes, copy_bytes)
        row = [0] * int(META_FIELDS)
        row[META_BASE] = tensor.data_ptr()
        row[META_BLOCK_STRIDE] = block_stride
        row[META_NUM_BLOCKS] = tensor.shape[0]
        row[META_ELEM_SIZE] = elem
        row[META_COPY_BYTES] = copy_bytes
        row[META_CONV_WIDTH] = conv_width
        row[META_GROUP] = spec.group
        row[META_KIND] = KIND_CODES[spec.kind]
        rows.append(row)
    # GROUP_BASE, GROUP_ROW_STRIDE, GROUP_COL_STRIDE, GROUP_NUM_COLS
    groups = [[t.data_ptr(), t.stride(0), t.stride(1), t.shape[1]] for t in block_tables]
    state_meta = torch.tensor(rows, dtype=torch.int64).reshape(len(rows), int(META_FIELDS))
    group_meta = torch.tensor(groups, dtype=torch.int64).reshape(len(groups), int(GROUP_FIELDS))
    state_meta, group_meta = state_meta.to(device), group_meta.to(device)
    result = (state_meta, group_meta, _largest_word(conv_sizes), _largest_word(temporal_sizes),
              max_temporal_bytes)
    _metadata_cache[key] = result
    if len(_metadata_cache) > _METADATA_CACHE_SIZE:
        _metadata_cache.popitem(last=False)
    return result


@functools.lru_cache(maxsize=None)
def _multiprocessors(device: torch.device) -> int:
    return torch.cuda.get_device_properties(device).multi_processor_count


def _auto_num_parts(device: torch.device, num_reqs: int, num_states: int,
                    max_temporal_bytes: int) -> int:
    """Parts per temporal copy: enough programs to fill the GPU, none below _MIN_PART_BYTES."""
    if device.type != "cuda":
        return 1  # the interpreter runs programs one after another: splitting only costs
    sms = _multiprocessors(device)
    wanted = triton.cdiv(_TARGET_PROGRAMS_PER_SM * sms, max(num_reqs * num_states, 1))
    return max(1, min(wanted, triton.cdiv(max_temporal_bytes, _MIN_PART_BYTES), 65535))


def _check_runtime(device: torch.device) -> None:
    interpreted = isinstance(_mamba_postprocess_kernel, InterpretedFunction)
    if device.type == "cpu" and not interpreted:
        raise RuntimeError("CPU tensors need Triton's interpreter: set TRITON_INTERPRET=1 "
                           "before importing triton / impl.postprocess")
    if device.type == "cuda" and interpreted:
        raise RuntimeError("TRITON_INTERPRET=1 is set, but the kernel dereferences raw device "
                           "addresses, which the interpreter cannot: unset it for CUDA tensors")
    if device.type not in ("cpu", "cuda"):
        raise RuntimeError(f"unsupported device {device} for the triton backend")


def mamba_postprocess(states: Sequence[MambaStateSpec],
                      block_tables: Sequence[torch.Tensor],
                      num_accepted: torch.Tensor,
                      state_idx: torch.Tensor,
                      num_scheduled: torch.Tensor,
                      num_computed: torch.Tensor,
                      num_draft: torch.Tensor,
                      num_reqs: int,
                      block_size: int,
                      *,
                      backend: str = "triton",
                      num_parts: int | None = None) -> None:
    """Save running Mamba states into block-aligned slots; normalize accepted counts.

    For every request ``i < num_reqs`` and state ``s`` (decision math in
    :func:`kernel_decisions`): a conv state's window is shifted left by ``bias`` into
    block column ``dest`` (memmove semantics when both columns share a physical block);
    a temporal state's block at column ``src + bias`` is copied to column ``dest``.

    Args:
        states: the state tensors, each with its kind and group (:class:`MambaStateSpec`).
        block_tables: one int32 ``[max_reqs, max_blocks]`` table per group.
        num_accepted: int32 ``[>= num_reqs]``, accepted tokens per request (1 ..= drafts + 1).
            Updated in place: ``num_accepted[i] = 1`` where ``src == dest``. Decisions are
            taken from a snapshot, so no program sees another's write; slots
            ``>= num_reqs`` are untouched.
        state_idx, num_scheduled, num_computed, num_draft: the four staged int32 device
            mirrors, ``[>= num_reqs]``; slots ``>= num_reqs`` are never read.
        num_reqs: live requests; 0 launches nothing.
        block_size: tokens per block.
        backend: ``"triton"`` (the kernel) or ``"reference"`` (the Python loop).
        num_parts: programs per temporal copy (None: enough to fill the GPU; 1 on CPU).

    All tensors must be on one device; states contiguous in their trailing dims.
    Column or block ids out of range are out of contract; both backends then skip that
    copy. Raises ValueError for a bad backend or malformed inputs.
    """
    if backend not in BACKENDS:
        raise ValueError(f"backend must be one of {BACKENDS}, got backend={backend!r}")
    if num_parts is not None and num_parts < 1:
        raise ValueError(f"num_parts must be >= 1 or None, got {num_parts}")
    if backend == "reference":   # validates its inputs as below
        mamba_postprocess_reference(states, block_tables, num_accepted, state_idx, num_scheduled,
                                    num_computed, num_draft, num_reqs, block_size)
        return
    staged = {"num_accepted": num_accepted, "state_idx": state_idx, "num_scheduled": num_scheduled,
              "num_computed": num_computed, "num_draft": num_draft}
    device = check_inputs(states, block_tables, staged, num_reqs, block_size)
    _check_runtime(device)
    if num_reqs == 0:
        return
    state_meta, group_meta, conv_word, temporal_word, max_temporal_bytes = \
        build_state_metadata(states, block_tables, device)
    if num_parts is None:
        num_parts = _auto_num_parts(device, num_reqs, len(states), max_temporal_bytes)
    accepted_snapshot = num_accepted[:num_reqs].clone()
    # Axis 1 has at least one program so accepted counts are normalized without states.
    grid = (num_reqs, max(len(states), 1), num_parts)
    _mamba_postprocess_kernel[grid](
        state_meta, group_meta, accepted_snapshot, num_accepted,
        state_idx, num_scheduled, num_computed, num_draft,
        len(states), block_size,
        CONV_WORD=conv_word, TEMPORAL_WORD=temporal_word, BLOCK=_BLOCK,
        num_warps=_NUM_WARPS,
    )
