"""The ``stagecheck`` command: ``main(argv) -> int``.

Each command only loads (targets, options), calls one analysis with one options
object, hands the result to the renderers and returns an exit code: 0 no error
finding; 1 error findings (with ``--strict`` info findings count too); 2 usage or
load error, with a message that names the argument, the value and the fix, an
undecided symbolic run, or a requested output that could not be written; 130/143 a
run stopped by SIGINT/SIGTERM (never 0).

Outputs are resolved to absolute paths and probed (nothing is created or truncated)
before anything runs; after the run, every file (replay files and the run manifest,
``--json``, ``--junit-xml``, ``--markdown``) is written, atomically, before the report is
printed, so a closed stdout (``| head -1``) changes neither the files nor the exit code.

Heavy libraries (torch, hypothesis, triton, crosshair) are imported by the command
that needs them, after its arguments were parsed and checked.
"""

from __future__ import annotations

import argparse
import os
import sys
from types import SimpleNamespace

from stagecheck.oracles import interrupt, messages, stdio
from stagecheck.oracles.errors import StagecheckError, UsageError
from stagecheck.oracles.options import (DEVICES, KERNEL_BACKENDS, KERNEL_MODES, CampaignConfig,
                                        RunOptions, integer, seconds, whole)

EXIT_CLEAN, EXIT_FINDINGS, EXIT_USAGE = 0, 1, 2
VERDICT_EXIT = {"equivalent": EXIT_CLEAN, "different": EXIT_FINDINGS, "undecided": EXIT_USAGE}
DEFAULT_SAVE_DIR = os.path.join(".stagecheck", "findings")

#: Canonical option name -> how the command line spells it, for error messages.
_FLAGS = {"examples": "--examples", "seed": "--seed", "max_capacity": "--max-capacity",
          "timeout": "--timeout", "steps": "--steps", "gpu_busy_cycles": "--gpu-busy-cycles",
          "device": "--device", "kernel": "--kernel", "kernel_backend": "--kernel-backend",
          "budget": "--budget", "jobs": "--jobs", "symbolic_timeout": "--symbolic-timeout",
          "symbolic_paths": "--symbolic-paths",
          "oracles": "--oracles", "operators": "--operators", "max_paths": "--max-paths"}


class _Parser(argparse.ArgumentParser):
    def __init__(self, *args, **kwargs) -> None:
        kwargs.setdefault("formatter_class", argparse.RawDescriptionHelpFormatter)
        super().__init__(*args, **kwargs)

    def error(self, message: str):  # never exit from inside argparse
        raise UsageError.of(messages.USAGE, message=message, prog=self.prog)

    def _check_value(self, action, value):
        # --device lists its choices in --help; a wrong one reads as everywhere else
        if action.dest == "device" and action.choices and value not in action.choices:
            raise UsageError.of(messages.BAD_DEVICE, value, "device")
        super()._check_value(action, value)


#: command -> (what exit 1 means, what else exit 2 means, one example)
_EPILOGS = {
    "diff": ("error findings (--strict: any finding)", "",
             "stagecheck diff legacy single-loop --examples 1000 --json report.json"),
    "spec": ("error findings (--strict: any finding)", "",
             "stagecheck spec single-loop --max-capacity 16"),
    "kernel": ("the Triton kernel and its reference differ", "; triton not installed",
               "stagecheck kernel --examples 50"),
    "symbolic": ("error findings (--strict: any finding)", "; undecided or inconclusive",
                 "stagecheck symbolic legacy single-loop --max-paths 40"),
    "bench": ("(never: bench measures)", "", "stagecheck bench legacy single-loop"),
    "mutants": ("survivors (a non-equivalent mutant no stagecheck oracle killed)", "",
                "stagecheck mutants single-loop --oracles spec,differential --budget 100"),
    "replay": ("the saved example still shows an error finding", "",
               "stagecheck replay .stagecheck/findings/FILE.json --candidate single-loop"),
    "schema": ("(never)", "; a schema with problems (check)",
               "stagecheck schema check tests/user_schema/attention_lengths_schema.py"),
}


def _epilog(command: str) -> str:
    findings, two, example = _EPILOGS[command]
    import textwrap
    codes = textwrap.fill(messages.EXIT_CODES_EPILOG.format(findings=findings, two=two), 78)
    return f"{codes}\n\nexample:\n  {example}"


def _add_quiet_option(p: argparse.ArgumentParser) -> None:
    p.add_argument("--quiet", "-q", action="store_true",
                   help="no progress on stderr (default: a live line on a terminal, a plain "
                   "line every few seconds elsewhere)")


def _add_schema_option(p: argparse.ArgumentParser) -> None:
    p.add_argument("--schema", default=None, metavar="SCHEMA",
                   help="the staging schema of the targets: a built-in name or "
                   "'path/to/schema.py[:NAME]' (default: chosen by the function's name)")


