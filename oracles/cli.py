"""The ``stagecheck`` command: ``main(argv) -> int``.

Each command only loads (targets, options), calls one analysis with one options
object, hands the result to the renderers and returns an exit code: 0 no error
finding; 1 error findings (with ``--strict`` info findings count too); 2 usage or
load error, with a message that names the argument, the value and the fix.

Heavy libraries (torch, hypothesis, triton, crosshair) are imported by the command
that needs them, after its arguments were parsed and checked.
"""

from __future__ import annotations

import argparse
import os
import sys

from stagecheck.oracles import messages
from stagecheck.oracles.errors import StagecheckError, UsageError
from stagecheck.oracles.options import (DEVICES, KERNEL_BACKENDS, KERNEL_MODES, CampaignConfig,
                                        RunOptions, integer, seconds, whole)

EXIT_CLEAN, EXIT_FINDINGS, EXIT_USAGE = 0, 1, 2
DEFAULT_SAVE_DIR = os.path.join(".stagecheck", "findings")

#: Canonical option name -> how the command line spells it, for error messages.
_FLAGS = {"examples": "--examples", "seed": "--seed", "max_capacity": "--max-capacity",
          "timeout": "--timeout", "steps": "--steps", "gpu_busy_cycles": "--gpu-busy-cycles",
          "device": "--device", "kernel": "--kernel", "kernel_backend": "--kernel-backend",
          "budget": "--budget", "jobs": "--jobs", "symbolic_timeout": "--symbolic-timeout",
          "oracles": "--oracles", "operators": "--operators"}


class _Parser(argparse.ArgumentParser):
    def error(self, message: str):  # never exit from inside argparse
        raise UsageError.of(messages.USAGE, message=message, prog=self.prog)


def _add_schema_option(p: argparse.ArgumentParser) -> None:
    p.add_argument("--schema", default=None, metavar="SCHEMA",
                   help="the staging schema of the targets: a built-in name or "
                   "'path/to/schema.py[:NAME]' (default: chosen by the function's name)")


