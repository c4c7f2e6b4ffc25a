"""The protocol machinery's speed on the CPU model, as figures measured in one run (issue 22).

    python benchmarks/bench_protocols.py [--sequences N] [--jobs J] [--skip PART ...]

Parts (each prints its own lines; --skip leaves one out):

- ``throughput``: for each built-in protocol, a campaign of ``N`` sequences of exactly 8
  steps through its fixed fixture, in ``J`` worker processes (spec mode: one target; each
  sequence runs twice, every operation completing when issued and under its drawn
  completion schedule). Step sequences per second, counted from the first sequence judged
  to the last (worker start and loading left out), and over the campaign's whole time.
  Beside it, in this process, the same sequences run once through the bare fixture (plain
  CPU tensors, events that do nothing, the device work called directly): the cost of the
  code under test itself, and the model's cost as a ratio of it.
- ``first-finding``: for each buggy fixture of each built-in protocol, a fresh process
  runs the campaign; the seconds from the campaign's start (worker start and torch import
  included) to its first error finding, and the median over the fixtures.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import pathlib
import statistics
import subprocess
import sys
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

PROTOCOLS = ("input-prep-event", "mamba-align-steps", "valid-count-readback",
             "condense-inflight-d2h")
STEPS = 8


def fixture(protocol: str, prefix: str) -> list[pathlib.Path]:
    return sorted((ROOT / "tests" / "targets" / "protocols" / protocol).glob(f"{prefix}_*.py"))


class _NoEvent:
    def __init__(self, *args, **kwargs) -> None:
        pass

    def record(self, stream=None) -> None:
        pass

    def synchronize(self) -> None:
        pass

    def wait(self, stream=None) -> None:
        pass

    def query(self) -> bool:
        return True


class _NoStream(_NoEvent):
    def wait_stream(self, other) -> None:
        pass

    def wait_event(self, event) -> None:
        pass


class _Bare:
    """The ``StepContext`` of a bare run: plain CPU tensors, nothing checked."""

    def __init__(self, module, protocol, seq) -> None:
        import torch
        self.module, self.protocol, self.sequence = module, protocol, seq
        self.device, self.state, self.step = torch.device("cpu"), None, None

    def component(self, *args, **kwargs):
        kwargs["pin_memory"] = False
        return getattr(self.module, self.protocol.component)(*args, **kwargs)

    def tensor(self, values, dtype):
        import torch
        return torch.tensor(values, dtype=getattr(torch, dtype))


def bare_runs(path: pathlib.Path, protocol, sequences) -> float:
    """Seconds to run ``sequences`` once each through the bare fixture."""
    import contextlib

    import torch

    from stagecheck.spec.steps import unfold
    spec = importlib.util.spec_from_file_location("bare_fixture", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    saved = {n: getattr(torch.cuda, n) for n in ("Event", "Stream", "stream", "current_stream")}
    torch.cuda.Event, torch.cuda.Stream = _NoEvent, _NoStream
    torch.cuda.stream = lambda s: contextlib.nullcontext()
    torch.cuda.current_stream = lambda device=None: _NoStream()
    try:
        started = time.perf_counter()
        for seq in sequences:
            ctx = _Bare(module, protocol, seq)
            ctx.state = protocol.build(ctx)
            for view in unfold(seq):
                ctx.step = view
                for op in protocol.operations:
                    if op.when(view):
                        op.run(ctx)
        return time.perf_counter() - started
    finally:
        for name, value in saved.items():
            setattr(torch.cuda, name, value)


def throughput(sequences: int, jobs: int, device: str = "cpu") -> None:
    from stagecheck.oracles.protocol import ProtocolConfig, load_protocol, run_protocol_campaign
    from stagecheck.oracles.protocol.generate import sample_sequence
    print(f"throughput on {device}: {sequences} sequences of {STEPS} steps per protocol, {jobs} "
          "worker process(es), spec mode (each sequence run twice: as meant, and as scheduled)")
    rates = []
    for name in PROTOCOLS:
        protocol = load_protocol(name)
        (path,) = fixture(name, "fixed")
        ticks: list[tuple[float, int]] = []

        def progress(done, total, findings=0):
            ticks.append((time.perf_counter(), done))

        result = run_protocol_campaign(None, f"{path}::{protocol.component}", protocol,
                                       ProtocolConfig(sequences=sequences, jobs=jobs,
                                                      steps=STEPS, device=device),
                                       progress=progress)
        assert not result.errors, [f.message for f in result.errors]
        (t0, n0), (t1, n1) = ticks[0], ticks[-1]
        steady = (n1 - n0) / (t1 - t0)
        whole = result.sequences_run / result.seconds
        seqs = [sample_sequence(protocol, 0, i, steps=STEPS) for i in range(sequences)]
        bare = sequences / bare_runs(path, protocol, seqs)
        rates.append(steady)
        print(f"  {name:<22} {steady:7.0f} sequences/s steady, {whole:6.0f}/s over the whole "
              f"campaign ({result.seconds:.1f} s); bare fixture {bare:6.0f} runs/s in one "
              f"process; checked / bare = {2 * bare / (steady / jobs):.1f}x per run")
    print(f"  median over the protocols: {statistics.median(rates):.0f} sequences/s "
          f"(goal >= 300/s on 2 cores)")


def first_finding(repeats: int, device: str = "cpu") -> None:
    print("first finding: a fresh process per buggy fixture, seconds from the campaign's "
          "start to its first error finding (worker start and torch import included)")
    times = []
    code = ("import json, sys\n"
            "from stagecheck.oracles.protocol import ProtocolConfig, run_protocol_campaign\n"
            "r = run_protocol_campaign(None, sys.argv[1], sys.argv[2], "
            "ProtocolConfig(sequences=200, shrink=False, device=sys.argv[3]))\n"
            "print(json.dumps([r.first_error_seconds, r.sequences_run, r.seconds]))\n")
    for name in PROTOCOLS:
        for path in fixture(name, "buggy"):
            runs = []
            for _ in range(repeats):
                started = time.perf_counter()
                out = subprocess.run([sys.executable, "-c", code, f"{path}::GPUModelRunner",
                                      name, device], capture_output=True, text=True, cwd=ROOT,
                                     check=True)
                wall = time.perf_counter() - started
                first, run, _ = json.loads(out.stdout.strip().splitlines()[-1])
                assert first is not None, (path, out.stdout)
                runs.append((first, run, wall))
            first, run, wall = min(runs)
            times.append(first)
            print(f"  {name}/{path.name:<46} {first:5.2f} s after {run} sequence(s) "
                  f"(process {wall:.1f} s)")
    print(f"  median: {statistics.median(times):.2f} s (goal < 2 s)")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sequences", type=int, default=120)
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--device", default="cpu", choices=["cpu", "cuda"],
                        help="cpu: the CPU model; cuda: real pinned memory, streams, events")
    parser.add_argument("--skip", action="append", default=[],
                        choices=["throughput", "first-finding"])
    args = parser.parse_args(argv)
    if "throughput" not in args.skip:
        throughput(args.sequences, args.jobs, args.device)
    if "first-finding" not in args.skip:
        first_finding(args.repeats, args.device)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