def _add_campaign_options(p: argparse.ArgumentParser) -> None:
    _add_schema_option(p)
    p.add_argument("--device", default="cpu", choices=DEVICES,
                   help="where the buffers live: cpu (default) or cuda")
    p.add_argument("--examples", default="300",
                   help="examples per stream, in contract and out of contract (default 300)")
    p.add_argument("--seed", default="0", help="hypothesis seed (default 0)")
    p.add_argument("--max-capacity", default="8", help="largest buffer capacity drawn (default 8)")
    p.add_argument("--timeout", default="5", help="seconds per staging call before it is a hang")
    p.add_argument("--json", metavar="PATH", help="write the verdict and findings as JSON")
    p.add_argument("--junit-xml", metavar="PATH", help="write a JUnit XML report (one test "
                   "case per invariant) for CI")
    p.add_argument("--strict", action="store_true", help="info findings also give exit 1")
    p.add_argument("--markdown", metavar="PATH", help="write a Markdown summary to paste into "
                   "a pull request: verdict, targets and SHAs, budget, errors with slot tables, "
                   "info findings by reason, the reproduction tests")
    _add_report_text_options(p)
    p.add_argument("--save-dir", default=DEFAULT_SAVE_DIR,
                   help=f"where replay files of findings go, with a manifest per run under "
                   f"runs/ (default {DEFAULT_SAVE_DIR})")
    _add_shim_option(p)
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


#: --color choices (oracles/report/style.py: COLOR_CHOICES, the rules of use_color)
_COLOR_CHOICES = ("auto", "always", "never")


def _add_color_option(p: argparse.ArgumentParser) -> None:
    p.add_argument("--color", choices=_COLOR_CHOICES, default="auto",
                   help="colour the verdict line and the ERRORS/INFO headers: auto (default: "
                   "on a terminal, unless NO_COLOR is set), always, never")


def _add_report_text_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--verbose", action="store_true", help="list every info finding in full "
                   "(default: one line per reason, with a count and one example)")
    _add_color_option(p)


def _colored(args, text: str) -> str:
    """``text`` with colour where ``--color`` and the terminal say so (style.use_color)."""
    from stagecheck.oracles.report.style import colorize, use_color
    return colorize(text, use_color(getattr(args, "color", "never"), sys.stdout, os.environ))


