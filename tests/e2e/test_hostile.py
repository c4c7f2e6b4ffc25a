"""Hostile inputs (issues 11 and 21): targets that exit, crash, hang, fork, daemonize, stop
their worker, write its position counter, patch the checker or print megabytes; schema
files that exit, loop or patch; files that are missing, empty, huge, binary, FIFOs,
devices or folders; bad options; malformed and untrusted replay files; closed or full
standard descriptors; signals and kills from outside. Each row runs the command line (or
pytest with the plugin) in a subprocess and names its exit code and what the output must
say. Every row also checks: no traceback, no raw escape or NUL character in the output,
stdout under 1 MB, a ``--json`` report an earlier run wrote intact when the row exits 2
(else written whole), and no process of the run alive one second after it exits (each
process of a row carries a marker in its environment; ``/proc`` is searched for it).

``docs/reliability.md`` lists this table (``test_the_reliability_doc_lists_every_case``
keeps them in step).
"""

from __future__ import annotations

import compileall
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
import uuid
from dataclasses import dataclass
from importlib.metadata import entry_points
from pathlib import Path

import pytest

from stagecheck.oracles import messages

ROOT = Path(__file__).resolve().parents[2]
HOSTILE = ROOT / "tests" / "targets" / "hostile"
FUNC = "stage_postprocess_inputs_to_gpu"
DOC = ROOT / "docs" / "reliability.md"
USER = f"{ROOT}/tests/user_schema/attention_lengths.py::stage_attention_lengths"
BUGGY = f"{ROOT}/tests/targets/buggy_swapped_views.py::stage_postprocess_inputs_to_gpu"
#: a small campaign; --quiet: no progress lines
QUICK = ["--examples", "10", "--timeout", "1", "--quiet"]
#: a target that crashes on every call is still shrunk: those rows run fewer examples
#: without the out-of-contract stream and the kernel oracle
CRASHY = ["--examples", "3", "--timeout", "1", "--no-out-of-contract", "--no-kernel", "--quiet"]
#: a target that hangs on every call: a short time limit too
HANGY = ["--examples", "3", "--timeout", "0.3", "--no-out-of-contract", "--no-kernel",
         "--quiet"]
#: targets that stage nothing: the out-of-contract stream would reach a kernel-impact
#: probe that fails on values that do not fit int32 (oracles/kernel, reported separately)
IN_CONTRACT = ["--examples", "10", "--timeout", "1", "--no-out-of-contract", "--no-kernel",
               "--quiet"]
OLD_REPORT = '{"tool": "stagecheck", "written by": "an earlier run"}\n'
#: what a row's command adds to its standard descriptors (shown in docs/reliability.md)
STDIO = {"no-stdout": ">&-", "no-stderr": "2>&-", "no-stdin": "<&-", "full": ">/dev/full"}


def fragment(template) -> str:
    """The longest literal piece of a message template (what any filling of it shows)."""
    text = template[0] if isinstance(template, tuple) else template
    return re.escape(max(re.split(r"\{[^}]*\}", text), key=len).strip())


@dataclass(frozen=True)
class Case:
    id: str
    argv: tuple[str, ...]
    code: int
    expect: str                   # a regular expression the output (stdout + stderr) holds
    what: str                     # what the row is, for docs/reliability.md
    env: tuple[tuple[str, str], ...] = ()
    stdio: str = ""               # a key of STDIO
    prepare: str = ""             # a function of PREPARE, run in the row's folder first
    during: str = ""              # a function of DURING, run while the command runs
    program: str = "stagecheck"   # or "pytest" (the plugin, in the row's folder)
    absent: str = ""              # a file of the row's folder that must not exist after

    def args(self, tmp: Path) -> list[str]:
        return [_filled(a, tmp) for a in self.argv]

    def command(self) -> str:
        """The command as docs/reliability.md shows it."""
        shown = " ".join(a.replace("{H}/", "hostile/").replace("{T}/", "").replace(
            f"{ROOT}/tests/user_schema/", "user_schema/") for a in self.argv)
        prefix = " ".join(f"{k}={v}" for k, v in self.env if k.startswith("STAGECHECK_"))
        program = "pytest" if self.program == "pytest" else ""
        return " ".join(p for p in (prefix, program, shown, STDIO.get(self.stdio, "")) if p)


def _filled(text: str, tmp: Path) -> str:
    return text.replace("{H}", str(HOSTILE)).replace("{T}", str(tmp)).replace(
        "{ESC}", "\x1b")


def target(name: str) -> str:
    return f"{{H}}/{name}.py::{FUNC}"


def spec(name, code, expect, what, crashy=False, options=None, **kw):
    options = options or (CRASHY if crashy else QUICK)
    return Case(name, ("spec", target(name), *options), code, expect, what, **kw)


def diff(name, code, expect, what, crashy=False, options=None, **kw):
    options = options or (CRASHY if crashy else QUICK)
    return Case(f"diff-{name}", ("diff", "single-loop", target(name), *options), code, expect,
                what, **kw)


def hang(name, what, **kw):
    return spec(name, 1, HANG, what, options=HANGY, **kw)


def schema_case(id_, schema, code, expect, what, **kw):
    return Case(id_, ("spec", USER, "--schema", f"{{H}}/{schema}.py", *QUICK), code, expect,
                what, **kw)


HANG = fragment(messages.HANG)
CRASH = "the call never returned: "
LEFT = r"left 1 process\(es\) running when it returned \({name}\); stagecheck ended them"
CONFORMS = "verdict: CONFORMS"
#: a worker that ended between calls, or that still held, when the run stopped it, what
#: could end it later (docs/reliability.md, "A worker that ends between calls")
ENDS_LATER = (f"(?:a worker ended .*{fragment(messages.WORKER_DIED_BETWEEN_CALLS)}"
              f"|{fragment(messages.WORKER_LEFT_BEHIND)})")
#: few examples: the run's last request comes before the timer fires
FEW = ["--examples", "3", "--timeout", "1", "--no-out-of-contract", "--no-kernel", "--quiet"]
EQUIVALENT = "verdict: EQUIVALENT"
#: rows that wait for the deadline of loading (or of a schema or protocol file's dry run):
#: its floor, 1 s of CPU time, 3 s on the wall clock (the rows are about what the deadline
#: does, not its default: 60 s, 180 s; a file target, a schema or a protocol file that
#: does not hang loads in milliseconds of it)
LOAD_ENV = (("STAGECHECK_LOAD_SECONDS", "1"),)
#: one call of schema or protocol code in the checker: its floor, 0.5 s of CPU time, 1.5 s
#: on the wall clock (the rows' other calls of such code take milliseconds)
CODE_ENV = (("STAGECHECK_CODE_SECONDS", "0.5"),)

