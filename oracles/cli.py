"""The ``stagecheck`` command: ``main(argv) -> int``.

Exit codes: 0 no error finding; 1 error findings (with ``--strict`` info findings
count too); 2 usage or load error, with a message that names the argument, the
value and the fix.
"""

from __future__ import annotations

import argparse
import json
import os
import sys

from oracles import messages
from oracles.errors import StagecheckError, UsageError

EXIT_CLEAN, EXIT_FINDINGS, EXIT_USAGE = 0, 1, 2
DEFAULT_SAVE_DIR = os.path.join(".stagecheck", "findings")


class _Parser(argparse.ArgumentParser):
    def error(self, message: str):  # never exit from inside argparse
        raise UsageError(messages.USAGE.format(message=message, command=self.prog.split()[-1]))


def _positive_int(option: str, template: str):
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise UsageError(template.format(value=text, option=option)) from None
        if value < 1:
            raise UsageError(template.format(value=text, option=option))
        return value
    return parse


def _int(option: str, template: str):
    def parse(text: str) -> int:
        try:
            return int(text)
        except ValueError:
            raise UsageError(template.format(value=text, option=option)) from None
    return parse


def _seconds(option: str):
    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise UsageError(messages.BAD_TIMEOUT.format(option=option, value=text)) from None
        if not value > 0:
            raise UsageError(messages.BAD_TIMEOUT.format(option=option, value=text))
        return value
    return parse


def _device(text: str) -> str:
    if text not in ("cpu", "cuda"):
        raise UsageError(messages.BAD_DEVICE.format(value=text))
    if text == "cuda":
        import torch
        if not torch.cuda.is_available():
            raise UsageError(messages.CUDA_UNAVAILABLE.format(torch=torch.__version__))
    return text


def _add_campaign_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--device", default="cpu", help="cpu (default) or cuda")
    p.add_argument("--examples", default="300",
                   help="examples per stream, in contract and out of contract (default 300)")
    p.add_argument("--seed", default="0", help="hypothesis seed (default 0)")
    p.add_argument("--max-capacity", default="8", help="largest buffer capacity drawn (default 8)")
    p.add_argument("--timeout", default="5", help="seconds per staging call before it is a hang")
    p.add_argument("--json", metavar="PATH", help="write the verdict and findings as JSON")
    p.add_argument("--junit-xml", metavar="PATH", help="write a JUnit XML report (one test "
                   "case per invariant) for CI")
    p.add_argument("--strict", action="store_true", help="info findings also give exit 1")
    p.add_argument("--save-dir", default=DEFAULT_SAVE_DIR,
                   help=f"where replay files of findings go (default {DEFAULT_SAVE_DIR})")
    p.add_argument("--no-out-of-contract", action="store_true",
                   help="skip the stream of inputs that should not happen")
    p.add_argument("--deferred-copies", action="store_true",
                   help="cpu: model asynchronous copies (they execute at the end of the call, "
                   "reading host memory then) to find write-after-copy hazards")
    p.add_argument("--gpu-busy-cycles", default="1000000",
                   help="cuda: device cycles of work queued ahead of each call, so its copies "
                   "stay queued while the host runs (default 1000000; 0 turns it off)")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="stagecheck", description="Formal spec and differential testing of "
                     "host-side staging code for the Mamba postprocess kernel.")
    sub = parser.add_subparsers(dest="command", parser_class=_Parser)
    diff = sub.add_parser("diff", help="compare two staging targets on generated scenarios")
    diff.add_argument("baseline", help="builtin name, module:function, file.py::function or "
                      "git:REV:file.py::function")
    diff.add_argument("candidate", help="same forms as BASELINE")
    _add_campaign_options(diff)
    spec = sub.add_parser("spec", help="check one staging target against the spec")
    spec.add_argument("target")
    _add_campaign_options(spec)
    replay = sub.add_parser("replay", help="re-run a saved finding")
    replay.add_argument("file")
    replay.add_argument("--baseline", help="override the saved baseline target")
    replay.add_argument("--candidate", help="override the saved candidate target")
    replay.add_argument("--device", default=None)
    return parser


def _write(option: str, path: str, text: str) -> None:
    try:
        with open(path, "w", encoding="utf-8") as fh:
            fh.write(text)
    except OSError as exc:
        raise UsageError(messages.JSON_UNWRITABLE.format(option=option, value=path,
                                                         error=exc.strerror)) from None


def _write_json(path: str, payload: dict) -> None:
    _write("--json", path, json.dumps(payload, indent=2, sort_keys=True))


