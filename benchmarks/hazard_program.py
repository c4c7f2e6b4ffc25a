"""One write-after-copy hazard, for a side-by-side of three detectors (CUDA only).

The program stages three requests with the single-loop generation into real pinned
buffers (impl.buffer.CpuGpuBuffer, no instrumentation), with GPU work queued ahead of
the copies, then rewrites one slot of the draft buffer through ``.np`` after its copy
was queued: the device receives the new value, not the one the host held at the copy.

    python benchmarks/hazard_program.py                       # the bare program
    TORCH_CUDA_SANITIZER=1 python benchmarks/hazard_program.py
    compute-sanitizer --tool racecheck python benchmarks/hazard_program.py
    python benchmarks/hazard_program.py --stagecheck          # the same, instrumented

It prints what the device received; with ``--stagecheck`` also the findings.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from types import SimpleNamespace

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch  # noqa: E402

BUFFERS = ("mamba_state_idx_buf", "num_scheduled_tokens_buf", "num_computed_tokens_buf",
           "num_draft_tokens_buf")
SOURCE = '''
def stage_then_rewrite(ctx, scheduler_output, req_ids, num_reqs, requests, mamba_state_idx):
    stage_postprocess_inputs_to_gpu(ctx, scheduler_output, req_ids, num_reqs, requests,
                                    mamba_state_idx)
    ctx.num_draft_tokens_buf.np[0] = 7      # the hazard: after the copy was queued
'''


def hazard_target():
    from stagecheck.oracles.targets import load_function_from_source, target_from_callable
    source = (Path(__file__).resolve().parents[1] / "impl" / "staging_single_loop.py").read_text()
    func = load_function_from_source(source + SOURCE, "hazard_program.py", "stage_then_rewrite")
    return target_from_callable(func, "hazard_program.py::stage_then_rewrite")


def scenario():
    from tests.helpers import scenario as make
    return make()


def bare() -> None:
    from stagecheck.impl.buffer import CpuGpuBuffer
    s = scenario()
    ctx = SimpleNamespace(**{b: CpuGpuBuffer(s.capacity, torch.int32, "cuda") for b in BUFFERS})
    so = SimpleNamespace(num_scheduled_tokens=s.num_scheduled_tokens,
                         scheduled_spec_decode_tokens=s.spec_decode_tokens)
    requests = {r: SimpleNamespace(num_computed_tokens=c, num_prompt_tokens=1)
                for r, c in s.num_computed_tokens.items()}
    torch.cuda._sleep(50_000_000)            # keep the copies queued behind device work
    hazard_target().func(ctx, so, list(s.req_ids), s.num_reqs, requests, s.mamba_state_idx)
    torch.cuda.synchronize()
    print(f"host held draft[0] = 2 when its copy was queued; the device received "
          f"{int(ctx.num_draft_tokens_buf.gpu[0])}")


def instrumented() -> None:
    from stagecheck.oracles.observe import observe
    from stagecheck.oracles.options import RunOptions
    from stagecheck.spec import check
    target, s = hazard_target(), scenario()
    o = observe(target, s, RunOptions(device="cuda", gpu_busy_cycles=50_000_000))
    print(f"device received draft[0] = {o.gpu['num_draft_tokens_buf'][0]}")
    for f in check(s, o, target.profile):
        print(f"stagecheck {f.severity}: {f.invariant}: {f.message}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--stagecheck", action="store_true")
    args = parser.parse_args()
    if not torch.cuda.is_available():
        sys.exit("hazard_program.py needs a CUDA device")
    instrumented() if args.stagecheck else bare()
