"""The engine's speed, as ratios of things measured in one run (issues 11 and 15).

    python benchmarks/bench_engine.py [--examples N] [--repeats R] [--skip PART ...]

Parts (each prints its own lines; --skip leaves one out):

- ``throughput``: ``stagecheck diff legacy single-loop`` as a user runs it (a fresh
  process: start, load, both streams, the hypothesis edge-case stream, the kernel
  impact of the info findings, the report), examples per second over the process's
  whole wall time, against the bare loop of bench_diff.py (draw inputs with ``random``,
  build plain ``CpuGpuBuffer``s, call both generations), interleaved; and the same
  bare loop on plain numpy buffers (the least any harness can do).
- ``isolation``: one campaign with the targets in a worker process against the same
  campaign with the targets in this process (issue 11: overhead under 25%).
- ``first-error``: for every buggy fixture in tests/targets, the seconds from starting
  ``stagecheck diff single-loop FIXTURE`` to its first error finding, process start
  included (an upper bound: the process's wall time less what it did after the first
  error, as its JSON report says).
- ``shrink``: the size of the smallest failing scenario each engine reports for each
  buggy fixture (the batched engine's shrinker against hypothesis's), as
  ``oracles.collect.scenario_size`` orders them: (capacity, live requests, ids,
  characters of inputs and buffer contents).
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import random
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

from bench_diff import BUFFERS, bare_loop  # noqa: E402

FIXTURES = sorted((ROOT / "tests" / "targets").glob("buggy_*.py"))
FUNCTION = "stage_postprocess_inputs_to_gpu"


def _stagecheck(*args: str) -> tuple[float, dict, int]:
    """Run the CLI in a fresh process; (wall seconds, its JSON report, exit code)."""
    with tempfile.TemporaryDirectory() as folder:
        report = os.path.join(folder, "report.json")
        started = time.perf_counter()
        done = subprocess.run([sys.executable, "-m", "stagecheck", *args, "--json", report,
                               "--save-dir", os.path.join(folder, "findings")],
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        wall = time.perf_counter() - started
        if done.returncode not in (0, 1):
            raise SystemExit(f"stagecheck {' '.join(args)} exited {done.returncode}:\n"
                             f"{done.stderr}")
        with open(report, encoding="utf-8") as fh:
            return wall, json.load(fh), done.returncode


def _examples(report: dict) -> int:
    counts = report["examples"]
    return counts["in_contract"] + counts["out_of_contract"] + counts.get("edge", 0)


def bare_numpy_loop(n: int, legacy, single, rng: random.Random) -> float:
    """bench_diff's bare loop on numpy buffers (``FastBuffer``) instead of torch ones."""
    from types import SimpleNamespace

    from stagecheck.oracles.observe.fast import FastBuffer
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
            events: list = []
            ctx = SimpleNamespace(**{b: FastBuffer(b, "int32", [0] * capacity, [0] * capacity,
                                                   events) for b in BUFFERS})
            try:
                func(ctx, so, ids, num_reqs, requests, state_idx)
            except AssertionError:
                pass
    return time.perf_counter() - started


def throughput(examples: int, repeats: int) -> None:
    from stagecheck.oracles.targets import load_target
    legacy, single = load_target("legacy").func, load_target("single-loop").func
    tool, torch_bare, numpy_bare, inside = [], [], [], []
    for r in range(repeats):      # interleaved, so drift hits every figure alike
        wall, report, code = _stagecheck("diff", "legacy", "single-loop", "--examples",
                                         str(examples), "--seed", str(r))
        assert code == 0, report["verdict"]
        n = _examples(report)
        tool.append(n / wall)
        inside.append(n / report["seconds"])
        torch_bare.append(n / bare_loop(n, legacy, single, random.Random(r)))
        numpy_bare.append(n / bare_numpy_loop(n, legacy, single, random.Random(r)))
    t, c = statistics.median(tool), statistics.median(inside)
    b, nb = statistics.median(torch_bare), statistics.median(numpy_bare)
    runs = lambda xs: ", ".join(f"{x:.0f}" for x in xs)   # noqa: E731
    print(f"diff legacy single-loop, whole process : {t:8.0f} examples/s (runs: {runs(tool)})")
    print(f"  the campaign alone (no start, report): {c:8.0f} examples/s (runs: {runs(inside)})")
    print(f"bare loop, torch CpuGpuBuffer          : {b:8.0f} examples/s (runs: {runs(torch_bare)})")
    print(f"bare loop, numpy buffers               : {nb:8.0f} examples/s (runs: {runs(numpy_bare)})")
    print(f"stagecheck / bare loop (torch)         : {b / t:8.2f}x  (goal <= 2x)")
    print(f"stagecheck / bare loop (numpy)         : {nb / t:8.2f}x")


