"""Verdicts that hold wherever stagecheck runs (issue 10): closed pipes, signals, partial
files, replay files of several runs, engine code with helpers, symbolic sampling, CI
clones, option values, outputs that cannot be written. Each test runs the command line
in a subprocess, as CI does.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import signal
import subprocess
import sys
import textwrap
import threading
from pathlib import Path
from xml.etree import ElementTree as ET

import pytest

from stagecheck.oracles import messages

ROOT = Path(__file__).resolve().parents[2]
FUNC = "stage_postprocess_inputs_to_gpu"
BUGGY = f"{ROOT / 'tests' / 'targets' / 'buggy_swapped_views.py'}::{FUNC}"
SINGLE_LOOP_SOURCE = (ROOT / "impl" / "staging_single_loop.py").read_text()
COMMAND = f"{shlex.quote(sys.executable)} -m stagecheck"


def stagecheck(*args, cwd=ROOT, timeout=600) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "stagecheck", *map(str, args)], cwd=cwd,
                          capture_output=True, text=True, timeout=timeout)


def junit(path: Path) -> ET.Element:
    return ET.parse(path).getroot()


def signal_when(proc: subprocess.Popen, pattern: str, sig) -> tuple[str, str]:
    """Send ``sig`` once a line of the run's stderr matches ``pattern`` (the event: a
    progress line that says the search is under way), then wait for the run to end;
    ``(stdout, stderr)``. A test waits for the event, never for a time (the cap only
    ends a run that never shows it)."""
    got: dict[str, list[str]] = {"out": [], "err": []}
    seen = threading.Event()

    def read(stream, into: list[str], watch: bool) -> None:
        for line in iter(stream.readline, ""):
            into.append(line)
            if watch and re.search(pattern, line):
                seen.set()
    readers = [threading.Thread(target=read, args=(proc.stdout, got["out"], False), daemon=True),
               threading.Thread(target=read, args=(proc.stderr, got["err"], True), daemon=True)]
    for reader in readers:
        reader.start()
    try:
        assert seen.wait(600), f"never saw {pattern!r}: {''.join(got['err'])[-2000:]}"
        proc.send_signal(sig)
        proc.wait(timeout=600)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    for reader in readers:
        reader.join(timeout=60)
    return "".join(got["out"]), "".join(got["err"])


def staging_file(path: Path, prelude: str = "", first_line: str = "",
                 replace: tuple[str, str] | None = None) -> str:
    """A vLLM-style file target: the single-loop generation, with ``prelude`` at module
    level, ``first_line`` run first in the staging function, ``replace`` applied."""
    source = SINGLE_LOOP_SOURCE
    if replace:
        assert replace[0] in source
        source = source.replace(*replace)
    if first_line:
        marker = "    for i, req_id in enumerate(req_ids[:num_reqs]):"
        assert marker in source
        source = source.replace(marker, textwrap.indent(first_line, "    ") + "\n" + marker, 1)
    path.write_text(textwrap.dedent(prelude) + "\n" + source)
    return f"{path}::{FUNC}"


# ------------------------------------------------------------------ 1. closed stdout

@pytest.mark.parametrize("sink", ["true", "head -1"])
def test_a_closed_stdout_keeps_the_verdicts_exit_code_and_every_file(tmp_path, sink):
    reports = tmp_path / "j.json", tmp_path / "j.xml"
    for _ in range(3):
        for r in reports:
            r.unlink(missing_ok=True)
        line = (f"{COMMAND} diff {shlex.quote(BUGGY)} single-loop --save-dir "
                f"{shlex.quote(str(tmp_path / 'found'))} --json {reports[0]} --junit-xml "
                f"{reports[1]} | {sink} > /dev/null; echo ${{PIPESTATUS[0]}}")
        proc = subprocess.run(["bash", "-c", line], capture_output=True, text=True,
                              cwd=tmp_path, timeout=600)
        assert proc.stdout.strip() == "1", proc.stdout + proc.stderr
        assert "Traceback" not in proc.stderr and "BrokenPipe" not in proc.stderr
        assert json.loads(reports[0].read_text())["verdict"] == "different"
        assert junit(reports[1]).find(".//failure") is not None


def test_a_clean_verdict_through_a_closed_pipe_is_never_0(tmp_path):
    """The reader left before the report came: what the run printed reached no one, so a
    clean verdict is exit 2 with a line on stderr saying why (a closed pipe is never 0)."""
    line = (f"{COMMAND} diff legacy single-loop --examples 30 --save-dir "
            f"{shlex.quote(str(tmp_path))} | true; echo ${{PIPESTATUS[0]}}")
    proc = subprocess.run(["bash", "-c", line], capture_output=True, text=True, timeout=600)
    assert proc.stdout.strip() == "2", proc.stderr
    assert messages.STDOUT_LOST in proc.stderr and "Traceback" not in proc.stderr


# ------------------------------------------------------------------ 2. interrupts

@pytest.mark.parametrize("sig,code", [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_a_signal_stops_the_run_saves_what_it_found_and_exits_128_plus_its_number(
        tmp_path, sig, code):
    out_json, out_xml, found = tmp_path / "r.json", tmp_path / "r.xml", tmp_path / "found"
    proc = subprocess.Popen(
        [sys.executable, "-m", "stagecheck", "diff", "legacy", "single-loop", "--examples",
         "500000", "--json", str(out_json), "--junit-xml", str(out_xml), "--save-dir",
         str(found), "--save-infos"], cwd=tmp_path, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True, env={**os.environ, **PROGRESS_OFTEN})
    # past the imports, early in a long run: a progress line with examples already judged
    stdout, stderr = signal_when(proc, r"^stagecheck diff: [1-9]\d*/\d+ examples", sig)
    assert proc.returncode == code, stderr
    # progress lines (non-terminal: one every few seconds) may come before the last word
    lines = [line for line in stderr.strip().splitlines()
             if not line.startswith("stagecheck diff:")]
    assert len(lines) == 1 and lines[0].endswith("no verdict: interrupted"), stderr
    assert f"interrupted by {sig.name}" in lines[0]
    assert stdout == ""
    report = json.loads(out_json.read_text())
    assert report["verdict"] == "interrupted" and report["interrupted"] == sig.name
    ran = report["examples"]["in_contract"] + report["examples"]["out_of_contract"]
    assert 0 < ran < 1_000_000
    case = junit(out_xml).find(".//testcase[@name='interrupted']")
    assert case is not None and case.find("error").get("type") == "interrupted"
    manifest = json.loads(Path(report["manifest"]).read_text())
    assert manifest["interrupted"] == sig.name
    assert [f["id"] for f in manifest["findings"]] == [f["id"] for f in report["findings"]]
    assert all(Path(f["file"]).is_file() for f in manifest["findings"])


#: a progress line that shows each command's search under way
UNDER_WAY = {"symbolic": r"^stagecheck symbolic: exploring", "kernel": r"^stagecheck kernel: ",
             "mutants": r"^(stagecheck mutants: |\[\d+/\d+\] m\d+ )"}
#: progress lines every half second (a run's stderr is not a terminal here)
PROGRESS_OFTEN = {"STAGECHECK_PROGRESS_INTERVAL": "0.5"}


@pytest.mark.parametrize("command", [
    ["symbolic", "legacy", "single-loop", "--timeout", "120"],
    ["kernel", "--examples", "5000"],
    ["mutants", "single-loop", "--oracles", "spec,differential", "--budget", "3000",
     "--jobs", "2"],
], ids=["symbolic", "kernel", "mutants"])
def test_every_search_loop_stops_on_sigint(tmp_path, command):
    out = tmp_path / "r.json"
    proc = subprocess.Popen([sys.executable, "-m", "stagecheck", *command, "--json", str(out)],
                            cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env={**os.environ, **PROGRESS_OFTEN})
    # the search under way (symbolic: while it explores, so z3 must not eat the signal)
    stdout, stderr = signal_when(proc, UNDER_WAY[command[0]], signal.SIGINT)
    assert proc.returncode == 130, stdout + stderr
    assert stderr.strip().splitlines()[-1].endswith("no verdict: interrupted"), stderr
    assert json.loads(out.read_text())["verdict"] == "interrupted"


#: a SIGINT sent while the module named in argv[1] is imported (a finder that sends it and
#: lets the import go on: the signal lands inside the import), then the command line
SIGINT_DURING_IMPORT = textwrap.dedent("""
    import os, signal, sys
    MODULE = sys.argv[1]
    class SendsSigint:
        def find_spec(self, name, path=None, target=None):
            if name == MODULE:
                sys.meta_path.remove(self)
                os.kill(os.getpid(), signal.SIGINT)
            return None
    sys.meta_path.insert(0, SendsSigint())
    sys.argv[1:2] = []
    from stagecheck.__main__ import run
    run()
