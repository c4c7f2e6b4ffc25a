"""The device-generic stream API and NVTX ranges on the CPU model: ``torch.accelerator``'s
current stream, ``with stream:`` and ``torch.cuda.nvtx`` raised on a CPU build of torch
("Cannot access accelerator device", AttributeError: __enter__, "NVTX functions not
installed"), so engine code written against them got step_outcome findings; they are the
model's while it is active, and torch's again after."""

from __future__ import annotations

import torch

from stagecheck.oracles.device import device_model


def test_the_accelerator_face_and_a_stream_context_are_the_models():
    torch_current = torch.accelerator.current_stream
    with device_model("cpu").activate():
        side = torch.Stream()
        side.wait_stream(torch.accelerator.current_stream())
        with side as entered:
            assert entered == side
            assert torch.accelerator.current_stream() == side == torch.cuda.current_stream()
        assert torch.accelerator.current_stream() == torch.cuda.default_stream()
        torch.accelerator.set_stream(side)
        assert torch.cuda.current_stream() == side
        torch.accelerator.synchronize()
        assert torch.zeros(2, device=torch.accelerator.current_accelerator()).is_cuda
    assert torch.accelerator.current_stream is torch_current


def test_nvtx_ranges_do_nothing_on_the_model():
    torch_push = torch.cuda.nvtx.range_push
    with device_model("cpu").activate():
        torch.cuda.nvtx.range_push("prepare")
        torch.cuda.nvtx.mark("here")
        torch.cuda.nvtx.range_pop()
        with torch.cuda.nvtx.range("forward"):
            pass
    assert torch.cuda.nvtx.range_push is torch_push


def test_selecting_the_one_device_changes_nothing():
    """``with torch.cuda.device(d):`` and ``set_device`` (engine code pins its device so):
    torch's raised "PyTorch was compiled without CUDA support" on a CPU build."""
    with device_model("cpu").activate():
        torch.cuda.set_device(0)
        with torch.cuda.device(torch.device("cuda", 0)):
            side = torch.cuda.Stream()
            with torch.cuda.stream(side):
                assert torch.cuda.current_stream() == side
    assert torch.cuda.device.__module__.startswith("torch")
