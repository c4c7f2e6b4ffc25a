"""Examples per second of `stagecheck diff` against a bare loop, measured in one run.

The bare loop draws random in-contract inputs with `random`, builds plain
`CpuGpuBuffer`s and calls both staging functions, with no instrumentation, no spec
checks and no comparison: the least any differential test must do. The ratio is
what the toolkit costs on top of that.

    python benchmarks/bench_diff.py [--examples N] [--repeats R]
"""

from __future__ import annotations

import argparse
import random
import statistics
import time
from types import SimpleNamespace

import torch

from stagecheck.impl.buffer import CpuGpuBuffer
from stagecheck.oracles.campaign import run_campaign
from stagecheck.oracles.options import CampaignConfig
from stagecheck.oracles.targets import load_target

BUFFERS = ("mamba_state_idx_buf", "num_scheduled_tokens_buf", "num_computed_tokens_buf",
           "num_draft_tokens_buf")


def bare_loop(n: int, legacy, single, rng: random.Random) -> float:
    started = time.perf_counter()
    for _ in range(n):
        capacity = rng.randint(1, 8)
        num_reqs = rng.randint(0, capacity)
        ids = [f"req-{k}" for k in rng.sample(range(32), rng.randint(num_reqs, capacity))]
        so = SimpleNamespace(
            num_scheduled_tokens={r: rng.randint(0, 2**31 - 1) for r in ids},
            scheduled_spec_decode_tokens={r: [0] * rng.randint(0, 3) for r in ids
                                          if rng.random() < 0.5})
        requests = {r: SimpleNamespace(num_computed_tokens=rng.randint(0, 2**31 - 1),
                                       num_prompt_tokens=rng.randint(0, 2**31 - 1)) for r in ids}
        state_idx = {r: rng.randint(0, 64) for r in ids if rng.random() < 0.9}
        for func in (legacy, single):
            ctx = SimpleNamespace(**{b: CpuGpuBuffer(capacity, torch.int32) for b in BUFFERS})
            try:
                func(ctx, so, ids, num_reqs, requests, state_idx)
            except AssertionError:
                pass
    return time.perf_counter() - started


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--examples", type=int, default=300)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args(argv)
    legacy, single = load_target("legacy"), load_target("single-loop")
    tool, bare = [], []
    for r in range(args.repeats):   # interleaved, so drift hits both alike
        cfg = CampaignConfig(examples=args.examples, seed=r, out_of_contract=False)
        result = run_campaign(legacy, single, cfg)
        assert not result.errors
        tool.append(result.examples_in_contract / result.seconds)
        n = result.examples_in_contract
        bare.append(n / bare_loop(n, legacy.func, single.func, random.Random(r)))
    t, b = statistics.median(tool), statistics.median(bare)
    print(f"stagecheck diff legacy single-loop : {t:8.1f} examples/s "
          f"(runs: {', '.join(f'{x:.0f}' for x in tool)})")
    print(f"bare loop, no instrumentation     : {b:8.1f} examples/s "
          f"(runs: {', '.join(f'{x:.0f}' for x in bare)})")
    print(f"cost of the toolkit               : {b / t:8.2f}x the bare loop (goal <= 5x)")


if __name__ == "__main__":
    main()
