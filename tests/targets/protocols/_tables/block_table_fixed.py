# Stand-in (fixed) for vLLM v1's BlockTable / MultiGroupBlockTable staging (vllm/v1/worker/block_table.py)
# and the part of GPUModelRunner that drives it: the block ids of every row live in one pinned
# CPU table (a CpuGpuBuffer), are edited in place by append_row/add_row/clear_row/move_row as the
# persistent batch changes, uploaded without blocking by commit_block_table, and read by the
# slot-mapping kernel. The runner waits on the event recorded after last step's uploads before it
# edits any pinned buffer (the input-prep window). Simplified: the slot-mapping kernel indexes
# the table by request and block (an advanced index), reading only the rows of live requests.
from contextlib import contextmanager

import numpy as np
import torch


class CpuGpuBuffer:
    def __init__(self, *size, dtype, device, pin_memory):
        self.cpu = torch.zeros(*size, dtype=dtype, pin_memory=pin_memory)
        self.np = self.cpu.numpy()
        self.gpu = torch.zeros(*size, dtype=dtype, device=device)

    def copy_to_gpu(self, n=None):
        if n is None:
            return self.gpu.copy_(self.cpu, non_blocking=True)
        return self.gpu[:n].copy_(self.cpu[:n], non_blocking=True)


class BlockTable:
    def __init__(self, block_size, max_num_reqs, max_num_blocks_per_req,
                 max_num_batched_tokens, pin_memory, device):
        self.block_size = block_size
        self.max_num_reqs = max_num_reqs
        self.max_num_blocks_per_req = max_num_blocks_per_req
        self.block_table = CpuGpuBuffer(max_num_reqs, max_num_blocks_per_req,
                                        dtype=torch.int32, device=device, pin_memory=pin_memory)
        self.num_blocks_per_row = np.zeros(max_num_reqs, dtype=np.int32)
        self.slot_mapping = CpuGpuBuffer(max_num_batched_tokens, dtype=torch.int64,
                                         device=device, pin_memory=pin_memory)

    def append_row(self, block_ids, row_idx):
        if not block_ids:
            return
        start = int(self.num_blocks_per_row[row_idx])
        self.block_table.np[row_idx, start:start + len(block_ids)] = block_ids
        self.num_blocks_per_row[row_idx] = start + len(block_ids)

    def add_row(self, block_ids, row_idx):
        self.num_blocks_per_row[row_idx] = 0
        self.append_row(block_ids, row_idx)

    def clear_row(self, row_idx):
        n = int(self.num_blocks_per_row[row_idx])
        if n > 0:
            self.block_table.np[row_idx, :n] = 0
        self.num_blocks_per_row[row_idx] = 0

    def move_row(self, src, tgt):
        n = int(self.num_blocks_per_row[src])
        self.block_table.np[tgt, :n] = self.block_table.np[src, :n]
        self.num_blocks_per_row[tgt] = n

    def commit_block_table(self, num_reqs):
        self.block_table.copy_to_gpu(num_reqs)

    def compute_slot_mapping(self, num_tokens, req_indices, positions):
        self._slot_mapping_kernel(req_indices[:num_tokens], positions[:num_tokens],
                                  self.block_table.gpu, self.block_size,
                                  self.slot_mapping.gpu[:num_tokens])

    def _slot_mapping_kernel(self, req_indices, positions, block_table, block_size, out):
        """Device work: slot = block_table[req, pos // bs] * bs + pos % bs."""
        blocks = block_table[req_indices, positions // block_size].to(torch.int64)
        out.copy_(blocks * block_size + positions % block_size)


class BlockTableRunner:
    """The runner's side: persistent batch rows, the input-prep window, the staging."""

    def __init__(self, max_num_reqs, max_num_blocks_per_req, max_num_tokens, block_size,
                 device, pin_memory=True):
        self.device = device
        self.block_table = BlockTable(block_size, max_num_reqs, max_num_blocks_per_req,
                                      max_num_tokens, pin_memory, device)
        self.req_indices = CpuGpuBuffer(max_num_tokens, dtype=torch.int64, device=device,
                                        pin_memory=pin_memory)
        self.positions = CpuGpuBuffer(max_num_tokens, dtype=torch.int64, device=device,
                                      pin_memory=pin_memory)
        self.req_ids = []                  # row order
        self.num_computed = {}             # req id -> tokens computed
        self.prepare_inputs_event = torch.cuda.Event()

    @contextmanager
    def synchronize_input_prep(self):
        self.prepare_inputs_event.synchronize()   # last step's uploads have read the pinned buffers
        try:
            yield
        finally:
            self.prepare_inputs_event.record()

    def _update_states(self, removed, added, appended):
        bt = self.block_table
        for req_id in removed:
            if req_id not in self.req_ids:
                continue
            row = self.req_ids.index(req_id)
            bt.clear_row(row)
            last = len(self.req_ids) - 1
            if row != last:                     # condense: the last row fills the hole
                bt.move_row(last, row)
                self.req_ids[row] = self.req_ids[last]
            self.req_ids.pop()
            del self.num_computed[req_id]
        for req_id, computed, block_ids in added:
            row = len(self.req_ids)
            self.req_ids.append(req_id)
            self.num_computed[req_id] = computed
            bt.add_row(block_ids, row)
        for req_id, block_ids in appended.items():
            if req_id in self.req_ids:
                bt.append_row(block_ids, self.req_ids.index(req_id))

    def _prepare_inputs(self, scheduled):
        n = 0
        for row, req_id in enumerate(self.req_ids):
            k = scheduled.get(req_id, 0)
            start = self.num_computed[req_id]
            self.req_indices.np[n:n + k] = row
            self.positions.np[n:n + k] = np.arange(start, start + k)
            self.num_computed[req_id] = start + k
            n += k
        self.block_table.commit_block_table(len(self.req_ids))
        self.req_indices.copy_to_gpu(n)
        self.positions.copy_to_gpu(n)
        return n

    def execute_model(self, removed, added, appended, scheduled):
        with self.synchronize_input_prep():
            self._update_states(removed, added, appended)
            num_tokens = self._prepare_inputs(scheduled)
        if num_tokens:
            self.block_table.compute_slot_mapping(num_tokens, self.req_indices.gpu,
                                                  self.positions.gpu)
        return num_tokens
