"""Kernel oracle 1: the Triton postprocess kernel against its reference, bit for bit.

Hypothesis draws kernel-valid scenarios (``scenarios.kernel_scenarios``); both
backends run on identical tensors and every bit of every state block and of the
accepted counts must agree. A mismatch is shrunk to a minimal scenario.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from hypothesis import HealthCheck, Phase, given, seed as hyp_seed, settings

from stagecheck.oracles import interrupt
from stagecheck.oracles.kernel.scenarios import (KernelScenario, build_kernel_inputs,
                                                 compare_kernel_outputs, kernel_scenarios)

__all__ = ["KernelCampaignResult", "check_kernel_scenario", "run_kernel_campaign"]


@dataclass
class KernelCampaignResult:
    examples: int = 0
    seconds: float = 0.0
    device: str = "cpu"
    seed: int = 0
    failure: KernelScenario | None = None
    differences: list[str] = field(default_factory=list)
    interrupted: str | None = None   # the signal that stopped the run early (no verdict)

    @property
    def clean(self) -> bool:
        return self.failure is None

    def to_dict(self) -> dict:
        return {"verdict": "interrupted" if self.interrupted else
                "equivalent" if self.clean else "different",
                "interrupted": self.interrupted,
                "examples": self.examples, "seconds": round(self.seconds, 3),
                "device": self.device, "seed": self.seed,
                "differences": self.differences,
                "scenario": self.failure.to_dict() if self.failure else None}


class _KernelMismatch(Exception):
    def __init__(self, scenario: KernelScenario, differences: list[str]) -> None:
        super().__init__(differences[0])
        self.scenario, self.differences = scenario, differences


def check_kernel_scenario(k: KernelScenario, device: str = "cpu") -> list[str]:
    """Triton kernel vs reference on one scenario: every bit-level difference."""
    triton_run = build_kernel_inputs(k, device).run("triton")
    reference = build_kernel_inputs(k, device).run("reference")
    return compare_kernel_outputs(triton_run, reference)


def run_kernel_campaign(examples: int = 100, seed: int = 0, device: str = "cpu",
                        progress=None) -> KernelCampaignResult:
    """Kernel oracle 1 over ``examples`` kernel-valid scenarios; shrinks a mismatch."""
    result = KernelCampaignResult(device=device, seed=seed)
    started = time.perf_counter()

    @settings(max_examples=examples, deadline=None, database=None,
              suppress_health_check=list(HealthCheck), report_multiple_bugs=False,
              phases=(Phase.explicit, Phase.generate, Phase.shrink))
    @hyp_seed(seed)
    @given(kernel_scenarios())
    def probe(k: KernelScenario) -> None:
        result.examples += 1
        differences = check_kernel_scenario(k, device)
        if progress is not None:
            progress(result.examples, examples)
        if differences and result.failure is None:   # kept if a signal stops the shrinking
            result.failure, result.differences = k, differences
        interrupt.check()   # after every example: a signal stops the run here
        if differences:
            raise _KernelMismatch(k, differences)

    try:
        probe()
    except _KernelMismatch as mismatch:
        result.failure, result.differences = mismatch.scenario, mismatch.differences
    except interrupt.Interrupted:
        pass
    if interrupt.requested():
        result.interrupted = interrupt.signal_name(interrupt.requested())
    result.seconds = time.perf_counter() - started
    return result
