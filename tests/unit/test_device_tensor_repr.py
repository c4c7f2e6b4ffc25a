"""``repr``/``str`` of a CPU-model device tensor is a host read, as torch's of a CUDA tensor
is (a blocking download): it waits for the upload still writing it, as ``f"{t}"`` and
``t.tolist()`` already did (was: the poison of fresh device memory, or the values from
before the upload, where the upload had not run)."""

from __future__ import annotations

import torch

from stagecheck.oracles.device import device_model


def test_repr_and_str_of_a_pending_uploads_mirror_show_what_it_uploads():
    with device_model("cpu").activate():
        first = torch.ones(3, pin_memory=True).to("cuda", non_blocking=True)
        assert "[1.0, 1.0, 1.0]" in repr(first)
        second = torch.full((2,), 7, dtype=torch.int64, pin_memory=True).to(
            "cuda", non_blocking=True)
        assert "[7, 7]" in str(second) and "[7, 7]" in "%s" % (second,)
    assert "[1.0, 1.0, 1.0]" in repr(first)      # and after the model left