LOAD = [
    Case("missing-file", ("spec", f"{{T}}/nope.py::{FUNC}"), 2,
         fragment(messages.TARGET_FILE_MISSING), "a file target that does not exist"),
    spec("empty", 2, fragment(messages.TARGET_FUNCTION_MISSING), "an empty file"),
    spec("binary", 2, fragment(messages.TARGET_BINARY), "a binary file"),
    Case("huge", ("spec", f"{{T}}/huge.py::{FUNC}"), 2, fragment(messages.TARGET_TOO_LARGE),
         "a 5 MB file", prepare="huge"),
    spec("syntax_error", 2, "is not valid Python", "a syntax error"),
    spec("wrong_signature", 2, "cannot take the arguments of schema", "too few parameters"),
    spec("not_a_function", 2, fragment(messages.TARGET_ASSIGNED),
         "the name is a constant"),
    spec("undeclared_latin1", 2, "cannot be read as Python source",
         "Latin-1 bytes without a coding declaration"),
    Case("folder", ("spec", f"{{H}}::{FUNC}"), 2, fragment(messages.TARGET_IS_FOLDER),
         "a folder given as a file target"),
    Case("git-tree", ("spec", f"git:HEAD:{ROOT}/tests/targets::{FUNC}"), 2,
         "is a folder \\(a git tree\\)", "a git tree given as a file target"),
    Case("git-bad-revision", ("spec", f"git:no-such-rev-11:{ROOT}/impl/staging_legacy.py::{FUNC}"),
         2, "no-such-rev-11", "an unknown git revision"),
    Case("git-hangs", ("spec", f"git:HEAD:{ROOT}/impl/staging_legacy.py::{FUNC}"), 2,
         "argument TARGET: 'git rev-parse --show-toplevel' did not end within 1 s .*"
         + fragment(messages.GIT_HUNG[1]), "a 'git' earlier on PATH that sleeps for ever "
         "(was: a run that never ends)", prepare="hanging_git",
         env=(("STAGECHECK_GIT_SECONDS", "1"), ("PATH", "{T}/bin:" + os.environ["PATH"]))),
    Case("missing-module", ("spec", "no_such_module_11:f"), 2, "no_such_module_11",
         "a module that does not exist"),
    Case("bad-spec", ("spec", "{H}/empty.py::1bad"), 2, "neither a Python identifier",
         "a function name that is not an identifier"),
    spec("load_time_exit", 2, "ended the worker process: exited the interpreter with code 0",
         "a constant's initialiser calls os._exit(0) at load"),
    spec("load_time_default_arg", 2, "raised SystemExit: 5",
         "a default argument calls sys.exit(5) at load"),
    spec("imports_engine_when_called", 2, fragment(messages.TARGET_IMPORTS_WHEN_CALLED),
         "an engine module imported inside the function (was: both sides raised "
         "ModuleNotFoundError, a finding, exit 1)"),
    spec("rebinds_gpu_view", 2, fragment(messages.VIEW_REBOUND),
         "a target assigns buf.gpu (was: stagecheck's own AttributeError 'no setter' "
         "reported as the target raising, DIFFERENT, exit 1)"),
    diff("rebinds_np_view", 2, fragment(messages.VIEW_REBOUND),
         "a target assigns a new array to buf.np, then writes into it (was: judged as if "
         "the new array were the memory .cpu and copy_to_gpu use; a real CpuGpuBuffer "
         "keeps the old one)"),
    diff("sets_cpu_storage", 2, fragment(messages.VIEW_MEMORY_REPLACED),
         "a target gives buf.cpu other memory with set_, then fills the buffer (was: "
         "EQUIVALENT, exit 0, while a real CpuGpuBuffer uploads the new memory's zeros)"),
    spec("sets_gpu_data", 2, fragment(messages.VIEW_MEMORY_REPLACED),
         "a target assigns buf.gpu.data memory of its size after its copies (was: "
         "CONFORMS, exit 0, while the kernel would read zeros)"),
    spec("pins_host_memory", 2, fragment(messages.TARGET_PINS_WITHOUT_DEVICE),
         "a target pins a staging copy on a CPU-only torch (was: 'raised RuntimeError: "
         "Cannot access accelerator device', DIFFERENT, exit 1, for code fine on CUDA)"),
    spec("records_cuda_event", 2, fragment(messages.TARGET_NEEDS_CUDA),
         "a target records a torch.cuda.Event after its uploads, on a CPU-only torch (was: "
         "'raised RuntimeError: Tried to instantiate dummy base class Event', DIFFERENT, "
         "exit 1, for code fine on CUDA)"),
    diff("synchronizes_cuda", 2, fragment(messages.TARGET_NEEDS_CUDA),
         "a target synchronizes the current CUDA stream, on a CPU-only torch (was: 'raised "
         "AssertionError: Torch not compiled with CUDA enabled', DIFFERENT, exit 1)"),
    spec("latin1_declared", 0, CONFORMS, "a PEP 263 Latin-1 file"),
    spec("utf8_bom", 0, CONFORMS, "a file starting with a UTF-8 BOM"),
    Case("target-fifo", ("spec", f"{{T}}/fifo.py::{FUNC}", *QUICK), 2,
         r"is a FIFO \(named pipe\), not a file", "a FIFO given as a target file (was: does "
         "not exist)", prepare="fifo"),
    Case("target-device", ("spec", f"/dev/zero::{FUNC}", *QUICK), 2,
         "is a character device, not a file", "a device given as a target file"),
    Case("shim-fifo", ("spec", target("chdir"), "--shim", "{T}/fifo.py", *QUICK), 2,
         r"is a FIFO \(named pipe\), not a file", "a FIFO given as a shim", prepare="fifo"),
    Case("shim-device", ("spec", target("chdir"), "--shim", "{T}/dev.py", *QUICK), 2,
         "is a character device, not a file: stagecheck reads a shim",
         "a device given as a shim (a link to /dev/zero)", prepare="dev_link"),
    Case("shim-ansi-error", ("spec", target("chdir"), "--shim", "{H}/shim_ansi_error.py",
                             *QUICK), 2, re.escape(r"ValueError: \x1b[31mred"),
         "a shim whose import raises text with ANSI escapes (shown escaped)"),
    spec("ansi_load_error", 2, re.escape(r"ValueError: \x1b[31mred"),
         "loading raises text with ANSI escapes (shown escaped)"),
    Case("target-path-ansi", ("spec", f"{{T}}/evil{{ESC}}[31m.py::{FUNC}", *QUICK), 0,
         re.escape(r"evil\x1b[31m.py"), "a target file whose name holds an ANSI escape "
         "(shown escaped in the report header)", prepare="ansi_name"),
    spec("load_time_setprofile", 2, fragment(messages.TARGET_LOAD_HUNG),
         "a constant's initialiser installs a profile hook that blocks every later call",
         options=HANGY, env=LOAD_ENV),
    spec("load_time_spins", 2, fragment(messages.TARGET_LOAD_HUNG),
         "a constant's initialiser spins for ever", options=HANGY, env=LOAD_ENV),
    spec("load_time_zeroes_counter", 2, fragment(messages.TARGET_LOAD_HUNG),
         "a default argument zeroes the position counter and spins at load", options=HANGY,
         env=LOAD_ENV),
    spec("load_time_daemon", 0, CONFORMS, "daemonizes a process when the file is loaded "
         "(ended after loading)"),
]
TARGETS = [
    diff("system_exit", 1, CRASH + "exited the interpreter with code 0",
         "raise SystemExit (was: exit 0, no output)", crashy=True),
    diff("os_exit_0", 1, CRASH + "exited the interpreter with code 0",
         "os._exit(0) (was: exit 0, no output)", crashy=True),
    diff("patch_checker", 1, r"copied 0 time\(s\) over \[\]",
         "replaces check/compare/evaluate in sys.modules, stages nothing (was: EQUIVALENT)",
         options=IN_CONTRACT),
    spec("system_exit_after", 1, CRASH + "exited the interpreter with code 0",
         "stages, then raise SystemExit(0)", crashy=True),
    spec("sys_exit_3", 1, CRASH + "exited the interpreter with code 3",
         "sys.exit(3) (was: exit 3)", crashy=True),
    spec("keyboard_interrupt", 1, "raised KeyboardInterrupt",
         "raise KeyboardInterrupt (was: exit 130 and a traceback)", crashy=True),
    # 100 examples: the worker's calls span more than the 50 ms, and it ends between them
    # (or, on a busy machine, when the run stops it: it still holds the timer)
    *[diff(name, 2, ENDS_LATER,
           what, options=["--examples", "100", "--timeout", "1", "--quiet"])
      for name, what in (
        ("timer_exits_after", "stages, then starts a threading.Timer that calls os._exit(0) "
         "50 ms later: the worker ends in a later call of either side or between calls (was: "
         "'baseline ended its process', DIFFERENT, exit 1, blaming the baseline; with 10 "
         "examples a fresh worker in silence, EQUIVALENT, exit 0)"),
        ("faulthandler_exits_after", "stages, then arms faulthandler.dump_traceback_later("
         "0.05, exit=True) (was: 'baseline ended its process (exited the interpreter with "
         "code 1)', an info finding blamed on the baseline, exit 0)"))],
    # few examples: the run's last request comes before the 50 ms pass; the worker, asked
    # when the run stops it, names what is left (was: exit 0, the verdict of a run that
    # ended before the timer fired)
    *[spec(name, 2, ENDS_LATER, what, options=FEW) for name, what in (
        ("timer_exits_after", "stages, then starts a threading.Timer that calls os._exit(0) "
         "50 ms later; 3 examples: the run may end before the timer fires (was: CONFORMS, "
         "exit 0)"),
        ("faulthandler_exits_after", "stages, then re-arms faulthandler.dump_traceback_later("
         "0.05, exit=True) in every call; 3 examples (was: CONFORMS, exit 0, where the calls "
         "came faster than 50 ms apart until the last)"))],
    *[Case(f"diff-{name}-few", ("diff", "single-loop", target(name), *FEW), 2, ENDS_LATER,
           what) for name, what in (
        ("timer_exits_after", "the threading.Timer target against single-loop with 3 "
         "examples (was: EQUIVALENT, exit 0, where the run ended before the timer fired)"),
        ("faulthandler_exits_after", "the faulthandler.dump_traceback_later(0.05, exit=True) "
         "target against single-loop with 3 examples (was: EQUIVALENT, exit 0, where the "
         "run ended before the dump fired)"))],
    spec("sigint_self", 1, CRASH + "killed by SIGINT", "sends its own process SIGINT with "
         "os.kill, then stages (was: ignored, CONFORMS, exit 0)", crashy=True),
    diff("raises_sigint", 1, r"baseline returned, candidate ended its process \(killed by "
         r"SIGINT\)", "signal.raise_signal(SIGINT), then stages (was: ignored, EQUIVALENT, "
         "exit 0)", crashy=True),
    spec("memory_loop", 1, CRASH + r"exceeded \d+ MiB", "allocates in a loop", crashy=True),
    hang("ignores_sigalrm", "ignores SIGALRM and spins"),
    hang("catches_base_exception", "catches BaseException in an endless loop"),
    hang("sleeps", "sleeps for an hour"),
    spec("alarm", 1, f"{HANG}|killed by SIGALRM", "arms SIGALRM itself", options=HANGY),
    spec("nondaemon_thread", 2, r"could end that worker later: (?:a thread|\d+ threads) "
         r"running sleep .*" + fragment(messages.WORKER_LEFT_BEHIND),
         "leaves a non-daemon thread running (sleeping an hour): it could end its worker "
         "after the run (was: CONFORMS, exit 0)"),
    spec("segfault", 1, CRASH + "killed by SIGSEGV", "ctypes.string_at(0)", crashy=True),
    spec("sigkill_self", 1, CRASH + "killed by SIGKILL", "sends itself SIGKILL (run again "
         "in a fresh worker first: it could have come from outside)", crashy=True),
    spec("killpg", 1, CRASH + "killed by SIGKILL", "kills its process group", crashy=True),
    spec("recursion", 1, "raised RecursionError", "infinite recursion"),
    spec("self_referencing_output", 1, "req_ids was mutated by the call",
         "self-referencing lists in its inputs and buffers (the inputs read back as "
         "changed: was 'cannot read back', as if the call never returned)"),
    spec("repr_raises", 1, r"KeyError: <str\(\) of the exception raised",
         "an exception holding an object whose repr raises"),
    spec("str_raises", 1, r"Bad: <str\(\) of the exception raised",
         "an exception whose __str__ raises"),
    spec("weird_exception_name", 1, "raised Weird", "an exception class whose __name__ is "
         "not a str (was: a traceback)"),
    spec("gpu_garbage", 1, "gpu", "ctx.<buf>.gpu = 'garbage'"),
    spec("np_garbage", 1, "cannot read back|np", "ctx.<buf>.np = None"),
    spec("closes_stdout", 1, "raised OSError", "closes fd 1"),
    spec("chdir", 0, CONFORMS, "os.chdir('/') (outputs stay where asked)"),
    spec("replaces_stdout", 0, CONFORMS, "sys.stdout = sys.stderr = None"),
    spec("prints_megabytes", 0, CONFORMS, "prints 8 MB (none of it shows)"),
    spec("rebinds_enumerate", 0, CONFORMS + r".*left builtins\.enumerate rebound when it "
         "returned", "stages correctly, then rebinds builtins.enumerate to a broken one "
         "(was: a traceback; then CONFORMS without a word of it): an info finding"),
    spec("writes_file", 0, CONFORMS, "writes a file in the current folder"),
    spec("closes_pipe", 1, CRASH + re.escape(messages.CLOSED_WORKER_PIPE),
         "os.closerange(3, 4096) in the call: stagecheck's pipe among them (was: blamed on "
         "its loading, exit 2)", crashy=True),
    spec("closes_pipe_in_finaliser", 1, CRASH + re.escape(messages.CLOSED_WORKER_PIPE),
         "a cycle each call leaves closes every descriptor from 3 up in its finaliser, when "
         "the collector runs after the calls (was: blamed on its loading, exit 2)",
         crashy=True),
    spec("load_time_closes_pipe", 2, "ended the worker process: " +
         re.escape(messages.CLOSED_WORKER_PIPE), "os.closerange(3, 4096) at load"),
    spec("writes_pipe", 1, CRASH + "wrote into stagecheck's pipe",
         "writes garbage into every inherited fd (the pipe and the position counter)", crashy=True),
    spec("forks", 0, CONFORMS, "forks; the child would answer too"),
    spec("reads_stdin", 1, "raised EOFError", "reads standard input"),
    spec("ansi_exception", 1, re.escape(r"KeyError: '\x1b[31mred"),
         "an exception message with ANSI escapes and NUL (shown escaped)"),
    spec("huge_exception", 1, r"\.\.\. \(\d+ more\)", "a 10 MB exception message (cut)"),
    spec("mutates_inputs", 1, "was mutated by the call", "clears its input dicts"),
    spec("eq_raises_value", 1, "mamba_state_idx was mutated by the call", "puts an object "
         "whose __eq__ raises into an input dict (was: exit 3, an internal error)"),
    spec("lock_value", 1, "num_scheduled_tokens was mutated by the call", "puts a "
         "threading.Lock into an input dict (was: 'exited the interpreter with code 1')"),
    spec("returns_generator", 1, r"copied 0 time\(s\)", "a generator function (runs nothing)",
         options=IN_CONTRACT),
    spec("kills_parent", 0, CONFORMS, "sends SIGTERM to its parent (the keeper ignores it)"),
    spec("cpu_heavy", 0, CONFORMS, "a correct target that burns 50 ms of CPU per call "
         "(--timeout 1 counts CPU time)"),
    *[spec(name, 1, "the call never returned: " + fragment(messages.BROKE_WORKER_MODULES),
           f"{what} (was: exit 3, a worker traceback)", options=[
               "--examples", "20", "--timeout", "1", "--no-out-of-contract", "--no-kernel",
               "--quiet"])
      for name, what in (("deletes_modules", "deletes the modules of stagecheck, torch and "
                          "numpy from sys.modules, then stages"),
                         ("stagecheck_modules_none", "sets the modules of stagecheck in "
                          "sys.modules to None, then stages"))],
    Case("bench-own-base-exception", ("bench", "single-loop",
                                      target("raises_own_base_exception")), 2,
         r"the candidate .* raised Boom: boom on an in-contract input with num_reqs=1, so it "
         "cannot be timed", "bench of a target that raises its own BaseException subclass "
         "(was: exit 3, a worker traceback)"),
    Case("bench-deletes-modules", ("bench", "single-loop", target("deletes_modules")), 2,
         r"a target ended the bench's worker \(broke its worker",
         "bench of a target that deletes modules from sys.modules (was: exit 3)"),
    Case("symbolic-deletes-modules", ("symbolic", "single-loop", target("deletes_modules"),
                                      "--max-paths", "20", "--quiet"), 2,
         r"ended the exploration's worker \(broke its worker",
         "symbolic: a target that deletes modules from sys.modules (was: exit 3)"),
    Case("mutants-system-exit", ("mutants", target("system_exit"), "--oracles",
                                 "spec,differential", "--budget", "10", "--operators",
                                 "copy_dropped", "--quiet"), 1,
         r"control \(the unmutated source.*: spec 1 error finding",
         "mutants of a target that raises SystemExit (was: exit 0; kills by oracles that "
         "fail on the unmutated source prove nothing)"),
    Case("bench-hangs", ("bench", "single-loop", target("sleeps"), "--timeout", "0.5"), 2,
         r"the candidate .*sleeps\.py::\w+' did not return within the time limit \(hang\) "
         r"on an in-contract input with num_reqs=1", "bench of a target that sleeps: ended at "
         "the per-call limit (was: about 100 s per size, 300 s on the wall clock)"),
    Case("bench-baseline-spins", ("bench", target("spins_from_3_reqs"), "single-loop",
                                  "--timeout", "0.5"), 2,
         r"the baseline .*spins_from_3_reqs\.py::\w+' did not return within the time limit "
         r"\(hang\) on an in-contract input with num_reqs=8", "bench of a baseline that spins "
         "from 3 live requests on: the per-call limit, the hang blamed on the baseline (was: "
         "100 s of CPU time per size)"),
    Case("bench-returns-generator", ("bench", "single-loop", target("returns_generator"),
                                     "--json", "report.json"), 2,
         fragment(messages.BENCH_NOT_EQUIVALENT) + ".*" + re.escape(
             "run 'stagecheck diff single-loop "),
         "bench of a candidate that returns a generator it never runs: it stages nothing "
         "(was: exit 0, timed as 300 to 600 times faster than the baseline, a speedup)"),
    Case("bench-os-exit", ("bench", "single-loop", target("os_exit_0")), 2,
         r"a target ended the bench's worker \(exited the interpreter with code 0\)",
         "bench of a target that calls os._exit(0)"),
    Case("symbolic-system-exit", ("symbolic", "single-loop", target("system_exit"),
                                  "--max-paths", "20", "--quiet"), 2,
         "ended the exploration's worker \\(exited the interpreter with code 0\\)",
         "symbolic: raise SystemExit (was: exit 0; now nothing is checked, said so)"),
]
HANGS = [
    hang("zeroes_counter", "zeroes the worker's position counter, then spins (was: a run "
         "that never ends)"),
    hang("spins_counter", "writes ever new values into the position counter while it spins "
         "(was: a run that never ends)"),
    hang("stops_itself", "sends its own worker SIGSTOP during the call (was: a run that "
         "never ends)"),
    spec("stops_after", 1, HANG, "stops its own worker (SIGSTOP) once its first call has "
         "returned (was: a run that never ends)",
         options=["--examples", "20", "--timeout", "0.3", "--no-out-of-contract",
                  "--no-kernel", "--quiet"]),
    hang("stops_mid_answer", "writes half of its worker's answer into the pipe and stops "
         "the worker there (was: a run that never ends: the checker read on for ever)"),
    hang("setprofile_block", "installs a profile hook that blocks every later call"),
    hang("setprofile_spin", "installs a profile hook that spins on every later call"),
    hang("gc_callback_block", "registers a gc callback that blocks, and collects"),
    Case("trace-hangs-fifo", ("spec", target("stops_itself"), *HANGY), 1, HANG,
         "STAGECHECK_TRACE_HANGS naming a FIFO no process reads, on a target the checker "
         "must end at its deadline (was: the checker blocked for ever opening it, SIGTERM "
         "too)", env=(("STAGECHECK_TRACE_HANGS", "{T}/trace.fifo"),), prepare="fifo_trace"),
    hang("swallows_the_limit", "sleeps for an hour, catches the time limit's interruption "
         "(except BaseException), then stages correctly (was: CONFORMS, each call taking its "
         "whole deadline)"),
    hang("result_del_hangs", "stages correctly and returns an object whose __del__ sleeps for "
         "an hour: the interruption raised there is only printed (was: CONFORMS, each call "
         "taking its whole deadline)"),
    Case("diff-sigterm", ("diff", "single-loop", target("sleeps"), "--timeout", "60",
                          "--quiet"), 143, "interrupted by SIGTERM",
         "one SIGTERM while a call sleeps with --timeout 60: the run ends within the grace "
         "period", during="sigterm", env=(("HOSTILE_MARK", "{T}/called"),)),
    Case("diff-sigquit", ("diff", "single-loop", target("sleeps"), "--timeout", "60",
                          "--quiet"), -signal.SIGQUIT, "",
         "SIGQUIT (Ctrl-\\) while a call sleeps: the checker ends at once, as SIGQUIT means "
         "(no verdict, no exit 0), and its worker and keeper with it",
         during="sigquit", env=(("HOSTILE_MARK", "{T}/called"),)),
    Case("bench-sigterm", ("bench", "single-loop", target("sleeps")), 143,
         "interrupted by SIGTERM", "one SIGTERM to bench while a call sleeps (was: survived "
         "timeout for 15 minutes)", during="sigterm", env=(("HOSTILE_MARK", "{T}/called"),)),
    Case("diff-sigterm-counts", ("diff", "single-loop", target("slow_counted"), "--examples",
                                 "200", "--quiet"), 143,
         r"interrupted by SIGTERM after (1[6-9]|[2-9]\d|\d{3}) example\(s\)",
         "one SIGTERM once the first batch (16 examples) was answered: the examples the cut "
         "stream judged are counted (was: 'after 0 example(s), 1 finding(s)')",
         during="sigterm_after_batch", env=(("HOSTILE_MARK", "{T}/calls"),)),
    Case("diff-sigterm-keeps-finding", ("diff", "single-loop", target("slow_counted_buggy"),
                                        "--examples", "200", "--quiet"), 143,
         r"interrupted by SIGTERM after \d+ example\(s\), [1-9]\d* finding",
         "one SIGTERM once the first batch, which holds an error, was answered, while the "
         "checker waits for the batch in hand (was: the error found was lost: '0 finding(s)')",
         during="sigterm_after_batch", env=(("HOSTILE_MARK", "{T}/calls"),)),
    Case("diff-double-sigterm", ("diff", "single-loop", target("slow_correct"), "--examples",
                                 "200", "--quiet"), 143, "interrupted by SIGTERM",
         "two SIGTERMs in a row: the second loses nothing (the partial report is written)",
         during="double_sigterm", env=(("HOSTILE_MARK", "{T}/called"),)),
    Case("killed-from-outside", ("diff", "single-loop", target("slow_correct"), "--examples",
                                 "8", "--no-out-of-contract", "--no-kernel", "--quiet"), 0,
         "killed from outside", "its worker is killed with SIGKILL during a call: the call "
         "runs again and passes (was: an error finding against the code)",
         during="kill_worker", env=(("HOSTILE_MARK", "{T}/called"),)),
    Case("busy-cpus", ("spec", target("cpu_heavy"), "--examples", "10", "--timeout", "0.2",
                       "--quiet"), 0, CONFORMS,
         "a correct target that burns 50 ms of CPU per call, --timeout 0.2, beside three "
         "processes that keep every CPU busy: not a hang (the deadline is CPU time)",
         prepare="busy_cpus"),
    Case("timeout-tiny", ("diff", "legacy", "single-loop", "--timeout", "0.000001",
                          *QUICK[:2], "--quiet"), 0, EQUIVALENT,
         "--timeout 0.000001: the time limit has a floor (was: every call a hang)"),
    Case("timeout-short-first-torch-use", ("diff", "single-loop",
                                           f"{{H}}/../equivalent_raw_copy_.py::{FUNC}",
                                           "--timeout", "0.1", "--examples", "40", "--quiet"),
         0, EQUIVALENT, "--timeout 0.1 on a correct target whose file imports torch: the "
         "worker imports it while it loads (was: a hang, or a SystemError or SIGABRT from "
         "inside torch's import, on a correct candidate)"),
    Case("timeout-short-own-torch-use", ("diff", "single-loop", target("raw_copy_first_use"),
                                         "--timeout", "0.1", "--examples", "40", "--quiet"),
         0, EQUIVALENT, "--timeout 0.1 on a correct target that never names torch but copies "
         "with `.gpu[:n].copy_(.cpu[:n])`: its first call is the worker's first use of torch, "
         "imported inside the call, untimed"),
    hang("pause_spins", "writes the flag that pauses the checker's clock for the worker's "
         "own import of torch, ignores the worker's timers and spins: a hang once the "
         "deadline of loading passed (at most one such pause per worker)",
         env=(("STAGECHECK_LOAD_SECONDS", "1"),)),
]
LEAKS = [
    spec("spawns_process", 0, LEFT.format(name="sleep"), "spawns a process (a finding, and "
         "killed after the call)"),
    spec("starts_session", 0, LEFT.format(name="sleep"), "starts a process in a session of "
         "its own (start_new_session)"),
    spec("setpgid", 0, LEFT.format(name="sleep"), "starts a process in a process group of "
         "its own (setpgid)"),
    # how many it finds depends on the moment (the first child may still be exiting, a
    # previous call's grandchild still being ended): that they are found and ended matters
    spec("daemonizes", 0, r"left \d+ process\(es\) running when it returned \([^)]*python",
         "daemonizes: fork, setsid, fork again (was: thousands of processes left)"),
    spec("shared_memory", 1, CRASH + "exceeded 1024 MiB", "maps and touches 1.5 GiB of "
         "shared memory (RLIMIT_DATA does not count it; the resident size does)",
         options=["--examples", "3", "--timeout", "20", "--no-out-of-contract", "--no-kernel",
                  "--quiet"],
         env=(("STAGECHECK_MEMORY_MIB", "1024"), ("HOSTILE_SHARED_MIB", "1536"))),
    Case("mutants-daemonizes", ("mutants", target("daemonizes"), "--oracles", "spec",
                                "--budget", "5", "--operators", "copy_dropped", "--quiet"),
         0, "killed", "mutants of a daemonizing target (was: about 6,000 processes left)"),
    Case("mutants-kill-9", ("mutants", "legacy", "--jobs", "2", "--budget", "300",
                            "--oracles", "spec,differential"), -9, "",
         "kill -9 of mutants --jobs 2: the pool processes and their workers end with it",
         during="kill9"),
]
SCHEMAS = [
    schema_case("schema-system-exit", "schema_system_exit", 2, r"failed to import \(SystemExit",
                "a --schema file that raises SystemExit(0) (was: exit 0, no report)"),
    schema_case("schema-os-exit", "schema_os_exit", 2,
                "ended the process that loaded it.*exited the interpreter with code 0",
                "a --schema file that calls os._exit(0) (was: exit 0, no report)"),
    schema_case("schema-import-loop", "schema_import_loop", 2, fragment(messages.SCHEMA_HUNG),
                "a --schema file that loops for ever when imported (was: a run that never ends)",
                env=LOAD_ENV),
    schema_case("schema-keyboard-interrupt", "schema_keyboard_interrupt", 2,
                r"failed to import \(KeyboardInterrupt", "a --schema file that raises "
                "KeyboardInterrupt (was: a traceback)"),
    schema_case("schema-ansi-error", "schema_ansi_error", 2, re.escape(r"\x1b[31mred"),
                "a --schema file whose import error holds ANSI escapes (shown escaped)"),
    schema_case("schema-patches-compare", "schema_patches_compare", 2,
                r"changed stagecheck's own code.*stagecheck\.oracles\.compare\.compare",
                "a --schema file that replaces the comparison (was: a buggy pair passed)"),
    schema_case("schema-build-hang", "schema_build_hang", 2, fragment(messages.SCHEMA_HUNG),
                "a --schema file whose call adapter never returns", env=LOAD_ENV),
    schema_case("schema-derive-exit", "schema_derive_exit", 2,
                "ended the process that loaded it.*code 3",
                "a --schema file whose derive calls sys.exit(3)"),
    schema_case("schema-derive-sleeps", "schema_derive_sleeps", 2,
                fragment(messages.SCHEMA_HUNG), "a --schema file whose derive sleeps",
                env=LOAD_ENV),
    *[Case(f"schema-{part}-rarely", ("spec", USER, "--schema", f"{{H}}/schema_{name}.py",
                                      "--examples", "300", "--timeout", "1", "--quiet"), 2,
           expect, f"a --schema file whose {what} only when 511 to 513 requests are live "
           "(past schema check's dry run; was: exit 3, or a finding against the code)")
      for part, name, expect, what in (
          ("derive-raises", "derive_raises_rarely",
           r"field 'query_len': derive \(slot 0, .*\) raised ValueError.*during the run",
           "derive raises ValueError"),
          ("column-wrong", "column_wrong_rarely",
           r"field 'query_len': column raised ValueError: it gives .* where derive gives",
           "column disagrees with its derive"),
          ("build-raises", "build_raises_rarely",
           r"schema 'attention-lengths': build raised RuntimeError: rare at \S+\.py:\d+ during "
           r"the run",
           "build raises RuntimeError"),
          ("build-exits", "build_exits_rarely",
           r"schema 'attention-lengths': build raised os\._exit\(0\)",
           "build calls os._exit(0)"))],
    *[Case(f"schema-derive-{part}", ("spec", USER, "--schema", f"{{H}}/schema_derive_{name}.py",
                                      "--examples", "300", "--timeout", "1", "--quiet"), code,
           expect, f"a --schema file whose derive {what} after its 300th call ({was})")
      for part, name, code, expect, what, was in (
          ("lowers-recursion", "lowers_recursion", 2,
           r"field 'query_len': derive \(slot \d+, .*\) raised RecursionError",
           "lowers the recursion limit to 25", "was: exit 3, a traceback in the checker"),
          ("leaks-fds", "leaks_fds", 0, CONFORMS, "opens a descriptor at every call, never "
           "closed (numbers past 1,023)", "was: exit 3, 'filedescriptor out of range in "
           "select()'"),
          ("replaces-stderr", "replaces_stderr", 0, CONFORMS, "replaces sys.stdout and "
           "sys.stderr with objects whose write raises", "was: exit 120 after the verdict"))],
    schema_case("schema-umask", "schema_umask", 0, CONFORMS, "a --schema file that sets the "
                "umask to 0o777 when imported (was: every output written with mode 000)"),
    Case("schema-chdir", ("spec", "target.py::stage_attention_lengths", "--schema",
                          "{H}/schema_chdir.py", *QUICK), 0, CONFORMS,
         "a --schema file that changes the working folder to / when imported, a relative "
         "target (was: exit 2 blaming the target, 'relative paths are taken from /')",
         prepare="user_target"),
    schema_case("schema-nofile", "schema_nofile", 2,
                "changed the process that imported it.*RLIMIT_NOFILE lowered to 12",
                "a --schema file that lowers the limit of open files to 12 when imported "
                "(was: exit 3, 'Too many open files')"),
    Case("schema-check-nofile", ("schema", "check", "{H}/schema_nofile.py"), 2,
         "RLIMIT_NOFILE lowered to 12", "schema check of a file that lowers the limit of "
         "open files to 12 (was: exit 0)"),
    Case("schema-writes-fd1", ("spec", USER, "--schema", "{H}/schema_writes_fd1.py", *QUICK,
                               "--json", "-"), 0, CONFORMS,
         "a --schema file that writes a JSON verdict to fd 1 (os.write, C's printf) when "
         "imported, under --json - (was: a stray document before the real one)"),
    Case("schema-takes-signals", ("spec", USER, "--schema", "{H}/schema_takes_signals.py",
                                  "--examples", "1000000", "--timeout", "1", "--quiet"), 143,
         "interrupted by SIGTERM", "a --schema file that sets SIGINT and SIGTERM to SIG_IGN, "
         "arms ITIMER_REAL and lowers the recursion limit to 80 when imported; one SIGTERM "
         "once its derive ran in the checker (was: the signal ignored, a run of a million "
         "examples went on; the timer's SIGALRM ended the checker, exit 142, no output)",
         during="sigterm_when_derived"),
    Case("schema-derive-takes-signals", ("spec", USER, "--schema",
                                         "{H}/schema_derive_takes_signals.py", "--examples",
                                         "1000000", "--timeout", "1", "--quiet"), 143,
         "interrupted by SIGTERM", "a --schema file whose derive, run in the checker, sets "
         "SIGINT and SIGTERM to SIG_IGN and arms ITIMER_REAL on every call; one SIGTERM once "
         "it ran (was: the signal ignored, a run of a million examples went on)",
         during="sigterm_when_derived"),
    schema_case("schema-base-exception", "schema_base_exception", 2,
                r"failed to import \(Boom: schema boom\)", "a --schema file that raises its "
                "own BaseException subclass (was: a 21-line worker traceback)"),
    Case("schema-check-base-exception", ("schema", "check", "{H}/schema_base_exception.py"),
         2, r"failed to import \(Boom: schema boom\)", "schema check of a file that raises "
         "its own BaseException subclass (was: a 21-line worker traceback)"),
    Case("schema-check-import-loop", ("schema", "check", "{H}/schema_import_loop.py"), 2,
         fragment(messages.SCHEMA_HUNG), "schema check of a file that loops when imported "
         "(was: a run that never ends)", env=LOAD_ENV),
    Case("schema-check-build-hang", ("schema", "check", "{H}/schema_build_hang.py"), 2,
         fragment(messages.SCHEMA_HUNG), "schema check of a call adapter that never returns "
         "(was: a run that never ends)", env=LOAD_ENV),
    Case("schema-check-os-exit", ("schema", "check", "{H}/schema_os_exit.py"), 2,
         "ended the process that loaded it", "schema check of a file that calls os._exit(0)"),
    Case("schema-device", ("spec", USER, "--schema", "{T}/dev.py", *QUICK), 2,
         "option --schema: .*is a character device, not a file",
         "a device given as a schema file (a link to /dev/zero)", prepare="dev_link"),
    Case("schema-check-device", ("schema", "check", "{T}/dev.py"), 2,
         "is a character device, not a file", "schema check of a device (a link to /dev/zero)",
         prepare="dev_link"),
    Case("schema-fifo", ("spec", USER, "--schema", "{T}/fifo.py", *QUICK), 2,
         r"is a FIFO \(named pipe\), not a file", "a FIFO given as a schema file",
         prepare="fifo"),
]
#: a component the protocol files of hostile/ drive (docs/protocols.md's worked example)
STAGER = f"{ROOT}/tests/targets/protocols/_machinery/fixed_token_stager.py::TokenStager"


