"""The protocol machinery's speed on the CPU model, as figures measured in one run (issue 22).

    python benchmarks/bench_protocols.py [--sequences N] [--jobs J] [--skip PART ...]
                                         [--repeats R] [--other CHECKOUT]

Parts (each prints its own lines; --skip leaves one out):

- ``throughput``: for each built-in protocol, a campaign of ``N`` sequences of exactly 8
  steps through its fixed fixture, in ``J`` worker processes (spec mode: one target; each
  sequence runs twice, every operation completing when issued and under its drawn
  completion schedule), each campaign in a fresh process. Step sequences per second,
  counted from the first sequence judged to the last (worker start and loading left
  out), and over the campaign's whole time; and the CPU seconds per sequence over the
  same span (the checker's process, every thread, plus its worker processes, from
  ``/proc``), with the rate they allow on ``J`` cores (``J`` / CPU seconds per sequence:
  what a machine whose cores are free for it would reach, a figure that the load of
  other processes moves far less than the wall-clock rate). Beside it, in the same
  process, the same sequences run once through the bare fixture (plain CPU tensors,
  events that do nothing, the device work called directly): the cost of the code under
  test itself, and the model's cost as a ratio of it. ``--repeats R``: each campaign R
  times, the median of each figure. ``--other CHECKOUT`` (another checkout with its own
  virtual environment in ``CHECKOUT/.venv``, as ``bench_engine.py`` takes it): the same
  campaigns of that checkout's stagecheck on its own fixtures, interleaved with this
  one's, printed beside them (before and after a change, in one run).
- ``first-finding``: for each buggy fixture of each built-in protocol, a fresh process
  runs the campaign; the seconds from the campaign's start (worker start and torch import
  included) to its first error finding, and the median over the fixtures.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import pathlib
import statistics
import subprocess
import sys
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]
if "--root" in sys.argv:      # a campaign of another checkout (``--other``): its fixtures
    ROOT = pathlib.Path(sys.argv[sys.argv.index("--root") + 1]).resolve()
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


def bare_runs(path: pathlib.Path, protocol, sequences) -> tuple[float, float]:
    """Seconds (wall, CPU) to run ``sequences`` once each through the bare fixture."""
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
        started, cpu = time.perf_counter(), time.process_time()
        for seq in sequences:
            ctx = _Bare(module, protocol, seq)
            ctx.state = protocol.build(ctx)
            for view in unfold(seq):
                ctx.step = view
                for op in protocol.operations:
                    if op.when(view):
                        op.run(ctx)
        return time.perf_counter() - started, time.process_time() - cpu
    finally:
        for name, value in saved.items():
            setattr(torch.cuda, name, value)


def _descendants(pid: int) -> list[int]:
    """Every process below ``pid`` (the workers sit below their keepers), from ``/proc``."""
    found, todo = [], [pid]
    while todo:
        parent = todo.pop()
        try:
            tasks = os.listdir(f"/proc/{parent}/task")
        except OSError:
            continue
        for tid in tasks:
            try:
                with open(f"/proc/{parent}/task/{tid}/children", encoding="ascii") as fh:
                    kids = [int(k) for k in fh.read().split()]
            except OSError:
                continue
            found += kids
            todo += kids
    return found


def _process_cpu(pid: int) -> float:
    """CPU seconds (user + system) process ``pid`` used so far; 0 once it is gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            fields = fh.read().rsplit(b")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _cpu_now() -> dict:
    """CPU seconds used so far by this process (``-1``) and by each process below it."""
    out = {pid: _process_cpu(pid) for pid in _descendants(os.getpid())}
    out[-1] = time.process_time()
    return out


def _cpu_between(before: dict, after: dict) -> float:
    """CPU seconds used between two ``_cpu_now`` readings (a process that started between
    them counts from 0; one that ended between them is left out: none does in the span
    measured, the workers live from the campaign's start to its end)."""
    return sum(cpu - before.get(pid, 0.0) for pid, cpu in after.items())


def one_campaign(name: str, sequences: int, jobs: int, device: str) -> dict:
    """One protocol's campaign through its fixed fixture, in this process, and the bare
    fixture on the same sequences: its figures (``throughput`` prints them)."""
    from stagecheck.oracles.protocol import ProtocolConfig, load_protocol, run_protocol_campaign
    from stagecheck.oracles.protocol.generate import sample_sequence
    protocol = load_protocol(name)
    (path,) = fixture(name, "fixed")
    ticks: list[tuple[float, int, dict]] = []

    def progress(done, total, findings=0):
        if not ticks:                 # the first sequence judged, and the last
            ticks.append((time.perf_counter(), done, _cpu_now()))
        elif done == total:
            ticks[1:] = [(time.perf_counter(), done, _cpu_now())]

    result = run_protocol_campaign(None, f"{path}::{protocol.component}", protocol,
                                   ProtocolConfig(sequences=sequences, jobs=jobs,
                                                  steps=STEPS, device=device),
                                   progress=progress)
    assert not result.errors, [f.message for f in result.errors]
    (t0, n0, c0), (t1, n1, c1) = ticks[0], ticks[-1]
    cpu = _cpu_between(c0, c1) / (n1 - n0)
    checker_cpu = (c1[-1] - c0[-1]) / (n1 - n0)
    seqs = [sample_sequence(protocol, 0, i, steps=STEPS) for i in range(sequences)]
    bare_wall, bare_cpu = bare_runs(path, protocol, seqs)
    bare, bare_cpu = sequences / bare_wall, bare_cpu / sequences
    return {"steady": (n1 - n0) / (t1 - t0), "whole": result.sequences_run / result.seconds,
            "seconds": result.seconds, "cpu": cpu, "checker_cpu": checker_cpu, "bare": bare,
            "bare_cpu": bare_cpu}


def _campaign_in(checkout: pathlib.Path | None, name: str, sequences: int, jobs: int,
                 device: str) -> dict:
    """``one_campaign`` in a fresh process: of this checkout, or (``checkout``) of another
    one's stagecheck (its ``.venv``) on its own fixtures."""
    python = sys.executable if checkout is None else str(checkout / ".venv" / "bin" / "python")
    command = [python, __file__, "--one-campaign", name, "--sequences", str(sequences),
               "--jobs", str(jobs), "--device", device]
    if checkout is not None:
        command += ["--root", str(checkout)]
    done = subprocess.run(command, capture_output=True, text=True, cwd=checkout or ROOT)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(command)} exited {done.returncode}:\n{done.stderr}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def throughput(sequences: int, jobs: int, device: str = "cpu", repeats: int = 1,
               other: pathlib.Path | None = None) -> None:
    print(f"throughput on {device}: {sequences} sequences of {STEPS} steps per protocol, {jobs} "
          "worker process(es), spec mode (each sequence run twice: as meant, and as "
          "scheduled), each campaign in a fresh process; load average "
          f"{', '.join(f'{x:.1f}' for x in os.getloadavg())} at the start")
    checkouts = {"this": None} | ({"other": other} if other else {})
    medians: dict = {label: {"steady": [], "cpu_rate": []} for label in checkouts}
    for name in PROTOCOLS:
        got: dict = {label: [] for label in checkouts}
        for r in range(repeats):          # interleaved: both checkouts see the same load
            order = list(checkouts.items())
            for label, checkout in (order if r % 2 == 0 else order[::-1]):
                got[label].append(_campaign_in(checkout, name, sequences, jobs, device))
        for label in checkouts:
            m = {k: statistics.median(run[k] for run in got[label]) for k in got[label][0]}
            cpu_rate = jobs / m["cpu"]
            medians[label]["steady"].append(m["steady"])
            medians[label]["cpu_rate"].append(cpu_rate)
            tag = f" [{label}]" if other else ""
            print(f"  {name:<22}{tag} {m['steady']:7.0f} sequences/s steady, {m['whole']:6.0f}/s "
                  f"over the whole campaign ({m['seconds']:.1f} s); {1e3 * m['cpu']:6.2f} CPU ms "
                  f"per sequence ({1e3 * m['checker_cpu']:.2f} the checker's) = "
                  f"{cpu_rate:5.0f}/s on {jobs} free cores; "
                  f"bare fixture {m['bare']:6.0f} runs/s ({1e3 * m['bare_cpu']:.2f} CPU ms) in "
                  f"one process; checked / bare = {2 * m['bare'] / (m['steady'] / jobs):.1f}x "
                  f"per run, {m['cpu'] / (2 * m['bare_cpu']):.1f}x in CPU")
    for label in checkouts:
        tag = f" [{label}]" if other else ""
        steady = statistics.median(medians[label]["steady"])
        cpu_rate = statistics.median(medians[label]["cpu_rate"])
        print(f"  median over the protocols{tag}: {steady:.0f} sequences/s steady, "
              f"{cpu_rate:.0f}/s from CPU seconds on {jobs} free cores (goal >= 300/s on 2 "
              "cores)")
    print(f"  load average at the end: {', '.join(f'{x:.1f}' for x in os.getloadavg())}")


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
    parser.add_argument("--other", type=pathlib.Path, default=None,
                        help="another checkout (with CHECKOUT/.venv): its throughput too, "
                        "interleaved with this one's")
    parser.add_argument("--one-campaign", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--root", type=pathlib.Path, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.one_campaign:
        print(json.dumps(one_campaign(args.one_campaign, args.sequences, args.jobs,
                                      args.device)))
        return 0
    if "throughput" not in args.skip:
        throughput(args.sequences, args.jobs, args.device, args.repeats,
                   args.other.resolve() if args.other else None)
    if "first-finding" not in args.skip:
        first_finding(args.repeats, args.device)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