""")


@pytest.mark.parametrize("module, said", [
    # before the command line took the signals over: the interrupt raises in the import
    ("stagecheck.oracles.cli", "INTERRUPTED_STARTING"),
    ("stagecheck.oracles.text", "INTERRUPTED_STARTING"),
    # after: the flag is set, and the command ends as interrupted where it looks
    ("stagecheck.oracles.commands.campaign", "stagecheck: interrupted by SIGINT after "),
])
def test_ctrl_c_while_the_command_line_starts_is_one_line_and_exit_130(tmp_path, module, said):
    from stagecheck.__main__ import INTERRUPTED_STARTING
    said = INTERRUPTED_STARTING if said == "INTERRUPTED_STARTING" else said
    done = subprocess.run([sys.executable, "-c", SIGINT_DURING_IMPORT, module, "diff", "legacy",
                           "single-loop", "--no-save"], cwd=tmp_path, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 130, done.stderr
    assert "Traceback" not in done.stderr and done.stdout == ""
    last = done.stderr.strip().splitlines()[-1]
    assert said in last and last.endswith("no verdict: interrupted"), done.stderr


def test_an_interrupt_the_target_swallows_still_ends_the_run_as_interrupted(tmp_path):
    """Code that catches KeyboardInterrupt (as hypothesis's gc callback does) cannot turn
    Ctrl-C into a verdict: the signal sets a flag, and the flag decides.

    Targets run in a worker process (``oracles/worker/``): the SIGINT that stagecheck
    gets while a target runs is sent to stagecheck itself (the worker's parent), by a
    target that catches everything around the call; sent once, as one Ctrl-C."""
    # the worker's parent is its keeper (oracles/worker/keeper.py); the checker is the
    # keeper's parent
    target = staging_file(tmp_path / "swallows.py", "import os\nimport signal\n_SENT = []\n",
                          "if not _SENT:\n    _SENT.append(1)\n    try:\n"
                          "        stat = open(f'/proc/{os.getppid()}/stat').read()\n"
                          "        checker = int(stat[stat.rindex(')') + 2:].split()[1])\n"
                          "        os.kill(checker, signal.SIGINT)\n"
                          "    except BaseException:\n        pass")
    proc = stagecheck("diff", "single-loop", target, "--examples", "200", "--json",
                      tmp_path / "r.json", "--save-dir", tmp_path / "found", cwd=tmp_path)
    assert proc.returncode == 130, proc.stdout + proc.stderr
    assert proc.stderr.strip().endswith("no verdict: interrupted")
    assert json.loads((tmp_path / "r.json").read_text())["verdict"] == "interrupted"


def test_a_signal_a_target_sends_its_own_process_is_not_an_interrupt_of_the_run(tmp_path):
    """Interrupts of the run are stagecheck's and reach it, not the worker (a session of its
    own): a target that sends SIGINT to its own process ends its worker; that is the
    target's crash, a finding, and the run ends with its verdict, not as interrupted (was:
    the worker ignored SIGINT, and the run was EQUIVALENT, exit 0)."""
    target = staging_file(tmp_path / "self.py", "import os\nimport signal\n",
                          "os.kill(os.getpid(), signal.SIGINT)")
    proc = stagecheck("diff", "single-loop", target, "--examples", "100", "--json",
                      tmp_path / "r.json", "--save-dir", tmp_path / "found", cwd=tmp_path)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert json.loads((tmp_path / "r.json").read_text())["verdict"] == "different"
    assert "candidate ended its process (killed by SIGINT)" in proc.stdout
    assert "interrupted" not in proc.stderr


# ------------------------------------------------------------------ 3. atomic files

def test_reports_replace_the_old_file_whole(tmp_path):
    out = tmp_path / "r.json"
    out.write_text('{"tool": "stagecheck", "verdict": "the previous run\'s"}')
    inode = os.stat(out).st_ino
    proc = stagecheck("diff", "legacy", "single-loop", "--examples", "20", "--json", out,
                      "--save-dir", tmp_path / "found")
    assert proc.returncode == 0, proc.stderr
    assert json.loads(out.read_text())["verdict"] == "equivalent"
    assert os.stat(out).st_ino != inode          # renamed over, never rewritten in place
    leftovers = [p.name for p in tmp_path.rglob("*.tmp")]
    assert leftovers == []


# ------------------------------------------------------------------ 4. replay ids

def test_runs_of_two_pairs_in_one_folder_keep_their_own_replay_files(tmp_path):
    found = tmp_path / "found"
    pairs = [("legacy", "single-loop"), ("legacy", "prefix-migration")]
    procs = [subprocess.Popen([sys.executable, "-m", "stagecheck", "diff", b, c, "--examples",
                               "100", "--save-dir", str(found), "--save-infos"], cwd=tmp_path,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for b, c in pairs]                  # in parallel, into one folder
    outputs = [p.communicate(timeout=600) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], outputs
    manifests = [json.loads(p.read_text()) for p in sorted((found / "runs").glob("*.json"))]
    assert len(manifests) == 2
    names = []
    for manifest in manifests:
        pair = (manifest["targets"]["baseline"]["spec"], manifest["targets"]["candidate"]["spec"])
        assert pair in pairs and manifest["findings"]
        for entry in manifest["findings"]:
            saved = json.loads(Path(entry["file"]).read_text())
            assert (saved["baseline"], saved["candidate"]) == pair
            names.append(Path(entry["file"]).name)
    assert len(names) == len(set(names)), "two runs wrote the same replay file"
    # the replay line printed by each run replays that run's pair, and the report says
    # where the run's manifest is
    for (b, c), (stdout, _) in zip(pairs, outputs):
        assert "its manifest lists them: " in stdout
        printed = next(line.split("stagecheck replay ", 1)[1] for line in stdout.splitlines()
                       if "replay: stagecheck replay " in line)
        again = stagecheck("replay", printed, cwd=tmp_path)
        assert again.stdout.splitlines()[0].endswith(f"{b} vs {c} on cpu"), again.stdout


# ------------------------------------------------------------------ 5. engine helpers

HELPER_PRELUDE = '''
    from vllm.utils.math_utils import cdiv
    from vllm.v1.worker.block_table import clamp_blocks


    def _check_blocks(num_reqs):
        return cdiv(num_reqs, 16) + clamp_blocks(0)
'''


def test_an_engine_helper_the_loader_cannot_provide_is_exit_2_not_a_difference(tmp_path):
    target = staging_file(tmp_path / "mamba_utils.py", HELPER_PRELUDE,
                          "_check_blocks(num_reqs)")
    proc = stagecheck("diff", "single-loop", target, "--examples", "30", "--junit-xml",
                      tmp_path / "j.xml", "--save-dir", tmp_path / "found", cwd=tmp_path)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "'clamp_blocks' (used by _check_blocks) from module 'vllm.v1.worker.block_table'" \
        in proc.stderr and "--shim FILE.py" in proc.stderr
    assert "'cdiv' (used by" not in proc.stderr   # the shipped vLLM shim provides it
    assert not (tmp_path / "j.xml").exists()
    shim = tmp_path / "shim.py"
    shim.write_text("def clamp_blocks(n):\n    return max(n, 0)\n")
    fixed = stagecheck("diff", "single-loop", target, "--examples", "30", "--shim", shim,
                       "--json", tmp_path / "r.json", "--save-dir", tmp_path / "found",
                       cwd=tmp_path)
    assert fixed.returncode == 0, fixed.stdout + fixed.stderr
    shims = json.loads((tmp_path / "r.json").read_text())["targets"]["candidate"]["shims"]
    assert any(s.startswith("cdiv from stagecheck.impl.shims.vllm") for s in shims)
    assert any(s.startswith(f"clamp_blocks from {shim}") for s in shims)


# ------------------------------------------------------------------ 6. symbolic

NARROWING = '''
    import numpy as np


    def _narrow(value):
        return np.int64(value).astype(np.float32).astype(np.int64)
'''


def test_symbolic_values_made_concrete_give_undecided_not_equivalent(tmp_path):
    """The refactor narrows computed counts through numpy's float32 (a bug above 2**24,
    for counts float32 cannot hold): numpy makes the symbolic values concrete, so the
    symbolic run only sampled them (the values it sampled are held exactly). The
    fuzzer the verdict points to finds the bug."""
    computed = "computed_buf.np[i] = requests[req_id].num_computed_tokens"
    target = staging_file(tmp_path / "narrow.py", NARROWING, replace=(
        computed, "computed_buf.np[i] = _narrow(requests[req_id].num_computed_tokens)"))
    proc = stagecheck("symbolic", "single-loop", target, "--max-paths", "80", cwd=tmp_path)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "verdict: UNDECIDED on " in proc.stdout and "EQUIVALENT" not in proc.stdout
    assert f"stagecheck diff single-loop {target}" in proc.stdout
    fuzzed = stagecheck("diff", "single-loop", target, "--save-dir", tmp_path / "found",
                        cwd=tmp_path)
    assert fuzzed.returncode == 1 and "verdict: DIFFERENT" in fuzzed.stdout, fuzzed.stdout


def test_a_symbolic_counterexample_is_shrunk_saved_and_replayable(tmp_path):
    """The solver's input for a fast path behind ``num_reqs >= 12`` (any size up to the
    capacity, any values) is shrunk to the threshold, shown as a slot table, saved, and
    its replay line shows it again; --no-save saves nothing."""
    target = f"{ROOT}/tests/targets/buggy_fast_path_12_forgets_drafts.py::" \
             "stage_postprocess_inputs_to_gpu"
    proc = stagecheck("symbolic", "single-loop", target, "--max-capacity", "16",
                      "--max-paths", "10", "--json", tmp_path / "s.json", cwd=tmp_path)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    head = next(f for f in json.loads((tmp_path / "s.json").read_text())["findings"]
                if f["invariant"] == "slot_alignment")
    assert (head["scenario"]["num_reqs"], head["scenario"]["capacity"]) == (12, 12)
    assert head["kernel_impact"] is True
    assert re.search(r"^ +\d+ +req-\d+ +yes .*<$", proc.stdout, re.M), proc.stdout
    (line,) = [ln.split("replay: ", 1)[1] for ln in proc.stdout.splitlines()
               if "replay: stagecheck replay" in ln and "slot_alignment" in ln]
    assert "this run saved 3 replay file(s)" in proc.stdout
    again = stagecheck(*shlex.split(line)[1:], cwd=tmp_path)
    assert again.returncode == 1 and "still shows" in again.stdout, again.stdout + again.stderr
    none = tmp_path / "none"
    none.mkdir()
    quiet = stagecheck("symbolic", "single-loop", target, "--max-capacity", "16",
                       "--max-paths", "10", "--no-save", cwd=none)
    assert quiet.returncode == 1 and not (none / ".stagecheck").exists(), quiet.stdout
    assert "replay:" not in quiet.stdout


MIXED = textwrap.dedent("""
    def stage(ctx, scheduler_output, req_ids, num_reqs, requests, mamba_state_idx):
        spec_tokens = scheduler_output.scheduled_spec_decode_tokens
        for i, req_id in enumerate(req_ids[:num_reqs]):
            assert req_id in mamba_state_idx, f"missing state index of {req_id!r}"
            ctx.mamba_state_idx_buf.np[i] = mamba_state_idx[req_id] + (num_reqs == 1)
            ctx.num_scheduled_tokens_buf.np[i] = scheduler_output.num_scheduled_tokens[req_id]
            ctx.num_computed_tokens_buf.np[i] = requests[req_id].num_computed_tokens
            ctx.num_draft_tokens_buf.np[i] = len(spec_tokens.get(req_id, ()))
        if num_reqs >= 3:   # a torch in-place op: outside the list model
            ctx.num_draft_tokens_buf.cpu[:num_reqs].clamp_(min=0)
        for buf in (ctx.mamba_state_idx_buf, ctx.num_scheduled_tokens_buf,
                    ctx.num_computed_tokens_buf, ctx.num_draft_tokens_buf):
            buf.copy_to_gpu(num_reqs)