def protocol_case(id_, protocol, code, expect, what, **kw):
    return Case(id_, ("spec", STAGER, "--protocol", f"{{H}}/{protocol}.py", "--examples", "5",
                      "--quiet"), code, expect, what, **kw)


PROTOCOL_FILES = [
    Case("protocol-chdir", ("spec", "stager.py::TokenStager", "--protocol",
                            "{H}/protocol_chdir.py", "--examples", "5"), 0,
         "verdict: HOLDS THE PROTOCOL", "a --protocol file that changes the working folder "
         "when imported, the target given relative to it (was: exit 2, 'the target does not "
         "exist')", prepare="stager"),
    protocol_case("protocol-os-exit", "protocol_os_exit", 2,
                  "option --protocol: protocol file .*ended the process that loaded it and "
                  "dry-ran it: exited the interpreter with code 0", "a --protocol file that "
                  "calls os._exit(0) when imported (was: exit 0, no report)"),
    protocol_case("protocol-system-exit", "protocol_system_exit", 2,
                  r"option --protocol: importing the protocol file .* raised SystemExit: 0",
                  "a --protocol file that raises SystemExit(0) when imported"),
    protocol_case("protocol-keyboard-interrupt", "protocol_keyboard_interrupt", 2,
                  "option --protocol: importing the protocol file .* raised KeyboardInterrupt",
                  "a --protocol file that raises KeyboardInterrupt when imported"),
    protocol_case("protocol-import-loop", "protocol_import_loop", 2,
                  r"its module-level code did not return within .* when the file was loaded "
                  r"and dry-run \(stopped at .*protocol_import_loop\.py:3\)",
                  "a --protocol file that loops for ever when imported (was: a run that never "
                  "ends; then 'did not finish loading', naming no line)", env=LOAD_ENV),
    protocol_case("protocol-import-blocks-signals", "protocol_import_blocks_signals", 2,
                  fragment(messages.PROTOCOL_HUNG), "a --protocol file that blocks every "
                  "signal and sleeps for an hour when imported: the worker's end stops it",
                  env=LOAD_ENV),
    protocol_case("protocol-when-exit", "protocol_when_exit", 2,
                  "ended the process that loaded it and dry-ran it: exited the interpreter "
                  "with code 0", "a --protocol file whose when (run by the checker to draw "
                  "steps) calls os._exit(0)"),
    protocol_case("protocol-patches-judge", "protocol_patches_judge", 2,
                  r"changed stagecheck's own code.*protocol_invariants\.check_run",
                  "a --protocol file that replaces the judge of protocol runs"),
    protocol_case("protocol-check-hang", "protocol_check_hang", 2,
                  r"option --protocol: .*checks\[0\]\.check did not return within",
                  "a --protocol file whose own check (run by the checker) loops on a real "
                  "trace", env=CODE_ENV),
    protocol_case("protocol-check-raises", "protocol_check_raises", 2,
                  r"checks\[0\] \('raises'\) raised ValueError: boom at \S+\.py:\d+ during the run",
                  "a --protocol file whose own check (run by the checker) raises ValueError "
                  "on a real trace (was: exit 3, an internal error)"),
    Case("protocol-check-atexit", ("spec", STAGER.replace("fixed_", "buggy_"), "--protocol",
                                   "{H}/protocol_check_atexit.py", "--examples", "20",
                                   "--quiet"), 1,
         r"\[no_copy_hazard-\w+\] \(candidate\)",
         "a --protocol file whose own check registers an exit handler that calls os._exit(0), "
         "on a buggy target (was: the verdict's exit 1 turned into 0; the process now ends "
         "after its verdict without running exit handlers of schema or protocol code)"),
    protocol_case("protocol-check-exit", "protocol_check_exit", 2,
                  r"option --protocol: .*checks\[0\]\.check raised os\._exit\(0\)",
                  "a --protocol file whose own check (run by the checker) calls os._exit(0) "
                  "on a real trace (was: exit 0, no report)"),
    protocol_case("protocol-run-exit", "protocol_run_exit", 2,
                  r"its own code for operation 'stage' raised .*os\._exit\(0\) at \S+"
                  r"protocol_run_exit\.py:\d+, not the code under test",
                  "a --protocol file whose own operation calls os._exit(0) in the worker "
                  "(was: a step_outcome finding against the code, exit 1)"),
    protocol_case("protocol-build-starts-process", "protocol_build_starts_process", 2,
                  r"its own code started a process \(subprocess\.Popen\) at "
                  r"\S+protocol_build_starts_process\.py:\d+, not the code under test",
                  "a --protocol file whose own build starts a process in a session of its own "
                  "(was: a no_process_left finding against the code under test)"),
    protocol_case("protocol-build-exit", "protocol_build_exit", 2,
                  r"its own code called os\._exit\(0\) at \S+protocol_build_exit\.py:\d+",
                  "a --protocol file whose own build calls os._exit(0) in the worker (was: "
                  "a step_outcome finding against the code, exit 1)"),
    Case("protocol-target-load-exit", ("spec", "{H}/stager_class_body_exits.py::TokenStager",
                                       "--protocol", f"{ROOT}/docs/examples/token_stager_protocol.py",
                                       "--examples", "5", "--quiet"), 2,
         r"argument TARGET: loading '\S+stager_class_body_exits\.py::TokenStager' ended the "
         r"worker process: exited the interpreter with code 0",
         "a protocol run's component whose class body calls os._exit(0) at load (was: exit 3, "
         "an internal error)"),
    Case("protocol-target-load-hang", ("spec", "{H}/stager_class_body_loops.py::TokenStager",
                                       "--protocol", f"{ROOT}/docs/examples/token_stager_protocol.py",
                                       "--examples", "5", "--quiet"), 2,
         r"argument TARGET: loading '\S+stager_class_body_loops\.py::TokenStager' did not "
         r"finish within 1 s of CPU time", "a protocol run's component whose class body loops "
         "for ever at load (was: exit 3 after 2 minutes, an internal error)", env=LOAD_ENV),
    Case("protocol-double-sigterm", ("spec", "{H}/slow_stager.py::TokenStager", "--protocol",
                                     f"{ROOT}/docs/examples/token_stager_protocol.py",
                                     "--examples", "200", "--quiet"), 143,
         "interrupted by SIGTERM", "two SIGTERMs in a row during a protocol run: the second "
         "loses nothing (was: no report, no replay file)", during="double_sigterm",
         env=(("HOSTILE_MARK", "{T}/called"),)),
    protocol_case("protocol-starts-process", "protocol_starts_process", 2,
                  r"protocol file .*protocol_starts_process\.py' left process\(es\) running "
                  r"when it was loaded and dry-run \(sleep\); they were ended",
                  "a --protocol file that starts a process of its own session when imported "
                  "(was: the process outlived the run: the checker imports the file too)"),
    Case("schema-starts-process", ("spec", f"{ROOT}/tests/user_schema/sampling_seeds.py::"
                                   "stage_sampling_seeds", "--schema",
                                   "{H}/schema_starts_process.py", *QUICK), 2,
         r"option --schema: schema file .*left process\(es\) running when it was loaded",
         "a --schema file that starts a process of its own session when imported (was: the "
         "process outlived the run)"),
    Case("protocol-leaves-processes", ("spec", "{H}/daemon_stager.py::TokenStager",
                                       "--protocol",
                                       f"{ROOT}/docs/examples/token_stager_protocol.py",
                                       "--examples", "10", "--strict", "--quiet"), 1,
         r"\[no_process_left-\w+\] \(candidate\) the step sequence left running \d+ "
         r"process\(es\) \(sleep[, sleep]*\), which stagecheck ended",
         "a component whose every step starts a process of its own session and leaves it "
         "(was: no finding, up to 38 processes alive at once); info, so --strict fails"),
    Case("protocol-swallows-the-limit", ("spec", "{H}/swallowing_stager.py::TokenStager",
                                         "--protocol",
                                         f"{ROOT}/docs/examples/token_stager_protocol.py",
                                         "--examples", "3", "--timeout", "0.3", "--quiet"), 1,
         r"\[step_outcome-\w+\] \(candidate\) step 0 \(stage\) hung",
         "a component whose every step sleeps for an hour and catches the time limit's "
         "interruption (except BaseException) (was: HOLDS THE PROTOCOL, each step taking its "
         "whole deadline)"),
    Case("protocol-converts-the-limit", ("spec", "{H}/converting_stager.py::TokenStager",
                                         "--protocol",
                                         f"{ROOT}/docs/examples/token_stager_protocol.py",
                                         "--examples", "3", "--timeout", "0.3", "--quiet"), 1,
         r"\[step_outcome-\w+\] \(candidate\) step 0 \(stage\) hung",
         "a component whose every step sleeps for an hour and turns the time limit's "
         "interruption into a RuntimeError of its own (was: 'raised RuntimeError', not a hang)"),
    Case("protocol-leaves-threads", ("spec", "{H}/thread_stager.py::TokenStager", "--protocol",
                                     f"{ROOT}/docs/examples/token_stager_protocol.py",
                                     "--examples", "2", "--timeout", "1", "--quiet"), 0,
         r"left running \d+ thread\(s\) \(Thread-\d+ \(_spin\).*whose worker stagecheck "
         r"replaced", "a component whose every step starts a thread that spins for ever (was: "
         "a later operation charged with their CPU time, a hang finding replay did not show)"),
    Case("protocol-check-pops-reads", ("diff", STAGER, STAGER.replace("fixed_", "off_by_one_"),
                                       "--protocol", "{H}/protocol_check_pops_reads.py",
                                       "--examples", "20", "--quiet"), 1,
         r"\[same_trace-\w+\] \(both\)", "a --protocol file whose own check pops every read "
         "of the trace it is given, on two targets that read different ids (was: EQUIVALENT, "
         "exit 0: the comparison read the emptied trace)"),
    protocol_case("protocol-check-hostile-str", "protocol_check_raises_hostile_str", 2,
                  r"checks\[0\] \('raises'\) raised Hostile: said by its arguments",
                  "a --protocol file whose own check raises an exception whose __str__ calls "
                  "os._exit(0) (was: exit 0, no output)"),
    protocol_case("protocol-check-base-exception", "protocol_check_base_exception", 2,
                  r"checks\[0\] \('booms'\) raised Boom: boom at \S+"
                  r"protocol_check_base_exception\.py:\d+",
                  "a --protocol file whose own check raises a BaseException class of its own "
                  "(was: a traceback, exit 1)"),
    protocol_case("protocol-thread-and-exit-handler", "protocol_thread_and_exit_handler", 0,
                  "", "a --protocol file whose import starts a thread that is not a daemon "
                  "and registers an exit handler that sleeps (was: the verdict printed, then a "
                  "process that never ended)"),
    protocol_case("protocol-takes-the-signal", "protocol_takes_the_signal", 2,
                  r"checks\[0\]\.check did not return within",
                  "a --protocol file that registers faulthandler for SIGUSR2 when imported, "
                  "and whose own check loops (was: the deadline never came, a run that never "
                  "ended)", env=CODE_ENV),
    Case("protocol-returns-the-time", ("diff", STAGER, STAGER, "--protocol",
                                       "{H}/protocol_returns_the_time.py", "--examples", "20",
                                       "--quiet"), 2,
         r": two runs of the same step sequence differ \(step 0 \(stage\) "
         r"returned \[1\] = .* \(second run\), .* \(first run\)\)",
         "diff of one target against itself with a --protocol file whose operation returns the "
         "time of day (was: DIFFERENT, a finding against the code): the protocol's mistake"),
    Case("protocol-returns-the-time-spec", ("spec", STAGER.replace("fixed_", "buggy_"),
                                            "--protocol", "{H}/protocol_returns_the_time.py",
                                            "--examples", "20", "--quiet"), 2,
         r"the candidate's two runs of the same step sequence differ",
         "spec of a racy target with that --protocol file: its error would compare the time of "
         "day between two runs; the protocol's mistake, never a finding"),
    protocol_case("protocol-observe-writes", "protocol_observe_writes", 2,
                  r"its observe after step \d+ wrote into ids_cpu while a copy still reads or "
                  r"fills it, not the code under test",
                  "a --protocol file whose observe writes into the component's pinned buffer "
                  "while an upload reads it (was: a no_copy_hazard finding against the code)"),
    protocol_case("protocol-check-forks", "protocol_check_forks", 2,
                  r"checks\[0\]\.check called os\.fork\(\), which the checker refuses",
                  "a --protocol file whose own check calls os.fork() (was: copies of the checker "
                  "carried on the run, tracebacks, a run that never ended)"),
    protocol_case("protocol-check-ignores-the-signal", "protocol_check_ignores_the_signal", 2,
                  r"checks\[0\]\.check did not return within",
                  "a --protocol file whose own check ignores SIGUSR2 and loops (was: a run "
                  "that never ended): interrupted without the signal", env=CODE_ENV),
    protocol_case("protocol-check-blocks-in-c", "protocol_check_blocks_in_c", 2,
                  fragment(messages.CODE_STUCK),
                  "a --protocol file whose own check ignores SIGUSR2 and runs for hours inside "
                  "one C call (was: a run that never ended): the run ends with one line, no "
                  "verdict", env=CODE_ENV),
    Case("protocol-patches-torch", ("spec", STAGER.replace("fixed_", "buggy_"), "--protocol",
                                    "{H}/protocol_patches_torch.py", "--examples", "20",
                                    "--quiet"), 2,
         r"option --protocol: protocol file .*changed stagecheck's own code or torch's when it "
         r"ran \(torch\.Tensor\.copy_\)", "a --protocol file that replaces "
         "torch.Tensor.copy_ with a no-op when imported, on a buggy target (was: HOLDS THE "
         "PROTOCOL)"),
    Case("protocol-check-os-exit", ("protocol", "check", "{H}/protocol_os_exit.py"), 2,
         "argument PROTOCOL: protocol file .*ended the process that loaded it",
         "protocol check of a file that calls os._exit(0) (was: exit 0)"),
    Case("protocol-check-import-loop", ("protocol", "check", "{H}/protocol_import_loop.py"),
         2, r"protocol_import_loop\.py': its module-level code did not return within .*"
         r"\(stopped at .*protocol_import_loop\.py:3\)", "protocol check of a file that loops "
         "when imported (was: a run that never ends; then no line named)", env=LOAD_ENV),
    Case("protocol-check-when-exit", ("protocol", "check", "{H}/protocol_when_exit.py"), 2,
         "ended the process that loaded it", "protocol check of a when that calls "
         "os._exit(0)"),
]
OPTIONS = [
    Case("examples-0", ("spec", "legacy", "--examples", "0"), 2, "--examples", "--examples 0"),
    Case("examples-huge", ("spec", "legacy", "--examples", str(10**23)), 2,
         "larger than 10,000,000", "--examples 10**23"),
    Case("examples-word", ("spec", "legacy", "--examples", "many"), 2, "--examples",
         "--examples many"),
    Case("capacity-huge", ("spec", "legacy", "--max-capacity", "1000000"), 2,
         "option --max-capacity: '1000000' is larger than 4,096.*vLLM batches",
         "--max-capacity 1000000 (was: a traceback after 84 s)"),
    Case("timeout-negative", ("spec", "legacy", "--timeout", "-1"), 2, "--timeout",
         "--timeout -1"),
    Case("timeout-nan", ("spec", "legacy", "--timeout", "nan"), 2, "--timeout", "--timeout nan"),
    Case("steps-0", ("spec", "legacy", "--steps", "0"), 2, "--steps", "--steps 0"),
    Case("seed-word", ("spec", "legacy", "--seed", "x"), 2, "--seed", "--seed x"),
    Case("device-tpu", ("spec", "legacy", "--device", "tpu"), 2, "tpu", "--device tpu"),
    Case("jobs-huge", ("mutants", "legacy", "--jobs", "1000"), 2,
         "option --jobs: '1000' is larger than 64.*4 GiB.*give e.g. 2",
         "mutants --jobs 1000"),
    Case("budget-0", ("mutants", "legacy", "--budget", "0"), 2, "--budget", "mutants --budget 0"),
    Case("symbolic-capacity", ("symbolic", "legacy", "single-loop", "--max-capacity", "10**6"),
         2, "--max-capacity", "symbolic --max-capacity 10**6"),
    Case("unknown-option", ("spec", "legacy", "--frobnicate"), 2, "unrecognized arguments",
         "an unknown option"),
    Case("missing-argument", ("diff", "legacy"), 2, r"missing argument\(s\): CANDIDATE",
         "diff without CANDIDATE"),
    Case("kernel-mode", ("spec", "legacy", "--kernel", "sometimes"), 2,
         "option --kernel: .sometimes. is not one of auto, always, off",
         "--kernel sometimes"),
    Case("gpu-busy-cycles-word", ("spec", "legacy", "--gpu-busy-cycles", "x"), 2,
         "option --gpu-busy-cycles: 'x' is not a whole number", "--gpu-busy-cycles x "
         "(was: accepted on cpu)"),
    Case("gpu-busy-cycles-negative", ("spec", "legacy", "--gpu-busy-cycles", "-1"), 2,
         "option --gpu-busy-cycles: '-1'", "--gpu-busy-cycles -1"),
    Case("gpu-busy-cycles-huge", ("spec", "legacy", "--gpu-busy-cycles", str(10**15)), 2,
         "option --gpu-busy-cycles: .*larger than", "--gpu-busy-cycles 10**15"),
    Case("symbolic-timeout-huge", ("mutants", "single-loop", "--symbolic-timeout", "1e99"), 2,
         "option --symbolic-timeout: '1e99' seconds is more than 3600",
         "--symbolic-timeout 1e99 (was: accepted, a search without end)"),
    Case("cwd-shadows-modules", ("diff", "legacy", "single-loop", *QUICK), 0, EQUIVALENT,
         "python -m stagecheck run in a folder holding numpy.py, torch.py and hypothesis.py "
         "of the user's own (was: exit 3, an internal error: -m put the folder first on "
         "sys.path)", prepare="shadows"),
    Case("config-not-utf8", ("spec", "legacy", "--examples", "5", "--quiet"), 2,
         r"cannot read '.*pyproject\.toml' \('utf-8' codec can't decode",
         "a pyproject.toml written in Latin-1, not UTF-8 (was: exit 3, an internal error)",
         prepare="config_latin1"),
    Case("config-nested-deep", ("spec", "legacy", "--examples", "5", "--quiet"), 2,
         r"cannot read '.*pyproject\.toml' \(" + re.escape(messages.CONFIG_TOO_DEEP),
         "a pyproject.toml whose [tool.stagecheck] value nests 5,000 arrays (was: exit 3, a "
         "RecursionError)", prepare="config_deep"),
    Case("config-fifo", ("spec", "legacy", "--examples", "5", "--quiet"), 2,
         r"'.*pyproject\.toml' is a FIFO, socket or device, not a file",
         "a FIFO named pyproject.toml in the working folder (was: passed over for the next "
         "pyproject.toml upwards, which the docs say is never read)", prepare="config_fifo"),
    Case("config-folder", ("spec", "legacy", "--examples", "5", "--quiet"), 2,
         r"'.*pyproject\.toml' is a folder, not a file",
         "a folder named pyproject.toml in the working folder (was: passed over)",
         prepare="config_folder"),
    Case("gpu-busy-cycles-on-cpu", ("spec", "legacy", "--gpu-busy-cycles", "5"), 2,
         "option --gpu-busy-cycles: 5 queues device work on a GPU, and the run is on "
         "device 'cpu'", "--gpu-busy-cycles 5 on the cpu (was: ignored, and shown in the "
         "JSON settings)"),
]
OUTPUTS = [
    Case("json-target-source", ("spec", f"{{T}}/target.py::{FUNC}", *QUICK, "--json",
                                "{T}/target.py"), 2,
         r"option --json: .*target\.py' exists and is not a stagecheck report \(a Python "
         "source file\\)", "--json naming the target's own source file (was: overwritten)",
         prepare="target_copy"),
    Case("json-other-file", ("diff", "legacy", "single-loop", *QUICK, "--json",
                             "{T}/notes.txt"), 2, "option --json: .*is not a stagecheck report",
         "--json naming a file that is not a report (was: overwritten)", prepare="notes"),
    Case("junit-other-file", ("diff", "legacy", "single-loop", *QUICK, "--junit-xml",
                              "{T}/notes.txt"), 2,
         "option --junit-xml: .*is not a stagecheck report", "--junit-xml naming a file that "
         "is not a report", prepare="notes"),
    Case("markdown-other-file", ("diff", "legacy", "single-loop", *QUICK, "--markdown",
                                 "{T}/notes.txt"), 2,
         "option --markdown: .*is not a stagecheck report", "--markdown naming a file that "
         "is not a report", prepare="notes"),
    Case("bench-json-other-file", ("bench", "legacy", "single-loop", "--json",
                                   "{T}/notes.txt"), 2,
         "option --json: .*is not a stagecheck report", "bench --json naming a file that is "
         "not a report", prepare="notes"),
    Case("mutants-json-schema", ("mutants", "legacy", "--json",
                                 f"{ROOT}/tests/user_schema/attention_lengths_schema.py"), 2,
         r"is not a stagecheck report \(a Python source file\)", "mutants --json naming a "
         "schema file of the repository"),
    Case("json-empty-init", ("spec", "legacy", *QUICK, "--json", "{T}/__init__.py"), 2,
         r"option --json: .*__init__\.py' exists and is not a stagecheck report \(a Python "
         "source file\\)", "--json naming an empty __init__.py (was: overwritten: an empty "
         "file counted as a report)", prepare="empty_init"),
    Case("json-empty", ("spec", "legacy", *QUICK, "--json", ""), 2,
         "option --json: --json was given an empty path", "--json '' (was: ignored)"),
    Case("junit-empty", ("spec", "legacy", *QUICK, "--junit-xml", ""), 2,
         "option --junit-xml: --junit-xml was given an empty path", "--junit-xml ''"),
    Case("save-dir-empty", ("spec", "legacy", *QUICK, "--save-dir", ""), 2,
         "option --save-dir: --save-dir was given an empty path",
         "--save-dir '' (was: a traceback)"),
    Case("save-dir-dangling", ("spec", "legacy", *QUICK, "--save-dir", "{T}/dangling"), 2,
         "option --save-dir: .*symbolic link to .*which does not exist",
         "--save-dir naming a dangling link: refused before the run", prepare="dangling"),
    Case("json-fifo", ("diff", "legacy", "single-loop", *QUICK, "--json", "{T}/fifo.json"), 2,
         "no process read the FIFO within", "--json naming a FIFO no process reads (was: a "
         "run that never ends)", prepare="fifo_json"),
    Case("cwd-deleted", ("spec", "legacy"), 2, fragment(messages.CWD_GONE),
         "run from a folder that was deleted (was: a traceback)", prepare="cwd_gone"),
    Case("save-dir-swapped", ("spec", target("swaps_save_dir"), *CRASHY, "--save-dir",
                              "{T}/found"), 1, "verdict: VIOLATES",
         "the save folder is replaced by a link during the run: nothing is written through "
         "it", prepare="save_dir", env=(("HOSTILE_SAVE_DIR", "{T}/found"),),
         absent="found-elsewhere/*"),
]
STDIO_CASES = [
    Case("stdout-closed", ("diff", "legacy", "single-loop", *QUICK, "--json", "report.json"),
         2, fragment(messages.STDOUT_LOST), "stdout closed, a clean pair: the report reached "
         "no one, so exit 2, never 0 (was: exit 1, a traceback and a 'killed by SIGKILL' load "
         "message)", stdio="no-stdout"),
    Case("stdout-closed-findings", ("diff", "single-loop", BUGGY, *QUICK, "--no-kernel"), 1,
         "",
         "stdout closed, a buggy target: the exit code is the verdict's", stdio="no-stdout"),
    Case("stderr-closed", ("diff", "legacy", "single-loop", *QUICK), 0, EQUIVALENT,
         "stderr closed", stdio="no-stderr"),
    Case("stderr-closed-usage", ("spec", "legacy", "--examples", "0"), 2, "",
         "stderr closed, a usage error (was: exit 1)", stdio="no-stderr"),
    Case("stdin-closed", ("diff", "legacy", "single-loop", *QUICK), 0, EQUIVALENT,
         "stdin closed (was: exit 2 blaming the targets)", stdio="no-stdin"),
    Case("stdin-closed-file-target", ("spec", target("chdir"), *QUICK), 0, CONFORMS,
         "stdin closed, a file target", stdio="no-stdin"),
    Case("stdout-full", ("diff", "legacy", "single-loop", *QUICK), 2,
         r"could not be written to standard output \(No space left on device\)",
         "stdout on a full disk, a clean pair: exit 2, never 0 (was: exit 1 and a traceback)",
         stdio="full"),
    Case("stdout-full-findings", ("diff", "single-loop", BUGGY, *QUICK, "--no-kernel"), 1,
         r"could not be written to standard output", "stdout on a full disk, a buggy target: "
         "exit 1", stdio="full"),
]
PLUGIN = [
    Case("plugin-os-exit", ("test_plugin.py",), 1, "1 failed, 2 passed",
         "pytest: a plain-function target that calls os._exit(0) runs in a worker (was: the "
         "session ended with exit 0 after 1 of 3 tests)", program="pytest",
         prepare="plugin_exits"),
    Case("plugin-lambda", ("test_plugin.py",), 1, fragment(messages.FIXTURE_NOT_ISOLABLE),
         "pytest: a lambda target is refused with a message", program="pytest",
         prepare="plugin_lambda"),
    Case("plugin-xdist-hang-and-daemon", ("test_plugin.py", "-n", "2"), 0, "2 passed",
         "pytest -n 2: a target that zeroes its counter and one that daemonizes (was: the "
         "session hung; processes left)", program="pytest", prepare="plugin_hangs",
         env=(("HOSTILE_DIR", "{H}"),)),
]


