# SPDX-License-Identifier: Apache-2.0
# stagecheck-expect: write_before_download, read_before_download, readback_mismatch
# Fixture (buggy): the counts land in the input batch rows that condense, admit and reorder rewrite meanwhile
"""Accepted-token counts copied back to the host while the batch rows move (hybrid spec decode).

Mirrors ``GPUModelRunner._update_states_after_model_execute`` and ``_prepare_inputs``
(vllm/v1/worker/gpu_model_runner.py) as reported in vllm-project/vllm#51571: the
non-blocking copy of the accepted counts targets ``input_batch.num_accepted_tokens_cpu_tensor``
itself, and the next step reads that tensor row by row in the current batch order.

Race: the next step's ``_update_states`` admits (row := 1), condenses and swaps rows of
that pinned tensor before ``_prepare_inputs`` waits on the event, so a copy landing
after the moves restores the previous row order and a moved or new request reads another
request's count.
"""
from contextlib import contextmanager

import torch


class CpuGpuBuffer:
    def __init__(self, size, dtype, device, pin_memory):
        self.cpu = torch.ones(size, dtype=dtype, device="cpu", pin_memory=pin_memory)
        self.np = self.cpu.numpy()
        self.gpu = torch.ones(size, dtype=dtype, device=device)

    def copy_to_gpu(self, n=None):
        return self.gpu[:n].copy_(self.cpu[:n], non_blocking=True)


class InputBatch:
    def __init__(self, max_num_reqs, pin_memory):
        self.req_ids = []
        self.prev_req_id_to_index = None
        self.num_accepted_tokens_cpu_tensor = torch.ones(max_num_reqs, dtype=torch.int32,
                                                         pin_memory=pin_memory)
        self.num_accepted_tokens_cpu = self.num_accepted_tokens_cpu_tensor.numpy()

    def add_request(self, req_id):
        i = self.req_ids.index(None) if None in self.req_ids else len(self.req_ids)
        self.req_ids[i:i + 1] = [req_id]
        self.num_accepted_tokens_cpu[i] = 1

    def remove_request(self, req_id):
        self.req_ids[self.req_ids.index(req_id)] = None

    def swap_states(self, i1, i2):
        self.req_ids[i1], self.req_ids[i2] = self.req_ids[i2], self.req_ids[i1]
        acc = self.num_accepted_tokens_cpu
        acc[i1], acc[i2] = acc[i2], acc[i1]

    def condense(self):
        """Move the last live rows into the holes left by removed requests."""
        while None in self.req_ids:
            if self.req_ids[-1] is None:
                self.req_ids.pop()
                continue
            hole, last = self.req_ids.index(None), len(self.req_ids) - 1
            self.req_ids[hole] = self.req_ids.pop()
            self.num_accepted_tokens_cpu[hole] = self.num_accepted_tokens_cpu[last]


class GPUModelRunner:
    def __init__(self, max_num_reqs, device, pin_memory=True):
        self.input_batch = InputBatch(max_num_reqs, pin_memory)
        self.num_accepted_tokens = CpuGpuBuffer(max_num_reqs, torch.int32, device, pin_memory)
        self.prepare_inputs_event = torch.cuda.Event()
        self.num_accepted_tokens_event = torch.cuda.Event()

    @contextmanager
    def synchronize_input_prep(self):
        self.prepare_inputs_event.synchronize()
        try:
            yield
        finally:
            self.prepare_inputs_event.record()

    def execute_model(self, scheduler_output):
        with self.synchronize_input_prep():
            self._update_states(scheduler_output)
            num_reqs = self._prepare_inputs()
        self._model_forward(self.num_accepted_tokens.gpu[:num_reqs])

    def _update_states(self, scheduler_output):
        batch = self.input_batch
        for req_id in scheduler_output.finished_req_ids:
            batch.remove_request(req_id)
        for new in scheduler_output.scheduled_new_reqs:
            batch.add_request(new.req_id)
        batch.condense()
        self._may_reorder_batch(scheduler_output)

    def _may_reorder_batch(self, scheduler_output):
        """Decodes first, as attention backends that split decodes from prefills want."""
        batch, num = self.input_batch, scheduler_output.num_scheduled_tokens
        for i in range(len(batch.req_ids)):
            for j in range(len(batch.req_ids) - 1, i, -1):
                if num[batch.req_ids[i]] > 1 >= num[batch.req_ids[j]]:
                    batch.swap_states(i, j)

    def _prepare_inputs(self):
        batch = self.input_batch
        num_reqs = len(batch.req_ids)
        self.num_accepted_tokens_event.synchronize()
        self.num_accepted_tokens.np[:num_reqs] = batch.num_accepted_tokens_cpu[:num_reqs]
        self.num_accepted_tokens.copy_to_gpu(num_reqs)
        return num_reqs

    def sample_tokens(self, sampled_token_ids):
        """``sampled_token_ids``: device [num_reqs, 1 + num_spec], -1 where rejected."""
        num_reqs = sampled_token_ids.shape[0]
        self._count_accepted(sampled_token_ids, self.num_accepted_tokens.gpu[:num_reqs])
        self.input_batch.num_accepted_tokens_cpu_tensor[:num_reqs].copy_(
            self.num_accepted_tokens.gpu[:num_reqs], non_blocking=True)
        self.num_accepted_tokens_event.record()
        batch = self.input_batch
        batch.prev_req_id_to_index = {r: i for i, r in enumerate(batch.req_ids)}

    def _count_accepted(self, sampled_token_ids, out):
        """Device work: the accepted count of each row (upstream, in
        ``_update_states_after_model_execute``)."""
        out.copy_((sampled_token_ids != -1).sum(dim=1))

    def _model_forward(self, num_accepted_tokens):
        """Device work: the hybrid attention metadata / kernels read the counts."""
        return num_accepted_tokens * 2