""")


def test_symbolic_error_findings_stand_and_are_saved_when_other_paths_are_lost(tmp_path):
    """Paths lost to an operation the list model cannot take (``clamp_`` at 3 requests or
    more) leave no verdict to vouch for, but an error the torch replay confirmed on
    another path (a state index off by one for a batch of one) is reported and saved: it
    was once lost with the run (exit 2, nothing saved)."""
    (tmp_path / "mixed.py").write_text(MIXED)
    proc = stagecheck("symbolic", "single-loop", "mixed.py::stage", "--max-capacity", "4",
                      "--max-paths", "60", "--json", "s.json", cwd=tmp_path)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    document = json.loads((tmp_path / "s.json").read_text())
    assert document["paths_unsupported"] > 0 and document["verdict"] == "different"
    manifest = json.loads(Path(document["manifest"]).read_text())
    saved = [f["file"] for f in manifest["findings"] if f["severity"] == "error"]
    assert saved and all(Path(f).exists() for f in saved)
    again = stagecheck("replay", saved[0], cwd=tmp_path)
    assert again.returncode == 1, again.stdout + again.stderr


def test_a_symbolic_path_budget_explores_the_same_paths_every_time(tmp_path):
    runs = []
    for k in range(2):
        out = tmp_path / f"s{k}.json"
        proc = stagecheck("symbolic", "legacy", "single-loop", "--max-paths", "120", "--json",
                          out)
        assert proc.returncode == 0, proc.stdout + proc.stderr
        runs.append(json.loads(out.read_text()))
    first, second = runs
    # the verdict says which batch sizes its paths cover, and how to search larger ones
    assert messages.SYMBOLIC_BOUND.format(capacity=4) in proc.stdout, proc.stdout
    assert first["paths_attempted"] == second["paths_attempted"] == 120
    for key in ("paths_explored", "paths_with_difference", "paths_ignored"):
        assert first[key] == second[key], key
    assert [(f["id"], f["scenario"]) for f in first["findings"]] == \
        [(f["id"], f["scenario"]) for f in second["findings"]]


# ------------------------------------------------------------------ 7. git revisions

def git(repo, *args):
    return subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True, text=True,
                          env={**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t",
                               "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t"}).stdout


@pytest.fixture
def ci_clone(tmp_path):
    """A shallow single-branch clone of a pull request's branch, as CI makes one."""
    upstream = tmp_path / "upstream"
    (upstream / "vllm" / "v1" / "worker").mkdir(parents=True)
    git(upstream, "init", "-q", "-b", "main")
    path = upstream / "vllm" / "v1" / "worker" / "mamba_utils.py"
    path.write_text((ROOT / "impl" / "staging_legacy.py").read_text())
    git(upstream, "add", ".")
    git(upstream, "commit", "-qm", "legacy")
    git(upstream, "checkout", "-qb", "refactor")
    path.write_text(SINGLE_LOOP_SOURCE)
    git(upstream, "commit", "-qam", "single loop")
    clone = tmp_path / "clone"
    git(tmp_path, "clone", "-q", "--depth", "1", "--single-branch", "--branch", "refactor",
        f"file://{upstream}", str(clone))
    return clone