def _replay(name: str) -> Case:
    return Case(f"replay-{name}", ("replay", f"{{T}}/replay-{name}.json"),
                REPLAY_CODE.get(name, 2),
                REPLAY_EXPECT.get(name, "is not a stagecheck replay file|cannot"),
                REPLAY_FILES[name][2], prepare="replay", absent=REPLAY_ABSENT.get(name, ""))


#: replay rows that do not exit 2: the file is fine, only its text is hostile
REPLAY_CODE = {"ansi-id": 0, "ansi-named-target": 1, "non-utf8-named-target": 1}
#: replay rows whose candidate is a copy of BUGGY under a hostile name, in the row's folder
REPLAY_NAMED = {"ansi-named-target": "evil\x1b[31m.py", "non-utf8-named-target": "b\udcfe.py"}
REPLAY_ABSENT = {"schema-inside": "schema-ran.txt"}
REPLAY_EXPECT = {
    "missing": "cannot read", "outside-target": "--baseline BASELINE --candidate CANDIDATE",
    "module-target": "--baseline BASELINE --candidate CANDIDATE",
    "outside-shim": "--shim or --schema", "capacity-huge": r"capacity=10000000",
    "deep": "nested too deeply", "fraction": r"capacity=1\.5", "num-reqs-huge": "num_reqs=",
    "long-list": "entries", "big-number": "int", "wrong-type": "TypeError",
    "ansi-target": re.escape(r"\x1b[31mlegacy"), "ansi-id": re.escape(r"\x1b]0;pwned\x07"),
    "control-id-in-scenario": "control characters",
    "schema-dict": "its field 'schema' is a dict, not str",
    "schema-list": "its field 'schema' is a list, not str",
    "schema-int": "its field 'schema' is a int, not str",
    "scenario-schema-list": "the scenario's schema is a list",
    "shims-int": "its field 'shims' is a int, not list",
    "baseline-list": "its field 'baseline' is a list, not str",
    "schema-inside": "runs none that a replay file names.*--schema",
    "fifo": r"is a FIFO \(named pipe\), not a file",
    "dev-zero": "is a character device, not a file",
    "ansi-named-target": re.escape(r"evil\x1b[31m.py::") + ".*" + re.escape(
        "verdict: DIFFERENT"),
    "non-utf8-named-target": re.escape(r"b\udcfe.py::") + ".*" + re.escape(
        "verdict: DIFFERENT"),
}
#: replay files: name -> (change to a valid file's fields, or raw text), what
REPLAY_FILES = {
    "missing": (None, None, "a replay file that does not exist"),
    "empty": (None, "", "an empty replay file"),
    "not-json": (None, "hello", "a replay file that is not JSON"),
    "binary": (None, b"\x00\xff\xfe", "a binary replay file"),
    "deep": (None, "[" * 100_000 + "]" * 100_000, "JSON nested 100,000 deep"),
    "capacity-huge": ({"capacity": 10**7}, None, "capacity 10**7 (was: 2 minutes, 2.6 GB)"),
    "fraction": ({"capacity": 1.5}, None, "a fractional capacity"),
    "num-reqs-huge": ({"num_reqs": 10**30}, None, "num_reqs 10**30"),
    "long-list": ({"req_ids": ["r"] * 10**6}, None, "a million req_ids"),
    "big-number": ({"initial_cpu": {"mamba_state_idx_buf": [10**400]}}, None,
                   "a 400-digit number"),
    "wrong-type": ({"__scenario__": [1, 2]}, None, "a scenario that is a list"),
    "outside-target": ({"candidate": f"/tmp/elsewhere-11/evil.py::{FUNC}"}, None,
                       "names a target file outside the repository"),
    "module-target": ({"candidate": "os:system"}, None, "names a module target"),
    "outside-shim": ({"shims": ["/tmp/elsewhere-11/shim.py"]}, None,
                     "names a shim outside the repository"),
    "ansi-target": ({"baseline": "\x1b[31mlegacy"}, None,
                    "a target spec with ANSI escapes (shown escaped)"),
    "ansi-id": ({"__id__": "\x1b]0;pwned\x07same_copies-1"}, None,
                "a finding id with a terminal title escape (shown escaped)"),
    "control-id-in-scenario": ({"req_ids": ["req-a\x1b[2J", "req-b", "req-c", "req-p"]}, None,
                               "a request id with control characters"),
    "schema-dict": ({"__schema__": {"a": 1}}, None,
                    "a schema that is a dict (was: a traceback)"),
    "schema-list": ({"__schema__": ["x"]}, None,
                    "a schema that is a list (was: a traceback)"),
    "schema-int": ({"__schema__": 7}, None, "a schema that is an int (was: a traceback)"),
    "scenario-schema-list": ({"schema": ["x"]}, None,
                             "a scenario whose schema is a list (was: a traceback)"),
    "shims-int": ({"shims": 7}, None, "shims that are an int"),
    "baseline-list": ({"baseline": ["legacy"]}, None, "a baseline that is a list"),
    "schema-inside": ({"__schema__": "{T}/schema_marks.py"}, None,
                      "names a schema file inside the current folder: never run in the "
                      "checker unless --schema names it (was: run)"),
    "fifo": (None, None, "a FIFO given as the replay file (was: blocked for 14 minutes)"),
    "dev-zero": (None, None, "a replay file linked to /dev/zero (was: a traceback)"),
    "ansi-named-target": ({"__candidate__": f"{{T}}/evil{{ESC}}[31m.py::{FUNC}"}, None,
                          "saved by a run on a target file whose name holds an ANSI escape "
                          "(was: the name was escaped when read, 'does not exist', exit 2)"),
    "non-utf8-named-target": ({"__candidate__": f"{{T}}/b\udcfe.py::{FUNC}"}, None,
                              "saved by a run on a target file whose name holds a byte that is "
                              "not UTF-8 (was: escaped when read, 'does not exist', exit 2)"),
}
REPLAYS = [_replay(name) for name in REPLAY_FILES]
CASES = (LOAD + TARGETS + HANGS + LEAKS + SCHEMAS + PROTOCOL_FILES + OPTIONS + OUTPUTS +
         STDIO_CASES + PLUGIN + REPLAYS)


