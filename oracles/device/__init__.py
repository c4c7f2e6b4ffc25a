"""The device model: one interface (``model.DeviceModel``), two implementations.

- ``cpu.CpuDevice``: a deterministic model of a CUDA device on the CPU, whose completion
  schedule the caller chooses (``lazy``, ``eager``, ``drain``);
- ``cuda.CudaDevice``: the real thing, with pinned memory, streams and events.

Both see every copy, stream, event and synchronization of the code under test while they
are active (``with model.activate():``), order them as CUDA does (``order.py``) and report
the same hazards (``spec.observation.HAZARD_KINDS``). Nothing here is imported by the
package itself: the modules import torch, and load only where a run needs them.
"""

__all__ = ["device_model"]


def device_model(device: str = "cpu", completion: str = "lazy", busy_cycles: int = 0):
    """The model of ``device``: the CPU model (``completion`` in force until a protocol
    says otherwise) or the CUDA backend (``busy_cycles`` of device work queued at each
    lazy boundary, so copies really lag)."""
    if device == "cuda":
        from stagecheck.oracles.device.cuda import CudaDevice
        return CudaDevice(completion, busy_cycles)
    from stagecheck.oracles.device.cpu import CpuDevice
    return CpuDevice(completion)
