"""Time to first counterexample: symbolic diff (CrossHair) next to the fuzzer, in one run.

For every buggy refactor in tests/targets (baseline: the single-loop builtin), runs
``stagecheck.oracles.symbolic.run_symbolic`` until its first error finding, then the fuzzer
(``stagecheck.oracles.campaign.run_campaign``, in-contract stream, as in
tests/test_fixture_targets.py) and records when its first error finding appeared.
The equivalent rewrites are run too (symbolic only, full budget): they must give no
error, and their path counts show what the symbolic diff could and could not follow.

Both sides run with the kernel oracle off (it annotates findings; it does not find
them). Wall-clock seconds on this machine; one warm-up call of each side first, so
that imports are not counted.

    python benchmarks/symbolic_vs_fuzz.py [--timeout 30] [--max-capacity 4]
        [--examples 300] [--seed 0] [--json out.json] [NAME_FILTER ...]
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from stagecheck.oracles import campaign  # noqa: E402
from stagecheck.oracles.campaign import run_campaign  # noqa: E402
from stagecheck.oracles.options import CampaignConfig  # noqa: E402
from stagecheck.oracles.symbolic import run_symbolic  # noqa: E402
from stagecheck.oracles.targets import load_target  # noqa: E402
from stagecheck.spec import ERROR  # noqa: E402

TARGETS = ROOT / "tests" / "targets"
FUNCTION = "stage_postprocess_inputs_to_gpu"


def expected(path: Path) -> list[str]:
    match = re.search(r"^# stagecheck-expect: (.+)$", path.read_text(), re.M)
    return sorted({x.strip() for x in match.group(1).split(",")} - {"none"}) if match else []


def symbolic_row(baseline, candidate, timeout: float, max_capacity: int, stop: bool) -> dict:
    r = run_symbolic(baseline, candidate, timeout=timeout, max_capacity=max_capacity,
                     stop_at_first_error=stop, strict=False)
    return {
        "found": bool(r.errors),
        "invariants": sorted({f.invariant for f in r.errors}),
        "first_s": r.first_counterexample_seconds,
        "paths_to_first": min((f.examples_to_find for f in r.errors), default=None),
        "paths_explored": r.paths_explored,
        "paths_unsupported": r.paths_unsupported,
        "paths_concretized": r.paths_concretized,
        "seconds": r.seconds,
        "lost_reason": r.lost[0].reason if r.lost else None,
    }


def fuzz_row(baseline, candidate, examples: int, seed: int) -> dict:
    """The fuzzer's time to its first error finding (the search itself, before shrinking)."""
    first: list[float] = []
    calls = [0]
    original = campaign.evaluate

    def timed(*args, **kwargs):
        out = original(*args, **kwargs)
        calls[0] += 1
        if not first and any(f.severity == ERROR for f in out.findings):
            first.append(time.perf_counter())
            first.append(calls[0])
        return out

    config = CampaignConfig.from_options(examples=examples, seed=seed, out_of_contract=False,
                                         kernel="off")
    campaign.evaluate = timed      # measurement hook only: run_campaign looks it up
    started = time.perf_counter()
    try:
        result = run_campaign(baseline, candidate, config)
    finally:
        campaign.evaluate = original
    return {
        "found": bool(result.errors),
        "invariants": sorted({f.invariant for f in result.errors}),
        "first_s": (first[0] - started) if first else None,
        "examples_to_first": first[1] if first else None,
        "seconds": result.seconds,
    }


def _s(value) -> str:
    return "-" if value is None else f"{value:.2f}"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--timeout", type=float, default=30.0,
                        help="symbolic budget per refactor, seconds (default 30)")
    parser.add_argument("--max-capacity", type=int, default=4)
    parser.add_argument("--examples", type=int, default=300,
                        help="fuzzer examples per refactor (its default budget)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", help="also write every measurement here")
    parser.add_argument("filters", nargs="*", help="only fixtures whose name contains one")
    args = parser.parse_args(argv)

    baseline = load_target("single-loop")
    paths = sorted(TARGETS.glob("buggy_*.py")) + sorted(TARGETS.glob("equivalent_*.py"))
    if args.filters:
        paths = [p for p in paths if any(f in p.name for f in args.filters)]
    # warm-up: imports and first-call costs are not part of any row
    run_symbolic(baseline, load_target("legacy"), timeout=2, max_capacity=2, strict=False)
    run_campaign(baseline, load_target("legacy"),
                 CampaignConfig.from_options(examples=5, out_of_contract=False, kernel="off"))

    rows = []
    for path in paths:
        candidate = load_target(f"{path}::{FUNCTION}")
        buggy = path.name.startswith("buggy_")
        row = {"fixture": path.stem, "expected": expected(path),
               "symbolic": symbolic_row(baseline, candidate, args.timeout, args.max_capacity,
                                        stop=buggy)}
        if buggy:
            row["fuzzer"] = fuzz_row(baseline, candidate, args.examples, args.seed)
        rows.append(row)
        print(json.dumps(row), file=sys.stderr, flush=True)

    print(f"Symbolic: run_symbolic(single-loop, refactor, timeout={args.timeout:g}, "
          f"max_capacity={args.max_capacity}, stop_at_first_error=True). Fuzzer: "
          f"run_campaign(single-loop, refactor, CampaignConfig(examples={args.examples}, "
          f"seed={args.seed}, out_of_contract=False, kernel='off')). Wall-clock seconds to "
          "the first error finding; '-' = none within the budget.\n")
    print("| buggy refactor | symbolic finds | symbolic s | paths | fuzzer finds | fuzzer s "
          "| examples |")
    print("|---|---|---|---|---|---|---|")
    for row in rows:
        if "fuzzer" not in row:
            continue
        sym, fz = row["symbolic"], row["fuzzer"]
        sym_found = ", ".join(sym["invariants"]) if sym["found"] else (
            f"no ({sym['paths_unsupported']} paths lost)" if sym["paths_unsupported"] else "no")
        print(f"| {row['fixture'][len('buggy_'):]} | {sym_found} | {_s(sym['first_s'])} "
              f"| {sym['paths_to_first'] or '-'} "
              f"| {', '.join(fz['invariants']) if fz['found'] else 'no'} | {_s(fz['first_s'])} "
              f"| {fz['examples_to_first'] or '-'} |")
    equivalents = [r for r in rows if "fuzzer" not in r]
    if equivalents:
        print("\n| equivalent rewrite | symbolic verdict | paths explored | lost | "
              "through numpy |")
        print("|---|---|---|---|---|")
        for row in equivalents:
            sym = row["symbolic"]
            verdict = ("inconclusive" if sym["paths_unsupported"] or not sym["paths_explored"]
                       else "different" if sym["found"] else "equivalent")
            print(f"| {row['fixture'][len('equivalent_'):]} | {verdict} "
                  f"| {sym['paths_explored']} | {sym['paths_unsupported']} "
                  f"| {sym['paths_concretized']} |")
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