def isolation(examples: int, repeats: int) -> None:
    from stagecheck.oracles.campaign import run_campaign
    from stagecheck.oracles.options import CampaignConfig, RunOptions
    from stagecheck.oracles.targets import load_target
    a, b = load_target("legacy"), load_target("single-loop")
    rates: dict[bool, list[float]] = {True: [], False: []}
    for r in range(repeats):
        for isolated in (True, False):
            config = CampaignConfig(examples=examples, seed=r, isolated=isolated,
                                    edge_examples=0, run=RunOptions(kernel="off"))
            result = run_campaign(a, b, config)
            assert not result.errors
            n = result.examples_in_contract + result.examples_out_of_contract
            rates[isolated].append(n / result.seconds)
    iso, here = statistics.median(rates[True]), statistics.median(rates[False])
    print(f"targets in a worker process            : {iso:8.0f} examples/s")
    print(f"targets in the checker's process       : {here:8.0f} examples/s")
    print(f"isolation overhead                     : {100 * (here / iso - 1):7.1f} %  "
          f"(goal < 25%; negative: the worker runs beside the checker)")


def first_error() -> None:
    times = []
    for path in FIXTURES:
        wall, report, code = _stagecheck("diff", "single-loop", f"{path}::{FUNCTION}",
                                         "--no-out-of-contract")
        assert code == 1, path.name
        after = report["seconds"] - report["first_error_seconds"]
        times.append(wall - after)
        print(f"  {path.stem:38s} {wall - after:6.2f} s to the first error "
              f"({wall:5.2f} s in all)")
    print(f"first error, median over {len(times)} buggy fixtures: "
          f"{statistics.median(times):.2f} s (max {max(times):.2f} s; goal: median < 1 s)")


def shrink() -> None:
    from stagecheck.oracles.campaign import run_campaign
    from stagecheck.oracles.options import CampaignConfig
    from stagecheck.oracles.collect import scenario_size
    from stagecheck.oracles.targets import load_target
    from stagecheck.spec import ERROR, StagingScenario
    baseline = load_target("single-loop")
    worse = compared = 0
    for path in FIXTURES:
        candidate = load_target(f"{path}::{FUNCTION}")
        sizes = {}
        for engine in ("batched", "hypothesis"):
            result = run_campaign(baseline, candidate,
                                  CampaignConfig(engine=engine, out_of_contract=False))
            sizes[engine] = {f.key: scenario_size(StagingScenario.from_dict(f.scenario))
                             for f in result.findings if f.severity == ERROR}
        # the same bug (finding key) as both engines kept it; a key only one engine
        # found (e.g. an overflow the batched engine's values reach) is not a size contest
        common = sorted(set(sizes["batched"]) & set(sizes["hypothesis"]), key=str)
        larger = [k for k in common if sizes["batched"][k] > sizes["hypothesis"][k]]
        worse += bool(larger)
        compared += bool(common)
        b = max(sizes["batched"][k] for k in common) if common else None
        h = max(sizes["hypothesis"][k] for k in common) if common else None
        print(f"  {path.stem:38s} {len(common)} bug(s) kept by both: largest batched {b}   "
              f"hypothesis {h}{'   LARGER: ' + str(larger) if larger else ''}")
    print(f"fixtures where the shrinker's example of a bug is larger than hypothesis's: "
          f"{worse} of {compared}")


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--examples", type=int, default=20_000,
                        help="examples per stream of the throughput runs (default 20000)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--skip", nargs="*", default=[],
                        choices=["throughput", "isolation", "first-error", "shrink"])
    args = parser.parse_args(argv)
    print(f"python {sys.version.split()[0]}, {os.cpu_count()} CPUs visible, "
          f"{len(os.sched_getaffinity(0))} usable")
    if "throughput" not in args.skip:
        throughput(args.examples, args.repeats)
    if "isolation" not in args.skip:
        isolation(args.examples // 2, args.repeats)
    if "first-error" not in args.skip:
        first_error()
    if "shrink" not in args.skip:
        shrink()


if __name__ == "__main__":
    main()
