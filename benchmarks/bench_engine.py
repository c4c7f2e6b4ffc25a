"""The engine's speed, as ratios of things measured in one run (issues 11, 15 and 20).

    python benchmarks/bench_engine.py [--examples N] [--repeats R] [--skip PART ...]
                                      [--other CHECKOUT]

Parts (each prints its own lines; --skip leaves one out):

- ``main-job``: ``stagecheck diff legacy single-loop`` with its defaults, as a user
  runs it (a fresh process: start, load, both streams of 300 examples at the default
  sizes, the hypothesis edge-case stream, the kernel impact of the info findings, the
  report): its wall time (goal: under 3 s), and its examples per second against the
  bare torch loop on the same size distribution (``bare_loop_sized``: the sizes drawn
  by ``spec.space.draw_batch``, values with ``random``, plain ``CpuGpuBuffer``s, both
  generations called; goal: at most 2x), interleaved.
  ``--main-examples N`` runs it with ``--examples N`` instead: the same sizes, the
  process's fixed costs spread over more examples.
- ``sizes``: the cost as the batch grows: for capacities 8, 64, 256 and 1,024, the
  engine's in-contract stream on full batches of that capacity (drawn, run in the
  worker, judged, one in 16 run instrumented) against the bare torch loop on the same
  sizes, each in a fresh process, with examples per second and peak memory (the
  process's maximum resident set, and its worker's); goal at 1,024: at most 1.5x.
``--other CHECKOUT`` (another checkout with its own virtual environment in
``CHECKOUT/.venv``, as ``bench_versions.py`` takes it): ``main-job``, ``stages`` and
``sizes`` also run that checkout's stagecheck, in turn with this one's and the bare loop
in each repeat, and print its figures beside this checkout's (before and after a change,
in one run).

- ``stages``: the engine's parts on full batches of 64 and 1,024 slots, in one process
  (no pipe, no worker start): CPU milliseconds per example for drawing, pickling the
  request, the worker's unpickling, its runs of both sides (``_Worker._observe_batch``,
  one in 16 instrumented) and its pickling of the answer, the checker's unpickling and
  decoding, judging and recording; each the least of 3 rounds, rounds of this checkout
  and ``--other``'s alternating (this file run with the other checkout's interpreter, in
  its folder: its own stagecheck). Against the bare loop's CPU milliseconds per example
  on the same batches.
- ``phases``: where the main job's time goes: the main job run in a fresh process with
  a timer on each part of the campaign (start, streams, drawing, judging, the
  edge-case stream and its preload, shrinking, kernel impact), CPU and wall seconds,
  and the worker's CPU seconds.
- ``throughput``: ``stagecheck diff legacy single-loop --examples N --max-capacity 8
  --max-drafts 4`` (default N 20,000), examples per second over the process's whole
  wall time, against the bare loop of bench_diff.py (the same sizes), interleaved; and
  the same bare loop on plain numpy buffers (the least any harness can do).
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

#: the buffers of the bare loops (bench_diff.py's; that module imports torch at its top,
#: which a measured process must not pay for)
BUFFERS = ("mamba_state_idx_buf", "num_scheduled_tokens_buf", "num_computed_tokens_buf",
           "num_draft_tokens_buf")

FIXTURES = sorted((ROOT / "tests" / "targets").glob("buggy_*.py"))
FUNCTION = "stage_postprocess_inputs_to_gpu"


def _children_cpu() -> float:
    import resource
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _stagecheck(*args: str, checkout: pathlib.Path | None = None
                ) -> tuple[float, dict, int]:
    """Run the CLI in a fresh process (of ``checkout``: another checkout's, in its folder);
    (wall seconds, its JSON report, exit code). The CPU seconds it and its workers used
    are kept in ``_LAST_CPU``."""
    cpu = _children_cpu()
    try:
        return _stagecheck_run(*args, checkout=checkout)
    finally:
        _LAST_CPU[0] = _children_cpu() - cpu


_LAST_CPU = [0.0]


def _python(checkout: pathlib.Path | None) -> str:
    """The interpreter of ``checkout`` (its ``.venv``), or this one's."""
    return sys.executable if checkout is None else str(checkout / ".venv" / "bin" / "python")


def _stagecheck_run(*args: str, checkout: pathlib.Path | None = None
                    ) -> tuple[float, dict, int]:
    with tempfile.TemporaryDirectory() as folder:
        report = os.path.join(folder, "report.json")
        started = time.perf_counter()
        done = subprocess.run([_python(checkout), "-m", "stagecheck", *args, "--json", report,
                               "--save-dir", os.path.join(folder, "findings")],
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                              cwd=checkout)
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


def bare_loop_sized(n: int, legacy, single, rng: random.Random,
                    batch: tuple[int, int] | None = None) -> float:
    """The bare torch loop on the engine's size distribution (or on ``batch``:
    ``(capacity, num_reqs)`` every time): sizes from ``spec.space``, values from
    ``random``, plain ``CpuGpuBuffer``s, both generations called. Seconds."""
    from types import SimpleNamespace

    import torch

    from stagecheck.impl.buffer import CpuGpuBuffer
    from stagecheck.oracles.sample import RandomDraw
    from stagecheck.spec.space import draw_batch, draw_length
    d = RandomDraw(rng)
    started = time.perf_counter()
    for _ in range(n):
        capacity, num_reqs = batch or draw_batch(d, 1024)
        length = num_reqs + (rng.randint(0, min(8, capacity - num_reqs)))
        ids = [f"req-{k}" for k in rng.sample(range(4 * max(capacity, 8)), length)]
        so = SimpleNamespace(
            num_scheduled_tokens={r: rng.randint(0, 2**31 - 1) for r in ids},
            scheduled_spec_decode_tokens={r: [0] * draw_length(d, 0, 16) for r in ids
                                          if rng.random() < 0.5})
        requests = {r: SimpleNamespace(num_computed_tokens=rng.randint(0, 2**31 - 1),
                                       num_prompt_tokens=rng.randint(0, 2**31 - 1)) for r in ids}
        state_idx = {r: rng.randint(0, 64) for r in ids
                     if num_reqs > 8 or rng.random() < 0.9}
        for func in (legacy, single):
            ctx = SimpleNamespace(**{b: CpuGpuBuffer(capacity, torch.int32) for b in BUFFERS})
            try:
                func(ctx, so, ids, num_reqs, requests, state_idx)
            except AssertionError:
                pass
    return time.perf_counter() - started


def main_job(repeats: int, other: pathlib.Path | None = None,
             examples: int | None = None) -> None:
    import torch  # noqa: F401  (the bare loop's; imported before its CPU time is counted)

    from stagecheck.impl.buffer import CpuGpuBuffer  # noqa: F401
    from stagecheck.oracles.targets import load_target
    legacy, single = load_target("legacy").func, load_target("single-loop").func
    checkouts = {"this checkout": None} | ({f"other ({other})": other} if other else {})
    walls: dict = {k: [] for k in checkouts}
    tool: dict = {k: [] for k in checkouts}
    cpus: dict = {k: [] for k in checkouts}
    bare, bare_cpu = [], []
    for r in range(repeats):      # interleaved, so drift hits every figure alike
        for label, checkout in (checkouts.items() if r % 2 == 0
                                else reversed(checkouts.items())):
            more = ("--examples", str(examples)) if examples else ()
            wall, report, code = _stagecheck("diff", "legacy", "single-loop", *more,
                                             checkout=checkout)
            assert code == 0, report["verdict"]
            n = _examples(report)
            walls[label].append(wall)
            tool[label].append(n / wall)
            cpus[label].append(_LAST_CPU[0])
        cpu = time.process_time()
        bare.append(n / bare_loop_sized(n, legacy, single, random.Random(r)))
        bare_cpu.append(time.process_time() - cpu)
    runs = lambda xs, f="{:.0f}": ", ".join(f.format(x) for x in xs)   # noqa: E731
    b = statistics.median(bare)
    print("main job: stagecheck diff legacy single-loop "
          + (f"--examples {examples} (the default sizes)" if examples else "(defaults)")
          + f", {n} examples")
    print(f"  bare torch loop, same sizes         : {b:8.0f} examples/s (runs: {runs(bare)})")
    for label in checkouts:
        w, t = statistics.median(walls[label]), statistics.median(tool[label])
        cpu_ratio = [c / bc for c, bc in zip(cpus[label], bare_cpu)]
        print(f"  {label}:")
        print(f"    wall time, whole process            : {w:8.2f} s (runs: "
              f"{runs(walls[label], '{:.2f}')}; goal < 3 s)")
        print(f"    stagecheck, whole process           : {t:8.0f} examples/s (runs: "
              f"{runs(tool[label])})")
        print(f"    stagecheck / bare loop              : {b / t:8.2f}x  (goal <= 2x)")
        print(f"    CPU seconds, process and workers    : {statistics.median(cpus[label]):8.2f} s "
              f"(runs: {runs(cpus[label], '{:.2f}')})")
        print(f"    CPU seconds, stagecheck / bare loop : {statistics.median(cpu_ratio):8.2f}x "
              f"(runs: {runs(cpu_ratio, '{:.2f}')}; the process and its workers, all "
              "their work: what a shared machine's load does not change)")


#: the parts of the main job ``phases`` times: (label, module, attribute), outermost first
PHASES = (
    ("the campaign (from the worker's start to the result)", "campaign", "run_campaign"),
    ("  batched streams, in and out of contract", "campaign._Search", "batched_stream"),
    ("    drawing the scenarios", "campaign._Search", "scenario"),
    ("    judging the observations", "campaign._Search", "judge"),
    ("  hypothesis edge-case stream (incl. preload)", "campaign._Search", "hypothesis_stream"),
    ("    preload of the project's modules", "campaign_hypothesis", "preload_project_modules"),
    ("  shrinking", "campaign._Search", "shrink"),
    ("  kernel impact of the kept findings", "campaign._Search", "kernel_impact"),
)


def _phases_run(argv: list[str]) -> dict:
    """The main job in this (fresh) process, each part of ``PHASES`` timed: CPU and wall
    seconds of this process; the worker's CPU seconds (its process and its keeper's,
    counted once they ended)."""
    import functools
    import importlib
    import resource

    started = time.perf_counter()
    from stagecheck.oracles import campaign
    from stagecheck.oracles.cli import main
    imported = time.process_time(), time.perf_counter() - started
    totals: dict[str, list[float]] = {}

    def timed(label, method):
        @functools.wraps(method)
        def wrapper(*args, **kwargs):
            cpu, wall = time.process_time(), time.perf_counter()
            try:
                return method(*args, **kwargs)
            finally:
                seen = totals.setdefault(label, [0.0, 0.0])
                seen[0] += time.process_time() - cpu
                seen[1] += time.perf_counter() - wall
        return wrapper

    for label, where, name in PHASES:
        owner = importlib.import_module("stagecheck.oracles." + where.split(".")[0])
        for part in where.split(".")[1:]:
            owner = getattr(owner, part)
        setattr(owner, name, timed(label, getattr(owner, name)))
    if "run_campaign" in vars(importlib.import_module("stagecheck.oracles.commands.campaign")):
        importlib.import_module("stagecheck.oracles.commands.campaign").run_campaign = \
            campaign.run_campaign
    code = main(argv)
    assert code in (0, 1), code
    own = resource.getrusage(resource.RUSAGE_SELF)
    workers = resource.getrusage(resource.RUSAGE_CHILDREN)
    return {"imports": imported, "phases": totals, "wall": time.perf_counter() - started,
            "cpu": own.ru_utime + own.ru_stime,
            "worker_cpu": workers.ru_utime + workers.ru_stime}


def phases(repeats: int) -> None:
    """Where the main job's time goes: each part's CPU and wall seconds (medians of
    ``repeats`` fresh processes)."""
    runs = []
    for _ in range(repeats):
        done = subprocess.run([sys.executable, __file__, "--phases-run", "diff", "legacy",
                               "single-loop", "--no-save"],
                              capture_output=True, text=True, check=True)
        runs.append(json.loads(done.stdout.strip().splitlines()[-1]))
    med = lambda f: statistics.median(f(r) for r in runs)    # noqa: E731
    print("where the main job's time goes (stagecheck diff legacy single-loop, in one "
          f"process with timers; medians of {repeats} runs)")
    print(f"  {'part':55s} {'CPU s':>7s} {'wall s':>7s}")
    print(f"  {'the whole process (checker)':55s} {med(lambda r: r['cpu']):7.2f} "
          f"{med(lambda r: r['wall']):7.2f}")
    print(f"  {'  start: interpreter and the command line imports':55s} "
          f"{med(lambda r: r['imports'][0]):7.2f} {med(lambda r: r['imports'][1]):7.2f}")
    for label, _, _ in PHASES:
        if all(label in r["phases"] for r in runs):
            print(f"  {label:55s} {med(lambda r: r['phases'][label][0]):7.2f} "
                  f"{med(lambda r: r['phases'][label][1]):7.2f}")
    print(f"  {'the worker process (start, targets, read-back; keeper)':55s} "
          f"{med(lambda r: r['worker_cpu']):7.2f}")


def _sized_run(capacity: int, examples: int, what: str) -> dict:
    """One measurement in this (fresh) process: the engine's in-contract stream on full
    batches of ``capacity``, or the bare loop on them. Rate and peak memory."""
    import resource

    from stagecheck.oracles.targets import load_target
    legacy, single = load_target("legacy"), load_target("single-loop")
    if what == "bare":      # what the bare loop imports is not counted as its work
        import torch  # noqa: F401

        from stagecheck.impl.buffer import CpuGpuBuffer  # noqa: F401
    cpu = time.process_time()
    if what == "bare":
        seconds = bare_loop_sized(examples, legacy.func, single.func, random.Random(0),
                                  batch=(capacity, capacity))
    else:
        from stagecheck.oracles.campaign import CampaignResult, _Search
        from stagecheck.oracles.gcpause import fewer_collections
        from stagecheck.oracles.options import CampaignConfig, RunOptions
        from stagecheck.oracles.runner import runner_for
        from stagecheck.oracles.sample import RandomDraw
        from stagecheck.spec.space import draw_scenario
        config = CampaignConfig(examples=examples, max_capacity=capacity,
                                run=RunOptions(kernel="off"))
        result = CampaignResult(legacy.spec, single.spec, config, schema=single.schema)
        with runner_for([legacy, single]) as runner:
            search = _Search(legacy, single, config, runner, result, None)
            search.scenario = lambda stream, index: draw_scenario(
                single.schema, RandomDraw(random.Random(index)), batch=(capacity, capacity))
            started = time.perf_counter()
            with fewer_collections():
                done = search.batched_stream("in")
            seconds = time.perf_counter() - started
            assert done == examples and not result.errors
    cpu = time.process_time() - cpu + _children_cpu()     # the workers, once ended
    own = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    children = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    return {"rate": examples / seconds, "cpu_per_example": cpu / examples,
            "peak_mib": own / 1024, "worker_peak_mib": children / 1024}


STAGES = ("draw", "pickle request", "worker: unpickle", "worker: run both sides",
          "worker: pickle answer", "unpickle answer", "decode", "judge", "record")
CHECKER_STAGES = ("draw", "pickle request", "unpickle answer", "decode", "judge", "record")


def _stages_run(capacity: int, examples: int) -> dict:
    """CPU ms per example of each of ``STAGES`` on ``examples`` full batches of
    ``capacity`` (least of 3 rounds), in this process; and the bare loop's."""
    import pickle
    from multiprocessing.reduction import ForkingPickler

    import numpy  # noqa: F401  (imported before any part is timed, as torch for the bare loop)
    import torch  # noqa: F401

    from stagecheck.impl.buffer import CpuGpuBuffer  # noqa: F401
    from stagecheck.oracles.collect import FindingsCollector
    from stagecheck.oracles.evaluate import judge
    from stagecheck.oracles.gcpause import fewer_collections
    from stagecheck.oracles.options import RunOptions
    from stagecheck.oracles.sample import RandomDraw
    from stagecheck.oracles.targets import load_target
    from stagecheck.oracles.worker.child import _Worker
    from stagecheck.oracles.worker.blame import decoded as _decoded
    from stagecheck.spec.space import draw_scenario
    legacy, single = load_target("legacy"), load_target("single-loop")
    worker = _Worker(type("Counter", (), {"value": 0})(), 4096)
    worker.targets = [legacy, single]
    options, ms = RunOptions(kernel="off"), {}

    def timed(name, part, given=None):
        """``part()`` (or ``part(given())``, ``given`` run before the clock starts)."""
        best = out = None
        for _ in range(3):
            arg = given() if given is not None else None
            started = time.process_time()
            out = part() if given is None else part(arg)
            spent = time.process_time() - started
            best = spent if best is None else min(best, spent)
        ms[name] = 1000 * best / examples
        return out

    with fewer_collections():
        batch = timed("draw", lambda: [(i, draw_scenario(
            single.schema, RandomDraw(random.Random(i)), batch=(capacity, capacity)))
            for i in range(examples)])
        request = timed("pickle request", lambda: bytes(ForkingPickler.dumps(
            ("observe", ([0, 1], batch, options, "fast", 16)))))
        timed("worker: unpickle", lambda: pickle.loads(request))
        # a fresh copy of the request each round, unpickled before the clock starts (its
        # unpickling is the row above: timed here too, it was counted twice before)
        answer = timed("worker: run both sides", lambda got: worker._observe_batch(
            [0, 1], got, options, "fast", 16), lambda: pickle.loads(request)[1][1])
        wire = timed("worker: pickle answer", lambda: bytes(ForkingPickler.dumps(
            ("ok", answer))))
        got = timed("unpickle answer", lambda: pickle.loads(wire))
        seen = timed("decode", lambda: _decoded(got[1], batch))
        findings = timed("judge", lambda: [judge(s, legacy, single, o[0], o[-1])
                                           for (_, s), (_, o) in zip(batch, seen)])

        def record():
            collector = FindingsCollector()
            for k, ((_, s), found) in enumerate(zip(batch, findings)):
                collector.add(found, s, k + 1, extra={"engine": "random"})
        timed("record", record)
    bare = []
    for r in range(3):
        started = time.process_time()
        bare_loop_sized(examples, legacy.func, single.func, random.Random(r),
                        batch=(capacity, capacity))
        bare.append(1000 * (time.process_time() - started) / examples)
    ms["bare loop"] = min(bare)
    return ms


def stages(other: pathlib.Path | None = None) -> None:
    print("the engine's parts on full batches (CPU ms per example, in one process, least "
          "of 3 rounds; worker start and pipe not counted)")
    runners = {"this": (sys.executable, None)}
    if other:
        runners["other"] = (_python(other), other)
    for capacity, examples in ((64, 256), (1024, 64)):
        seen: dict = {label: [] for label in runners}
        for r in range(2):       # alternating, so drift hits both alike
            for label, (python, folder) in (list(runners.items()) if r % 2 == 0
                                            else list(runners.items())[::-1]):
                done = subprocess.run([python, __file__, "--stages-run", str(capacity),
                                       str(examples)], capture_output=True, text=True,
                                      check=True, cwd=folder)
                seen[label].append(json.loads(done.stdout.strip().splitlines()[-1]))
        print(f"  capacity {capacity}, {examples} examples")
        print(f"    {'part':28s} " + " ".join(f"{label:>8s}" for label in runners))
        best = {label: {k: min(run[k] for run in runs) for k in runs[0]}
                for label, runs in seen.items()}
        for part in (*STAGES, "bare loop"):
            print(f"    {part:28s} "
                  + " ".join(f"{best[label][part]:8.2f}" for label in runners))
        for label in runners:
            b = best[label]
            checker = sum(b[k] for k in CHECKER_STAGES)
            worker = sum(b[k] for k in STAGES if k not in CHECKER_STAGES)
            print(f"    {label}: checker {checker:.2f} ms, worker {worker:.2f} ms per example; "
                  f"the slower of the two / bare loop: {max(checker, worker) / b['bare loop']:.2f}x"
                  f"; both / bare loop: {(checker + worker) / b['bare loop']:.2f}x")


def sizes(repeats: int, other: pathlib.Path | None = None) -> None:
    print("cost as the batch grows (full batches; in-contract stream; kernel oracle off)")
    print(f"  {'capacity':>8} {'checkout':>8} {'stagecheck ex/s':>16} {'bare ex/s':>10} "
          f"{'ratio':>6} {'CPU ratio':>9} {'peak MiB (checker + worker)':>28} "
          f"{'bare peak MiB':>14}")
    runners = {"this": [sys.executable, __file__]}
    if other:
        runners["other"] = [_python(other), str(other / "benchmarks" / "bench_engine.py")]
    for capacity in (8, 64, 256, 1024):
        examples = max(128, min(2000, 40_000 // capacity))   # 128: past the first batches
        seen: dict = {k: {"tool": [], "cpu": [], "peaks": []} for k in runners}
        bare, bare_cpu, bare_peaks = [], [], []
        for r in range(repeats):      # interleaved, each in a fresh process
            order = [(k, "stagecheck") for k in runners] + [("this", "bare")]
            for label, what in (order if r % 2 == 0 else order[::-1]):
                done = subprocess.run([*runners[label], "--sized-run", what, str(capacity),
                                       str(examples)], capture_output=True, text=True,
                                      check=True, cwd=other if label == "other" else None)
                got = json.loads(done.stdout.strip().splitlines()[-1])
                if what == "bare":
                    bare.append(got["rate"])
                    bare_cpu.append(got["cpu_per_example"])
                    bare_peaks.append(got["peak_mib"])
                else:
                    seen[label]["tool"].append(got["rate"])
                    seen[label]["cpu"].append(got["cpu_per_example"])
                    seen[label]["peaks"].append((got["peak_mib"], got["worker_peak_mib"]))
        b = statistics.median(bare)
        for label in runners:
            t = statistics.median(seen[label]["tool"])
            cpu = statistics.median(seen[label]["cpu"]) / statistics.median(bare_cpu)
            peak = max(seen[label]["peaks"])
            print(f"  {capacity:>8} {label:>8} {t:>16.0f} {b:>10.0f} {b / t:>5.2f}x "
                  f"{cpu:>8.2f}x {peak[0]:>12.0f} + {peak[1]:<13.0f} "
                  f"{max(bare_peaks):>14.0f}")
    print("  (ratio: wall-clock examples per second, bare / stagecheck; CPU ratio: CPU "
          "seconds per example, stagecheck's checker and worker together (the worker's "
          "start included) / bare's; goal at 1,024: stagecheck at most 1.5x the bare loop)")


def throughput(examples: int, repeats: int) -> None:
    from bench_diff import bare_loop
    from stagecheck.oracles.targets import load_target
    legacy, single = load_target("legacy").func, load_target("single-loop").func
    tool, torch_bare, numpy_bare, inside = [], [], [], []
    for r in range(repeats):      # interleaved, so drift hits every figure alike
        # at bench_diff's sizes (capacities up to 8, drafts up to 4), as its bare loop
        wall, report, code = _stagecheck("diff", "legacy", "single-loop", "--examples",
                                         str(examples), "--seed", str(r), "--max-capacity",
                                         "8", "--max-drafts", "4")
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
    parser.add_argument("--main-examples", type=int, default=None,
                        help="main-job: run it with --examples N (its default sizes; a "
                             "rate with the process's start spread over more examples)")
    parser.add_argument("--skip", nargs="*", default=[],
                        choices=["main-job", "phases", "stages", "sizes", "throughput",
                                 "isolation", "first-error", "shrink"])
    parser.add_argument("--other", type=pathlib.Path, default=None,
                        help="another checkout (with CHECKOUT/.venv): main-job and sizes "
                             "run it too, interleaved with this one")
    parser.add_argument("--sized-run", nargs=3, metavar=("WHAT", "CAPACITY", "EXAMPLES"),
                        help=argparse.SUPPRESS)
    parser.add_argument("--phases-run", nargs=argparse.REMAINDER, help=argparse.SUPPRESS)
    parser.add_argument("--stages-run", nargs=2, type=int, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.stages_run:
        print(json.dumps(_stages_run(*args.stages_run)))
        return
    if args.phases_run:
        import contextlib
        with contextlib.redirect_stdout(sys.stderr):     # the report: not the JSON line
            out = _phases_run(args.phases_run)
        print(json.dumps(out))
        return
    if args.sized_run:
        what, capacity, examples = args.sized_run
        print(json.dumps(_sized_run(int(capacity), int(examples), what)))
        return
    print(f"python {sys.version.split()[0]}, {os.cpu_count()} CPUs visible, "
          f"{len(os.sched_getaffinity(0))} usable; load average "
          f"{', '.join(f'{x:.1f}' for x in os.getloadavg())} (other sessions share them)")
    other = args.other.resolve() if args.other else None
    if "main-job" not in args.skip:
        main_job(args.repeats, other, args.main_examples)
    if "phases" not in args.skip:
        phases(args.repeats)
    if "stages" not in args.skip:
        stages(other)
    if "sizes" not in args.skip:
        sizes(args.repeats, other)
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
