"""Benchmark the Mamba postprocess kernel.

``--device cuda``: effective copy bandwidth (bytes read + written per second) of
``mamba_postprocess`` saving large temporal states (>= 1 MiB per block) for batches of
8..512 requests, next to a plain device-to-device ``copy_`` of the same bytes and an
indexed torch copy (``state[dst] = state[src]``), all in the same run. Device times
are the better of CUDA-graph replay (``triton.testing.do_bench_cudagraph``) and plain
launches (``do_bench``); the wall time of one call from Python is shown too, since
small batches are launch-bound.

``--device cpu``: seconds per example of the interpreted kernel (and of the Python
reference) on small generated scenarios.

    python benchmarks/bench_kernel.py --device cuda
    python benchmarks/bench_kernel.py --device cpu --examples 20
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path
from typing import Callable

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from stagecheck.oracles.kernel import select_triton_mode  # noqa: E402


def _wall_ms(fn: Callable[[], None]) -> float:
    """Per call, launches from Python included (host-bound for small copies)."""
    import triton.testing

    return float(triton.testing.do_bench(fn, warmup=25, rep=200))


def _gpu_ms(fn: Callable[[], None]) -> float:
    """Per call, device time: the better of a CUDA-graph replay and plain launches.

    Graph replay removes host launch overhead (which dominates small copies), but a
    large contiguous ``copy_`` captured in a graph becomes a memcpy node that may run
    on a copy engine, slower than the kernel torch launches outside graphs.
    """
    import triton.testing

    return min(float(triton.testing.do_bench_cudagraph(fn, rep=200)), _wall_ms(fn))


def bench_cuda(batches: list[int], block_mib: float, layers: int) -> None:
    import torch

    from stagecheck.impl.postprocess import MambaStateSpec, mamba_postprocess

    device = torch.device("cuda")
    words = int(block_mib * (1 << 20)) // 4
    print(f"device: {torch.cuda.get_device_name(device)}; temporal block {words * 4 / (1 << 20):.2f} MiB "
          f"fp32, {layers} layer(s); GB/s count bytes read + written")
    print("wall us: one mamba_postprocess call from Python (do_bench); other times are device "
          "times, the better of CUDA-graph replay and plain launches")
    header = (f"{'batch':>6} {'MiB copied':>10} {'wall us':>8} {'kernel us':>9} {'kernel GB/s':>11} "
              f"{'copy_ GB/s':>10} {'indexed GB/s':>12} {'kernel/copy_':>12}")
    print(header)
    print("-" * len(header))
    for batch in batches:
        # Request i: running state at column 0, a save due into column 1 (bias 0, a copy).
        num_blocks = 2 * batch
        states = [MambaStateSpec(torch.randn(num_blocks, words, device=device), "temporal", 0)
                  for _ in range(layers)]
        table = torch.arange(num_blocks, dtype=torch.int32, device=device).reshape(batch, 2)

        def staged(value: int) -> torch.Tensor:
            return torch.full((batch,), value, dtype=torch.int32, device=device)

        state_idx, scheduled, computed, draft = staged(0), staged(4), staged(4), staged(0)
        accepted = staged(1)

        def kernel() -> None:
            mamba_postprocess(states, [table], accepted, state_idx, scheduled, computed, draft,
                              batch, 4)

        kernel()
        for spec in states:
            assert torch.equal(spec.tensor[1::2], spec.tensor[0::2]), "kernel copied wrong bytes"
        copied = layers * batch * words * 4
        src_flat = torch.randn(layers * batch * words, device=device)
        dst_flat = torch.empty_like(src_flat)
        src_rows, dst_rows = table[:, 0].long(), table[:, 1].long()

        def plain_copy() -> None:
            dst_flat.copy_(src_flat)

        def indexed_copy() -> None:
            for spec in states:
                spec.tensor[dst_rows] = spec.tensor[src_rows]

        t_wall = _wall_ms(kernel)
        t_kernel, t_copy, t_indexed = (_gpu_ms(f) for f in (kernel, plain_copy, indexed_copy))

        def gbps(ms: float) -> float:
            return 2 * copied / (ms * 1e-3) / 1e9

        print(f"{batch:>6} {copied / (1 << 20):>10.0f} {t_wall * 1e3:>8.1f} {t_kernel * 1e3:>9.1f} "
              f"{gbps(t_kernel):>11.0f} "
              f"{gbps(t_copy):>10.0f} {gbps(t_indexed):>12.0f} {t_copy / t_kernel:>12.2f}")
        del states, src_flat, dst_flat
        torch.cuda.empty_cache()


def bench_cpu(examples: int) -> None:
    from hypothesis import HealthCheck, Phase, given, settings

    from stagecheck.oracles.kernel.scenarios import (KernelScenario, build_kernel_inputs,
                                                     kernel_scenarios)

    scenarios: list[KernelScenario] = []

    @settings(max_examples=examples, phases=[Phase.generate], derandomize=True, database=None,
              suppress_health_check=list(HealthCheck))
    @given(kernel_scenarios())
    def collect(scenario: KernelScenario) -> None:
        scenarios.append(scenario)

    collect()
    header = f"{'#':>3} {'reqs':>4} {'states':>6} {'programs':>8} {'triton s':>9} {'reference s':>11}"
    print(header)
    print("-" * len(header))
    triton_times, reference_times = [], []
    for index, scenario in enumerate(scenarios):
        timings = []
        for backend in ("triton", "reference"):
            inputs = build_kernel_inputs(scenario, "cpu")
            start = time.perf_counter()
            inputs.run(backend)
            timings.append(time.perf_counter() - start)
        triton_times.append(timings[0])
        reference_times.append(timings[1])
        num_states = 2 * len(scenario.layers)
        print(f"{index:>3} {scenario.num_reqs:>4} {num_states:>6} {scenario.num_reqs * num_states:>8} "
              f"{timings[0]:>9.4f} {timings[1]:>11.4f}")
    print(f"mean seconds per example: triton (interpreter) {statistics.mean(triton_times):.4f}, "
          f"reference {statistics.mean(reference_times):.4f} over {len(scenarios)} examples")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", choices=["cpu", "cuda"], default="cuda")
    parser.add_argument("--batches", type=int, nargs="+", default=[8, 32, 128, 512])
    parser.add_argument("--block-mib", type=float, default=1.0, help="temporal bytes per block, MiB")
    parser.add_argument("--layers", type=int, default=1)
    parser.add_argument("--examples", type=int, default=20, help="cpu: generated scenarios")
    args = parser.parse_args(argv)
    # The kernel module reads TRITON_INTERPRET when it is imported: decide it first.
    select_triton_mode(args.device)
    if args.device == "cpu":
        bench_cpu(args.examples)
    else:
        bench_cuda(args.batches, args.block_mib, args.layers)
    return 0


if __name__ == "__main__":
    sys.exit(main())
