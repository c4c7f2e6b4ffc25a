"""A protocol finding as a ready pytest test, importing only stagecheck.

The test names every file it runs by its absolute path (a file target, a protocol file, a
single-call protocol's schema file, each shim), so it runs pasted anywhere, from any folder; it fails
with the messages of the error findings its sequence still shows."""

from __future__ import annotations

import json
import os

from stagecheck.spec.findings import Finding

__all__ = ["absolute_protocol", "absolute_target", "protocol_pytest_example"]

SINGLE_CALL = "single-call:"


def absolute_target(spec: str | None) -> str | None:
    """A file target ``path.py::Name`` with its path absolute; any other spec as it is (a
    ``git:REV:PATH`` target reads its path in the repository, a module by its name)."""
    if not isinstance(spec, str) or spec.startswith("git:") or "::" not in spec:
        return spec
    path, _, name = spec.partition("::")
    return f"{os.path.abspath(path)}::{name}"


def absolute_protocol(spec: str) -> str:
    """A protocol file ``path.py[:NAME]`` (also a ``single-call:`` schema file) with its path
    absolute; a built-in name as it is."""
    if not isinstance(spec, str):
        return spec
    prefix = SINGLE_CALL if spec.startswith(SINGLE_CALL) else ""
    rest = spec[len(prefix):]
    path, sep, name = rest.partition(".py:") if ".py:" in rest else (rest, "", "")
    if sep:
        path += ".py"
        sep = ":"
    if not path.endswith(".py"):
        return spec
    return f"{prefix}{os.path.abspath(path)}{sep}{name}"


def protocol_pytest_example(f: Finding, baseline: str | None, candidate: str,
                            protocol: str, config=None) -> str:
    """A pytest test that runs ``f``'s shortest step sequence again and fails, printing
    each error finding's id and message, while the sequence still shows one. It carries
    the sequence as plain data, and the run options that decide what it shows (the
    device, each operation's time limit, the device work queued on cuda) of ``config``,
    the ``ProtocolConfig`` of the run that found it (None: the defaults), and its shims
    (``--shim``, by absolute path), which a file target needs to load."""
    sequence = json.dumps(f.scenario, sort_keys=True)
    name = "".join(ch if ch.isalnum() else "_" for ch in f.id)
    base, cand = absolute_target(baseline), absolute_target(candidate)
    shims = tuple(os.path.abspath(s) for s in getattr(config, "shims", ()) or ())
    options = "" if config is None else (
        f", ProtocolConfig(sequences=1, device={config.device!r}, "
        f"timeout={float(config.timeout)!r}, busy_cycles={int(config.busy_cycles)!r}"
        + (f", shims={shims!r}" if shims else "") + ")")
    return (
        "import json\n"
        "from stagecheck.oracles.protocol import "
        f"{'' if config is None else 'ProtocolConfig, '}check_sequence\n\n"
        f"SEQUENCE = json.loads({sequence!r})\n\n\n"
        f"def test_{name}():\n"
        f"    findings = check_sequence({base!r}, {cand!r}, "
        f"{absolute_protocol(protocol)!r}, SEQUENCE{options})\n"
        "    errors = [f for f in findings if f.severity == 'error']\n"
        "    assert not errors, '\\n'.join(f'[{f.id}] {f.message}' for f in errors)\n")