def _add_shim_option(p: argparse.ArgumentParser) -> None:
    p.add_argument("--shim", action="append", default=[], metavar="PATH.py",
                   help="a module whose top-level names file targets may use where their "
                   "imports cannot be honoured (e.g. def cdiv(a, b): ...); repeatable")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="stagecheck", description="Formal spec and differential testing of "
                     "host-side staging code for the Mamba postprocess kernel.",
                     epilog=messages.EXIT_CODES_EPILOG.format(
                         findings="findings (see each command's --help)", two="") +
                     "\n\nexample:\n  stagecheck diff legacy single-loop\n\n"
                     "defaults may be set in pyproject.toml under [tool.stagecheck]")
    parser.add_argument("--version", action="store_true",
                        help="print stagecheck's version and exit")
    sub = parser.add_subparsers(dest="command", parser_class=_Parser, metavar="COMMAND")

    def command(name: str, help: str) -> argparse.ArgumentParser:
        return sub.add_parser(name, help=help, description=help, epilog=_epilog(name))

    diff = command("diff", "compare two staging targets on generated scenarios")
    diff.add_argument("baseline", help="builtin name, module:function, file.py::function or "
                      "git:REV:file.py::function")
    diff.add_argument("candidate", help="same forms as BASELINE")
    _add_campaign_options(diff)
    _add_quiet_option(diff)
    spec = command("spec", "check one staging target against the spec")
    spec.add_argument("target", help="the staging function: same forms as diff's BASELINE")
    _add_campaign_options(spec)
    _add_quiet_option(spec)
    kernel = command("kernel", "kernel oracle 1: the Triton postprocess kernel against its "
                     "reference, bit for bit (needs the kernel extra: "
                     f"{messages.KERNEL_EXTRA})")
    kernel.add_argument("--examples", default="100", help="kernel scenarios (default 100)")
    kernel.add_argument("--seed", default="0", help="hypothesis seed (default 0)")
    kernel.add_argument("--device", default="cpu", choices=DEVICES,
                        help="cpu (Triton interpreter, default) or cuda (compiled)")
    kernel.add_argument("--json", metavar="PATH", help="write the result as JSON")
    _add_color_option(kernel)
    _add_quiet_option(kernel)
    symbolic = command("symbolic", "CrossHair: symbolic diff of two targets over list-backed "
                       "buffers")
    symbolic.add_argument("baseline", help="builtin name, module:function, file.py::function "
                          "or git:REV:file.py::function")
    symbolic.add_argument("candidate", help="same forms as BASELINE")
    symbolic.add_argument("--timeout", default=None, help="seconds of exploration (default "
                          "30; with --max-paths, a limit the budget should not reach)")
    symbolic.add_argument("--max-paths", default=None, metavar="N",
                          help="path budget: stop after N paths, so that two runs with the "
                          "same arguments explore the same paths")
    symbolic.add_argument("--max-capacity", default="4", help="largest capacity (default 4)")
    symbolic.add_argument("--json", metavar="PATH", help="write the verdict and findings as JSON")
    _add_shim_option(symbolic)
    symbolic.add_argument("--strict", action="store_true", help="info findings also give exit 1")
    _add_report_text_options(symbolic)
    _add_schema_option(symbolic)
    _add_quiet_option(symbolic)
    bench = command("bench", "per-call cost of two targets, interleaved, as ratios")
    bench.add_argument("baseline", help="builtin name, module:function, file.py::function or "
                       "git:REV:file.py::function")
    bench.add_argument("candidate", help="same forms as BASELINE")
    bench.add_argument("--device", default="cpu", choices=DEVICES,
                       help="where the buffers live: cpu (default) or cuda")
    bench.add_argument("--json", metavar="PATH", help="write the timings as JSON")
    _add_shim_option(bench)
    _add_schema_option(bench)
    mutants = command("mutants", "mutation catalog: which oracle kills which realistic "
                      "refactoring mistake")
    mutants.add_argument("target", help="the staging function to mutate: a builtin name, "
                         "module:function or file.py::function")
    mutants.add_argument("--oracles", default="spec,differential,kernel,symbolic,upstream",
                         help="comma-separated: spec, differential, kernel, symbolic, upstream")
    mutants.add_argument("--budget", default="300", help="examples per oracle run (default 300)")
    mutants.add_argument("--symbolic-paths", default="160",
                         help="symbolic paths explored per mutant (default 160: a budget of "
                         "paths gives the same matrix on any machine)")
    mutants.add_argument("--symbolic-timeout", default="60",
                         help="seconds of symbolic search per mutant at most (default 60)")
    mutants.add_argument("--operators", default=None,
                         help="comma-separated subset of the catalog (default: every operator)")
    mutants.add_argument("--jobs", default=str(cpu_count()),
                         help="mutants run in this many parallel processes (default: the CPUs "
                         f"this process may use, here {cpu_count()})")
    mutants.add_argument("--no-out-of-contract", action="store_true",
                         help="skip the campaigns' stream of inputs that should not happen (it "
                         "gives info findings only: same kills, faster, survivors less "
                         "explained)")
    mutants.add_argument("--list", action="store_true", help="list the mutants and exit")
    _add_schema_option(mutants)
    mutants.add_argument("--json", metavar="PATH", help="write the kill matrix as JSON")
    _add_shim_option(mutants)
    _add_quiet_option(mutants)
    replay = command("replay", "re-run a saved finding")
    replay.add_argument("file", help="a replay file a run saved (under .stagecheck/findings/)")
    replay.add_argument("--baseline", help="override the saved baseline target")
    replay.add_argument("--candidate", help="override the saved candidate target")
    replay.add_argument("--device", default=None, choices=DEVICES,
                        help="cpu or cuda (default: the device the finding was saved from)")
    _add_shim_option(replay)
    _add_schema_option(replay)
    schema = command("schema", "staging schemas: list the built-in ones, show one, or check "
                     "a schema file and the scenario space it induces")
    schema_sub = schema.add_subparsers(dest="schema_command", parser_class=_Parser,
                                       metavar="SUBCOMMAND")
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
    from stagecheck.oracles.runner import load_schema_isolated as load_schema   # issue 21
    try:
        return load_schema(spec, checked=checked)
    except StagecheckError as exc:
        raise exc.located(where) from None


def _open(pairs: list[tuple[str, str]], schema=None, shims=()):
    """Load the targets ``(spec, argument)`` in a worker process, never in this one; a
    runner holding them. A file or revision target is read here first (a ``git:REV``
    resolved to its commit once: the runner's targets keep the commit and the pinned
    spec); the worker compiles it with ``shims``. A loading error names its argument,
    whether it came from reading here or from loading in the worker (a global name no
    import, definition or shim provides: exit 2, never a difference in a run)."""
    from stagecheck.oracles.runner import load_isolated
    from stagecheck.oracles.targets import schema_spec, target_ref
    spec = schema_spec(schema)
    refs = []
    for target, argument in pairs:
        try:
            refs.append(target_ref(target, spec, shims))
        except StagecheckError as exc:
            raise exc.located(f"argument {argument}") from None
    try:
        return load_isolated(refs, {spec: schema} if schema is not None else None)
    except StagecheckError as exc:
        index = getattr(exc, "target_index", None)
        raise exc.located(f"argument {pairs[index][1]}" if index is not None
                          else "arguments") from None


def _shims(args) -> tuple[str, ...]:
    """``--shim`` paths, absolute (a target that changes folder must not move them)."""
    return tuple(os.path.abspath(p) for p in getattr(args, "shim", None) or ())


# ------------------------------------------------------------------------------ output

_stdout_gone = stdio.stdout_gone     # stdout cannot take more: the rest goes to /dev/null
_emit = stdio.emit      # the report; a write error loses it and changes nothing else
_note = stdio.note      # one line on stderr, escaped (never fails)


