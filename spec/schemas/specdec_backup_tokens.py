"""Spec-decode backup tokens: the host staging of ``prepare_next_token_ids_padded``.

``SpecDecodeBaseProposer.prepare_next_token_ids_padded(self, sampled_token_ids, requests,
gpu_input_batch, discard_request_mask)`` (vLLM's ``llm_base_proposer.py`` from v0.20;
``eagle.py`` before) first stages, for every live slot ``i`` (``i <
gpu_input_batch.num_reqs``) and ``r = gpu_input_batch.req_ids[i]``, the "backup" next
token of the request, the one used when its sampled token is discarded:
``requests[r].get_token_id(num_tokens_no_spec[i] - 1)``, the id of the last token
before any draft, into the int32 buffer ``self.backup_next_token_ids``, and copies
``[0, num_reqs)`` to the device; then it launches a Triton kernel that reads it.

``get_token_id(idx)`` is the request state's: the prompt token ``idx`` if ``idx <
num_prompt_tokens`` (Python indexing, so -1 is the last prompt token), else output
token ``idx - num_prompt_tokens`` if there is one, else -1. A request whose prompt came
as embeddings has no prompt token ids: asked for a prompt position, it raises
``ValueError``. That is the failure path here (``prompt_token_ids`` may be missing).

The adapter makes ``self`` with the buffer, request states whose ``get_token_id``
follows that rule (a request given as embeddings lacks ``prompt_token_ids``), the
input batch (``num_reqs``, ``req_ids``, ``num_tokens_no_spec`` as an int32 array,
``vocab_size``), and for the kernel launch that follows the staging, stand-ins of the
two tensors it inspects: ``sampled_token_ids`` (``shape``, ``device``, ``stride``)
and ``discard_request_mask`` (a ``dtype`` equal to ``torch.bool``). The launch itself
uses module-level names of the engine (the kernel, ``next_power_of_2``), which a file
target gets from shims.
"""

from __future__ import annotations

import functools
from types import SimpleNamespace

from stagecheck.spec.scenario import StagingScenario
from stagecheck.spec.schema import (INT32_MAX, MAY_MISS, PER_SLOT, Call, Field, Input,
                                    MissingPolicy, Signature, StagingSchema, StandIn, Values)

#: the largest draft length the ``sampled_token_ids`` stand-in assumes
NUM_SPECULATIVE_TOKENS = 3

INPUTS = (
    Input("num_tokens_no_spec", kind=PER_SLOT, values=Values(0, INT32_MAX, small=12,
                                                             special=(0, 1)),
          doc="gpu_input_batch.num_tokens_no_spec: tokens of the request in slot i, "
              "drafts excluded (int32)"),
    Input("num_prompt_tokens", values=Values(1, 8, small=8), group="requests",
          doc="requests[r].num_prompt_tokens (len(prompt_token_ids) where those exist)"),
    Input("output_token_ids", dtype="int-list", length=(0, 6), group="requests",
          doc="requests[r].output_token_ids"),
    Input("prompt_token_ids", dtype="int-list", length=(1, 8), presence=MAY_MISS,
          doc="requests[r].prompt_token_ids (absent: the prompt came as embeddings)"),
)


def _position(q) -> int:
    return q.slot_value("num_tokens_no_spec") - 1


def backup_token(q) -> int:
    """``get_token_id(num_tokens_no_spec[i] - 1)`` of the request in slot ``i``."""
    idx = _position(q)
    if idx < q.num_prompt_tokens:
        prompt = q.prompt_token_ids            # KeyError for an embeddings prompt
        if not -len(prompt) <= idx < len(prompt):   # a prompt shorter than num_prompt_tokens
            raise KeyError(idx)    # (out of contract): no value to expect, as for a missing input
        return prompt[idx]
    outputs, k = q.output_token_ids, idx - q.num_prompt_tokens
    return outputs[k] if k < len(outputs) else -1


