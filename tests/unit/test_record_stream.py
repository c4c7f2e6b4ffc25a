"""``Tensor.record_stream`` with the CPU model's streams: torch's parses its argument as a
``torch.Stream`` before any override sees the call, so engine code that keeps a tensor
alive for a side stream (``t.record_stream(side)``, as offloading workers do) raised
"RuntimeError: unknown parameter type", a step_outcome finding against correct code. On
the model it is a no-op (every allocation of a run lives until the run ends), and leaving
the model gives torch its own method back."""

from __future__ import annotations

import torch

from stagecheck.oracles.device import device_model


def test_record_stream_takes_the_models_streams_and_is_restored_after():
    torch_method = torch.Tensor.record_stream
    with device_model("cpu").activate():
        side = torch.cuda.Stream()
        out = torch.zeros(4, dtype=torch.int64, device="cuda")
        assert out.record_stream(side) is None
        assert out[:2].record_stream(torch.cuda.current_stream()) is None
        pinned = torch.zeros(4, dtype=torch.int64, pin_memory=True)
        assert pinned.record_stream(side) is None
    assert torch.Tensor.record_stream is torch_method
    assert "record_stream" not in vars(torch.Tensor)


def test_a_nested_model_keeps_the_outer_ones_method_until_the_outer_one_leaves():
    with device_model("cpu").activate():
        with device_model("cpu").activate():
            torch.zeros(2, device="cuda").record_stream(torch.cuda.Stream())
        torch.zeros(2, device="cuda").record_stream(torch.cuda.Stream())   # still the model's
    assert "record_stream" not in vars(torch.Tensor)