class _Outputs:
    """The files a command writes: resolved to absolute paths and probed before the run
    (nothing created or truncated), written atomically after it. A write that fails is
    remembered and reported on stderr by ``finish``, which turns exit 0 into 2."""

    def __init__(self, reports: dict[str, str | None], save_dir: str | None = None) -> None:
        from stagecheck.oracles.report.files import check_outputs, probe_file, probe_folder
        check_outputs(reports, save_dir)     # '' paths; a file that is not a report
        self.reports = {opt: os.path.abspath(p) for opt, p in reports.items() if p}
        self.save_dir = os.path.abspath(save_dir) if save_dir else None
        self.failed: list[tuple[str, str, str]] = []
        paths = list(self.reports.values())
        if len(set(paths)) < len(paths):
            same = next(p for p in paths if paths.count(p) > 1)
            options = [o for o, p in self.reports.items() if p == same]
            if options == ["--json", "--junit-xml"]:
                raise UsageError.of(messages.SAME_REPORT_PATH, same)
            raise UsageError.of(messages.SAME_REPORT_PATHS, same, options=" and ".join(options))
        for option, path in self.reports.items():
            why = probe_file(path)
            if why:
                raise UsageError.of(messages.REPORT_UNWRITABLE, path, why=why).located(
                    f"option {option}")
        if self.save_dir:
            why = probe_folder(self.save_dir)
            if why:
                raise UsageError.of(messages.SAVE_DIR_UNWRITABLE, self.save_dir,
                                    why=why).located("option --save-dir")

    def write(self, option: str, text_of) -> None:
        """Write the report ``option`` asked for (``text_of()`` renders it)."""
        from stagecheck.oracles.report.files import write_atomic
        path = self.reports.get(option)
        if not path:
            return
        try:
            write_atomic(path, text_of())
        except OSError as exc:
            self.failed.append((option, path, exc.strerror or str(exc)))

    def attempt(self, option: str, path: str, action):
        """Run ``action()`` (writes under ``path``); None when it failed (remembered)."""
        try:
            return action()
        except OSError as exc:
            self.failed.append((option, path, exc.strerror or str(exc)))
            return None

    def finish(self, code: int, verdict: str) -> int:
        """The exit code: ``code``; 2 instead of 0 when a requested output could not be
        written (0 means a clean verdict *and* every output written). A non-zero code
        (findings, undecided, interrupted) is kept: it already says the run is not clean."""
        for option, path, error in self.failed:
            template = messages.REPORT_NOT_WRITTEN if code == EXIT_CLEAN else \
                messages.REPORT_NOT_WRITTEN_KEPT
            error_ = UsageError.of(template, path, error=error, verdict=verdict.upper(),
                                   code=code).located(f"option {option}")
            _note(f"stagecheck: error: {error_}")
        if self.failed and code == EXIT_CLEAN:
            return EXIT_USAGE
        return code


def _shown(path: str) -> str:
    """``path`` relative to the current folder when it is under it (shorter to read)."""
    rel = os.path.relpath(path)
    return path if rel.startswith("..") else rel


def _interrupted(examples: int, findings=(), saved: str = "", unit: str = "example(s)") -> int:
    """The one line of an interrupted run (what ran, what was found so far, where it was
    saved), and its exit code."""
    findings = list(findings)
    errors = sum(1 for f in findings if f.severity == "error")
    _note(messages.INTERRUPTED.format(
        signal=interrupt.signal_name(interrupt.requested()), examples=examples, unit=unit,
        findings=len(findings), errors=errors, infos=len(findings) - errors, saved=saved))
    return interrupt.exit_code()


def _run_options(args) -> RunOptions:
    cycles = whole("gpu_busy_cycles", args.gpu_busy_cycles, 0, "1000000")  # on any device
    return RunOptions(
        device=args.device, timeout=args.timeout, deferred_copies=args.deferred_copies,
        gpu_busy_cycles=cycles if args.device == "cuda" else 0,
        steps=args.steps, kernel=args.kernel, kernel_backend=args.kernel_backend)


def _campaign_config(args) -> CampaignConfig:
    return CampaignConfig(examples=args.examples, seed=args.seed, max_capacity=args.max_capacity,
                          out_of_contract=not args.no_out_of_contract, run=_run_options(args))


def cpu_count() -> int:
    """The CPUs this process may run on (``mutants --jobs`` default), at most the most
    ``--jobs`` takes."""
    from stagecheck.oracles.options import LIMITS
    counter = getattr(os, "process_cpu_count", None)     # Python 3.13
    if counter is not None:
        count = counter()
    else:
        try:
            count = len(os.sched_getaffinity(0))
        except (AttributeError, OSError):
            count = os.cpu_count()
    return max(1, min(count or 1, LIMITS["jobs"]))


def _progress_of(args, label: str, unit: str, total: int | None = None,
                 counters: tuple[str, ...] = ()):
    """A started ``Progress`` on stderr, or None under ``--quiet``."""
    if getattr(args, "quiet", False):
        return None
    from stagecheck.oracles.progress import Progress
    return Progress(label, unit, total, counters=counters,
                    stopped=interrupt.requested).start()


