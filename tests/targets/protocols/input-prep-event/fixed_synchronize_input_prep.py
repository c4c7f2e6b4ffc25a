# SPDX-License-Identifier: Apache-2.0
# stagecheck-expect: none
# Fixture (fixed): one event guards every write of the reused pinned inputs, dummy steps included
"""Input preparation of the GPU model runner under async scheduling, step after step.

Mirrors ``GPUModelRunner`` (vllm/v1/worker/gpu_model_runner.py) after vllm-project/vllm
#25279 and #34866: ``synchronize_input_prep()`` waits on ``prepare_inputs_event`` before
the step's first host write and records it after its last non-blocking upload. It covers
``_update_states`` (which re-uploads the pinned sampling tensors) and ``_prepare_inputs``;
``_dummy_run`` (idle data-parallel ranks) writes the same buffers inside the same context.
Sampling is left out; ``_model_forward`` stands for the device work.
"""
from contextlib import contextmanager

import numpy as np
import torch


class CpuGpuBuffer:
    def __init__(self, size, dtype, device, pin_memory):
        self.cpu = torch.zeros(size, dtype=dtype, device="cpu", pin_memory=pin_memory)
        self.np = self.cpu.numpy()
        self.gpu = torch.zeros(size, dtype=dtype, device=device)

    def copy_to_gpu(self, n=None):
        return self.gpu[:n].copy_(self.cpu[:n], non_blocking=True)


class InputBatch:
    """The persistent batch: one row per running request; rows are reused across steps."""
    def __init__(self, max_num_reqs, device, pin_memory):
        self.req_ids = []
        self.num_computed_tokens_cpu = np.zeros(max_num_reqs, dtype=np.int32)
        self.temperature = torch.zeros(max_num_reqs, dtype=torch.float32, device=device)
        self.temperature_cpu_tensor = torch.zeros(max_num_reqs, dtype=torch.float32,
                                                  pin_memory=pin_memory)
        self.temperature_cpu = self.temperature_cpu_tensor.numpy()
        self.batch_changed = False

    def add_request(self, req_id, num_computed_tokens, temperature):
        i = self.req_ids.index(None) if None in self.req_ids else len(self.req_ids)
        self.req_ids[i:i + 1] = [req_id]
        self.num_computed_tokens_cpu[i] = num_computed_tokens
        self.temperature_cpu[i] = temperature
        self.batch_changed = True

    def remove_request(self, req_id):
        self.req_ids[self.req_ids.index(req_id)] = None
        self.batch_changed = True

    def condense(self):
        """Move the last live rows into the holes left by removed requests."""
        while None in self.req_ids:
            if self.req_ids[-1] is None:
                self.req_ids.pop()
                continue
            hole, last = self.req_ids.index(None), len(self.req_ids) - 1
            self.req_ids[hole] = self.req_ids.pop()
            self.num_computed_tokens_cpu[hole] = self.num_computed_tokens_cpu[last]
            self.temperature_cpu[hole] = self.temperature_cpu[last]

    def refresh_metadata(self):
        """Re-upload the sampling tensors when the batch changed (as upstream does)."""
        if self.batch_changed:
            n = len(self.req_ids)
            self.temperature[:n].copy_(self.temperature_cpu_tensor[:n], non_blocking=True)
            self.batch_changed = False


class GPUModelRunner:
    def __init__(self, max_num_reqs, device, pin_memory=True):
        self.max_num_reqs = max_num_reqs
        self.input_batch = InputBatch(max_num_reqs, device, pin_memory)
        self.query_start_loc = CpuGpuBuffer(max_num_reqs + 1, torch.int32, device, pin_memory)
        self.seq_lens = CpuGpuBuffer(max_num_reqs, torch.int32, device, pin_memory)
        self.prepare_inputs_event = torch.cuda.Event()

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
            if not scheduler_output.total_num_scheduled_tokens:
                return None
            num_reqs = self._prepare_inputs(scheduler_output)
        return self._model_forward(self.query_start_loc.gpu[:num_reqs + 1],
                                   self.seq_lens.gpu[:num_reqs],
                                   self.input_batch.temperature[:num_reqs])

    def _update_states(self, scheduler_output):
        batch = self.input_batch
        for req_id in scheduler_output.finished_req_ids:
            batch.remove_request(req_id)
        for new in scheduler_output.scheduled_new_reqs:
            batch.add_request(new.req_id, new.num_computed_tokens, new.sampling_params.temperature)
        cached = scheduler_output.scheduled_cached_reqs
        for req_id, num_computed in zip(cached.req_ids, cached.num_computed_tokens):
            batch.num_computed_tokens_cpu[batch.req_ids.index(req_id)] = num_computed
        batch.condense()
        batch.refresh_metadata()

    def _prepare_inputs(self, scheduler_output):
        req_ids = self.input_batch.req_ids
        tokens = np.array([scheduler_output.num_scheduled_tokens[r] for r in req_ids], np.int32)
        self._stage_attn_inputs(tokens, self.input_batch.num_computed_tokens_cpu[:len(tokens)])
        return len(tokens)

    def _stage_attn_inputs(self, tokens, num_computed):
        num_reqs = len(tokens)
        self.query_start_loc.np[0] = 0
        self.query_start_loc.np[1:num_reqs + 1] = np.cumsum(tokens)
        self.query_start_loc.np[num_reqs + 1:].fill(self.query_start_loc.np[num_reqs])
        self.query_start_loc.copy_to_gpu()
        self.seq_lens.np[:num_reqs] = num_computed + tokens
        self.seq_lens.np[num_reqs:].fill(0)
        self.seq_lens.copy_to_gpu()

    def _dummy_run(self, num_tokens):
        """A forward over a made-up batch (idle data-parallel rank, CUDA-graph capture)."""
        num_reqs = min(num_tokens, self.max_num_reqs)
        tokens = np.full(num_reqs, num_tokens // num_reqs, dtype=np.int32)
        tokens[-1] += num_tokens % num_reqs
        with self.synchronize_input_prep():
            self._stage_attn_inputs(tokens, 0)
        return self._model_forward(self.query_start_loc.gpu[:num_reqs + 1],
                                   self.seq_lens.gpu[:num_reqs], None)

    def _model_forward(self, query_start_loc, seq_lens, temperature):
        """Device work: stands for the forward pass; reads the mirrors in stream order."""
        out = seq_lens.to(torch.float32) + query_start_loc[1:].to(torch.float32)
        return out if temperature is None else out * temperature