def test_a_base_branch_missing_from_a_ci_clone_is_explained_and_the_fix_works(ci_clone):
    rel = f"vllm/v1/worker/mamba_utils.py::{FUNC}"
    old = ci_clone / "stagecheck.xml"
    proc = stagecheck("diff", f"git:main:{rel}", rel, "--junit-xml", "stagecheck.xml",
                      cwd=ci_clone)
    assert proc.returncode == 2 and not old.exists(), proc.stderr
    err = proc.stderr
    assert "shallow and single-branch" in err
    fetch = "git fetch --depth 1 origin main:refs/remotes/origin/main"
    assert fetch in err and f"'git:origin/main:{rel}'" in err
    subprocess.run(fetch.split(), cwd=ci_clone, check=True, capture_output=True)
    proc = stagecheck("diff", f"git:origin/main:{rel}", rel, "--examples", "50",
                      "--junit-xml", "stagecheck.xml", "--json", "stagecheck.json",
                      cwd=ci_clone)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    sha = git(ci_clone, "rev-parse", "origin/main").strip()
    assert f"= commit {sha}" in proc.stdout
    report = json.loads((ci_clone / "stagecheck.json").read_text())
    assert report["targets"]["baseline"]["sha"] == sha
    assert report["targets"]["baseline"]["resolved"].startswith(f"git:{sha}:")
    props = {p.get("name"): p.get("value") for p in junit(old).iter("property")}
    assert props["baseline.sha"] == sha