class _CampaignProgress:
    """``run_campaign``'s progress callback: both streams as one count."""

    def __init__(self, progress, config: CampaignConfig) -> None:
        self.progress, self.config = progress, config
        self.offset, self.last_in = 0, 0
        progress.update(0, config.examples * (2 if config.out_of_contract else 1))

    def __call__(self, stream: str, done: int, total: int, findings: int = 0,
                 phase: str = "random") -> None:
        if phase == "edge":    # the hypothesis stream for edge cases, after both streams
            if stream == "in":
                self.last_in = done
                self.progress.update(done, total * (2 if self.config.out_of_contract else 1),
                                     findings=findings, phase="edge cases")
            else:
                self.progress.update(self.last_in + done, self.last_in + total,
                                     findings=findings, phase="edge cases")
            return
        if stream == "in":
            self.last_in = done
            planned = self.config.examples if self.config.out_of_contract else 0
            self.progress.update(done, total + planned, findings=findings)
        else:
            self.progress.update(self.last_in + done, self.last_in + total, findings=findings)

    def close(self) -> None:
        self.progress.close()


def _triton_available() -> bool:
    """Whether ``import triton`` can work, without importing it (a second)."""
    if "triton" in sys.modules:
        return sys.modules["triton"] is not None
    import importlib.util
    try:
        return importlib.util.find_spec("triton") is not None
    except (ImportError, ValueError):
        return False


def _require_triton(what: str, alternative: str = "") -> None:
    """Exit 2 naming the kernel extra when ``what`` needs triton and it is missing."""
    if _triton_available():
        return
    from stagecheck.oracles.errors import StagecheckError as _Error
    raise _Error.of(messages.TRITON_EXTRA_MISSING, what=what,
                    error="import triton fails", alternative=alternative)


def _kernel_backend(args) -> None:
    """Settle ``--kernel-backend`` before the run: an explicit triton without triton
    installed is exit 2; the default (triton on cuda) falls back to the reference
    backend, and says so."""
    if args.kernel == "off":
        return
    if args.kernel_backend == "triton":
        _require_triton("--kernel-backend triton", "; or use --kernel-backend reference, "
                        "which needs no triton")
    elif args.kernel_backend is None and args.device == "cuda" and not _triton_available():
        args.kernel_backend = "reference"
        if not getattr(args, "quiet", False):
            _note(messages.TRITON_FALLBACK)


# ------------------------------------------------------------------------------ commands

def _campaign(args, baseline_spec: str | None, candidate_spec: str) -> int:
    config = _campaign_config(args)
    outputs = _Outputs({"--json": args.json, "--junit-xml": args.junit_xml,
                        "--markdown": args.markdown}, args.save_dir)
    shims = _shims(args)
    _kernel_backend(args)
    config = _campaign_config(args)
    from stagecheck.oracles.observe import require_device
    require_device(config.run.device)
    schema = _schema(args)
    pairs = ([(baseline_spec, "BASELINE")] if baseline_spec else []) + \
        [(candidate_spec, "CANDIDATE" if baseline_spec else "TARGET")]
    from stagecheck.oracles.campaign import run_campaign
    from stagecheck.oracles.report import (json_document, render_campaign, render_json,
                                           render_junit)
    from stagecheck.oracles.report.json import campaign_body
    from stagecheck.oracles.report.replay import new_run_id, save_findings, write_manifest
    from stagecheck.oracles.targets import schema_spec
    shown = _progress_of(args, args.command, "examples", counters=("findings",))
    progress = _CampaignProgress(shown, config) if shown else None
    try:
        with _open(pairs, schema, shims) as runner:     # the workers end with the search
            baseline = runner.targets[0] if baseline_spec else None
            candidate = runner.targets[-1]
            result = run_campaign(baseline, candidate, config, progress, runner=runner)
    finally:
        if progress:
            progress.close()
    result.schema_spec = schema_spec(schema)     # pinned: a schema file by its absolute path
    targets = {"baseline": baseline.record() if baseline else None,
               "candidate": candidate.record()}
    verdict = "interrupted" if result.interrupted else result.verdict(args.strict)
    # every file first, the report last: a closed stdout cannot cost a file
    saved, manifest = {}, None
    if result.findings:
        saved = outputs.attempt("--save-dir", outputs.save_dir, lambda: save_findings(
            result, outputs.save_dir, baseline, candidate, shims)) or {}
        manifest = outputs.attempt("--save-dir", outputs.save_dir, lambda: write_manifest(
            outputs.save_dir, new_run_id(), args.command, result, saved, targets, verdict))
    from stagecheck.oracles.report.json import campaign_settings
    from stagecheck.oracles.report.markdown import render_markdown
    flags = _replay_flags(baseline, candidate, shims, result.schema_spec)
    shown = {k: _shown(v) + flags for k, v in saved.items()}
    body = campaign_body(result, args.strict, targets, manifest)
    outputs.write("--json", lambda: render_json(json_document(
        args.command, body, verdict, settings=campaign_settings(result, args.strict),
        targets=targets)))
    outputs.write("--junit-xml", lambda: render_junit(result, args.strict, targets=targets,
                                                      command=args.command))
    outputs.write("--markdown", lambda: render_markdown(
        result, args.strict, targets, shown,
        _shown(manifest) if manifest else None, args.command))
    if result.interrupted:
        where = f"; saved: {_shown(manifest)}" if manifest else ""
        return outputs.finish(_interrupted(
            result.examples_in_contract + result.examples_out_of_contract, result.findings,
            where), verdict)
    _emit(_colored(args, render_campaign(
        result, args.strict, shown, targets=targets,
        manifest=_shown(manifest) if manifest else None, verbose=args.verbose)))
    return outputs.finish(VERDICT_EXIT[verdict], verdict)


