"""On CUDA, events and streams made through names the target's file bound at load
(``from torch.cuda import Event as CudaEvent``) are the tracked ones, as
``torch.cuda.Event()`` is: the model sees them recorded and waited for."""

from __future__ import annotations

import pytest

from stagecheck.oracles.protocol import ProtocolConfig, run_protocol_campaign
from tests.unit.test_names_bound_at_load import FIXTURES, _bound_at_load

pytestmark = pytest.mark.cuda

#: device cycles queued ahead of the copies (as tests/gpu/test_protocols_gpu.py)
CUDA = dict(device="cuda", busy_cycles=2_000_000)


def test_a_fixed_component_that_imports_event_by_name_is_clean_on_cuda(tmp_path):
    spec = _bound_at_load(FIXTURES / "fixed_event_synchronized_readback.py",
                          tmp_path / "fixed_bound.py")
    result = run_protocol_campaign(None, spec, "valid-count-readback",
                                   ProtocolConfig(sequences=40, **CUDA))
    assert result.errors == [], [f.message for f in result.errors]
    assert result.gates_forced == 0, result.stalls     # the model saw every wait


def test_a_buggy_component_that_imports_event_by_name_is_found_on_cuda(tmp_path):
    spec = _bound_at_load(FIXTURES / "buggy_counts_read_without_sync.py",
                          tmp_path / "buggy_bound.py")
    result = run_protocol_campaign(None, spec, "valid-count-readback",
                                   ProtocolConfig(sequences=100, **CUDA))
    assert result.verdict() == "different"
