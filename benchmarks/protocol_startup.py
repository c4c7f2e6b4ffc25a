"""Where a protocol campaign's time to its first finding goes (issue 22's first-finding figure).

    python benchmarks/protocol_startup.py [--device cpu|cuda] [--repeats N]

For each buggy fixture of ``input-prep-event`` (a fresh process per run, as
``bench_protocols.py`` measures it): the seconds from the campaign's start until its
worker pools have loaded the target (worker start, torch's import, the device's
initialisation, the target's code), and from then to the first error finding (drawing,
running, judging). Beside them, in fresh processes, the bare costs of the worker's start:
``python -c "import torch"`` and, on CUDA, torch's import plus the device's first
allocation and a pinned host tensor.
"""

from __future__ import annotations

import argparse
import json
import pathlib
import statistics
import subprocess
import sys
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]
PROTOCOL = "input-prep-event"

CODE = """
import json, sys, time
from stagecheck.oracles.protocol import ProtocolConfig, run_protocol_campaign
from stagecheck.oracles.protocol import campaign
marks = {}
load = campaign._Runner.load
def timed_load(self):
    started = time.perf_counter()
    try:
        return load(self)
    finally:
        marks["load"] = time.perf_counter() - started
campaign._Runner.load = timed_load
r = run_protocol_campaign(None, sys.argv[1], sys.argv[2],
                          ProtocolConfig(sequences=200, shrink=False, device=sys.argv[3]))
print(json.dumps([marks["load"], r.first_error_seconds, r.sequences_run]))
"""

BARE = {
    "import torch": "import torch",
    "import torch, first CUDA allocation, a pinned tensor":
        "import torch; torch.zeros(1, device='cuda'); torch.zeros(1024, pin_memory=True)",
}


def seconds(code: str) -> float:
    started = time.perf_counter()
    subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT)
    return time.perf_counter() - started


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args(argv)
    for what, code in BARE.items():
        if "cuda" in code and args.device != "cuda":
            continue
        runs = [seconds(code) for _ in range(args.repeats)]
        print(f"{what:<55} {statistics.median(runs):5.2f} s (runs: "
              + ", ".join(f"{r:.2f}" for r in runs) + ")")
    fixtures = sorted((ROOT / "tests" / "targets" / "protocols" / PROTOCOL).glob("buggy_*.py"))
    for path in fixtures:
        rows = []
        for _ in range(args.repeats):
            out = subprocess.run([sys.executable, "-c", CODE, f"{path}::GPUModelRunner",
                                  PROTOCOL, args.device], capture_output=True, text=True,
                                 cwd=ROOT, check=True)
            rows.append(json.loads(out.stdout.strip().splitlines()[-1]))
        load, first, run = sorted(rows, key=lambda r: r[1])[len(rows) // 2]
        print(f"{path.name:<40} workers loaded {load:5.2f} s; first finding {first:5.2f} s "
              f"(search {first - load:5.2f} s, {run} sequence(s))")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