def _replay_flags(baseline, candidate, shims, schema_spec) -> str:
    """What the printed ``stagecheck replay FILE`` line must add so that it runs as
    printed: a replay file runs only the targets, shims and schema file inside the trust
    boundary unless the command line names them (``report.replay.untrusted_parts``)."""
    import shlex

    from stagecheck.oracles.report.replay import untrusted_parts
    parts, _ = untrusted_parts({"baseline": baseline.pinned if baseline else None,
                                "candidate": candidate.pinned, "shims": list(shims),
                                "schema": schema_spec})
    out = []
    if "baseline" in parts or "candidate" in parts:
        if baseline is not None:
            out += ["--baseline", shlex.quote(baseline.pinned)]
        out += ["--candidate", shlex.quote(candidate.pinned)]
    for s in shims if "shims" in parts else ():
        out += ["--shim", shlex.quote(s)]
    if "schema" in parts:
        out += ["--schema", shlex.quote(schema_spec)]
    return (" " + " ".join(out)) if out else ""


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
    shims = _shims(args) or tuple(saved.get("shims") or ())
    from stagecheck.oracles.report.replay import check_trusted
    try:
        check_trusted(saved, args.file, args.baseline, args.candidate, bool(_shims(args)),
                      getattr(args, "schema", None) is not None)
    except StagecheckError as exc:
        raise exc.located("argument FILE") from None
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
    with _open(pairs, schema, shims) as runner:
        baseline = runner.targets[0] if base_spec else None
        findings = evaluate(baseline, runner.targets[-1], scenario, options, runner).findings
    if interrupt.requested():
        return _interrupted(1, findings)
    _emit(render_replay(args.file, saved, base_spec, cand_spec, options.device, findings))
    return EXIT_FINDINGS if any(f.severity == "error" for f in findings) else EXIT_CLEAN


def _kernel(args) -> int:
    from stagecheck.oracles.options import choice
    examples = whole("examples", args.examples, 1, "100")
    seed = integer("seed", args.seed)
    device = choice("device", args.device, DEVICES)
    outputs = _Outputs({"--json": args.json})
    _require_triton("stagecheck kernel (the Triton kernel against its reference)")
    from stagecheck.oracles.observe import require_device
    require_device(device)
    from stagecheck.oracles.kernel.campaign import run_kernel_campaign
    from stagecheck.oracles.report import json_document, render_json, render_kernel
    shown = _progress_of(args, "kernel", "scenarios", examples)
    try:
        result = run_kernel_campaign(examples, seed, device,
                                     progress=shown.update if shown else None)
    finally:
        if shown:
            shown.close()
    verdict = ("interrupted" if result.interrupted else
               "equivalent" if result.clean else "different")
    from stagecheck.oracles.report.json import kernel_settings
    outputs.write("--json", lambda: render_json(json_document(
        "kernel", result.to_dict(), verdict, settings=kernel_settings(result))))
    if result.interrupted:
        mismatch = [] if result.clean else [SimpleNamespace(severity="error")]
        return outputs.finish(_interrupted(result.examples, mismatch), verdict)
    _emit(_colored(args, render_kernel(result)))
    return outputs.finish(VERDICT_EXIT[verdict], verdict)


def _symbolic(args) -> int:
    max_paths = whole("max_paths", args.max_paths, 1, "500") if args.max_paths else None
    timeout = seconds("timeout", args.timeout, "30") if args.timeout is not None else None
    capacity = whole("max_capacity", args.max_capacity, 1, "4")
    outputs = _Outputs({"--json": args.json})
    shims = _shims(args)
    schema = _schema(args)
    from stagecheck.oracles.report import json_document, render_json, render_symbolic
    from stagecheck.oracles.symbolic import run_symbolic
    shown = _progress_of(args, "symbolic", "paths")
    try:
        with _open([(args.baseline, "BASELINE"), (args.candidate, "CANDIDATE")], schema,
                   shims) as runner:
            result = run_symbolic(*runner.targets, timeout=timeout, max_capacity=capacity,
                                  max_paths=max_paths, runner=runner,
                                  progress=shown.update if shown else None)
    finally:
        if shown:
            shown.close()
    verdict = "interrupted" if result.interrupted else result.verdict(args.strict)
    from stagecheck.oracles.report.json import symbolic_settings
    outputs.write("--json", lambda: render_json(json_document(
        "symbolic", result.to_dict(), verdict, targets={
            "baseline": runner.targets[0].record(), "candidate": runner.targets[1].record()},
        settings=symbolic_settings(result, args.strict, args.schema, shims))))
    if result.interrupted:
        return outputs.finish(_interrupted(result.paths_attempted, result.findings,
                                           unit="symbolic path(s)"), verdict)
    _emit(_colored(args, render_symbolic(result, args.strict, verbose=args.verbose)))
    return outputs.finish(VERDICT_EXIT[verdict], verdict)