def test_revision_paths_are_relative_to_the_current_folder_as_the_message_says(ci_clone):
    sub = ci_clone / "vllm"
    proc = stagecheck("diff", f"git:HEAD:v1/worker/mamba_utils.py::{FUNC}", "single-loop",
                      "--examples", "30", "--save-dir", ci_clone / "found", cwd=sub)
    assert proc.returncode == 0, proc.stderr
    wrong = stagecheck("diff", f"git:HEAD:vllm/v1/worker/mamba_utils.py::{FUNC}", "legacy",
                       cwd=sub)
    assert wrong.returncode == 2
    assert f"paths are taken relative to the current folder ({sub})" in wrong.stderr
    assert "'vllm/vllm/v1/worker/mamba_utils.py' from the repository root" in wrong.stderr


# ------------------------------------------------------------------ 9. option values

BAD_VALUES = [("timeout", "inf"), ("timeout", "1e20"), ("timeout", "nan"), ("timeout", "-1"),
              ("steps", "0"), ("kernel", "bogus")]


@pytest.mark.parametrize("option,value", BAD_VALUES)
def test_bad_option_values_are_refused_up_front_by_cli_and_fixture(option, value, capsys):
    from stagecheck.oracles.cli import main
    from stagecheck.oracles.pytest_plugin import StagecheckFixture
    assert main(["diff", "legacy", "single-loop", f"--{option}", value]) == 2
    out, err = capsys.readouterr()
    assert out == ""                             # refused before any example ran
    assert err.startswith(f"stagecheck: error: option --{option}: ") or \
        "invalid choice" in err, err
    typed = {"timeout": float, "steps": int, "kernel": str}[option](value)
    with pytest.raises(pytest.fail.Exception) as info:
        StagecheckFixture().run("legacy", "single-loop", **{option: typed})
    text = str(info.value)
    assert text.startswith(f"stagecheck: keyword {option}: ")
    if option != "kernel":     # argparse words its own choices; the values are the same
        assert err.split(f"option --{option}: ", 1)[1].strip() == \
            text.split(f"keyword {option}: ", 1)[1].strip().replace(repr(typed), repr(value))


