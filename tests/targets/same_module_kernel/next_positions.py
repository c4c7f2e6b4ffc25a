"""A staging function whose device consumer, a Triton kernel, is defined in the same
module: it stages each live request's last position, uploads it, runs the kernel on the
device copy (next position = position + 1) and stages the kernel's result too.

stagecheck loads the file without running it, keeps ``@triton.jit`` (the kernel runs
through Triton's interpreter on the CPU) and resolves ``triton``, ``tl`` as honoured
imports."""

import torch
import triton
import triton.language as tl


@triton.jit
def _next_position_kernel(positions_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offsets = tl.arange(0, BLOCK)
    mask = offsets < n
    positions = tl.load(positions_ptr + offsets, mask=mask)
    tl.store(out_ptr + offsets, positions + 1, mask=mask)


def stage_next_positions(ctx, scheduler_output, req_ids, num_reqs):
    for i, req_id in enumerate(req_ids[:num_reqs]):
        ctx.positions_buf.np[i] = scheduler_output.num_scheduled_tokens[req_id] - 1
    ctx.positions_buf.copy_to_gpu(num_reqs)
    out = torch.zeros_like(ctx.positions_buf.gpu)
    block = triton.next_power_of_2(max(num_reqs, 1))
    _next_position_kernel[(1,)](ctx.positions_buf.gpu, out, num_reqs, BLOCK=block)
    ctx.next_buf.np[:num_reqs] = out[:num_reqs].cpu().numpy()
    ctx.next_buf.copy_to_gpu(num_reqs)
