"""What the signature error's fix says to write: the built-in ``specdec-backup-tokens``
schema with one more adapter, for the release whose discarded requests come as indices
and a count (``eagle_discard_indices.py``)."""

import dataclasses

from stagecheck.spec.schema import Call, Signature
from stagecheck.spec.schemas import BUILTIN_SCHEMAS
from stagecheck.spec.schemas.specdec_backup_tokens import (TensorStandIn,
                                                           build_with_attention_metadata)

BUILTIN = BUILTIN_SCHEMAS["specdec-backup-tokens"]


def build(b, profile):
    """The v0.18 adapter's arguments, the mask replaced by indices and a count (no request
    is discarded: the staging does not read them)."""
    call = build_with_attention_metadata(b, profile)
    indices = TensorStandIn((0,), "torch.int32")
    return Call((*call.args[:5], indices, 0), call.kwargs)


SCHEMA = dataclasses.replace(BUILTIN, signatures=(*BUILTIN.signatures, Signature(
    ("self", "common_attn_metadata", "sampled_token_ids", "requests", "gpu_input_batch",
     "discard_request_indices", "num_discarded_requests"), build,
    releases="before v0.18", note="discarded requests as indices and a count")))
