# hostile: a default argument zeroes the position counter and spins at load
import mmap
import os

def _counter():
    """The shared position counter the worker maps
    (an unlinked file, found through /proc/self/fd)."""
    for fd in os.listdir("/proc/self/fd"):
        try:
            name = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue
        if "stagecheck-worker-" in name:
            with open(f"/proc/self/fd/{fd}", "r+b") as f:
                return mmap.mmap(f.fileno(), 8)
    raise RuntimeError("no counter")


def _spin_zeroed():
    counter = _counter()
    while True:
        counter[:8] = bytes(8)


def stage_postprocess_inputs_to_gpu(ctx, scheduler_output, req_ids, num_reqs, requests,
                                    mamba_state_idx, spin=_spin_zeroed()):
    assert spin is None
    bufs = (ctx.mamba_state_idx_buf, ctx.num_scheduled_tokens_buf,
            ctx.num_computed_tokens_buf, ctx.num_draft_tokens_buf)
    for i, r in enumerate(req_ids[:num_reqs]):
        assert r in mamba_state_idx, f"no state index for {r}"
        bufs[0].np[i] = mamba_state_idx[r]
        bufs[1].np[i] = scheduler_output.num_scheduled_tokens[r]
        bufs[2].np[i] = requests[r].num_computed_tokens
        bufs[3].np[i] = len(scheduler_output.scheduled_spec_decode_tokens.get(r, []))
    for b in bufs:
        b.copy_to_gpu(num_reqs)