FIELDS = (
    Field("backup_token", "backup_next_token_ids", "int32", backup_token,
          "requests[r].get_token_id(num_tokens_no_spec[i] - 1): the prompt token at that "
          "position, else the output token, else -1",
          missing=MissingPolicy("prompt_token_ids", kind="raises", exception="ValueError",
                                applies=lambda q: _position(q) < q.num_prompt_tokens,
                                applies_prose="(prompt given as embeddings) whose position "
                                              "num_tokens_no_spec[i] - 1 is a prompt one")),
)


def get_token_id(state, idx: int) -> int:
    """``CachedRequestState.get_token_id`` over a stand-in request state."""
    if idx < state.num_prompt_tokens:
        prompt = getattr(state, "prompt_token_ids", None)
        if prompt is None:
            raise ValueError(f"token {idx} of this request came as an embedding: its id is "
                             "unknown")
        return prompt[idx]
    k = idx - state.num_prompt_tokens
    return state.output_token_ids[k] if k < len(state.output_token_ids) else -1


class _Dtype:
    """Equal to the torch dtype of that name (a schema does not import torch)."""

    def __init__(self, name: str) -> None:
        self.name = name

    def __eq__(self, other) -> bool:
        return str(other) == self.name

    def __hash__(self) -> int:
        return hash(self.name)

    def __repr__(self) -> str:
        return self.name


class TensorStandIn(StandIn):
    """What the kernel launch after the staging inspects of a device tensor."""

    def __init__(self, shape: tuple[int, ...], dtype: str) -> None:
        self.shape, self.dtype, self.device = shape, _Dtype(dtype), "cpu"

    def stride(self, dim: int | None = None):
        strides = tuple(_product(self.shape[d + 1:]) for d in range(len(self.shape)))
        return strides if dim is None else strides[dim]


def _product(values) -> int:
    out = 1
    for v in values:
        out *= v
    return out


class HostIntsStandIn(StandIn):
    """A host int tensor the staging only indexes: ``t[i].item()``, ``t[a:b]``, ``tolist()``."""

    def __init__(self, values: list[int]) -> None:
        self.values = list(values)

    def __getitem__(self, key):
        if isinstance(key, slice):
            return HostIntsStandIn(self.values[key])
        return _Item(self.values[key])

    def tolist(self) -> list[int]:
        return list(self.values)


class _Item(int):
    """An int that answers ``.item()``, as a 0-d tensor does."""

    def item(self) -> int:
        return int(self)


def build_with_attention_metadata(b, profile) -> Call:
    """The earlier signature (vLLM v0.18, ``eagle.py``): ``common_attn_metadata`` second.
    Its ``seq_lens_cpu[i]`` is request i's sequence length with the drafts this step
    scheduled, ``num_tokens_no_spec[i] + NUM_SPECULATIVE_TOKENS`` (the draft slots the
    ``sampled_token_ids`` stand-in has): a release that reads it for the backup position
    instead of ``num_tokens_no_spec[i] - 1`` stages another token."""
    call = build(b, profile)
    counts = b.scenario.inputs["num_tokens_no_spec"]
    metadata = SimpleNamespace(
        num_reqs=b.scenario.num_reqs,
        seq_lens_cpu=HostIntsStandIn([n + NUM_SPECULATIVE_TOKENS for n in counts]))
    return Call((call.args[0], metadata, *call.args[1:]), call.kwargs)


def build(b, profile) -> Call:
    s = b.scenario
    made = b.objects(num_prompt_tokens="num_prompt_tokens",
                     output_token_ids="output_token_ids", prompt_token_ids="prompt_token_ids")
    requests = {}
    for r, state in made.items():
        state.get_token_id = functools.partial(get_token_id, state)
        if hasattr(state, "num_prompt_tokens"):     # a request of the engine's dict
            requests[r] = state
    gpu_input_batch = SimpleNamespace(
        num_reqs=s.num_reqs, req_ids=b.req_ids(),
        num_tokens_no_spec=b.array("num_tokens_no_spec", "int32"), vocab_size=50_001)
    proposer = SimpleNamespace(backup_next_token_ids=b.buffer("backup_next_token_ids"))
    sampled = TensorStandIn((s.num_reqs, 1 + NUM_SPECULATIVE_TOKENS), "torch.int64")
    discard = TensorStandIn((s.num_reqs,), "torch.bool")
    return Call((proposer, sampled, requests, gpu_input_batch, discard))