def _valid_replay() -> dict:
    from tests.helpers import scenario
    return {"stagecheck_replay": 1, "baseline": "legacy", "candidate": "single-loop",
            "device": "cpu", "schema": None, "shims": [],
            "finding": {"id": "x", "invariant": "same_copies", "severity": "error",
                        "scenario": scenario().to_dict()}}


# ------------------------------------------------------------------------------ preparing

def _prepare_replay(case: Case, tmp: Path) -> None:
    name = case.id[len("replay-"):]
    change, text, _ = REPLAY_FILES[name]
    path = tmp / f"replay-{name}.json"
    if name == "fifo":
        os.mkfifo(path)
    elif name == "dev-zero":
        path.symlink_to("/dev/zero")
    elif name == "schema-inside":
        shutil.copy(HOSTILE / "schema_marks.py", tmp / "schema_marks.py")
    elif name in REPLAY_NAMED:
        shutil.copy(BUGGY.partition("::")[0], tmp / REPLAY_NAMED[name])
    if text is not None:
        path.write_bytes(text if isinstance(text, bytes) else text.encode())
    elif change is not None:
        doc = _valid_replay()
        for key, value in change.items():
            value = _filled(value, tmp) if isinstance(value, str) else value
            if key == "__id__":
                doc["finding"]["id"] = value
            elif key.startswith("__") and key.endswith("__") and key != "__scenario__":
                doc[key.strip("_")] = value          # a field of the file, not the scenario
            elif key == "__scenario__":
                doc["finding"]["scenario"] = value
            elif key in doc["finding"]["scenario"]:
                doc["finding"]["scenario"][key] = value
            else:
                doc[key] = value
        path.write_text(json.dumps(doc))


