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
        raise UsageError(messages.USAGE.format(message=message, prog=self.prog))


def _positive_int(option: str, template: str):
    """A parser for a whole number >= 1 whose error names the option and the value."""
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
    p.add_argument("--kernel", default="auto", choices=("auto", "always", "off"),
                   help="kernel oracle: run the postprocess kernel on both sides' mirrors where "
                   "their live slots differ (auto, default), on every example (always), or "
                   "never (off)")
    p.add_argument("--no-kernel", dest="kernel", action="store_const", const="off",
                   help="same as --kernel off")
    p.add_argument("--kernel-backend", choices=("reference", "triton"), default=None,
                   help="kernel the oracle runs (default: triton on cuda, reference on cpu; "
                   "triton on cpu uses the interpreter)")
    p.add_argument("--steps", default="1", help="staging calls per example on the same "
                   "buffers, each after the previous step's copies completed (default 1)")
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
    kernel = sub.add_parser("kernel", help="kernel oracle 1: the Triton postprocess kernel "
                            "against its reference, bit for bit")
    kernel.add_argument("--examples", default="100", help="kernel scenarios (default 100)")
    kernel.add_argument("--seed", default="0")
    kernel.add_argument("--device", default="cpu", help="cpu (Triton interpreter) or cuda")
    kernel.add_argument("--json", metavar="PATH")
    symbolic = sub.add_parser("symbolic", help="CrossHair: symbolic diff of two targets over "
                              "list-backed buffers")
    symbolic.add_argument("baseline")
    symbolic.add_argument("candidate")
    symbolic.add_argument("--timeout", default="30", help="seconds of exploration (default 30)")
    symbolic.add_argument("--max-capacity", default="4", help="largest capacity (default 4)")
    symbolic.add_argument("--json", metavar="PATH")
    symbolic.add_argument("--strict", action="store_true", help="info findings also give exit 1")
    bench = sub.add_parser("bench", help="per-call cost of two targets, interleaved, as ratios")
    bench.add_argument("baseline")
    bench.add_argument("candidate")
    bench.add_argument("--device", default="cpu")
    bench.add_argument("--json", metavar="PATH")
    mutants = sub.add_parser("mutants", help="mutation catalog: which oracle kills which "
                             "realistic refactoring mistake")
    mutants.add_argument("target")
    mutants.add_argument("--oracles", default="spec,differential,kernel,symbolic,upstream",
                         help="comma-separated: spec, differential, kernel, symbolic, upstream")
    mutants.add_argument("--budget", default="300", help="examples per oracle run (default 300)")
    mutants.add_argument("--symbolic-timeout", default="10",
                         help="seconds of symbolic search per mutant (default 10)")
    mutants.add_argument("--jobs", default="1", help="mutants run in parallel processes")
    mutants.add_argument("--json", metavar="PATH")
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
        max_capacity=_positive_int("--max-capacity", messages.BAD_CAPACITY)(args.max_capacity),
        timeout=_seconds("--timeout")(args.timeout),
        out_of_contract=not args.no_out_of_contract,
        deferred_copies=args.deferred_copies,
        gpu_busy_cycles=_int("--gpu-busy-cycles", messages.BAD_CYCLES)(args.gpu_busy_cycles)
        if args.device == "cuda" else 0,
        kernel=args.kernel, kernel_backend=args.kernel_backend,
        steps=_positive_int("--steps", messages.BAD_STEPS)(args.steps))


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
    from spec.scenario import malformed
    problems = malformed(scenario)
    if problems:
        raise ScenarioError(f"argument FILE: the scenario in {args.file!r} cannot be built: "
                            f"{'; '.join(problems[:3])}; fix the file or re-run the search")
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


def _use_interpreter_without_gpu() -> None:
    """Triton runs through its interpreter where torch sees no GPU (set before import)."""
    import torch
    if not torch.cuda.is_available():
        os.environ.setdefault("TRITON_INTERPRET", "1")