def _campaign_config(args):
    from oracles.differential import CampaignConfig
    return CampaignConfig(
        examples=_positive_int("--examples", messages.BAD_EXAMPLES)(args.examples),
        seed=_int("--seed", messages.BAD_SEED)(args.seed),
        device=_device(args.device),
        max_capacity=_positive_int("--max-capacity", messages.BAD_EXAMPLES.replace(
            "--examples", "--max-capacity").replace("--examples 500", "--max-capacity 8"))(
                args.max_capacity),
        timeout=_seconds("--timeout")(args.timeout),
        out_of_contract=not args.no_out_of_contract,
        deferred_copies=args.deferred_copies,
        gpu_busy_cycles=_int("--gpu-busy-cycles", messages.BAD_CYCLES)(args.gpu_busy_cycles)
        if args.device == "cuda" else 0)


def _progress():
    if not sys.stderr.isatty():
        return None

    def show(stream: str, done: int, total: int) -> None:
        if done % 25 == 0 or done == total:
            label = "in contract" if stream == "in" else "out of contract"
            sys.stderr.write(f"\r{label}: {done}/{total} examples ")
            sys.stderr.flush()
    return show


def _run_campaign(args, baseline_spec: str | None, candidate_spec: str) -> int:
    from oracles.differential import run_campaign
    from oracles.report import json_report, junit_xml, save_findings, text_report
    from oracles.targets import load_target
    config = _campaign_config(args)
    if args.json and args.junit_xml and os.path.abspath(args.json) == os.path.abspath(
            args.junit_xml):
        raise UsageError(messages.SAME_REPORT_PATH.format(value=args.json))
    for option, path in (("--json", args.json), ("--junit-xml", args.junit_xml)):
        if path:
            _write(option, path, "")   # fail early on an unwritable path
    baseline = load_target(baseline_spec, "BASELINE") if baseline_spec else None
    candidate = load_target(candidate_spec, "CANDIDATE" if baseline_spec else "TARGET")
    progress = _progress()
    result = run_campaign(baseline, candidate, config, progress)
    if progress:
        sys.stderr.write("\n")
    saved = save_findings(result, args.save_dir) if result.findings else {}
    print(text_report(result, args.strict, saved))
    if args.json:
        _write_json(args.json, json_report(result, args.strict))
    if args.junit_xml:
        _write("--junit-xml", args.junit_xml, junit_xml(result, args.strict))
    return EXIT_FINDINGS if result.verdict(args.strict) == "different" else EXIT_CLEAN


def _replay(args) -> int:
    from oracles.differential import evaluate
    from oracles.errors import ScenarioError
    from oracles.targets import load_target
    from spec import ERROR, StagingScenario
    try:
        with open(args.file, encoding="utf-8") as fh:
            saved = json.load(fh)
        scenario = StagingScenario.from_dict(saved["finding"]["scenario"])
    except OSError as exc:
        raise UsageError(f"argument FILE: cannot read {args.file!r} ({exc.strerror}); give a "
                         "replay file written by 'stagecheck diff'") from None
    except (ValueError, KeyError, TypeError) as exc:
        raise ScenarioError(f"argument FILE: {args.file!r} is not a stagecheck replay file "
                            f"({type(exc).__name__}: {exc}); give a file from "
                            f"{DEFAULT_SAVE_DIR}") from None
    base_spec = args.baseline or saved.get("baseline")
    cand_spec = args.candidate or saved.get("candidate")
    device = _device(args.device or saved.get("device", "cpu"))
    baseline = load_target(base_spec, "--baseline") if base_spec else None
    candidate = load_target(cand_spec, "--candidate")
    findings, _, _ = evaluate(baseline, candidate, scenario, device)
    print(f"replay of {saved['finding'].get('id')} ({saved['finding'].get('invariant')}): "
          f"{base_spec} vs {cand_spec} on {device}")
    for f in findings:
        print(f"  {f.severity}: {f.invariant} ({f.side}) {f.message}")
    if not findings:
        print("  no finding: the saved example no longer shows a difference")
    return EXIT_FINDINGS if any(f.severity == ERROR for f in findings) else EXIT_CLEAN


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
        if args.command is None:
            parser.print_help()
            return EXIT_USAGE
        if args.command == "diff":
            return _run_campaign(args, args.baseline, args.candidate)
        if args.command == "spec":
            return _run_campaign(args, None, args.target)
        if args.command == "replay":
            return _replay(args)
        raise UsageError(f"unknown command {args.command!r}")
    except StagecheckError as exc:
        print(f"stagecheck: error: {exc}", file=sys.stderr)
        return EXIT_USAGE


def entry_point() -> None:
    try:
        code = main()
        sys.stdout.flush()
    except BrokenPipeError:   # e.g. piped into head: not an error of ours
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        code = EXIT_CLEAN
    sys.exit(code)


if __name__ == "__main__":
    entry_point()
