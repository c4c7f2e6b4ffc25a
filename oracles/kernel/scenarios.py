"""Scenarios for the Mamba postprocess kernel: hypothesis strategies, tensors, comparison.

A :class:`KernelScenario` is plain data (ints, strings, lists): it prints, saves as
JSON (``to_dict``/``from_dict``) and replays anywhere. :func:`build_kernel_inputs`
turns it into tensors on a device; :func:`compare_kernel_outputs` lists every
bit-level difference between two runs.

Memory layout, like the engine's: each layer owns one uint8 *page* buffer
``[num_blocks, page_bytes]`` that holds the layer's conv state and its temporal state
side by side (optionally with padding), and the two state tensors are dtype views
into it. So the block stride is the page size, larger than either state's block, and
a copy that writes too many bytes corrupts a neighbour that the comparison sees.
"""

from __future__ import annotations

import json
import mmap
from dataclasses import asdict, dataclass, field
from typing import Any, Sequence

import numpy as np
import torch
from hypothesis import strategies as st

from stagecheck.impl.postprocess_ref import KernelDecision, MambaStateSpec, kernel_decisions
from stagecheck.oracles.kernel import postprocess_function

DTYPES: dict[str, torch.dtype] = {"float16": torch.float16, "bfloat16": torch.bfloat16,
                                  "float32": torch.float32}
INT32_MIN, INT32_MAX = -2**31, 2**31 - 1


@dataclass
class LayerSpec:
    """One Mamba layer: a conv state and a temporal state sharing a page per block."""

    group: int
    conv_width: int
    conv_inner: int
    conv_dtype: str
    temporal_shape: list[int]
    temporal_dtype: str
    temporal_first: bool = False  # page order: temporal state before the conv state
    pad_bytes: int = 0            # padding after each state inside the page


@dataclass(frozen=True)
class SparseTable:
    """A block table that maps almost every column to block 0: ``rows x columns``, with
    the other entries listed (the impact check's long-context tables are 65,536 wide)."""

    rows: int
    columns: int
    entries: dict     # (row, column) -> physical block


@dataclass
class KernelScenario:
    """Everything one kernel launch sees, as plain data.

    The five per-request lists have ``max_reqs`` slots; slots ``>= num_reqs`` hold
    garbage the kernel must not read. ``block_tables[g]`` is group ``g``'s table
    ``[max_reqs][max_blocks]``. State contents are random bits drawn from ``seed``.
    """

    block_size: int
    num_reqs: int
    num_blocks: int
    state_idx: list[int]
    num_scheduled: list[int]
    num_computed: list[int]
    num_draft: list[int]
    num_accepted: list[int]
    block_tables: list[list[list[int]] | SparseTable]
    layers: list[LayerSpec]
    seed: int = 0

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "KernelScenario":
        values = dict(data)
        values["layers"] = [LayerSpec(**layer) for layer in data["layers"]]
        return cls(**values)

    def to_json(self) -> str:
        return json.dumps(self.to_dict())

    @classmethod
    def from_json(cls, text: str) -> "KernelScenario":
        return cls.from_dict(json.loads(text))

    def decisions(self) -> list[KernelDecision | None]:
        """The kernel's per-request decisions (see ``kernel_decisions``)."""
        return kernel_decisions(self.state_idx, self.num_scheduled, self.num_computed,
                                self.num_draft, self.num_accepted, self.num_reqs, self.block_size)


@dataclass
class PageLayout:
    """Byte offsets of a layer's two states inside its page."""

    conv_offset: int
    conv_bytes: int
    temporal_offset: int
    temporal_bytes: int
    page_bytes: int