def _copy_plugin_module(name: str):
    def prepare(case: Case, tmp: Path) -> None:
        shutil.copy(HOSTILE / f"{name}.py", tmp / "test_plugin.py")
    return prepare


#: processes a row started to keep the CPUs busy (ended after the row)
_BUSY: list[subprocess.Popen] = []


def _busy_cpus(case: Case, tmp: Path) -> None:
    for _ in range(max(3, (os.cpu_count() or 2) + 1)):
        _BUSY.append(subprocess.Popen([sys.executable, "-c", "while True: pass"]))


def _hanging_git(case: Case, tmp: Path) -> None:
    """A 'git' earlier on PATH that never answers (a wrapper, a hook that waits)."""
    (tmp / "bin").mkdir()
    (tmp / "bin" / "git").write_text("#!/bin/sh\nsleep 1000\n")
    (tmp / "bin" / "git").chmod(0o755)


PREPARE = {
    "busy_cpus": _busy_cpus,
    "huge": lambda case, tmp: (tmp / "huge.py").write_text(
        "# padding\n" * 500_000 + f"def {FUNC}():\n    pass\n"),
    "hanging_git": _hanging_git,
    "fifo": lambda case, tmp: os.mkfifo(tmp / "fifo.py"),
    "fifo_json": lambda case, tmp: os.mkfifo(tmp / "fifo.json"),
    "fifo_trace": lambda case, tmp: os.mkfifo(tmp / "trace.fifo"),
    "dev_link": lambda case, tmp: (tmp / "dev.py").symlink_to("/dev/zero"),
    "ansi_name": lambda case, tmp: shutil.copy(HOSTILE / "chdir.py", tmp / "evil\x1b[31m.py"),
    "target_copy": lambda case, tmp: shutil.copy(HOSTILE / "chdir.py", tmp / "target.py"),
    "user_target": lambda case, tmp: shutil.copy(ROOT / "tests" / "user_schema" /
                                                 "attention_lengths.py", tmp / "target.py"),
    "stager": lambda case, tmp: shutil.copy(STAGER.partition("::")[0], tmp / "stager.py"),
    "notes": lambda case, tmp: (tmp / "notes.txt").write_text("my notes, not a report\n"),
    "empty_init": lambda case, tmp: (tmp / "__init__.py").write_text(""),
    "shadows": lambda case, tmp: [(tmp / f"{name}.py").write_text(
        f"raise RuntimeError('the {name}.py of the current folder was imported')\n")
        for name in ("numpy", "torch", "hypothesis")],
    "config_latin1": lambda case, tmp: (tmp / "pyproject.toml").write_bytes(
        "[tool.stagecheck]\nexamples = 10  # r\u00e9sum\u00e9\n".encode("latin-1")),
    "config_deep": lambda case, tmp: (tmp / "pyproject.toml").write_text(
        "[tool.stagecheck]\nexamples = " + "[" * 5000 + "]" * 5000 + "\n"),
    "config_fifo": lambda case, tmp: os.mkfifo(tmp / "pyproject.toml"),
    "config_folder": lambda case, tmp: (tmp / "pyproject.toml").mkdir(),
    "dangling": lambda case, tmp: (tmp / "dangling").symlink_to(tmp / "nowhere"),
    "save_dir": lambda case, tmp: (tmp / "found").mkdir(),
    "cwd_gone": lambda case, tmp: (tmp / "gone").mkdir(),
    "replay": _prepare_replay,
    "plugin_exits": _copy_plugin_module("plugin_exits"),
    "plugin_lambda": _copy_plugin_module("plugin_lambda"),
    "plugin_hangs": _copy_plugin_module("plugin_hangs"),
}


