"""How fast the command line answers ``--help`` and usage errors, against a bare
``python -c pass`` measured in the same run (issue 19: heavy libraries are imported only
by the command that runs, after its arguments were checked).

Each case runs ``--repeats`` times, interleaved with the bare interpreter; the table gives
the best and median wall time of each and the median over the bare one's median, and
whether torch, numpy, hypothesis, triton or crosshair were imported.

    python benchmarks/bench_cli_startup.py [--repeats N]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time

HEAVY = ("torch", "numpy", "hypothesis", "triton", "crosshair")
CASES = {
    "stagecheck --help": ["--help"],
    "stagecheck diff --help": ["diff", "--help"],
    "misspelt option": ["diff", "legacy", "single-loop", "--exampls", "3"],
    "abbreviated option": ["diff", "legacy", "single-loop", "--example", "3"],
    "bad value": ["diff", "legacy", "single-loop", "--examples", "many"],
    "bad choice": ["diff", "legacy", "single-loop", "--kernel", "sometimes"],
    "mutants bad --jobs": ["mutants", "legacy", "--jobs", "0"],
}
#: runs the command line in-process and says which heavy libraries it imported
PROBE = ("import sys\nfrom stagecheck.oracles.cli import main\ntry:\n    main(sys.argv[1:])\n"
         "except SystemExit:\n    pass\n"
         f"print(sorted(m for m in {HEAVY!r} if m in sys.modules), file=sys.stderr)")


def timed(argv: list[str]) -> float:
    started = time.perf_counter()
    subprocess.run(argv, capture_output=True)
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=9)
    repeats = parser.parse_args().repeats
    bare, runs = [], {name: [] for name in CASES}
    for _ in range(repeats):
        bare.append(timed([sys.executable, "-c", "pass"]))
        for name, argv in CASES.items():
            runs[name].append(timed([sys.executable, "-m", "stagecheck", *argv]))
    base = statistics.median(bare)
    print(f"bare python -c pass: best {min(bare):.3f} s, median {base:.3f} s "
          f"({repeats} runs each, interleaved)\n")
    print("| case | best | median | median / bare | heavy imports |")
    print("| --- | --- | --- | --- | --- |")
    for name, times in runs.items():
        probe = subprocess.run([sys.executable, "-c", PROBE, *CASES[name]],
                               capture_output=True, text=True)
        heavy = probe.stderr.strip().splitlines()[-1] if probe.stderr.strip() else "?"
        median = statistics.median(times)
        print(f"| `{name}` | {min(times):.3f} s | {median:.3f} s | {median / base:.1f}x | "
              f"{heavy} |")


if __name__ == "__main__":
    main()
