"""How often the CUDA backend's watchdog opened the gates (docs/protocols.md, "When operations
complete"), per fixture: the clean fixtures of the built-in protocols and those of
``tests/targets/protocols/_early``, each a campaign in this process, with its wall time,
the runs whose gates were forced open and the first places the host was then.

    python benchmarks/protocol_forced_gates.py [--sequences 40] [--busy-cycles 2000000]

A forced run is checked with its copies completed earlier than the latest point; none is
expected of code whose every wait stagecheck sees. CUDA only.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from stagecheck.oracles.protocol import ProtocolConfig, run_protocol_campaign  # noqa: E402
from tests.protocol_catalog import BUILTIN, fixtures, target  # noqa: E402

EARLY = os.path.join(ROOT, "tests", "targets", "protocols", "_early")
#: the fixtures of _early that run on CUDA, and their component
EARLY_FIXTURES = [("positions_event_window.py", "Positions"),
                  ("positions_written_early.py", "Positions"),
                  ("counts_read_after_event.py", "Counts"),
                  ("counts_read_before_event.py", "Counts"),
                  ("mapping_after_unique.py", "Mapping"),
                  ("mapping_without_wait.py", "Mapping")]


def campaigns():
    """``(label, target, protocol)`` of every fixture measured."""
    for protocol in BUILTIN:
        for path in fixtures(protocol, "fixed") + fixtures(protocol, "equivalent"):
            yield f"{protocol}/{os.path.basename(path)}", target(path), protocol
    for name, component in EARLY_FIXTURES:
        yield (f"_early/{name}", f"{os.path.join(EARLY, name)}::{component}",
               os.path.join(EARLY, name.split("_")[0] + "_protocol.py"))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sequences", type=int, default=40)
    parser.add_argument("--busy-cycles", type=int, default=2_000_000)
    args = parser.parse_args(argv)
    print(f"{'fixture':<62} {'seconds':>8} {'forced runs':>12}  errors  where (first)")
    for label, spec, protocol in campaigns():
        started = time.perf_counter()
        result = run_protocol_campaign(None, spec, protocol, ProtocolConfig(
            sequences=args.sequences, device="cuda", busy_cycles=args.busy_cycles))
        seconds = time.perf_counter() - started
        where = result.stalls[0] if result.stalls else "-"
        print(f"{label:<62} {seconds:8.1f} {result.gates_forced:12d}  "
              f"{len(result.errors):6d}  {where}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