def _add_campaign_options(p: argparse.ArgumentParser) -> None:
    _add_schema_option(p)
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
    p.add_argument("--kernel", default="auto", choices=KERNEL_MODES,
                   help="kernel oracle: run the postprocess kernel on both sides' mirrors where "
                   "their live slots differ (auto, default), on every example (always), or "
                   "never (off)")
    p.add_argument("--no-kernel", dest="kernel", action="store_const", const="off",
                   help="same as --kernel off")
    p.add_argument("--kernel-backend", choices=KERNEL_BACKENDS, default=None,
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
    _add_schema_option(symbolic)
    bench = sub.add_parser("bench", help="per-call cost of two targets, interleaved, as ratios")
    bench.add_argument("baseline")
    bench.add_argument("candidate")
    bench.add_argument("--device", default="cpu")
    bench.add_argument("--json", metavar="PATH")
    _add_schema_option(bench)
    mutants = sub.add_parser("mutants", help="mutation catalog: which oracle kills which "
                             "realistic refactoring mistake")
    mutants.add_argument("target")
    mutants.add_argument("--oracles", default="spec,differential,kernel,symbolic,upstream",
                         help="comma-separated: spec, differential, kernel, symbolic, upstream")
    mutants.add_argument("--budget", default="300", help="examples per oracle run (default 300)")
    mutants.add_argument("--symbolic-timeout", default="10",
                         help="seconds of symbolic search per mutant (default 10)")
    mutants.add_argument("--operators", default=None,
                         help="comma-separated subset of the catalog (default: every operator)")
    mutants.add_argument("--jobs", default="1", help="mutants run in parallel processes")
    mutants.add_argument("--no-out-of-contract", action="store_true",
                         help="skip the campaigns' stream of inputs that should not happen (it "
                         "gives info findings only: same kills, faster, survivors less "
                         "explained)")
    mutants.add_argument("--list", action="store_true", help="list the mutants and exit")
    _add_schema_option(mutants)
    mutants.add_argument("--json", metavar="PATH")
    replay = sub.add_parser("replay", help="re-run a saved finding")
    replay.add_argument("file")
    replay.add_argument("--baseline", help="override the saved baseline target")
    replay.add_argument("--candidate", help="override the saved candidate target")
    replay.add_argument("--device", default=None)
    _add_schema_option(replay)
    schema = sub.add_parser("schema", help="staging schemas: list the built-in ones, show one, "
                            "or check a schema file and the scenario space it induces")
    schema_sub = schema.add_subparsers(dest="schema_command", parser_class=_Parser)
    schema_sub.add_parser("list", help="the built-in schemas and the functions they describe")
    show = schema_sub.add_parser("show", help="what a schema declares, as Markdown")
    show.add_argument("schema", help="a built-in name or 'path/to/schema.py[:NAME]'")
    check = schema_sub.add_parser("check", help="validate a schema (declarations and a dry "
                                  "run) and show the scenario space it induces")
    check.add_argument("schema", help="a built-in name or 'path/to/schema.py[:NAME]'")
    return parser


# ------------------------------------------------------------------------------ loading

def _option(error: UsageError) -> UsageError:
    """Name the option the way the command line spells it."""
    if error.where is None and getattr(error, "option", None):
        error.located(f"option {_FLAGS.get(error.option, error.option)}")
    return error


def _schema(args, where: str = "option --schema", checked: bool = True):
    """The schema ``--schema`` names (None: chosen by each target's function name)."""
    spec = getattr(args, "schema", None)
    if spec is None:
        return None
    from stagecheck.oracles.schemas import load_schema
    try:
        return load_schema(spec, checked=checked)
    except StagecheckError as exc:
        raise exc.located(where) from None


def _open(pairs: list[tuple[str, str]], schema=None):
    """Load the targets ``(spec, argument)`` in a worker process, never in this one; a
    runner holding them. A loading error names its argument."""
    from stagecheck.oracles.runner import load_isolated
    from stagecheck.oracles.targets import TargetRef, schema_spec
    spec = schema_spec(schema)
    try:
        return load_isolated([TargetRef(target, spec) for target, _ in pairs],
                             {spec: schema} if schema is not None else None)
    except StagecheckError as exc:
        index = getattr(exc, "target_index", None)
        raise exc.located(f"argument {pairs[index][1]}" if index is not None
                          else "arguments") from None


def _write(option: str, path: str, text: str) -> None:
    try:
        with open(path, "w", encoding="utf-8") as fh:
            fh.write(text)
    except OSError as exc:
        raise UsageError.of(messages.JSON_UNWRITABLE, path, error=exc.strerror).located(
            f"option {option}") from None


def _check_writable(option: str, path: str | None) -> None:
    if path:
        _write(option, path, "")


def _run_options(args) -> RunOptions:
    return RunOptions(
        device=args.device, timeout=args.timeout, deferred_copies=args.deferred_copies,
        gpu_busy_cycles=args.gpu_busy_cycles if args.device == "cuda" else 0,
        steps=args.steps, kernel=args.kernel, kernel_backend=args.kernel_backend)


def _campaign_config(args) -> CampaignConfig:
    return CampaignConfig(examples=args.examples, seed=args.seed, max_capacity=args.max_capacity,
                          out_of_contract=not args.no_out_of_contract, run=_run_options(args))


def _progress():
    if not sys.stderr.isatty():
        return None

    def show(stream: str, done: int, total: int) -> None:
        if done % 25 == 0 or done == total:
            label = "in contract" if stream == "in" else "out of contract"
            sys.stderr.write(f"\r{label}: {done}/{total} examples ")
            sys.stderr.flush()
    return show


# ------------------------------------------------------------------------------ commands

def _campaign(args, baseline_spec: str | None, candidate_spec: str) -> int:
    config = _campaign_config(args)
    if args.json and args.junit_xml and os.path.abspath(args.json) == os.path.abspath(
            args.junit_xml):
        raise UsageError.of(messages.SAME_REPORT_PATH, args.json)
    _check_writable("--json", args.json)
    _check_writable("--junit-xml", args.junit_xml)
    from stagecheck.oracles.observe import require_device
    require_device(config.run.device)
    schema = _schema(args)
    pairs = ([(baseline_spec, "BASELINE")] if baseline_spec else []) + \
        [(candidate_spec, "CANDIDATE" if baseline_spec else "TARGET")]
    from stagecheck.oracles.campaign import run_campaign
    from stagecheck.oracles.report import (json_document, render_campaign, render_json,
                                           render_junit, save_findings)
    from stagecheck.oracles.report.json import campaign_body
    progress = _progress()
    with _open(pairs, schema) as runner:
        baseline = runner.targets[0] if baseline_spec else None
        candidate = runner.targets[-1]
        result = run_campaign(baseline, candidate, config, progress, runner=runner)
    result.schema_spec = args.schema
    if progress:
        sys.stderr.write("\n")
    saved = save_findings(result, args.save_dir) if result.findings else {}
    print(render_campaign(result, args.strict, saved))
    if args.json:
        _write("--json", args.json, render_json(json_document(
            args.command, campaign_body(result, args.strict), result.verdict(args.strict))))
    if args.junit_xml:
        _write("--junit-xml", args.junit_xml, render_junit(result, args.strict))
    return EXIT_FINDINGS if result.verdict(args.strict) == "different" else EXIT_CLEAN


def _replay(args) -> int:
    from stagecheck.oracles.evaluate import evaluate
    from stagecheck.oracles.observe import require_device
    from stagecheck.oracles.report import load_replay, render_replay
    try:
        saved, scenario = load_replay(args.file)
    except StagecheckError as exc:
        raise exc.located("argument FILE") from None
    base_spec = args.baseline or saved.get("baseline")
    cand_spec = args.candidate or saved.get("candidate")
    options = RunOptions(device=args.device or saved.get("device", "cpu"))
    require_device(options.device)
    schema = _schema(args)
    if schema is None and saved.get("schema"):
        from stagecheck.oracles.schemas import load_schema
        try:
            schema = load_schema(saved["schema"])
        except StagecheckError as exc:
            raise exc.located("argument FILE") from None
    pairs = ([(base_spec, "--baseline")] if base_spec else []) + [(cand_spec, "--candidate")]
    with _open(pairs, schema) as runner:
        baseline = runner.targets[0] if base_spec else None
        findings = evaluate(baseline, runner.targets[-1], scenario, options, runner).findings
    print(render_replay(args.file, saved, base_spec, cand_spec, options.device, findings))
    return EXIT_FINDINGS if any(f.severity == "error" for f in findings) else EXIT_CLEAN


def _kernel(args) -> int:
    from stagecheck.oracles.options import choice
    examples = whole("examples", args.examples, 1, "100")
    seed = integer("seed", args.seed)
    device = choice("device", args.device, DEVICES)
    _check_writable("--json", args.json)
    from stagecheck.oracles.observe import require_device
    require_device(device)
    from stagecheck.oracles.kernel.campaign import run_kernel_campaign
    from stagecheck.oracles.report import json_document, render_json, render_kernel
    result = run_kernel_campaign(examples, seed, device)
    print(render_kernel(result))
    if args.json:
        _write("--json", args.json, render_json(json_document(
            "kernel", result.to_dict(), "equivalent" if result.clean else "different")))
    return EXIT_CLEAN if result.clean else EXIT_FINDINGS


def _symbolic(args) -> int:
    timeout = seconds("timeout", args.timeout, "30")
    capacity = whole("max_capacity", args.max_capacity, 1, "4")
    _check_writable("--json", args.json)
    schema = _schema(args)
    from stagecheck.oracles.report import json_document, render_json, render_symbolic
    from stagecheck.oracles.symbolic import run_symbolic
    with _open([(args.baseline, "BASELINE"), (args.candidate, "CANDIDATE")], schema) as runner:
        result = run_symbolic(*runner.targets, timeout=timeout, max_capacity=capacity,
                              runner=runner)
    print(render_symbolic(result, args.strict))
    if args.json:
        _write("--json", args.json, render_json(json_document(
            "symbolic", result.to_dict(), result.verdict(args.strict))))
    return EXIT_FINDINGS if result.verdict(args.strict) == "different" else EXIT_CLEAN


def _bench(args) -> int:
    from stagecheck.oracles.options import choice
    device = choice("device", args.device, DEVICES)
    _check_writable("--json", args.json)
    schema = _schema(args)
    from stagecheck.oracles.bench import run_bench
    from stagecheck.oracles.report import json_document, render_bench, render_json
    with _open([(args.baseline, "BASELINE"), (args.candidate, "CANDIDATE")], schema) as runner:
        result = run_bench(*runner.targets, device=device, runner=runner)
    print(render_bench(result))
    if args.json:
        _write("--json", args.json, render_json(json_document("bench", result.to_dict())))
    return EXIT_CLEAN


def _mutants(args) -> int:
    from stagecheck.oracles.mutants import MutantsConfig, list_mutants, parse_list
    operators = parse_list(args.operators) if args.operators is not None else None
    config = MutantsConfig(oracles=tuple(parse_list(args.oracles)), budget=args.budget,
                           symbolic_timeout=args.symbolic_timeout, operators=operators,
                           jobs=args.jobs, out_of_contract=not args.no_out_of_contract)
    _check_writable("--json", args.json)
    schema = _schema(args)
    if args.list:
        try:
            mutants = list_mutants(args.target, config.operators, args.schema)
        except StagecheckError as exc:
            raise exc.located("argument TARGET") from None
        for m in mutants:
            eq = "  [equivalent: operator reason]" if m.equivalent_reason else ""
            print(f"{m.id} {m.operator:<24} {str(m.location):<36} {m.description}{eq}")
        return EXIT_CLEAN
    _open([(args.target, "TARGET")], schema).close()
    from stagecheck.oracles.kernel import use_interpreter_without_gpu
    use_interpreter_without_gpu()
    from stagecheck.oracles.mutants import run_mutants
    from stagecheck.oracles.report import json_document, render_json, render_mutants
    report = run_mutants(args.target, config, _mutant_progress, schema=args.schema)
    print(render_mutants(report))
    verdict = "all-killed" if report.all_killed() else "survivors"
    if args.json:
        _write("--json", args.json, render_json(json_document("mutants", report.to_dict(),
                                                              verdict)))
    return EXIT_CLEAN if report.all_killed() else EXIT_FINDINGS


def _mutant_progress(res, done: int, total: int) -> None:
    cells = " ".join(f"{o}={out.cell()}" for o, out in res.outcomes.items())
    sys.stderr.write(f"[{done}/{total}] {res.mutant.id} {res.mutant.operator} "
                     f"{res.mutant.location}: {cells}\n")
    sys.stderr.flush()


def _schema_command(args) -> int:
    from stagecheck.spec.prose import render_schema
    from stagecheck.spec.schemas import BUILTIN_SCHEMAS
    if args.schema_command in (None, "list"):
        for name, s in BUILTIN_SCHEMAS.items():
            print(f"{name}: {', '.join(s.functions)} — {s.summary}")
        return EXIT_CLEAN
    # 'check' lists every problem itself; a schema with problems is no use elsewhere
    schema = _schema(args, "argument SCHEMA", checked=args.schema_command != "check")
    if args.schema_command == "check":
        from stagecheck.oracles.schemas import check_schema
        problems = check_schema(schema)
        if problems:
            for problem in problems:
                print(f"stagecheck: error: schema {schema.name!r}: {problem}", file=sys.stderr)
            return EXIT_USAGE
    print("\n".join(render_schema(schema)))
    if args.schema_command == "check":
        from stagecheck.oracles.schemas import schema_space
        space = schema_space(schema)
        print(f"\nschema {schema.name!r}: the declarations and a dry run on 30 drawn scenarios "
              "are fine.")
        print(f"scenario space over {space['scenarios']} drawn in-contract scenarios:")
        for key, value in space.items():
            if key not in ("scenarios", "out-of-contract breaches"):
                print(f"  {key}: {value}")
        print("out-of-contract stream, breaches drawn:")
        for key, value in space["out-of-contract breaches"].items():
            print(f"  {key}: {value}")
    return EXIT_CLEAN


_COMMANDS = {
    "diff": lambda args: _campaign(args, args.baseline, args.candidate),
    "spec": lambda args: _campaign(args, None, args.target),
    "replay": _replay, "kernel": _kernel, "symbolic": _symbolic, "bench": _bench,
    "mutants": _mutants, "schema": _schema_command,
}


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
        if args.command is None:
            parser.print_help()
            return EXIT_USAGE
        return _COMMANDS[args.command](args)
    except StagecheckError as exc:
        if isinstance(exc, UsageError):
            _option(exc)
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
