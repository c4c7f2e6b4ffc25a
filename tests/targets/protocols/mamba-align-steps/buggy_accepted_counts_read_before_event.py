# SPDX-License-Identifier: Apache-2.0
# stagecheck-expect: read_before_download, device_read_mismatch
# Fixture (buggy): the accepted counts are remapped before the event wait, which was deferred past preprocess
"""Mamba prefix caching with speculative decoding ("align" mode), step after step.

The Mamba align protocol of vllm/v1/worker/mamba_utils.py and gpu_model_runner.py (see
fixed_mamba_align_steps.py) with ``num_accepted_tokens_event.synchronize()`` deferred from
the start of ``_prepare_inputs`` to just before the re-upload of the counts, the kind of
deferral vllm-project/vllm#42574 proposed for throughput; the unsynchronized read is the
bug vllm-project/vllm#36013 fixed for the same counts.

Race: ``_prepare_inputs`` gathers the previous step's counts from the pinned
``num_accepted_tokens.cpu`` before its non-blocking copy has landed, so
``preprocess_mamba`` derives the pre-copy token bias from stale counts and moves the
wrong speculative state.
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


class MambaSpecDecodeGPUContext:
    def __init__(self, max_num_reqs, block_size, device, pin_memory):
        self.block_size = block_size
        for name in ("mamba_state_idx_buf", "precopy_src_col_buf", "precopy_token_bias_buf",
                     "num_scheduled_tokens_buf", "num_computed_tokens_buf", "num_draft_tokens_buf"):
            setattr(self, name, CpuGpuBuffer(max_num_reqs, torch.int32, device, pin_memory))

    def run_fused_precopy(self, num_reqs, state_idx_gpu, src_col_gpu, token_bias_gpu):
        """Device work: move each running state from ``src_col + token_bias`` to ``state_idx``."""
        return state_idx_gpu[:num_reqs] * 0 + src_col_gpu[:num_reqs] + token_bias_gpu[:num_reqs]

    def run_fused_postprocess(self, num_reqs, num_accepted_tokens_gpu, mamba_state_idx_gpu,
                              num_scheduled_tokens_gpu, num_computed_tokens_gpu,
                              num_draft_tokens_gpu):
        """Device work: save the state at the block-aligned column after acceptance; a
        request whose state stays in its column gets its accepted count reset to 1."""
        n, bs = num_reqs, self.block_size
        running = (num_computed_tokens_gpu[:n] + num_scheduled_tokens_gpu[:n]
                   - num_draft_tokens_gpu[:n])
        aligned = (running + num_accepted_tokens_gpu[:n] - 1) // bs * bs
        stays = (aligned >= running) & (mamba_state_idx_gpu[:n] == aligned // bs - 1)
        num_accepted_tokens_gpu[:n] = torch.where(stays, 1, num_accepted_tokens_gpu[:n])


def preprocess_mamba(scheduler_output, mamba_state_idx, input_batch, requests, align_ctx):
    """Fused path: stage where each running state moves this step, launch the pre-copy."""
    for req_id in scheduler_output.finished_req_ids:
        mamba_state_idx.pop(req_id, None)
    num_reqs, bs = len(input_batch.req_ids), align_ctx.block_size
    state_idx, src_col = align_ctx.mamba_state_idx_buf, align_ctx.precopy_src_col_buf
    token_bias = align_ctx.precopy_token_bias_buf
    src_col.np[:num_reqs] = -1
    token_bias.np[:num_reqs] = 0
    for i, req_id in enumerate(input_batch.req_ids):
        computed = requests[req_id].num_computed_tokens
        prev = mamba_state_idx.get(req_id, (computed - 1) // bs)
        curr = -(-(computed + scheduler_output.num_scheduled_tokens[req_id]) // bs) - 1
        mamba_state_idx[req_id] = curr
        state_idx.np[i] = curr
        if prev != -1 and prev != curr:
            src_col.np[i] = prev
            token_bias.np[i] = int(input_batch.num_accepted_tokens_cpu[i]) - 1
            input_batch.num_accepted_tokens_cpu[i] = 1
    for buf in (state_idx, src_col, token_bias):
        buf.copy_to_gpu(num_reqs)
    align_ctx.run_fused_precopy(num_reqs, state_idx.gpu, src_col.gpu, token_bias.gpu)


def stage_postprocess_inputs_to_gpu(ctx, scheduler_output, req_ids, num_reqs, requests,
                                    mamba_state_idx):
    """The postprocess kernel's per-request inputs (the state column was staged into
    ``ctx.mamba_state_idx_buf`` by ``preprocess_mamba`` this step)."""
    spec_tokens = scheduler_output.scheduled_spec_decode_tokens
    for i in range(num_reqs):
        req_id = req_ids[i]
        assert req_id in mamba_state_idx, f"preprocess_mamba must run first ({req_id!r})"
        ctx.num_scheduled_tokens_buf.np[i] = scheduler_output.num_scheduled_tokens[req_id]
        ctx.num_computed_tokens_buf.np[i] = requests[req_id].num_computed_tokens
        ctx.num_draft_tokens_buf.np[i] = len(spec_tokens.get(req_id, ()))
    for buf in (ctx.num_scheduled_tokens_buf, ctx.num_computed_tokens_buf,
                ctx.num_draft_tokens_buf):
        buf.copy_to_gpu(num_reqs)


class CachedRequestState:
    def __init__(self, req_id, num_computed_tokens):
        self.req_id, self.num_computed_tokens = req_id, num_computed_tokens


class InputBatch:
    """Only what this protocol uses; the accepted counts here are host-only."""
    def __init__(self, max_num_reqs):
        self.req_ids, self.prev_req_id_to_index = [], None
        self.num_accepted_tokens_cpu = [1] * max_num_reqs


class GPUModelRunner:
    def __init__(self, max_num_reqs, block_size, device, pin_memory=True):
        self.requests, self.mamba_state_idx = {}, {}
        self.input_batch = InputBatch(max_num_reqs)
        self.num_accepted_tokens = CpuGpuBuffer(max_num_reqs, torch.int32, device, pin_memory)
        self.align_ctx = MambaSpecDecodeGPUContext(max_num_reqs, block_size, device, pin_memory)
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
        batch = self.input_batch
        with self.synchronize_input_prep():
            self._update_states(scheduler_output)
            num_reqs = self._prepare_inputs()
            preprocess_mamba(scheduler_output, self.mamba_state_idx, batch, self.requests,
                             self.align_ctx)
            self.num_accepted_tokens_event.synchronize()
            self.num_accepted_tokens.np[:num_reqs] = batch.num_accepted_tokens_cpu[:num_reqs]
            self.num_accepted_tokens.copy_to_gpu(num_reqs)
            stage_postprocess_inputs_to_gpu(self.align_ctx, scheduler_output, batch.req_ids,
                                            num_reqs, self.requests, self.mamba_state_idx)
        self._model_forward(self.num_accepted_tokens.gpu[:num_reqs])

    def _update_states(self, scheduler_output):
        for req_id in scheduler_output.finished_req_ids:
            self.requests.pop(req_id, None)
        batch = self.input_batch
        batch.req_ids = [r for r in batch.req_ids if r in self.requests]
        for new in scheduler_output.scheduled_new_reqs:
            self.requests[new.req_id] = CachedRequestState(new.req_id, new.num_computed_tokens)
            batch.req_ids.append(new.req_id)
        cached = scheduler_output.scheduled_cached_reqs
        for req_id, num_computed in zip(cached.req_ids, cached.num_computed_tokens):
            self.requests[req_id].num_computed_tokens = num_computed

    def _prepare_inputs(self):
        """Bring the previous step's accepted counts into this step's row order."""
        batch = self.input_batch
        prev = batch.prev_req_id_to_index or {}
        for i, req_id in enumerate(batch.req_ids):
            j = prev.get(req_id)
            landed = self.num_accepted_tokens.np
            batch.num_accepted_tokens_cpu[i] = 1 if j is None else int(landed[j])
        return len(batch.req_ids)

    def sample_tokens(self, sampled_token_ids):
        """``sampled_token_ids``: device [num_reqs, 1 + num_spec], -1 where rejected."""
        num_reqs, ctx = sampled_token_ids.shape[0], self.align_ctx
        self._count_accepted(sampled_token_ids, self.num_accepted_tokens.gpu[:num_reqs])
        ctx.run_fused_postprocess(num_reqs, self.num_accepted_tokens.gpu,
                                  ctx.mamba_state_idx_buf.gpu, ctx.num_scheduled_tokens_buf.gpu,
                                  ctx.num_computed_tokens_buf.gpu, ctx.num_draft_tokens_buf.gpu)
        self.num_accepted_tokens.cpu[:num_reqs].copy_(self.num_accepted_tokens.gpu[:num_reqs],
                                                     non_blocking=True)
        self.num_accepted_tokens_event.record()
        batch = self.input_batch
        batch.prev_req_id_to_index = {r: i for i, r in enumerate(batch.req_ids)}

    def _count_accepted(self, sampled_token_ids, out):
        """Device work: accepted tokens per row (``_update_states_after_model_execute``)."""
        out.copy_((sampled_token_ids != -1).sum(dim=1))

    def _model_forward(self, num_accepted_tokens):
        """Device work: the Mamba/GDN kernels read the counts (initial state slot)."""
        return num_accepted_tokens * 2
