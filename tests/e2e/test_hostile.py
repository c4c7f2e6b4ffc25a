"""Hostile inputs (issue 11): targets that exit, crash, hang, fork, patch the checker or
print megabytes; files that are missing, empty, huge, binary or folders; bad options;
malformed and untrusted replay files. Each row runs the command line in a subprocess and
names its exit code and what the output must say; no row may show a traceback, and a
``--json`` report an earlier run wrote stays intact when a row exits 2.

``docs/reliability.md`` lists this table (``test_the_reliability_doc_lists_every_case``
keeps them in step).
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from stagecheck.oracles import messages

ROOT = Path(__file__).resolve().parents[2]
HOSTILE = ROOT / "tests" / "targets" / "hostile"
FUNC = "stage_postprocess_inputs_to_gpu"
DOC = ROOT / "docs" / "reliability.md"
#: a small campaign; a target that crashes or hangs on every call is still shrunk, so those
#: rows run fewer examples without the out-of-contract stream and the kernel oracle
QUICK = ["--examples", "20", "--timeout", "1"]
CRASHY = ["--examples", "3", "--timeout", "1", "--no-out-of-contract", "--no-kernel"]
#: targets that stage nothing: the out-of-contract stream would reach a kernel-impact
#: probe that fails on values that do not fit int32 (oracles/kernel, reported separately)
IN_CONTRACT = ["--examples", "20", "--timeout", "1", "--no-out-of-contract"]
OLD_REPORT = '{"written by": "an earlier run"}\n'


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

    def args(self, tmp: Path) -> list[str]:
        return [a.replace("{H}", str(HOSTILE)).replace("{T}", str(tmp)) for a in self.argv]


def target(name: str) -> str:
    return f"{{H}}/{name}.py::{FUNC}"


def spec(name, code, expect, what, crashy=False, options=None):
    options = options or (CRASHY if crashy else QUICK)
    return Case(name, ("spec", target(name), *options), code, expect, what)


def diff(name, code, expect, what, crashy=False, options=None):
    options = options or (CRASHY if crashy else QUICK)
    return Case(f"diff-{name}", ("diff", "single-loop", target(name), *options), code, expect,
                what)


HANG = fragment(messages.HANG)
CRASH = "the call never returned: "
LOAD = [
    Case("missing-file", ("spec", f"{{T}}/nope.py::{FUNC}"), 2,
         fragment(messages.TARGET_FILE_MISSING), "a file target that does not exist"),
    spec("empty", 2, fragment(messages.TARGET_FUNCTION_MISSING), "an empty file"),
    spec("binary", 2, fragment(messages.TARGET_BINARY), "a binary file"),
    Case("huge", ("spec", f"{{T}}/huge.py::{FUNC}"), 2, fragment(messages.TARGET_TOO_LARGE),
         "a 5 MB file"),
    spec("syntax_error", 2, "is not valid Python", "a syntax error"),
    spec("wrong_signature", 2, "cannot take the arguments of schema", "too few parameters"),
    spec("not_a_function", 2, fragment(messages.TARGET_FUNCTION_MISSING),
         "the name is a constant"),
    spec("undeclared_latin1", 2, "cannot be read as Python source",
         "Latin-1 bytes without a coding declaration"),
    Case("folder", ("spec", f"{{H}}::{FUNC}"), 2, fragment(messages.TARGET_IS_FOLDER),
         "a folder given as a file target"),
    Case("git-tree", ("spec", f"git:HEAD:{ROOT}/tests/targets::{FUNC}"), 2,
         "is a folder \\(a git tree\\)", "a git tree given as a file target"),
    Case("git-bad-revision", ("spec", f"git:no-such-rev-11:{ROOT}/impl/staging_legacy.py::{FUNC}"),
         2, "no-such-rev-11", "an unknown git revision"),
    Case("missing-module", ("spec", "no_such_module_11:f"), 2, "no_such_module_11",
         "a module that does not exist"),
    Case("bad-spec", ("spec", f"{{H}}/empty.py::1bad"), 2, "neither a Python identifier",
         "a function name that is not an identifier"),
    spec("load_time_exit", 2, "ended the worker process: exited the interpreter with code 0",
         "a constant's initialiser calls os._exit(0) at load"),
    spec("load_time_default_arg", 2, "raised SystemExit: 5",
         "a default argument calls sys.exit(5) at load"),
    spec("latin1_declared", 0, "verdict: CONFORMS", "a PEP 263 Latin-1 file"),
    spec("utf8_bom", 0, "verdict: CONFORMS", "a file starting with a UTF-8 BOM"),
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
    spec("memory_loop", 1, CRASH + r"exceeded \d+ MiB", "allocates in a loop", crashy=True),
    spec("ignores_sigalrm", 1, HANG, "ignores SIGALRM and spins", crashy=True),
    spec("catches_base_exception", 1, HANG, "catches BaseException in an endless loop",
         crashy=True),
    spec("sleeps", 1, HANG, "sleeps for an hour", crashy=True),
    spec("alarm", 1, f"{HANG}|killed by SIGALRM", "arms SIGALRM itself", crashy=True),
    spec("nondaemon_thread", 0, "verdict: CONFORMS", "leaves a non-daemon thread running"),
    spec("segfault", 1, CRASH + "killed by SIGSEGV", "ctypes.string_at(0)", crashy=True),
    spec("sigkill_self", 1, CRASH + "killed by SIGKILL", "sends itself SIGKILL", crashy=True),
    spec("killpg", 1, CRASH + "killed by SIGKILL", "kills its process group", crashy=True),
    spec("recursion", 1, "raised RecursionError", "infinite recursion"),
    spec("self_referencing_output", 1, "cannot read back",
         "self-referencing lists in its inputs and buffers"),
    spec("repr_raises", 1, r"KeyError: <str\(\) of the exception raised",
         "an exception holding an object whose repr raises"),
    spec("str_raises", 1, r"Bad: <str\(\) of the exception raised",
         "an exception whose __str__ raises"),
    spec("gpu_garbage", 1, "gpu", "ctx.<buf>.gpu = 'garbage'"),
    spec("np_garbage", 1, "cannot read back|np", "ctx.<buf>.np = None"),
    spec("closes_stdout", 1, "raised OSError", "closes fd 1"),
    spec("chdir", 0, "verdict: CONFORMS", "os.chdir('/') (outputs stay where asked)"),
    spec("replaces_stdout", 0, "verdict: CONFORMS", "sys.stdout = sys.stderr = None"),
    spec("prints_megabytes", 0, "verdict: CONFORMS", "prints 8 MB (none of it shows)"),
    spec("spawns_process", 0, "verdict: CONFORMS", "spawns a process (killed with its worker)"),
    spec("writes_file", 0, "verdict: CONFORMS", "writes a file in the current folder"),
    spec("writes_pipe", 1, CRASH + "wrote into stagecheck's pipe",
         "writes garbage into every inherited fd (the pipe and the position counter)", crashy=True),
    spec("forks", 0, "verdict: CONFORMS", "forks; the child would answer too"),
    spec("reads_stdin", 1, "raised EOFError", "reads standard input"),
    spec("ansi_exception", 1, re.escape(r"KeyError: '\x1b[31mred"),
         "an exception message with ANSI escapes and NUL (shown escaped)"),
    spec("huge_exception", 1, r"\.\.\. \(\d+ more\)", "a 10 MB exception message (cut)"),
    spec("mutates_inputs", 1, "was mutated by the call", "clears its input dicts"),
    spec("returns_generator", 1, r"copied 0 time\(s\)", "a generator function (runs nothing)",
         options=IN_CONTRACT),
    Case("mutants-system-exit", ("mutants", target("system_exit"), "--oracles",
                                 "spec,differential", "--budget", "20"), 1,
         r"control \(the unmutated source.*: spec 1 error finding",
         "mutants of a target that raises SystemExit (was: exit 0; kills by oracles that "
         "fail on the unmutated source prove nothing)"),
    Case("bench-os-exit", ("bench", "single-loop", target("os_exit_0")), 2,
         r"a target ended the bench's worker \(exited the interpreter with code 0\)",
         "bench of a target that calls os._exit(0)"),
    Case("symbolic-system-exit", ("symbolic", "single-loop", target("system_exit"),
                                  "--max-paths", "20"), 2,
         "ended the exploration's worker \\(exited the interpreter with code 0\\)",
         "symbolic: raise SystemExit (was: exit 0; now nothing is checked, said so)"),
]
OPTIONS = [
    Case("examples-0", ("spec", "legacy", "--examples", "0"), 2, "--examples", "--examples 0"),
    Case("examples-huge", ("spec", "legacy", "--examples", str(10**23)), 2,
         "larger than 10,000,000", "--examples 10**23"),
    Case("examples-word", ("spec", "legacy", "--examples", "many"), 2, "--examples",
         "--examples many"),
    Case("capacity-huge", ("spec", "legacy", "--max-capacity", "1000000"), 2,
         "option --max-capacity: '1000000' is larger than 4,096.*vLLM batches", "--max-capacity 1000000 (was: a traceback after 84 s)"),
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
    Case("missing-argument", ("diff", "legacy"), 2, "required", "diff without CANDIDATE"),
    Case("kernel-mode", ("spec", "legacy", "--kernel", "sometimes"), 2,
         "option --kernel: .sometimes. is not one of auto, always, off",
         "--kernel sometimes"),
]


def _replay(name: str, change: dict | None, text: str | None = None, what: str = "") -> Case:
    return Case(f"replay-{name}", ("replay", f"{{T}}/replay-{name}.json"),
                REPLAY_CODE.get(name, 2),
                REPLAY_EXPECT.get(name, "is not a stagecheck replay file|cannot"), what)


#: replay rows that do not exit 2: the file is fine, only its text is hostile
REPLAY_CODE = {"ansi-id": 0}


REPLAY_EXPECT = {
    "missing": "cannot read", "outside-target": "--baseline BASELINE --candidate CANDIDATE",
    "module-target": "--baseline BASELINE --candidate CANDIDATE",
    "outside-shim": "--shim or --schema", "capacity-huge": r"capacity=10000000",
    "deep": "nested too deeply", "fraction": r"capacity=1\.5", "num-reqs-huge": "num_reqs=",
    "long-list": "entries", "big-number": "int", "wrong-type": "TypeError",
    "ansi-target": re.escape(r"\x1b[31mlegacy"), "ansi-id": re.escape(r"\x1b]0;pwned\x07"),
    "control-id-in-scenario": "control characters",
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
}
REPLAYS = [_replay(name, change, text, what)
           for name, (change, text, what) in REPLAY_FILES.items()]
CASES = LOAD + TARGETS + OPTIONS + REPLAYS


def _valid_replay() -> dict:
    from tests.helpers import scenario
    return {"stagecheck_replay": 1, "baseline": "legacy", "candidate": "single-loop",
            "device": "cpu", "schema": None, "shims": [],
            "finding": {"id": "x", "invariant": "same_copies", "severity": "error",
                        "scenario": scenario().to_dict()}}


def _prepare(case: Case, tmp: Path) -> None:
    if case.id == "huge":
        (tmp / "huge.py").write_text("# padding\n" * 500_000 + f"def {FUNC}():\n    pass\n")
    if case.id.startswith("replay-"):
        name = case.id[len("replay-"):]
        change, text, _ = REPLAY_FILES[name]
        path = tmp / f"replay-{name}.json"
        if text is not None:
            path.write_bytes(text if isinstance(text, bytes) else text.encode())
        elif change is not None:
            doc = _valid_replay()
            for key, value in change.items():
                if key == "__id__":
                    doc["finding"]["id"] = value
                elif key == "__scenario__":
                    doc["finding"]["scenario"] = value
                elif key in doc["finding"]["scenario"]:
                    doc["finding"]["scenario"][key] = value
                else:
                    doc[key] = value
            path.write_text(json.dumps(doc))


def _run(args: list[str], cwd: Path, timeout: float = 300) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-m", "stagecheck", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, errors="replace", timeout=timeout,
                          stdin=subprocess.DEVNULL)


def _with_json(case: Case, args: list[str]) -> list[str]:
    if args[0] in ("diff", "spec", "symbolic", "mutants") and "--frobnicate" not in args:
        return args + ["--json", "report.json"]
    return args


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_hostile_input(case: Case, tmp_path):
    _prepare(case, tmp_path)
    (tmp_path / "report.json").write_text(OLD_REPORT)
    args = _with_json(case, case.args(tmp_path))
    if args[0] in ("diff", "spec"):
        args += ["--save-dir", str(tmp_path / "found")]
    started = time.monotonic()
    proc = _run(args, tmp_path)
    seconds = time.monotonic() - started
    out = proc.stdout + proc.stderr
    assert proc.returncode == case.code, out[-3000:]
    assert re.search(case.expect, out), out[-3000:]
    assert "Traceback" not in out, out[-3000:]
    assert len(proc.stdout) < 1_000_000             # nothing a target prints reaches it
    assert "\x1b" not in out and "\x00" not in out   # what a target chose is escaped
    report = (tmp_path / "report.json").read_text()
    if proc.returncode == 2:
        assert report == OLD_REPORT, "a failed run touched an earlier report"
    elif "--json" in args:
        assert json.loads(report)["command"] == args[0]  # written whole, where it was asked
    if case.id == "spawns_process":
        assert not _alive_with_cmdline(b"sleep\x003601\x00")
    if case.id == "nondaemon_thread":
        assert seconds < 120


def _alive_with_cmdline(cmdline: bytes) -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/cmdline", "rb") as fh:
                    if fh.read() == cmdline:
                        found.append(int(entry))
            except OSError:
                pass
    return found


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


def test_a_link_at_a_findings_path_does_not_redirect_the_write(tmp_path):
    """A committed symlink at a finding's deterministic path: the replay file replaces
    the link, the file it pointed to stays as it was."""
    victim = tmp_path / "victim.txt"
    victim.write_text("precious")
    found = tmp_path / "found"
    args = ["diff", "single-loop", f"{ROOT}/tests/targets/buggy_copy_one_slot_short.py::{FUNC}",
            *CRASHY, "--save-dir", str(found)]
    first = _run(args, tmp_path)
    assert first.returncode == 1, first.stdout + first.stderr
    saved = sorted(found.glob("*.json"))
    assert saved
    for path in saved:
        path.unlink()
        path.symlink_to(victim)
    again = _run(args, tmp_path)
    assert again.returncode == 1, again.stdout + again.stderr
    assert victim.read_text() == "precious"
    for path in saved:
        assert not path.is_symlink() and json.loads(path.read_text())["finding"]


def test_the_reliability_doc_lists_every_case():
    text = DOC.read_text()
    text = text[text.index("## The hostile inputs"):text.index("## Trust boundaries")]
    rows = {m.group(1) for m in re.finditer(r"^\| `([^`]+)` \|", text, re.M)}
    assert rows == {c.id for c in CASES}
    assert len(CASES) >= 60


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


def test_sigterm_to_mutants_with_jobs_ends_every_child_and_saves_the_partial_matrix(tmp_path):
    """SIGTERM to ``stagecheck mutants --jobs 2``: the pool processes, the workers they
    started (sessions of their own) and the resource tracker all end with the parent; the
    mutants finished so far are listed and saved."""
    proc = subprocess.Popen([sys.executable, "-m", "stagecheck", "mutants", "legacy", "--jobs",
                             "2", "--budget", "300", "--json", "m.json"], cwd=tmp_path,
                            env={**os.environ, "PYTHONPATH": str(ROOT)},
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    seen: set[int] = set()
    started = time.monotonic()
    while time.monotonic() - started < 20 and proc.poll() is None:
        seen |= _descendants(proc.pid)
        time.sleep(0.2)
    assert proc.poll() is None, "the campaign ended before the signal; give it more budget"
    assert len(seen) >= 3           # two pool processes and the workers they started
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 143, err[-2000:]
    assert "Traceback" not in out + err
    assert "interrupted by SIGTERM" in err
    document = json.loads((tmp_path / "m.json").read_text())
    assert document["verdict"] == "interrupted"
    finished = [line for line in err.splitlines() if re.match(r"\[\d+/\d+\] m\d+ ", line)]
    assert finished, "no mutant finished before the signal"
    assert len(document["results"]) == len(finished)     # the partial matrix, saved
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        alive = [pid for pid, (_, sid) in _processes().items()
                 if pid in seen or sid == proc.pid]
        if not alive:
            break
        time.sleep(0.1)
    assert not alive, f"processes outlived the run: {alive}"
