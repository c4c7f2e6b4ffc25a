"""Verdicts under closed pipes and signals (issue 10), measured over many runs.

1. ``stagecheck diff BUGGY single-loop ... | true`` and ``| head -1``: the exit status
   of stagecheck (bash ``PIPESTATUS[0]``) must be 1 every time, and the ``--json`` and
   ``--junit-xml`` reports complete.
2. ``stagecheck diff legacy single-loop --examples 10000`` (20,000 examples) stopped by
   SIGINT (or ``--signal TERM``) at a random moment: never exit 0 (130 expected), one
   line on stderr, and every file present is complete: the JSON and JUnit reports, the
   replay files and the run manifest parse, none is empty, no temporary file is left.

    python benchmarks/verdicts_under_stress.py [--runs 20] [--only pipes|signals]
        [--max-delay 20] [--seed 0] [--signal INT]
"""

from __future__ import annotations

import argparse
import collections
import json
import pathlib
import random
import shlex
import signal
import subprocess
import sys
import tempfile
import time
from xml.etree import ElementTree as ET

ROOT = pathlib.Path(__file__).resolve().parents[1]
BUGGY = f"{ROOT / 'tests' / 'targets' / 'buggy_swapped_views.py'}::stage_postprocess_inputs_to_gpu"
COMMAND = f"{shlex.quote(sys.executable)} -m stagecheck"


def complete(path: pathlib.Path) -> str | None:
    """None when ``path`` is absent or a complete report; else what is wrong with it."""
    if not path.exists():
        return None
    text = path.read_text()
    if not text:
        return "0-byte"
    try:
        if path.suffix == ".xml":
            ET.fromstring(text)
        else:
            json.loads(text)
    except Exception as exc:   # noqa: BLE001 - any parse failure is a partial file
        return f"partial ({type(exc).__name__})"
    return None


def pipes(runs: int) -> bool:
    ok = True
    for sink in ("true", "head -1"):
        codes: collections.Counter = collections.Counter()
        bad_files = 0
        started = time.perf_counter()
        for _ in range(runs):
            with tempfile.TemporaryDirectory() as tmp:
                tmp = pathlib.Path(tmp)
                line = (f"{COMMAND} diff {shlex.quote(BUGGY)} single-loop --save-dir {tmp}/found "
                        f"--json {tmp}/r.json --junit-xml {tmp}/r.xml | {sink} > /dev/null; "
                        "echo ${PIPESTATUS[0]}")
                out = subprocess.run(["bash", "-c", line], capture_output=True, text=True)
                codes[out.stdout.strip()] += 1
                reports = [tmp / "r.json", tmp / "r.xml"]
                if any(complete(r) or not r.exists() for r in reports):
                    bad_files += 1
        good = codes.get("1", 0)
        ok &= good == runs and bad_files == 0
        print(f"| {sink:<7} | {good}/{runs} exit 1 | exit codes {dict(codes)} | "
              f"incomplete reports: {bad_files} | {time.perf_counter() - started:.0f} s |")
    return ok


def signals(runs: int, max_delay: float, rng: random.Random, signum: int) -> bool:
    name = signal.Signals(signum).name
    expected = 128 + signum
    rows = []
    for k in range(runs):
        with tempfile.TemporaryDirectory() as tmp:
            tmp = pathlib.Path(tmp)
            delay = rng.uniform(0.2, max_delay)
            proc = subprocess.Popen(
                [sys.executable, "-m", "stagecheck", "diff", "legacy", "single-loop",
                 "--examples", "10000", "--json", str(tmp / "r.json"), "--junit-xml",
                 str(tmp / "r.xml"), "--save-dir", str(tmp / "found")], cwd=tmp,
                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            time.sleep(delay)
            sent = time.monotonic()
            proc.send_signal(signum)
            _, err = proc.communicate()
            stop_s = time.monotonic() - sent
            ours = [tmp / "r.json", tmp / "r.xml", *sorted((tmp / "found").rglob("*.json"))]
            problems = [f"{p.name}: {why}" for p in ours if p.is_file() and (why := complete(p))]
            leftovers = [p.name for p in tmp.rglob("*.tmp")]
            replay_files = len(list((tmp / "found").glob("*.json")))
            examples = "-"
            if (tmp / "r.json").exists() and not complete(tmp / "r.json"):
                e = json.loads((tmp / "r.json").read_text())["examples"]
                examples = e["in_contract"] + e["out_of_contract"]
            lines = err.strip().splitlines()
            rows.append(dict(run=k + 1, delay=delay, code=proc.returncode, stop=stop_s,
                             replays=replay_files,
                             examples=examples, reports=(tmp / "r.json").exists(),
                             problems=problems + leftovers, one_line=len(lines) == 1 and
                             lines[0].endswith("no verdict: interrupted")))
    print(f"| run | {name} after (s) | exit | stopped in (s) | examples run | reports written "
          "| replay files | one line | bad files |")
    print("|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['run']} | {r['delay']:.1f} | {r['code']} | {r['stop']:.2f} | "
              f"{r['examples']} | {'yes' if r['reports'] else 'no'} | {r['replays']} | "
              f"{'yes' if r['one_line'] else 'NO'} | {', '.join(r['problems']) or 'none'} |")
    zero = sum(r["code"] == 0 for r in rows)
    right = sum(r["code"] == expected for r in rows)
    bad = sum(bool(r["problems"]) for r in rows)
    print(f"\n{name}: exit {expected} in {right}/{runs}, exit 0 in {zero}/{runs}, runs with a "
          f"0-byte/partial/temporary file: {bad}/{runs}; longest stop "
          f"{max(r['stop'] for r in rows):.2f} s")
    return zero == 0 and bad == 0 and right == runs


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--only", choices=("pipes", "signals"))
    parser.add_argument("--max-delay", type=float, default=20.0,
                        help="signals: latest moment, in seconds after the start")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--signal", default="INT", choices=("INT", "TERM"))
    args = parser.parse_args()
    ok = True
    if args.only in (None, "pipes"):
        print("| sink | verdict kept | | | |")
        print("|---|---|---|---|---|")
        ok &= pipes(args.runs)
    if args.only in (None, "signals"):
        ok &= signals(args.runs, args.max_delay, random.Random(args.seed),
                      getattr(signal, f"SIG{args.signal}"))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