def _round_up(value: int, multiple: int) -> int:
    return -(-value // multiple) * multiple


def page_layout(layer: LayerSpec) -> PageLayout:
    """Where the layer's states sit in its page (offsets aligned to their element size)."""
    conv_elem = DTYPES[layer.conv_dtype].itemsize
    temporal_elem = DTYPES[layer.temporal_dtype].itemsize
    conv_bytes = layer.conv_width * layer.conv_inner * conv_elem
    temporal_bytes = temporal_elem
    for dim in layer.temporal_shape:
        temporal_bytes *= dim
    order = [("temporal", temporal_bytes, temporal_elem), ("conv", conv_bytes, conv_elem)]
    if not layer.temporal_first:
        order.reverse()
    offsets: dict[str, int] = {}
    cursor = 0
    for name, size, elem in order:
        offsets[name] = _round_up(cursor, elem)
        cursor = offsets[name] + size + layer.pad_bytes
    page_bytes = _round_up(max(cursor, 1), max(conv_elem, temporal_elem))
    return PageLayout(offsets["conv"], conv_bytes, offsets["temporal"], temporal_bytes, page_bytes)


@dataclass
class KernelInputs:
    """Tensors materialized from a scenario; after a run they hold the outputs."""

    scenario: KernelScenario
    pages: list[torch.Tensor]         # per layer, uint8 [num_blocks, page_bytes]
    states: list[MambaStateSpec]      # per layer: conv state, then temporal state
    block_tables: list[torch.Tensor]
    num_accepted: torch.Tensor
    state_idx: torch.Tensor
    num_scheduled: torch.Tensor
    num_computed: torch.Tensor
    num_draft: torch.Tensor
    labels: list[str] = field(default_factory=list)  # one per state, e.g. "layer1.conv(g0)"

    def run(self, backend: str = "triton", **kwargs: Any) -> "KernelInputs":
        """Run the kernel (``backend``) in place on these tensors; return self."""

        postprocess_function(backend)(
            self.states, self.block_tables, self.num_accepted, self.state_idx,
            self.num_scheduled, self.num_computed, self.num_draft, self.scenario.num_reqs,
            self.scenario.block_size, **kwargs)
        return self

    def staged(self) -> dict[str, torch.Tensor]:
        return {"num_accepted": self.num_accepted, "state_idx": self.state_idx,
                "num_scheduled": self.num_scheduled, "num_computed": self.num_computed,
                "num_draft": self.num_draft}


def _untouched_zeros(shape: tuple[int, int]) -> torch.Tensor:
    """An int32 table of zeros on the CPU whose pages no entry touches are never made (a
    table of 1,024 x 65,536 costs what its entries do): anonymous memory mapped for it,
    in small pages. numpy's zeros ask for huge pages, so each entry written there made
    2 MiB (a kernel-impact probe spent 8 s of a 10-s run on it)."""
    count = shape[0] * shape[1]
    memory = mmap.mmap(-1, max(count * 4, 1))
    if hasattr(memory, "madvise") and hasattr(mmap, "MADV_NOHUGEPAGE"):
        memory.madvise(mmap.MADV_NOHUGEPAGE)
    return torch.from_numpy(np.frombuffer(memory, dtype=np.int32, count=count).reshape(shape))


def build_block_tables(scenario: KernelScenario, device: str | torch.device = "cpu"
                       ) -> list[torch.Tensor]:
    """``scenario``'s block tables as int32 tensors on ``device``."""
    def table_tensor(table) -> torch.Tensor:
        if isinstance(table, SparseTable):
            shape = (table.rows, table.columns)
            if torch.device(device).type == "cpu":
                out = _untouched_zeros(shape)
            else:
                out = torch.zeros(shape, dtype=torch.int32, device=device)
            if table.entries:
                where = torch.tensor(list(table.entries), dtype=torch.long, device=out.device)
                out.view(-1)[where[:, 0] * shape[1] + where[:, 1]] = torch.tensor(
                    list(table.entries.values()), dtype=torch.int32, device=out.device)
            return out
        return torch.tensor(table, dtype=torch.int32, device=device).reshape(
            len(table), len(table[0]) if table else 0)

    return [table_tensor(table) for table in scenario.block_tables]


def build_kernel_inputs(scenario: KernelScenario, device: str | torch.device = "cpu",
                        tables: list[torch.Tensor] | None = None) -> KernelInputs:
    """Materialize ``scenario`` on ``device``; pages hold random bits from its seed.

    ``tables``: its block tables already built (runs that only read them may share them).
    """
    generator = torch.Generator().manual_seed(scenario.seed)
    pages: list[torch.Tensor] = []
    states: list[MambaStateSpec] = []
    labels: list[str] = []
    for index, layer in enumerate(scenario.layers):
        layout = page_layout(layer)
        page = torch.randint(0, 256, (scenario.num_blocks, layout.page_bytes), dtype=torch.uint8,
                             generator=generator).to(device)
        conv = page[:, layout.conv_offset:layout.conv_offset + layout.conv_bytes]
        conv = conv.view(DTYPES[layer.conv_dtype]).view(scenario.num_blocks, layer.conv_width,
                                                        layer.conv_inner)
        temporal = page[:, layout.temporal_offset:layout.temporal_offset + layout.temporal_bytes]
        temporal = temporal.view(DTYPES[layer.temporal_dtype]).view(scenario.num_blocks,
                                                                    *layer.temporal_shape)
        pages.append(page)
        states += [MambaStateSpec(conv, "conv", layer.group),
                   MambaStateSpec(temporal, "temporal", layer.group)]
        labels += [f"layer{index}.conv(g{layer.group})", f"layer{index}.temporal(g{layer.group})"]

    def int32(values: Sequence[int]) -> torch.Tensor:
        return torch.tensor(list(values), dtype=torch.int32, device=device)

    if tables is None:
        tables = build_block_tables(scenario, device)
    return KernelInputs(scenario=scenario, pages=pages, states=states, block_tables=tables,
                        num_accepted=int32(scenario.num_accepted), state_idx=int32(scenario.state_idx),
                        num_scheduled=int32(scenario.num_scheduled),
                        num_computed=int32(scenario.num_computed), num_draft=int32(scenario.num_draft),
                        labels=labels)


def state_bytes(tensor: torch.Tensor) -> torch.Tensor:
    """A ``[num_blocks, bytes_per_block]`` uint8 copy of a state's bits (NaN-safe)."""
    rows = tensor.reshape(tensor.shape[0], -1).contiguous()
    return rows.view(torch.uint8).cpu()


def _describe_rows(label: str, a: torch.Tensor, b: torch.Tensor) -> list[str]:
    differs = a != b
    blocks = differs.any(dim=1).nonzero().flatten().tolist()
    if not blocks:
        return []
    block = blocks[0]
    byte = int(differs[block].nonzero()[0])
    return [f"{label}: blocks {blocks} differ ({int(differs.sum())} bytes); first at block "
            f"{block} byte {byte}: {int(a[block, byte]):#04x} != {int(b[block, byte]):#04x}"]


def compare_kernel_outputs(a: KernelInputs, b: KernelInputs) -> list[str]:
    """Every bit-level difference between two runs of the same scenario; [] when identical.

    Compares each state tensor per block, the page bytes outside the states (padding),
    ``num_accepted`` per slot, and the inputs the kernel must leave alone (the four
    staged arrays and the block tables).
    """
    if (len(a.pages), len(a.block_tables)) != (len(b.pages), len(b.block_tables)):
        raise ValueError("compare_kernel_outputs needs two runs of the same scenario")
    found: list[str] = []
    for index, layer in enumerate(a.scenario.layers):
        for slot in (2 * index, 2 * index + 1):
            found += _describe_rows(a.labels[slot], state_bytes(a.states[slot].tensor),
                                    state_bytes(b.states[slot].tensor))
        layout = page_layout(layer)
        outside = torch.ones(layout.page_bytes, dtype=torch.bool)
        outside[layout.conv_offset:layout.conv_offset + layout.conv_bytes] = False
        outside[layout.temporal_offset:layout.temporal_offset + layout.temporal_bytes] = False
        found += _describe_rows(f"layer{index}.padding", a.pages[index].cpu()[:, outside],
                                b.pages[index].cpu()[:, outside])
    for name, tensor in a.staged().items():
        other = b.staged()[name]
        slots = (tensor.cpu() != other.cpu()).nonzero().flatten().tolist()
        if slots:
            found.append(f"{name}: slots {slots} differ: {tensor.cpu()[slots].tolist()} != "
                         f"{other.cpu()[slots].tolist()}")
    for g, (table, other) in enumerate(zip(a.block_tables, b.block_tables)):
        if table is not other and not torch.equal(table.cpu(), other.cpu()):
            found.append(f"block_tables[{g}] differ")
    return found


# --------------------------------------------------------------------------- builders


def make_kernel_scenario(requests: Sequence[tuple[int, int, int, int, int]], block_size: int,
                         layers: Sequence[LayerSpec], *, num_groups: int | None = None,
                         tail: int = 0, spare_blocks: int = 1, seed: int = 0) -> KernelScenario:
    """A scenario from ``(computed, scheduled, draft, accepted, state_idx)`` per request.

    Block tables give every (request, column) its own physical block, in a different
    order per group; ``tail`` extra slots hold garbage (huge and negative values).
    Tests edit the returned plain data for special cases (aliasing, bad ids).
    """
    num_reqs = len(requests)
    if num_groups is None:
        num_groups = max((layer.group for layer in layers), default=0) + 1
    scenario = KernelScenario(
        block_size=block_size, num_reqs=num_reqs, num_blocks=0,
        state_idx=[r[4] for r in requests], num_scheduled=[r[1] for r in requests],
        num_computed=[r[0] for r in requests], num_draft=[r[2] for r in requests],
        num_accepted=[r[3] for r in requests], block_tables=[], layers=list(layers), seed=seed)
    max_blocks = _columns_needed(scenario)
    scenario.num_blocks = num_reqs * max_blocks + spare_blocks
    garbage = [INT32_MAX, INT32_MIN, -1, 1 << 20]
    for name in ("state_idx", "num_scheduled", "num_computed", "num_draft", "num_accepted"):
        values = getattr(scenario, name)
        values += [garbage[(k + len(name)) % len(garbage)] for k in range(tail)]
    for g in range(num_groups):
        blocks = list(range(scenario.num_blocks))
        rotated = blocks[g:] + blocks[:g]
        rows = [[rotated[(i * max_blocks + c) % len(rotated)] for c in range(max_blocks)]
                for i in range(num_reqs)]
        rows += [[garbage[(i + c) % len(garbage)] for c in range(max_blocks)] for i in range(tail)]
        scenario.block_tables.append(rows)
    return scenario


def _columns_needed(scenario: KernelScenario) -> int:
    """Block columns the live requests touch (src, dest, src + bias), at least 1."""
    needed = 1
    for i, decision in enumerate(scenario.decisions()):
        needed = max(needed, scenario.state_idx[i] + 1)
        if decision is not None:
            needed = max(needed, decision.dest + 1, decision.src + decision.bias + 1)
    return needed


# --------------------------------------------------------------------------- hypothesis

_dtype_names = st.sampled_from(sorted(DTYPES))


@st.composite
def _layer_specs(draw: st.DrawFn, num_groups: int) -> LayerSpec:
    return LayerSpec(
        group=draw(st.integers(0, num_groups - 1)),
        conv_width=draw(st.integers(1, 4)),
        conv_inner=draw(st.integers(1, 6)),
        conv_dtype=draw(_dtype_names),
        temporal_shape=draw(st.lists(st.integers(1, 4), min_size=1, max_size=3)),
        temporal_dtype=draw(_dtype_names),
        temporal_first=draw(st.booleans()),
        pad_bytes=draw(st.sampled_from([0, 0, 2, 4, 16])),
    )


@st.composite
def _requests(draw: st.DrawFn, block_size: int) -> tuple[int, int, int, int, int]:
    """One live request ``(computed, scheduled, draft, accepted, state_idx)``.

    Two times in three the accepted tokens cross a block boundary (a save is due):
    ``running = m * block_size - bias`` with ``bias`` an accepted position that
    keeps ``m * block_size`` the last boundary reached. Otherwise computed is random.
    """
    draft = draw(st.integers(0, 3))
    accepted = draw(st.integers(1, draft + 1))
    if draw(st.sampled_from([True, True, False])):
        bias = draw(st.integers(max(0, accepted - block_size), accepted - 1))
        first = -(-(bias + 1) // block_size)
        running = draw(st.integers(first, first + 3)) * block_size - bias
    else:
        running = draw(st.integers(1, 4 * block_size))
    extra = draw(st.one_of(st.just(0), st.integers(0, min(running - 1, 2 * block_size))))
    scheduled = draft + 1 + extra
    computed = running + draft - scheduled
    natural = (running - 1) // block_size
    state_idx = max(0, natural - draw(st.sampled_from([0, 0, 0, 1, 2])))
    return computed, scheduled, draft, accepted, state_idx


@st.composite
def kernel_scenarios(draw: st.DrawFn, max_reqs: int = 5, max_layers: int = 4,
                     max_groups: int = 3) -> KernelScenario:
    """Kernel-valid scenarios: every column and block id the kernel reads is in range.

    Per request: ``draft`` 0..3, ``scheduled = draft + 1`` (decode) or more (a chunk
    of prefill), ``accepted`` 1..draft+1, usually crossing a block boundary (see
    ``_requests``). The running state's column ``state_idx`` is
    usually ``(running - 1) // block_size`` (so ``src == dest`` whenever a save is
    due: overlapping conv shifts and no-copy requests), sometimes an earlier column
    (copies between distinct blocks). Physical blocks are distinct per group, except
    that a request may alias ``dest`` onto ``src``'s block. Tail slots hold garbage.
    """
    block_size = draw(st.integers(1, 8), label="block_size")
    num_reqs = draw(st.integers(0, max_reqs), label="num_reqs")
    tail = draw(st.integers(0, 2), label="tail")
    num_groups = draw(st.integers(1, max_groups), label="num_groups")
    layers = draw(st.lists(_layer_specs(num_groups), min_size=1, max_size=max_layers))
    requests = [draw(_requests(block_size)) for _ in range(num_reqs)]
    scenario = make_kernel_scenario(requests, block_size, layers, num_groups=num_groups,
                                    spare_blocks=draw(st.integers(1, 3)), seed=draw(st.integers(0, 2**32 - 1)))
    max_blocks = _columns_needed(scenario)
    for g in range(num_groups):
        table = scenario.block_tables[g]
        order = draw(st.permutations(range(scenario.num_blocks)))
        for i in range(num_reqs):
            table[i] = [order[i * max_blocks + c] for c in range(max_blocks)]
    for i, decision in enumerate(scenario.decisions()):
        if decision is not None and decision.src != decision.dest and draw(st.booleans()):
            for g in draw(st.sets(st.integers(0, num_groups - 1), min_size=1)):
                scenario.block_tables[g][i][decision.dest] = scenario.block_tables[g][i][decision.src]
    int32s = st.integers(INT32_MIN, INT32_MAX)
    for name in ("state_idx", "num_scheduled", "num_computed", "num_draft", "num_accepted"):
        getattr(scenario, name).extend(draw(st.lists(int32s, min_size=tail, max_size=tail)))
    for table in scenario.block_tables:
        table.extend(draw(st.lists(st.lists(int32s, min_size=max_blocks, max_size=max_blocks),
                                   min_size=tail, max_size=tail)))
    return scenario
