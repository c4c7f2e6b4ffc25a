"""Names code under test bound to torch's when it loaded (``from torch.cuda import Event``
at module level, as sglang's LoRA manager does): while a device model is active they are
the model's, as ``torch.cuda.Event`` is; before, torch's own class stayed bound there, and
on a CPU build it raised when made ("dummy base class Event", "cpu backend doesn't support
events"), a finding against correct code (audit of 2026-12-07)."""

from __future__ import annotations

import pathlib

import torch

from stagecheck.oracles.device import device_model
from stagecheck.oracles.device.standins import watch_names
from stagecheck.oracles.protocol import ProtocolConfig, run_protocol_campaign

FIXTURES = pathlib.Path(__file__).resolve().parents[1] / "targets" / "protocols" / \
    "valid-count-readback"


def test_a_watched_namespace_holds_the_models_names_while_it_is_active_and_torchs_after():
    cuda_event, generic_event, stream = torch.cuda.Event, torch.Event, torch.cuda.Stream
    namespace = {"Event": cuda_event, "AccEvent": generic_event, "Stream": stream,
                 "torch": torch, "other": 3}
    watch_names(namespace)
    with device_model("cpu").activate():
        assert namespace["Event"] is torch.cuda.Event is not cuda_event
        assert namespace["AccEvent"] is torch.Event is not generic_event
        assert namespace["Stream"] is torch.cuda.Stream is not stream
        assert namespace["torch"] is torch and namespace["other"] == 3
        event = namespace["Event"]()          # torch's raised here on a CPU build
        event.record()
        event.synchronize()
    assert namespace == {"Event": cuda_event, "AccEvent": generic_event, "Stream": stream,
                         "torch": torch, "other": 3}


def _bound_at_load(path: pathlib.Path, out: pathlib.Path) -> str:
    """``path`` with its events and streams made through names bound at module level."""
    text = path.read_text()
    assert "torch.cuda.Event()" in text and "torch.cuda.Stream()" in text
    text = text.replace("torch.cuda.Event()", "CudaEvent()").replace(
        "torch.cuda.Stream()", "CudaStream()")
    text = text.replace("import torch\n", "import torch\nfrom torch.cuda import Event as "
                        "CudaEvent, Stream as CudaStream\n", 1)
    out.write_text(text)
    return f"{out}::GPUModelRunner"


def test_a_fixed_component_that_imports_event_by_name_holds(tmp_path):
    spec = _bound_at_load(FIXTURES / "fixed_event_synchronized_readback.py",
                          tmp_path / "fixed_bound.py")
    result = run_protocol_campaign(None, spec, "valid-count-readback",
                                   ProtocolConfig(sequences=60, jobs=1))
    assert result.errors == [], [f.message for f in result.errors]
    assert result.sequences_run == 60


def test_a_buggy_component_that_imports_event_by_name_is_still_found(tmp_path):
    spec = _bound_at_load(FIXTURES / "buggy_counts_read_without_sync.py",
                          tmp_path / "buggy_bound.py")
    result = run_protocol_campaign(None, spec, "valid-count-readback",
                                   ProtocolConfig(sequences=200, jobs=1))
    assert result.verdict() == "different"
    assert not any("dummy base class" in f.message or "support events" in f.message
                   for f in result.errors), [f.message for f in result.errors]