def _bench(args) -> int:
    from stagecheck.oracles.options import choice
    device = choice("device", args.device, DEVICES)
    outputs = _Outputs({"--json": args.json})
    shims = _shims(args)
    schema = _schema(args)
    from stagecheck.oracles.bench import run_bench
    from stagecheck.oracles.report import json_document, render_bench, render_json
    with _open([(args.baseline, "BASELINE"), (args.candidate, "CANDIDATE")], schema,
               shims) as runner:
        result = run_bench(*runner.targets, device=device, runner=runner)
    from stagecheck.oracles.report.json import bench_settings
    outputs.write("--json", lambda: render_json(json_document(
        "bench", result.to_dict(), "measured", targets={
            "baseline": runner.targets[0].record(), "candidate": runner.targets[1].record()},
        settings=bench_settings(result, args.schema, shims))))
    _emit(render_bench(result))
    return outputs.finish(EXIT_CLEAN, "measured")


def _mutants(args) -> int:
    from stagecheck.oracles.mutants import MutantsConfig, list_mutants, parse_list
    operators = parse_list(args.operators) if args.operators is not None else None
    shims = _shims(args)
    config = MutantsConfig(oracles=tuple(parse_list(args.oracles)), budget=args.budget,
                           symbolic_timeout=args.symbolic_timeout,
                           symbolic_paths=args.symbolic_paths, operators=operators,
                           jobs=args.jobs, out_of_contract=not args.no_out_of_contract,
                           shims=shims)
    outputs = _Outputs({"--json": args.json})
    schema = _schema(args)
    from stagecheck.oracles.targets import schema_spec
    pinned_schema = schema_spec(schema)    # a schema file by its absolute path
    if args.list:
        try:
            mutants = list_mutants(args.target, config.operators, pinned_schema, shims)
        except StagecheckError as exc:
            raise exc.located("argument TARGET") from None
        _emit("\n".join(f"{m.id} {m.operator:<24} {str(m.location):<36} {m.description}"
                        + ("  [equivalent: operator reason]" if m.equivalent_reason else "")
                        for m in mutants))
        return EXIT_CLEAN
    with _open([(args.target, "TARGET")], schema, shims) as runner:   # checked, read once
        original = runner.targets[0]
    from stagecheck.oracles.kernel import use_interpreter_without_gpu
    use_interpreter_without_gpu()
    from stagecheck.oracles.mutants import run_mutants
    from stagecheck.oracles.report import json_document, render_json, render_mutants
    shown = _progress_of(args, "mutants", "mutants",
                         counters=("killed", "equivalent", "survived"))
    try:
        report = run_mutants(args.target, config, _MutantProgress(shown), schema=pinned_schema,
                             original=original)
    finally:
        if shown:
            shown.close()
    verdict = ("interrupted" if report.interrupted else
               "all-killed" if report.all_killed() else "survivors")
    from stagecheck.oracles.report.json import mutants_settings
    outputs.write("--json", lambda: render_json(json_document(
        "mutants", report.to_dict(), verdict, targets={"target": original.record()},
        settings=mutants_settings(config, pinned_schema))))
    if report.interrupted:
        killed = [SimpleNamespace(severity="error") for r in report.results
                  if r.killed_by_stagecheck]
        return outputs.finish(_interrupted(len(report.results), killed,
                                           unit="mutant(s) (findings: mutants killed)"), verdict)
    _emit(render_mutants(report))
    return outputs.finish(EXIT_CLEAN if report.all_killed() else EXIT_FINDINGS, verdict)


class _MutantProgress:
    """``run_mutants``' callback: one line per mutant (its row of the matrix) and the
    progress line (done/total, kills, ETA); ``--quiet``: nothing."""

    def __init__(self, progress) -> None:
        self.progress, self.killed, self.equivalent = progress, 0, 0

    def __call__(self, res, done: int, total: int) -> None:
        if self.progress is None:
            return
        self.killed += bool(res.killed_by_stagecheck)
        self.equivalent += bool(res.equivalent)
        cells = " ".join(f"{o}={out.cell()}" for o, out in res.outcomes.items())
        self.progress.print_above(f"[{done}/{total}] {res.mutant.id} {res.mutant.operator} "
                                  f"{res.mutant.location}: {cells}")
        self.progress.update(done, total, killed=self.killed, equivalent=self.equivalent,
                             survived=done - self.killed - self.equivalent)