def _kernel(args) -> int:
    examples = _positive_int("--examples", messages.BAD_EXAMPLES)(args.examples)
    seed = _int("--seed", messages.BAD_SEED)(args.seed)
    device = _device(args.device)
    if args.json:
        _write("--json", args.json, "")
    _use_interpreter_without_gpu()
    from oracles.kernel_oracle import run_kernel_campaign
    result = run_kernel_campaign(examples, seed, device)
    print(f"stagecheck kernel: Triton kernel vs reference on {device}"
          f"{' (interpreter)' if device == 'cpu' else ''}")
    print(f"tried {result.examples} kernel scenarios (seed {seed}) in {result.seconds:.1f} s")
    if result.clean:
        print("verdict: EQUIVALENT — bit-identical states (every block) and accepted counts")
        print(messages.KERNEL_CLEAN_HINT.format(more=examples * 10, examples=examples,
                                                seed=seed))
    else:
        print("verdict: DIFFERENT — shrunk scenario:")
        for line in result.differences:
            print(f"  {line}")
        print("  scenario: " + result.failure.to_json())
    if args.json:
        _write_json(args.json, result.to_dict())
    return EXIT_CLEAN if result.clean else EXIT_FINDINGS


def _symbolic(args) -> int:
    from oracles.targets import load_target
    timeout = _seconds("--timeout")(args.timeout)
    capacity = _positive_int("--max-capacity", messages.BAD_CAPACITY)(args.max_capacity)
    if args.json:
        _write("--json", args.json, "")
    baseline = load_target(args.baseline, "BASELINE")
    candidate = load_target(args.candidate, "CANDIDATE")
    from oracles.symbolic import run_symbolic
    result = run_symbolic(baseline, candidate, timeout=timeout, max_capacity=capacity)
    print(result.summary())
    errors, infos = result.errors, result.infos
    different = bool(errors) or (args.strict and bool(infos))
    print(f"verdict: {'DIFFERENT' if different else 'EQUIVALENT'} — {len(errors)} error "
          f"finding(s), {len(infos)} info finding(s) on the paths explored")
    for f in errors + infos:
        where = "in contract" if f.in_contract else "out of contract"
        print(f"  {f.severity}: {f.invariant} ({f.side}, {where}) {f.message}")
        print(f"    input: {json.dumps(f.scenario, sort_keys=True)}")
    if args.json:
        _write_json(args.json, result.to_dict())
    return EXIT_FINDINGS if different else EXIT_CLEAN


def _bench(args) -> int:
    from oracles.targets import load_target
    device = _device(args.device)
    if args.json:
        _write("--json", args.json, "")
    baseline = load_target(args.baseline, "BASELINE")
    candidate = load_target(args.candidate, "CANDIDATE")
    from oracles.bench import format_bench, run_bench
    result = run_bench(baseline, candidate, device=device)
    print(format_bench(result))
    if args.json:
        _write_json(args.json, result.to_dict())
    return EXIT_CLEAN


def _mutants(args) -> int:
    budget = _positive_int("--budget", messages.BAD_BUDGET)(args.budget)
    _seconds("--symbolic-timeout")(args.symbolic_timeout)
    _positive_int("--jobs", messages.BAD_JOBS)(args.jobs)
    oracles = [o.strip() for o in args.oracles.split(",") if o.strip()]
    if args.json:
        _write("--json", args.json, "")
    _use_interpreter_without_gpu()
    from oracles.mutants import mutants_command
    return mutants_command(args.target, oracles, budget, args.json,
                           symbolic_timeout=_seconds("--symbolic-timeout")(args.symbolic_timeout),
                           jobs=_positive_int("--jobs", messages.BAD_JOBS)(args.jobs))


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
        if args.command == "kernel":
            return _kernel(args)
        if args.command == "symbolic":
            return _symbolic(args)
        if args.command == "bench":
            return _bench(args)
        if args.command == "mutants":
            return _mutants(args)
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