# ------------------------------------------------------------------ 10. outputs

def test_a_failed_load_leaves_earlier_reports_untouched(tmp_path):
    for name in ("r.json", "r.xml"):
        (tmp_path / name).write_text(f"earlier {name}")
    proc = stagecheck("diff", "legacy", "missing.py::f", "--json", tmp_path / "r.json",
                      "--junit-xml", tmp_path / "r.xml", cwd=tmp_path)
    assert proc.returncode == 2
    assert (tmp_path / "r.json").read_text() == "earlier r.json"
    assert (tmp_path / "r.xml").read_text() == "earlier r.xml"


def test_an_unwritable_save_dir_is_refused_before_the_run(tmp_path):
    (tmp_path / "plain").write_text("")
    proc = stagecheck("diff", "legacy", "single-loop", "--examples", "5000", "--save-dir",
                      tmp_path / "plain" / "found", cwd=tmp_path)
    assert proc.returncode == 2 and "option --save-dir: cannot write" in proc.stderr
    assert proc.stdout == ""                     # refused before any example ran


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full")
def test_a_report_that_cannot_be_written_is_never_exit_0(tmp_path):
    clean = stagecheck("diff", "legacy", "single-loop", "--examples", "20", "--json",
                       "/dev/full", "--save-dir", tmp_path)
    assert clean.returncode == 2 and "verdict: EQUIVALENT" in clean.stdout
    problem = messages.REPORT_NOT_WRITTEN[0].format(value="/dev/full",
                                                    error="No space left on device")
    assert f"option --json: {problem}" in clean.stderr
    buggy = stagecheck("diff", BUGGY, "single-loop", "--json", "/dev/full", "--save-dir",
                       tmp_path)
    assert buggy.returncode == 1 and f"option --json: {problem}" in buggy.stderr
    # the message names the verdict in the report's own words (one target: the spec's)
    spec = stagecheck("spec", BUGGY, "--examples", "20", "--json", "/dev/full", "--save-dir",
                      tmp_path)
    assert spec.returncode == 1 and "the exit code stays the verdict's (VIOLATES: 1)" \
        in spec.stderr, spec.stderr


def test_a_target_that_changes_folder_does_not_move_the_outputs(tmp_path):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    target = staging_file(tmp_path / "wanders.py", "import os\n",
                          f"os.chdir({str(elsewhere)!r})")
    proc = stagecheck("diff", "legacy", target, "--examples", "30", "--json", "r.json",
                      "--junit-xml", "r.xml", "--save-infos", cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert json.loads((tmp_path / "r.json").read_text())["verdict"] == "equivalent"
    junit(tmp_path / "r.xml")
    assert list((tmp_path / ".stagecheck" / "findings" / "runs").glob("*.json"))
    assert list(elsewhere.iterdir()) == []


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into read-only folders")
def test_a_read_only_working_folder_is_refused_before_the_run(tmp_path):
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o500)
    try:
        proc = stagecheck("diff", "legacy", "single-loop", cwd=locked)
        assert proc.returncode == 2 and "option --save-dir" in proc.stderr
    finally:
        locked.chmod(0o700)