def _schema_command(args) -> int:
    """``schema list|show|check``: nothing is written but the report (through ``_emit``,
    so a closed stdout keeps the exit code), problems go to stderr."""
    from stagecheck.spec.prose import render_schema
    from stagecheck.spec.schemas import BUILTIN_SCHEMAS
    outputs = _Outputs({})
    if args.schema_command in (None, "list"):
        _emit("\n".join(f"{name}: {', '.join(s.functions)} — {s.summary}"
                        for name, s in BUILTIN_SCHEMAS.items()))
        return outputs.finish(EXIT_CLEAN, "listed")
    # 'check' lists every problem itself; a schema with problems is no use elsewhere
    schema = _schema(args, "argument SCHEMA", checked=args.schema_command != "check")
    lines = []
    if args.schema_command == "check":
        from stagecheck.oracles.schemas import check_schema
        problems = check_schema(schema)
        if problems:
            for problem in problems:
                _note(f"stagecheck: error: schema {schema.name!r}: {problem}")
            return EXIT_USAGE
    lines += render_schema(schema)
    if args.schema_command == "check":
        from stagecheck.oracles.schemas import schema_space
        space = schema_space(schema)
        lines.append(f"\nschema {schema.name!r}: the declarations and a dry run on 30 drawn "
                     "scenarios are fine.")
        lines.append(f"scenario space over {space['scenarios']} drawn in-contract scenarios:")
        for key, value in space.items():
            if key not in ("scenarios", "out-of-contract breaches"):
                lines.append(f"  {key}: {value}")
        lines.append("out-of-contract stream, breaches drawn:")
        for key, value in space["out-of-contract breaches"].items():
            lines.append(f"  {key}: {value}")
    _emit("\n".join(lines))
    return outputs.finish(EXIT_CLEAN, "shown")


def _subparsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def _parse(parser: argparse.ArgumentParser, argv: list[str] | None):
    """Parse ``argv`` over the defaults of ``[tool.stagecheck]`` (the command line wins).

    The arguments are parsed first without the file, so a typo answers at once and
    ``--help`` / ``--version`` work whatever the file holds; then the file is read and
    checked, its values become the defaults of the command's options, and the
    arguments are parsed again over them.
    """
    args = parser.parse_args(argv)
    if args.version or args.command is None:
        return args
    from stagecheck.oracles.config import load_config
    config = load_config()
    defaults = config.defaults_for(args.command)
    if not defaults:
        return args
    command = _subparsers(parser)[args.command]
    shims = defaults.pop("shim", None)
    command.set_defaults(**defaults)
    args = parser.parse_args(argv)
    if shims is not None and not args.shim:    # --shim on the command line replaces them
        args.shim = shims
    used = config.summary(args.command, args)
    if used and not getattr(args, "quiet", False):
        _note(messages.CONFIG_USED.format(path=_shown(config.path), values=used))
    return args


_COMMANDS = {
    "diff": lambda args: _campaign(args, args.baseline, args.candidate),
    "spec": lambda args: _campaign(args, None, args.target),
    "replay": _replay, "kernel": _kernel, "symbolic": _symbolic, "bench": _bench,
    "mutants": _mutants, "schema": _schema_command,
}


def main(argv: list[str] | None = None) -> int:
    """Run one command; its exit code. SIGINT/SIGTERM are taken over for the run (see
    ``oracles/interrupt.py``) and given back on return."""
    stdio.ensure_standard_fds()     # before any pipe: no fd 0-2 may be reused
    parser = build_parser()
    interrupt.reset()
    interrupt.install()
    try:
        try:
            stdio.check_working_folder()
            args = _parse(parser, argv)
            if args.version:
                from stagecheck import __version__
                _emit(f"stagecheck {__version__}")
                code = EXIT_CLEAN
            elif args.command is None:
                _emit(parser.format_help().rstrip("\n"))
                code = EXIT_USAGE
            else:
                code = _COMMANDS[args.command](args)
        except StagecheckError as exc:
            if isinstance(exc, UsageError):
                _option(exc)
            _note(f"stagecheck: error: {exc}")
            code = EXIT_USAGE
        except KeyboardInterrupt:   # a second signal, or Ctrl-C outside a search loop
            if not interrupt.requested():
                raise
            code = _interrupted(0)
        if interrupt.requested() and code != interrupt.exit_code():
            # the flag decides: a signal that came while files were written, or one an
            # exception handler swallowed, still ends the run as interrupted
            _note(f"stagecheck: interrupted by {interrupt.signal_name(interrupt.requested())}"
                  "; no verdict: interrupted")
            code = interrupt.exit_code()
        return code
    finally:
        interrupt.uninstall()


def entry_point() -> None:
    code = main()
    stdio.finish_stdout()     # a closed or full stdout: the exit code stays the verdict's
    sys.exit(code)


if __name__ == "__main__":
    entry_point()
