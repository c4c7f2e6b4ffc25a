"""Examples per second of this checkout against another one, at the same sizes, in one run.

    python benchmarks/bench_versions.py OTHER [--examples N] [--repeats R]
                                        [--max-capacity C] [--max-drafts D]

``OTHER`` is another checkout of stagecheck with its own virtual environment in
``OTHER/.venv`` (e.g. ``git worktree add ../base80 80fead0``, then the README's install
command there). Each repeat runs ``stagecheck diff legacy single-loop --examples N --seed
R`` once with this checkout's interpreter and once with the other's, in turn (the order
alternates), each as a fresh process in its own checkout: so load on a shared machine
hits both alike. Both draw at the same sizes: ``--max-capacity C`` (default 8), and
``--max-drafts D`` (default 4) where a checkout has that option (one that does not
draws at most 4 drafts: the bound before issue 20).

Printed: for each checkout the examples per second over the whole process's wall time,
over the campaign alone (the JSON report's ``seconds``: no start, no report), and over
the CPU time of the process and its workers; then this checkout's rate over the
other's (goal, issue 19: at least 0.95).
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import resource
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _has_option(python: str, checkout: pathlib.Path, option: str) -> bool:
    done = subprocess.run([python, "-m", "stagecheck", "diff", "--help"], cwd=checkout,
                          capture_output=True, text=True)
    return option in done.stdout


def run_once(python: str, checkout: pathlib.Path, args: list[str]) -> dict:
    """One ``stagecheck diff`` in ``checkout`` with ``python``: its rates."""
    with tempfile.TemporaryDirectory() as folder:
        report = os.path.join(folder, "report.json")
        cpu = _children_cpu()
        started = time.perf_counter()
        done = subprocess.run([python, "-m", "stagecheck", "diff", "legacy", "single-loop",
                               *args, "--json", report,
                               "--save-dir", os.path.join(folder, "findings")],
                              cwd=checkout, stdout=subprocess.DEVNULL,
                              stderr=subprocess.PIPE, text=True)
        wall = time.perf_counter() - started
        cpu = _children_cpu() - cpu
        if done.returncode != 0:
            raise SystemExit(f"{checkout}: stagecheck diff exited {done.returncode}:\n"
                             f"{done.stderr[-2000:]}")
        with open(report, encoding="utf-8") as fh:
            data = json.load(fh)
    counts = data["examples"]
    n = counts["in_contract"] + counts["out_of_contract"] + counts.get("edge", 0)
    return {"examples": n, "process": n / wall, "campaign": n / data["seconds"],
            "cpu": n / cpu}


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("other", type=pathlib.Path, help="the other checkout (with .venv/)")
    parser.add_argument("--examples", type=int, default=20_000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--max-capacity", type=int, default=8)
    parser.add_argument("--max-drafts", type=int, default=4)
    args = parser.parse_args(argv)
    other = args.other.resolve()
    python = other / ".venv" / "bin" / "python"
    if not python.exists():
        parser.error(f"{python} does not exist: make the other checkout's venv first")
    sides = {"this": (sys.executable, ROOT), "other": (str(python), other)}
    common = ["--examples", str(args.examples), "--max-capacity", str(args.max_capacity)]
    extra = {name: (["--max-drafts", str(args.max_drafts)]
                    if _has_option(py, where, "--max-drafts") else [])
             for name, (py, where) in sides.items()}
    print(f"python {sys.version.split()[0]}, {len(os.sched_getaffinity(0))} usable CPUs; "
          f"load average {', '.join(f'{x:.1f}' for x in os.getloadavg())}")
    for name, (py, where) in sides.items():
        commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=where,
                                capture_output=True, text=True).stdout.strip()
        print(f"  {name:5s}: {where} at {commit}: stagecheck diff legacy single-loop "
              f"{' '.join(common + extra[name])} --seed R")
    rates: dict[str, list[dict]] = {"this": [], "other": []}
    for r in range(args.repeats):
        order = ("this", "other") if r % 2 == 0 else ("other", "this")
        for name in order:
            py, where = sides[name]
            rates[name].append(run_once(py, where, common + extra[name] + ["--seed", str(r)]))
    print(f"{'':24s}{'this':>12s}{'other':>12s}{'this/other':>12s}")
    for key, label in (("process", "examples/s, process"), ("campaign", "examples/s, campaign"),
                       ("cpu", "examples per CPU s")):
        a = statistics.median(x[key] for x in rates["this"])
        b = statistics.median(x[key] for x in rates["other"])
        print(f"{label:24s}{a:12.0f}{b:12.0f}{a / b:12.3f}")
    runs = lambda side: ", ".join(f"{x['process']:.0f}" for x in rates[side])   # noqa: E731
    print(f"(whole-process runs, this: {runs('this')}; other: {runs('other')}; "
          f"{rates['this'][0]['examples']} examples per run; goal: this/other >= 0.95)")


if __name__ == "__main__":
    main()