# ------------------------------------------------------------------------------ during a run

def _processes() -> dict[int, tuple[int, int]]:
    """pid -> (parent pid, session id) of every process (from /proc)."""
    found = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as fh:
                    stat = fh.read()
            except OSError:
                continue
            fields = stat[stat.rindex(")") + 2:].split()
            found[int(entry)] = (int(fields[1]), int(fields[3]))
    return found


def _descendants(root: int) -> set[int]:
    procs, kids = _processes(), {root}
    grew = True
    while grew:
        before = len(kids)
        kids |= {pid for pid, (ppid, _) in procs.items() if ppid in kids}
        grew = len(kids) > before
    return kids - {root}


def _cmdline(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as fh:
            return fh.read().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def _wait_for(condition, seconds: float = 120.0, every: float = 0.05):
    """Wait until ``condition()`` is true (its value), failing after ``seconds``: a test
    waits for the event it needs, never for a fixed time."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(every)
    pytest.fail(f"waited {seconds:.0f} s for {condition.__doc__ or condition}")


def _read_pipes(proc) -> tuple[list[str], list[str], list[threading.Thread]]:
    """``(stderr lines, stdout lines, readers)``: one thread per pipe reads it as it comes
    (a second reader, such as ``communicate()``, would take some of its lines); join the
    readers after the process ended."""
    lines: list[str] = []
    printed: list[str] = []
    readers = [threading.Thread(target=lambda stream=stream, into=into: into.extend(
        iter(stream.readline, "")), daemon=True)
        for stream, into in ((proc.stderr, lines), (proc.stdout, printed))]
    for reader in readers:
        reader.start()
    return lines, printed, readers


def _assert_none_outlive(seen: set[int], session: int) -> None:
    """No process of ``seen`` nor of the run's ``session`` is alive within 10 s."""
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        alive = [pid for pid, (_, sid) in _processes().items()
                 if pid in seen or sid == session]
        if not alive:
            break
        time.sleep(0.1)
    assert not alive, f"processes outlived the run: {alive}"


def _workers(proc) -> list[int]:
    return [pid for pid in _descendants(proc.pid)
            if "stagecheck.oracles.worker " in _cmdline(pid) + " "
            and "keeper.py" not in _cmdline(pid)]


def _called(tmp: Path):
    def called():
        """the target's first call (its mark file)"""
        return (tmp / "called").exists()
    return called


def _during_sigterm(proc, tmp: Path, seen: dict) -> None:
    _wait_for(_called(tmp))             # a call in progress: it sleeps for an hour
    proc.send_signal(signal.SIGTERM)


def _during_sigquit(proc, tmp: Path, seen: dict) -> None:
    _wait_for(_called(tmp))
    proc.send_signal(signal.SIGQUIT)


def _during_sigterm_after_batch(proc, tmp: Path, seen: dict) -> None:
    def second_batch():
        """the target's 18th call: the first batch (16 examples) was answered"""
        calls = tmp / "calls"
        return calls.exists() and calls.read_text().count("call") >= 18
    _wait_for(second_batch)
    proc.send_signal(signal.SIGTERM)


def _during_double_sigterm(proc, tmp: Path, seen: dict) -> None:
    _wait_for(_called(tmp))
    proc.send_signal(signal.SIGTERM)
    time.sleep(0.05)
    proc.send_signal(signal.SIGTERM)


def _during_sigterm_when_derived(proc, tmp: Path, seen: dict) -> None:
    def derived():
        """the schema's derive ran in the checker (its mark file names the checker's pid)"""
        return (tmp / f"derived-{proc.pid}").exists()
    _wait_for(derived)
    proc.send_signal(signal.SIGTERM)


def _during_kill_worker(proc, tmp: Path, seen: dict) -> None:
    _wait_for(_called(tmp))             # the worker is inside a call (it sleeps 0.3 s)
    for pid in _workers(proc):
        os.kill(pid, signal.SIGKILL)


def _during_kill9(proc, tmp: Path, seen: dict) -> None:
    def pool_and_workers():
        """two pool processes and a worker of theirs"""
        kids = _descendants(proc.pid)
        pools = [p for p in kids if "multiprocessing" in _cmdline(p)
                 and "resource_tracker" not in _cmdline(p)]
        return len(pools) >= 2 and _workers(proc)
    _wait_for(pool_and_workers, 180)
    seen["killed"] = _descendants(proc.pid)
    proc.kill()


DURING = {"sigterm": _during_sigterm, "double_sigterm": _during_double_sigterm,
          "sigquit": _during_sigquit,
          "sigterm_after_batch": _during_sigterm_after_batch,
          "kill_worker": _during_kill_worker, "kill9": _during_kill9,
          "sigterm_when_derived": _during_sigterm_when_derived}


# ------------------------------------------------------------------------------ the rows

def _plugin_args() -> list[str]:
    for ep in entry_points(group="pytest11"):
        if ep.value == "stagecheck.oracles.pytest_plugin":
            return ["-p", ep.name]
    return ["-p", "stagecheck.oracles.pytest_plugin"]


def _argv(case: Case, args: list[str]) -> list[str]:
    if case.program == "pytest":
        autoload = ["-p", "xdist.plugin", "-p", "hypothesispytest"] \
            if os.environ.get("PYTEST_DISABLE_PLUGIN_AUTOLOAD") else []
        return [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *autoload,
                *_plugin_args(), *args]
    return [sys.executable, "-m", "stagecheck", *args]


def _stdio(case: Case):
    """(stdin, stdout, stderr, the descriptor to close in the child, files to close)."""
    if case.stdio == "full":
        full = open("/dev/full", "w")
        return subprocess.DEVNULL, full, subprocess.PIPE, None, [full]
    closed = {"no-stdout": 1, "no-stderr": 2, "no-stdin": 0}.get(case.stdio)
    stdin = subprocess.PIPE if closed == 0 else subprocess.DEVNULL
    return stdin, subprocess.PIPE, subprocess.PIPE, closed, []


def _run_case(case: Case, tmp: Path, args: list[str], marker: str, seen: dict):
    env = {**os.environ, "PYTHONPATH": str(ROOT), "STAGECHECK_HOSTILE_ROW": marker,
           **{k: _filled(v, tmp) for k, v in case.env}}
    cwd = tmp
    if case.prepare == "cwd_gone":
        cwd = tmp / "gone"
    stdin, stdout, stderr, closed, opened = _stdio(case)

    def child_setup() -> None:
        # as a terminal starts a command: a background job of a script (how CI may run
        # this suite) inherits SIGQUIT ignored, and stagecheck keeps what it inherits
        signal.signal(signal.SIGQUIT, signal.SIG_DFL)
        if case.prepare == "cwd_gone":
            os.rmdir(cwd)                   # the folder the command runs in is deleted
        if closed is not None:
            os.close(closed)

    proc = subprocess.Popen(_argv(case, args), cwd=cwd, env=env, stdin=stdin, stdout=stdout,
                            stderr=stderr, preexec_fn=child_setup)
    try:
        if case.during:
            DURING[case.during](proc, tmp, seen)
        out, err = proc.communicate(timeout=300)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        for fh in opened:
            fh.close()
    decode = (lambda b: b.decode("utf-8", "replace") if b else "")
    return proc.returncode, decode(out), decode(err)


def _marked(marker: str) -> list[tuple[int, str]]:
    """Every process whose environment holds ``marker`` (a row's processes), with its
    command line."""
    found = []
    needle = f"STAGECHECK_HOSTILE_ROW={marker}".encode()
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/environ", "rb") as fh:
                    if needle in fh.read():
                        found.append((int(entry), _cmdline(int(entry))))
            except OSError:
                pass
    return found


def _with_json(case: Case, args: list[str]) -> list[str]:
    if case.program == "stagecheck" and args[0] in ("diff", "spec", "symbolic", "mutants") \
            and "--frobnicate" not in args and "--json" not in args and not case.stdio:
        return args + ["--json", "report.json"]
    return args


#: the rows that take longest, slowest first (measured with ``--durations=0`` at 3fc13d8:
#: deadlines on the wall clock, a fresh worker with torch for each crash its shrinking
#: tries, pytest sessions of the plugin, campaigns that are signalled mid-run): run first,
#: so that under ``-n 2`` neither process is left with one of them at the end. xdist
#: (``--dist load``) hands each process a run of consecutive tests at the start, then the
#: next ones as it needs them: the rest follow in the table's order, its cheapest parts
#: (options, outputs, standard descriptors, replay files: a usage error or a small run
#: each) last, so the two processes end within a second or two of each other
SLOW = ("plugin-os-exit", "deletes_modules", "mutants-kill-9", "protocol-patches-torch",
        "plugin-xdist-hang-and-daemon", "schema-derive-raises-rarely", "shared_memory",
        "replay-non-utf8-named-target", "protocol-leaves-threads", "protocol-check-blocks-in-c",
        "schema-column-wrong-rarely", "protocol-converts-the-limit",
        "protocol-swallows-the-limit", "mutants-system-exit", "schema-build-exits-rarely",
        "replay-ansi-named-target", "bench-deletes-modules", "stops_mid_answer",
        "protocol-takes-the-signal", "bench-sigterm", "pause_spins", "mutants-daemonizes",
        "timeout-short-first-torch-use", "schema-build-raises-rarely",
        "protocol-check-ignores-the-signal", "symbolic-deletes-modules",
        "timeout-short-own-torch-use", "bench-baseline-spins", "protocol-check-hang",
        "gc_callback_block", "stops_after", "protocol-target-load-exit", "busy-cpus",
        "diff-raises_sigint", "diff-sigterm-keeps-finding", "diff-timer_exits_after",
        "bench-hangs", "stops_itself", "catches_base_exception", "json-fifo",
        "schema-derive-sleeps", "load_time_setprofile")
#: the table's parts whose rows each take a usage error or a small run (run last)
CHEAP = {case.id for case in OPTIONS + OUTPUTS + STDIO_CASES + REPLAYS}
RUN_ORDER = sorted(CASES, key=lambda case: (SLOW.index(case.id) if case.id in SLOW else
                                            len(SLOW) + (case.id in CHEAP)))


def test_sigterm_to_mutants_with_jobs_ends_every_child_and_saves_the_partial_matrix(tmp_path):
    """SIGTERM to ``stagecheck mutants --jobs 2``: the pool processes, the workers they
    started (sessions of their own) and the resource tracker all end with the parent; the
    mutants finished so far are listed and saved."""
    # --budget 10: the signal follows the first mutant's line, which came after 26.7 s (14.6
    # CPU s) with --budget 300, 16.3 s (9.4 CPU s) with 10; 67 mutants still take far longer
    proc = subprocess.Popen([sys.executable, "-m", "stagecheck", "mutants", "legacy", "--jobs",
                             "2", "--budget", "10", "--json", "m.json"], cwd=tmp_path,
                            env={**os.environ, "PYTHONPATH": str(ROOT)},
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    lines, printed, readers = _read_pipes(proc)
    seen: set[int] = set()

    def one_mutant_finished():
        """a mutant's line of the matrix on stderr (the event the signal must follow)"""
        seen.update(_descendants(proc.pid))
        return (any(re.match(r"\[\d+/\d+\] m\d+ ", line) for line in lines)
                or proc.poll() is not None)      # an early end is told below, not waited
    _wait_for(one_mutant_finished, 600)     # however busy the CPUs: the event, not a time
    assert proc.poll() is None, ("the campaign ended before the signal; give it more "
                                 "budget\n" + "".join(lines)[-2000:])
    assert len(seen) >= 3           # two pool processes and the workers they started
    proc.send_signal(signal.SIGTERM)
    proc.wait(timeout=120)
    for reader in readers:
        reader.join(timeout=30)
    out, err = "".join(printed), "".join(lines)
    assert proc.returncode == 143, err[-2000:]
    assert "Traceback" not in out + err
    assert "interrupted by SIGTERM" in err
    document = json.loads((tmp_path / "m.json").read_text())
    assert document["verdict"] == "interrupted"
    finished = [line for line in err.splitlines() if re.match(r"\[\d+/\d+\] m\d+ ", line)]
    assert finished, "no mutant finished before the signal"
    assert len(document["results"]) == len(finished)     # the partial matrix, saved
    _assert_none_outlive(seen, proc.pid)


def _check_row_specifics(case: Case, tmp: Path, seen: dict, stdout: str) -> None:
    if case.id == "diff-sigterm":
        # within the grace, not at the call's deadline (3 x 60 s on the wall clock): a
        # call waited out would be a hang finding; the report was written with none
        report = json.loads((tmp / "report.json").read_text())
        assert report["verdict"] == "interrupted" and report["findings"] == [], report
    if case.id in ("diff-double-sigterm", "protocol-double-sigterm"):
        assert json.loads((tmp / "report.json").read_text())["verdict"] == "interrupted"
    if case.id == "stdout-closed":
        assert json.loads((tmp / "report.json").read_text())["verdict"] == "equivalent"
    if case.id == "save-dir-swapped":
        assert list((tmp / "found-moved").glob("*.json")), "the findings were not saved"
        assert not list((tmp / "found-elsewhere").iterdir()), "written through the link"
    if case.id == "schema-umask":      # the schema's umask is not the outputs' mode
        assert os.stat(tmp / "report.json").st_mode & 0o600 == 0o600
    if case.id == "schema-chdir":      # written where asked, by this run
        assert json.loads((tmp / "report.json").read_text())["verdict"] == "equivalent"
    if case.id == "schema-writes-fd1":     # stdout holds the document alone
        assert json.loads(stdout)["verdict"] == "equivalent"
    if case.id == "killed-from-outside":
        assert "no error finding" in stdout.lower() or EQUIVALENT in stdout


def test_load_time_code_runs_in_the_worker_not_the_checker(tmp_path):
    """A class body, run when the file is loaded, runs in a worker process: it records
    its process id, which is not the checker's."""
    args = ["spec", target("load_time_class_body").replace("{H}", str(HOSTILE)), *QUICK,
            "--save-dir", str(tmp_path / "found")]
    proc = subprocess.Popen([sys.executable, "-m", "stagecheck", *args], cwd=tmp_path,
                            env={**os.environ, "PYTHONPATH": str(ROOT)},
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    out, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, out + err
    ran_in = int((tmp_path / "class-body-ran.txt").read_text())
    assert ran_in != proc.pid


def _stagecheck(args: list[str], cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "stagecheck", *args], cwd=cwd,
                          env={**os.environ, "PYTHONPATH": str(ROOT)}, capture_output=True,
                          text=True, errors="replace", timeout=300, stdin=subprocess.DEVNULL)


def test_a_link_at_a_findings_path_does_not_redirect_the_write(tmp_path):
    """A committed symlink at a finding's deterministic path: the replay file replaces
    the link, the file it pointed to stays as it was."""
    victim = tmp_path / "victim.txt"
    victim.write_text("precious")
    found = tmp_path / "found"
    args = ["diff", "single-loop", f"{ROOT}/tests/targets/buggy_copy_one_slot_short.py::{FUNC}",
            *CRASHY, "--save-dir", str(found)]
    first = _stagecheck(args, tmp_path)
    assert first.returncode == 1, first.stdout + first.stderr
    saved = sorted(found.glob("*.json"))
    assert saved
    for path in saved:
        path.unlink()
        path.symlink_to(victim)
    again = _stagecheck(args, tmp_path)
    assert again.returncode == 1, again.stdout + again.stderr
    assert victim.read_text() == "precious"
    for path in saved:
        assert not path.is_symlink() and json.loads(path.read_text())["finding"]


def test_a_stopped_worker_holds_no_write_and_no_read_of_the_checker():
    """A worker stopped (SIGSTOP) between two requests, sent a request larger than its
    pipe takes: the send returns at once (was: the checker waited in the write for ever,
    which ``stops_after`` showed under load) and the wait for the answer ends at the
    call's deadline, as a hang. The half-written answer is the ``stops_mid_answer`` row."""
    from stagecheck.oracles.worker.pool import WorkerEnded, WorkerPool
    pool = WorkerPool()
    outcome: dict = {}

    def big_call() -> None:
        try:
            outcome["answer"] = pool.call("builtins", "len", "x" * 4_000_000, deadline=0.3)
        except WorkerEnded as ended:
            outcome["ended"] = ended
    try:
        assert pool.call("builtins", "len", "abc") == 3       # a worker, idle
        os.kill(pool._process.pid, signal.SIGSTOP)
        caller = threading.Thread(target=big_call, daemon=True)
        caller.start()
        caller.join(120)            # a cap against a hang only: the event is the answer
        assert not caller.is_alive(), "the checker waits for a stopped worker"
        assert outcome["ended"].hung, outcome
        assert pool.call("builtins", "len", "abcd") == 4      # a fresh worker
    finally:
        pool.discard()              # killed: no "stop" request to write


def test_the_reliability_doc_lists_every_case():
    text = DOC.read_text()
    text = text[text.index("## The hostile inputs"):text.index("## Trust boundaries")]
    rows = {m.group(1) for m in re.finditer(r"^\| `([^`]+)` \|", text, re.M)}
    assert rows == {c.id for c in CASES}
    assert len(CASES) >= 150
    assert set(SLOW) <= rows and len(RUN_ORDER) == len(CASES)


@pytest.mark.parametrize("redirect", [">&-", ">/dev/full"])
def test_json_to_a_closed_or_full_stdout_is_a_missing_output_exit_2(redirect, tmp_path):
    """``--json -`` asks for the document on stdout: a closed stdout (the process gets
    /dev/null there) or a full disk loses it, so a clean verdict is exit 2, not 0 (a reader
    that left, ``| head``, is the reader's choice and keeps the verdict's code)."""
    if redirect == ">/dev/full" and not os.path.exists("/dev/full"):
        pytest.skip("no /dev/full here")
    command = (f"{sys.executable} -m stagecheck diff legacy single-loop --examples 20 "
               f"--no-save --json - {redirect}")
    proc = subprocess.run(command, shell=True, cwd=tmp_path, capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 2, proc.stderr
    assert "option --json: " + messages.REPORT_NOT_WRITTEN[0].format(
        value="-", error="")[:-2] in proc.stderr
    assert "the verdict was EQUIVALENT" in proc.stderr and "Traceback" not in proc.stderr


def test_what_protocol_code_prints_in_the_checker_leaves_the_json_on_stdout_whole(tmp_path):
    # a --protocol file printing at import and in its check once corrupted `--json -`
    proc = subprocess.run(
        [sys.executable, "-m", "stagecheck", "spec", STAGER, "--protocol",
         str(HOSTILE / "protocol_prints.py"), "--examples", "5", "--json", "-", "--save-dir",
         str(tmp_path)], capture_output=True, text=True, timeout=300, cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert json.loads(proc.stdout)["candidate"].endswith("::TokenStager")
    assert "printed at import" in proc.stderr and "printed by the check" in proc.stderr


# the table last in the module: the tests above (two of them take seconds) start first, and
# the cheapest rows end the run (RUN_ORDER)
@pytest.fixture(scope="module", autouse=True)
def _bytecode_once():
    """The project's modules compiled once, into their ``__pycache__`` folders (ignored by
    git), before the rows run: every row starts two to a dozen Python processes (the
    command, its workers, a fresh worker after each crash or hang), and under
    ``PYTHONDONTWRITEBYTECODE=1`` (set on this project's machines) each of them compiled
    the 35,000 lines it imports again, about 0.3 s of CPU time per process. What a row
    runs and what it checks are unchanged: Python loads the same source either way."""
    for folder in ("stagecheck", "oracles", "spec", "impl"):
        compileall.compile_dir(ROOT / folder, quiet=2)


@pytest.mark.parametrize("case", RUN_ORDER, ids=[c.id for c in RUN_ORDER])
def test_hostile_input(case: Case, tmp_path):
    if case.prepare:
        PREPARE[case.prepare](case, tmp_path)
    (tmp_path / "report.json").write_text(OLD_REPORT)
    args = _with_json(case, case.args(tmp_path))
    if case.program == "stagecheck" and args[0] in ("diff", "spec") and "--save-dir" not in args:
        args += ["--save-dir", str(tmp_path / "found")]
    marker, seen = uuid.uuid4().hex, {}
    try:
        code, stdout, stderr = _run_case(case, tmp_path, args, marker, seen)
    finally:
        while _BUSY:
            busy = _BUSY.pop()
            busy.kill()
            busy.wait()
    out = stdout + stderr
    assert code == case.code, out[-3000:]
    assert re.search(case.expect, out, re.S), out[-3000:]
    assert "Traceback" not in out, out[-3000:]
    assert len(stdout) < 1_000_000             # nothing a target prints reaches it
    assert "\x1b" not in out and "\x00" not in out   # what a target chose is escaped
    report = (tmp_path / "report.json").read_text()
    if code == 2 and messages.STDOUT_LOST not in out:   # failed (not clean and unheard)
        assert report == OLD_REPORT, "a failed run touched an earlier report"
    elif "--json" in args and "report.json" in args:
        document = json.loads(report)                         # written whole, where asked
        assert document.get("tool") == "stagecheck" or "stagecheck_protocol" in document
    if case.absent:
        assert not list(tmp_path.glob(case.absent)), f"{case.absent} exists"
    _check_row_specifics(case, tmp_path, seen, stdout)
    deadline = time.monotonic() + 1.0
    left = _marked(marker)
    while left and time.monotonic() < deadline:
        time.sleep(0.05)
        left = _marked(marker)
    assert not left, f"processes of the run outlived it by a second: {left}"
