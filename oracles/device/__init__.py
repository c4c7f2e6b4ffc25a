"""The device model: one interface (``model.DeviceModel``), two implementations.

- ``cpu.CpuDevice``: a deterministic model of a CUDA device on the CPU, whose completion
  schedule the caller chooses (``lazy``, ``eager``, ``drain``);
- ``cuda.CudaDevice``: the real thing, with pinned memory, streams and events.

Both see every copy, stream, event and synchronization of the code under test while they
are active (``with model.activate():``), order them as CUDA does (``order.py``) and report
the same hazards (``spec.observation.HAZARD_KINDS``). None of the modules imports torch
at its top: each takes it from ``torchload.import_torch`` when a model is made or used.
"""

from stagecheck.oracles.device.cpu import CpuDevice
from stagecheck.oracles.device.cuda import CudaDevice

__all__ = ["device_model"]


def device_model(device: str = "cpu", completion: str = "lazy", busy_cycles: int = 0):
    """The model of ``device``: the CPU model (``completion`` in force until a protocol
    says otherwise) or the CUDA backend (``busy_cycles`` of device work queued at each
    lazy boundary, so copies really lag)."""
    if device == "cuda":
        return CudaDevice(completion, busy_cycles)
    return CpuDevice(completion)
