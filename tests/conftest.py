import os

import torch

# Triton runs on the CPU through its interpreter where no GPU exists; the variable
# must be set before triton is first imported.
if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")

import pytest  # noqa: E402


def pytest_collection_modifyitems(config, items):
    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason="needs a CUDA device; none is visible to torch")
    for item in items:
        if "cuda" in item.keywords:
            item.add_marker(skip)