def breaches(s) -> list[str]:
    """A request's prompt ids and its prompt length agree."""
    prompts, lengths = s.inputs["prompt_token_ids"], s.inputs["num_prompt_tokens"]
    return [f"prompt_token_ids[{r!r}] has {len(prompts[r])} ids, num_prompt_tokens[{r!r}] "
            f"is {lengths[r]}" for r in s.live_ids
            if r in prompts and r in lengths and len(prompts[r]) != lengths[r]]


def generate(d, s) -> None:
    """Prompt lengths agree with the prompt ids; token id 0 appears on purpose; half of
    the time the engine's own positions, ``num_tokens_no_spec[i] = num_prompt_tokens +
    len(output_token_ids)`` (the last token), with one in four slots a position before
    it (a prompt or an earlier output position, or -1 for 0 tokens)."""
    prompts, lengths = s.inputs["prompt_token_ids"], s.inputs["num_prompt_tokens"]
    for r, prompt in prompts.items():
        if r in lengths:
            lengths[r] = len(prompt)
    for r in s.live_ids:       # token id 0 on purpose: a value carried over hides behind it
        for tokens in (prompts.get(r), s.inputs["output_token_ids"].get(r)):
            if tokens and d.chance(1, 4):
                tokens[d.size(0, len(tokens) - 1)] = 0
    if d.pick(("engine", "wide")) != "engine":
        return
    positions = s.inputs["num_tokens_no_spec"]
    for i, r in enumerate(s.live_ids):
        if r not in lengths:
            continue
        total = lengths[r] + len(s.inputs["output_token_ids"][r])
        positions[i] = total if not d.chance(1, 4) else d.size(0, total)


def bench(n: int):
    """In contract, deterministic: ``n`` live requests, capacity ``n``; each has a prompt
    of 4 and 0-5 outputs and asks for its last token (one in seven a prompt position)."""
    req_ids = [f"req-{i}" for i in range(n)]
    outputs = {r: [100 + i + k for k in range(i % 6)] for i, r in enumerate(req_ids)}
    return StagingScenario(
        n, n, req_ids,
        {"num_tokens_no_spec": [2 if i % 7 == 6 else 4 + len(outputs[r])
                                for i, r in enumerate(req_ids)],
         "num_prompt_tokens": {r: 4 for r in req_ids}, "output_token_ids": outputs,
         "prompt_token_ids": {r: [1, 2, 3, 4] for r in req_ids}}, schema=SCHEMA.name)


SCHEMA = StagingSchema(
    name="specdec-backup-tokens",
    summary="vLLM's spec-decode backup tokens (prepare_next_token_ids_padded): each live "
            "slot's request token at num_tokens_no_spec[i] - 1 (-1 past its tokens), copied "
            "over [0, num_reqs); a prompt given as embeddings raises ValueError when a "
            "prompt position is asked for",
    functions=("prepare_next_token_ids_padded",),
    parameters=("self", "sampled_token_ids", "requests", "gpu_input_batch",
                "discard_request_mask"),
    releases="v0.20 and v0.21, llm_base_proposer.py; a body that indexes the tensors the "
             "stand-ins model no further is refused, naming what it asked",
    signatures=(Signature(("self", "common_attn_metadata", "sampled_token_ids", "requests",
                           "gpu_input_batch", "discard_request_mask"),
                          build_with_attention_metadata, releases="v0.18, eagle.py",
                          note="common_attn_metadata: num_reqs and seq_lens_cpu (tokens with "
                               "the drafts of this step)"),),
    inputs=INPUTS,
    fields=FIELDS,
    build=build,
    generate=generate,
    breaches=breaches,
    bench=bench,
)
