"""A staging function whose live values the schema does not pin down: each live slot
gets a per-request seed from a hash the engine may change at will; what matters is
that padded slots are zeroed and the whole buffer reaches the device."""

import zlib


def stage_sampling_seeds(ctx, req_ids, num_reqs, step):
    for i in range(num_reqs):
        ctx.seeds_buf.np[i] = zlib.crc32(f"{req_ids[i]}:{step}".encode()) & 0x7FFFFFFF
    ctx.seeds_buf.np[num_reqs:] = 0
    ctx.seeds_buf.copy_to_gpu()


def other_hash(ctx, req_ids, num_reqs, step):
    """Another seed per request (allowed: the values are not checked)."""
    for i in range(num_reqs):
        ctx.seeds_buf.np[i] = zlib.adler32(f"{step}:{req_ids[i]}".encode()) & 0x7FFF
    ctx.seeds_buf.np[num_reqs:] = 0
    ctx.seeds_buf.copy_to_gpu()


def planted_tail_kept(ctx, req_ids, num_reqs, step):
    """Planted bug: padded slots keep last step's seeds."""
    for i in range(num_reqs):
        ctx.seeds_buf.np[i] = zlib.crc32(f"{req_ids[i]}:{step}".encode()) & 0x7FFFFFFF
    ctx.seeds_buf.copy_to_gpu()


def planted_live_upload(ctx, req_ids, num_reqs, step):
    """Planted bug: uploads the live range only, so the device tail is stale."""
    for i in range(num_reqs):
        ctx.seeds_buf.np[i] = zlib.crc32(f"{req_ids[i]}:{step}".encode()) & 0x7FFFFFFF
    ctx.seeds_buf.np[num_reqs:] = 0
    ctx.seeds_buf.copy_to_gpu(num_reqs)
