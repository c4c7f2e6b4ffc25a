"""The sizes the default input space draws, measured (docs/schemas.md, "Sizes").

    python benchmarks/size_distribution.py [--examples N] [--schema NAME] [--max-capacity C]

Draws N in-contract scenarios of the schema the way ``stagecheck diff`` does (seed 0,
the batched engine's ``sample_scenario``) and prints the share of each band of the size
distribution (small, on a threshold, any other size, full), how often each threshold's
fast path would run (``num_reqs >= t``, on examples off the failure path), how many
thresholds and sizes were drawn exactly (a fast path for ``num_reqs == t``), and the
draft-list lengths.
"""

from __future__ import annotations

import argparse
import collections
import statistics
import sys

from stagecheck.oracles.sample import sample_scenario
from stagecheck.oracles.schemas import load_schema
from stagecheck.spec.space import SMALL, draft_bound, size_thresholds


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--examples", type=int, default=300,
                        help="scenarios drawn (default 300: diff's budget per stream)")
    parser.add_argument("--schema", default="mamba-postprocess")
    parser.add_argument("--max-capacity", type=int, default=None)
    args = parser.parse_args(argv)
    schema = load_schema(args.schema)
    capacity = args.max_capacity or schema.max_capacity
    drawn = [sample_scenario(schema, 0, i, capacity) for i in range(args.examples)]
    n = len(drawn)

    thresholds = size_thresholds(SMALL + 1, capacity)

    def band(s) -> str:
        if s.num_reqs == s.capacity == capacity:
            return "full batch of the largest capacity"
        if s.num_reqs <= SMALL:
            return f"small (at most {SMALL} live requests)"
        if s.num_reqs in thresholds:
            return "on a threshold above the small band"
        return "any other size above the small band"

    shares = collections.Counter(band(s) for s in drawn)
    print(f"{n} in-contract scenarios of {schema.name} (seed 0, capacity <= {capacity})")
    for name, count in shares.most_common():
        print(f"  {name:45s} {count:5d}  {100 * count / n:5.1f} %")
    big_buffers = sum(1 for s in drawn if s.num_reqs <= SMALL < s.capacity)
    print(f"  (of the small: in a buffer larger than {SMALL} slots: {big_buffers})")
    print(f"live requests: median {statistics.median(s.num_reqs for s in drawn):.0f}, "
          f"mean {statistics.mean(s.num_reqs for s in drawn):.1f}; capacity: mean "
          f"{statistics.mean(s.capacity for s in drawn):.1f}")
    maymiss = [inp.name for inp in schema.inputs if inp.presence == "may-miss"]
    served = [s for s in drawn if all(r in s.inputs[name] for name in maymiss
                                      for r in s.live_ids)]
    print(f"examples off the failure path with num_reqs >= t (of {len(served)}):")
    row = []
    for t in thresholds:
        row.append(f"{t}:{sum(1 for s in served if s.num_reqs >= t)}")
    for k in range(0, len(row), 10):
        print("  " + "  ".join(row[k:k + 10]))
    exact = {s.num_reqs for s in served}
    print(f"sizes drawn exactly (off the failure path): {len(exact & set(thresholds))} of "
          f"{len(thresholds)} thresholds, {len(exact - set(range(SMALL + 1)))} of "
          f"{capacity - SMALL} sizes above {SMALL}; in {SMALL + 1}..{capacity}, the "
          f"longest run of sizes never drawn: {_longest_gap(exact, SMALL + 1, capacity)}")
    bound = draft_bound(schema)
    if bound is not None:
        lengths = [len(v) for s in drawn for inp in schema.inputs if inp.drafts
                   for v in s.inputs[inp.name].values()]
        longer = sum(1 for x in lengths if x > 4)
        print(f"draft lists: {len(lengths)}, longest {max(lengths)} (bound {bound}), "
              f"{100 * longer / len(lengths):.1f} % longer than 4")


def _longest_gap(drawn: set, low: int, high: int) -> int:
    """The most consecutive sizes in ``[low, high]`` none of ``drawn`` is."""
    longest = run = 0
    for n in range(low, high + 1):
        run = 0 if n in drawn else run + 1
        longest = max(longest, run)
    return longest


if __name__ == "__main__":
    sys.exit(main())
