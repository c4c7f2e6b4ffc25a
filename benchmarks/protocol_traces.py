"""The traces of fixed step sequences through every protocol fixture: a change to the device
model or the protocol run must leave them identical (no verdict can change then).

    python benchmarks/protocol_traces.py --out FILE          # record
    python benchmarks/protocol_traces.py --against FILE      # record again and compare

For each built-in protocol, every fixture of ``tests/targets/protocols/PROTOCOL/``, and the
worked example's protocol (``docs/examples/token_stager_protocol.py``) over every fixture
of ``tests/targets/protocols/_machinery/`` but the hanging and exiting ones, and the fixtures
of ``tests/targets/protocols/_reuse/`` with their two protocols: the sequences
``0 .. N-1`` of each seed (``--seeds``, ``--sequences``), drawn as a campaign draws them
(half of them of exactly 8 steps, half of the drawn length), run in this process exactly as
a worker runs a batch (``run.run_batch``: the run as scheduled, and the run as meant where
the worker makes it), and each answer's wire form (every operation's outcome, the copies in
flight, the hazards, what device work read, what the host meant, the host's state after
each step) written as one JSON line per fixture and sequence. ``--against`` names the
first fixture and sequence whose trace differs, and exits 1 on any difference.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import pathlib
import sys
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

PROTOCOLS = ("input-prep-event", "mamba-align-steps", "valid-count-readback",
             "condense-inflight-d2h")
EXAMPLE = ROOT / "docs" / "examples" / "token_stager_protocol.py"
#: machinery fixtures left out: they hang or end their process by design
LEFT_OUT = ("hangs_", "exits_")
#: ``tests/targets/protocols/_reuse/``: each protocol file's prefix and its fixtures' class
REUSE = (("scratch", "Scratch"), ("stop_flag", "StopChecker"),
         ("prev_tokens", "PrevTokenInputs"), ("async_output", "AsyncSampler"),
         ("prep", "InputPreparer"))


def cases() -> list[tuple[str, pathlib.Path, str]]:
    """``(protocol spec, fixture file, component)`` for every fixture checked."""
    out = []
    for name in PROTOCOLS:
        for path in sorted((ROOT / "tests" / "targets" / "protocols" / name).glob("*.py")):
            out.append((name, path, "GPUModelRunner"))
    for path in sorted((ROOT / "tests" / "targets" / "protocols" / "_machinery").glob("*.py")):
        if not path.name.startswith(LEFT_OUT):
            out.append((str(EXAMPLE), path, "TokenStager"))
    reuse = ROOT / "tests" / "targets" / "protocols" / "_reuse"
    for prefix, component in REUSE:
        for path in sorted(reuse.glob(f"{prefix}_*.py")):
            if not path.name.endswith("_protocol.py"):
                out.append((str(reuse / f"{prefix}_protocol.py"), path, component))
    return out


def record(seeds: list[int], sequences: int, only: str | None = None) -> dict[str, str]:
    """``{"protocol fixture seed index": wire answer as JSON}``."""
    from stagecheck.oracles.protocol.campaign import _ops_per_sequence
    from stagecheck.oracles.protocol.generate import sample_sequence
    from stagecheck.oracles.protocol.load import load_protocol, protocol_spec
    from stagecheck.oracles.protocol.run import run_batch
    from stagecheck.oracles.targets import target_ref
    out = {}
    for spec, path, component in cases():
        if only and only not in f"{spec} {path.name}":
            continue
        protocol = load_protocol(spec)
        ref = target_ref(f"{path}::{component}")
        options = {"device": "cpu", "timeout": 30.0, "busy_cycles": 0,
                   "ops": _ops_per_sequence(protocol, 8)}
        for seed in seeds:
            for index in range(sequences):
                seq = sample_sequence(protocol, seed, index,
                                      steps=8 if index % 2 == 0 else None)
                ((_, sides),) = run_batch(protocol_spec(protocol), [ref],
                                          [(index, seq.to_dict())], options)
                key = f"{protocol.name} {path.parent.name}/{path.name} {seed} {index}"
                out[key] = json.dumps(sides, sort_keys=True, default=repr)
    return out


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 7])
    parser.add_argument("--sequences", type=int, default=10)
    parser.add_argument("--only", default=None, help="fixtures whose 'protocol file' holds this")
    what = parser.add_mutually_exclusive_group(required=True)
    what.add_argument("--out", type=pathlib.Path)
    what.add_argument("--against", type=pathlib.Path)
    args = parser.parse_args(argv)
    started = time.perf_counter()
    traces = record(args.seeds, args.sequences, args.only)
    digest = hashlib.sha256("\n".join(f"{k}\t{v}" for k, v in traces.items()).encode())
    print(f"{len(traces)} traces in {time.perf_counter() - started:.1f} s, "
          f"sha256 {digest.hexdigest()[:16]}")
    if args.out:
        args.out.write_text("".join(json.dumps([k, v]) + "\n" for k, v in traces.items()))
        return 0
    before = dict(json.loads(line) for line in args.against.read_text().splitlines())
    differ = [k for k in before if k in traces and before[k] != traces[k]]
    missing = [k for k in before if k not in traces and not args.only]
    for k in differ[:5]:
        print(f"DIFFERENT: {k}")
    for k in missing[:5]:
        print(f"MISSING: {k}")
    print(f"{len(differ)} different, {len(missing)} missing, "
          f"{sum(k in traces for k in before)} compared")
    return 1 if differ or missing else 0


if __name__ == "__main__":
    raise SystemExit(main())
