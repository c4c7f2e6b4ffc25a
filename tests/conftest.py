"""Shared test configuration: Triton's mode, and CUDA tests skipped where no GPU exists.

The suite is in tiers (tests/unit, tests/quality, tests/e2e, tests/gpu); ``python -m
pytest -n 2`` runs them all, ``python -m pytest tests/unit`` is the fast inner loop.
"""

import pytest
import torch

from stagecheck.oracles.kernel import use_interpreter_without_gpu

use_interpreter_without_gpu()   # before anything imports triton


def pytest_collection_modifyitems(config, items):
    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason="needs a CUDA device; none is visible to torch")
    for item in items:
        if "cuda" in item.keywords:
            item.add_marker(skip)
