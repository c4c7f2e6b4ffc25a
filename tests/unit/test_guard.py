"""Schema code the checker runs (oracles/guard.py): a deadline on each call, no exit, no
patching of stagecheck itself (issue 21)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time

import pytest

from stagecheck.oracles import guard, messages
from stagecheck.oracles.errors import SchemaError
from stagecheck.oracles.worker.deadlines import load_deadline, probe_seconds


@pytest.fixture
def short(monkeypatch):
    monkeypatch.setattr(guard, "CPU_SECONDS", 0.3)
    monkeypatch.setattr(guard, "WALL_SECONDS", 0.6)


def _spin():
    while True:
        pass


def test_a_call_that_sleeps_ends_at_the_wall_clock_deadline(short):
    # a sleep of an hour uses no CPU time: only the wall-clock deadline can end it
    with pytest.raises(SchemaError, match="did not return within"):
        guard.guarded_call("derive of field 'x'", time.sleep, 3600)


def test_a_call_that_spins_ends_at_the_cpu_deadline(short):
    started = time.thread_time()           # CPU time: busy CPUs do not change it
    with pytest.raises(SchemaError, match="derive of field 'x' did not return"):
        guard.guarded_call("derive of field 'x'", _spin)
    assert time.thread_time() - started < 5


def test_time_spent_waiting_for_a_cpu_does_not_count_toward_the_wall_clock(short,
                                                                        monkeypatch):
    # a machine so busy that the main thread waited for a CPU all along: the call that
    # takes 1.2 s on the wall clock (twice the deadline) used none of its own time
    started = time.monotonic()
    monkeypatch.setattr(guard, "thread_waited", lambda: time.monotonic() - started)
    assert guard.guarded_call("build", lambda: time.sleep(1.2) or "built") == "built"
    monkeypatch.setattr(guard, "thread_waited", lambda: 0.0)     # no waiting: it hangs
    with pytest.raises(SchemaError, match="build did not return within"):
        guard.guarded_call("build", time.sleep, 1.2)


def test_a_call_is_never_judged_by_the_clocks_of_the_call_before_it(short, monkeypatch):
    # a clean-clone run beside a CPU load failed here: the main thread lost its CPU while
    # a new call was being armed, the watchdog looked meanwhile, saw the call armed with
    # the clocks of a call made long before, and interrupted it before it began
    assert guard.guarded_call("derive", lambda: 1) == 1      # the watchdog runs
    guard._STATE.started = time.monotonic() - 3600            # a call an hour ago
    quick = guard._thread_cpu

    def cpu_slowly() -> float:
        if threading.current_thread() is threading.main_thread():
            time.sleep(5 * guard._EVERY)   # the watchdog looks several times meanwhile
        return quick()
    monkeypatch.setattr(guard, "_thread_cpu", cpu_slowly)
    assert guard.guarded_call("derive", lambda: "fine") == "fine"


def test_the_kernel_says_how_long_the_mainthread_waited_for_a_cpu():
    first = guard.thread_waited()
    assert first >= 0.0 and guard.thread_waited() >= first     # it only grows


def test_an_exit_is_a_schema_error_and_other_exceptions_pass(short):
    with pytest.raises(SchemaError, match="raised SystemExit"):
        guard.guarded_call("build", lambda: exec("raise SystemExit(0)"))
    with pytest.raises(KeyError):          # a derive's KeyError: "the request lacks an input"
        guard.guarded_call("derive", lambda: {}["missing"])
    assert guard.guarded_call("derive", lambda: 7) == 7


def test_a_call_after_a_deadline_is_not_interrupted_by_it(short):
    with pytest.raises(SchemaError):
        guard.guarded_call("build", _spin)
    signal.raise_signal(guard.SIGNAL)        # a late signal, outside a call: nothing happens
    assert guard.guarded_call("derive", lambda: "fine") == "fine"


def test_guard_schema_wraps_every_function_of_a_schema_in_place():
    from tests.user_schema.attention_lengths_schema import SCHEMA
    from dataclasses import replace
    schema = replace(SCHEMA, fields=tuple(replace(f) for f in SCHEMA.fields))
    guard.guard_schema(schema, "attention-lengths")
    assert schema.build.__stagecheck_guarded__ and schema.build.__wrapped__ is SCHEMA.build
    assert all(f.derive.__stagecheck_guarded__ for f in schema.fields)


def test_a_replaced_function_of_stagecheck_is_seen(monkeypatch):
    import stagecheck.oracles.compare as compare
    before = guard.snapshot()
    assert guard.patched(before) == []
    monkeypatch.setattr(compare, "compare", lambda *args, **kwargs: [])
    assert "stagecheck.oracles.compare.compare" in guard.patched(before)


def test_os_exit_inside_a_guarded_call_or_from_another_thread_never_ends_the_checker():
    """Run in a fresh interpreter: once the guard is installed, ``os._exit`` stays
    replaced for the process; a thread schema code did not start still exits."""
    import subprocess
    import sys
    import textwrap
    program = textwrap.dedent("""
        import os, posix, threading
        from stagecheck.oracles import guard
        from stagecheck.oracles.errors import SchemaError

        def leaves(through):
            try:
                through._exit(0)
            except Exception:       # the code's own broad except cannot keep it
                pass
            return "went on"

        for through in (os, posix):
            try:
                guard.guarded_call("checks[0].check", leaves, through)
            except SchemaError as exc:
                assert "os._exit(0)" in str(exc), exc
            else:
                raise AssertionError("no error")
        # a thread the code started calls it after the call returned: refused there
        seen = []
        def later():
            try:
                os._exit(0)
            except BaseException as exc:
                seen.append(type(exc).__name__)
        started = []
        def start():
            started.append(threading.Thread(target=later))
            started[0].start()
        guard.guarded_call("derive", start)
        started[0].join()
        assert seen == ["_ExitRefused"], seen
        print("went on", flush=True)
        # a thread schema code did not start (another library's) exits for real
        other = threading.Thread(target=os._exit, args=(3,))
        other.start()
        other.join()
        os._exit(4)
    """)
    done = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 3, done.stderr
    assert done.stdout.strip() == "went on"


def _ignore_the_watchdog_then(then):
    def call():
        signal.signal(guard.SIGNAL, signal.SIG_IGN)
        then()
    return call


def test_a_call_that_ignores_the_watchdogs_signal_is_still_ended(short, monkeypatch):
    # the signal cannot reach it: the exception is raised in the main thread without it
    monkeypatch.setattr(guard, "ESCALATE_SECONDS", 0.3)
    started = time.monotonic()
    try:
        with pytest.raises(SchemaError, match="check of 'x' did not return within"):
            guard.guarded_call("check of 'x'", _ignore_the_watchdog_then(_spin))
    finally:
        signal.signal(guard.SIGNAL, signal.SIG_DFL)
    assert time.monotonic() - started < 30
    assert guard.guarded_call("check of 'y'", lambda: 7) == 7      # the guard works on


def test_a_call_blocked_in_c_with_the_signal_ignored_ends_the_process_with_one_line():
    import subprocess
    import sys
    program = (
        "import signal, time\n"
        "from stagecheck.oracles import guard\n"
        "guard.CPU_SECONDS, guard.WALL_SECONDS, guard.ESCALATE_SECONDS = 0.3, 0.6, 0.3\n"
        "def call():\n"
        "    signal.signal(guard.SIGNAL, signal.SIG_IGN)\n"
        "    time.sleep(600)\n"
        "guard.guarded_call(\"check of 'x'\", call)\n")
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 2, done.stderr
    assert done.stderr == messages.CODE_STUCK.format(value="check of 'x'", cpu=0.3,
                                                     wall=0.6) + "\n"
    assert time.monotonic() - started < 60


def test_a_fork_inside_a_guarded_call_is_refused_and_outside_it_is_not():
    # a copy of the checker forked by a protocol check carried on the run beside it
    # (duplicated progress, tracebacks, no end); stagecheck's own forks are not touched
    import os
    with pytest.raises(SchemaError) as refused:
        guard.guarded_call("checks[0].check", os.fork)
    assert str(refused.value).startswith(messages.SCHEMA_CODE_FORKED[0].format(
        value="checks[0].check"))
    pid = os.fork()
    if pid == 0:
        os._exit(7)
    assert os.waitpid(pid, 0)[1] >> 8 == 7


def test_a_call_that_grows_the_checkers_memory_past_the_limit_is_ended(short, monkeypatch):
    # the checker has no memory limit of its own (a worker's is RLIMIT_DATA): a check that
    # kept allocating ran for a minute and took 6 GiB before it returned
    monkeypatch.setattr(guard, "MEMORY_MIB", 64)
    monkeypatch.setattr(guard, "CPU_SECONDS", 60.0)
    monkeypatch.setattr(guard, "WALL_SECONDS", 60.0)
    held = []

    def grows():
        while True:
            held.append(b"x" * (1 << 20))      # written: resident at once
            time.sleep(0.001)
    try:
        with pytest.raises(SchemaError) as ended:
            guard.guarded_call("checks[0].check", grows)
    finally:
        size = len(held)
        held.clear()
    assert str(ended.value).startswith(messages.SCHEMA_CODE_MEMORY[0].format(
        value="checks[0].check", mib=64))
    assert 64 <= size < 1024


@pytest.mark.parametrize("given, seconds", [("2", 2.0), ("0.1", 0.5), ("", 5.0), ("soon", 5.0),
                                            ("nan", 5.0), ("inf", 5.0), ("-3", 0.5)])
def test_the_deadline_of_schema_code_is_changed_by_its_variable(monkeypatch, given, seconds):
    # STAGECHECK_CODE_SECONDS: a number of at least 0.5 s; anything else keeps the default
    monkeypatch.setenv(guard.SECONDS_ENV, given)
    assert guard.seconds_given(guard.SECONDS_ENV, 5.0, 0.5) == seconds


def test_a_lower_deadline_for_schema_code_is_what_the_message_says(tmp_path):
    # the variable reaches the checker's deadline and its message (3 s on the wall clock)
    program = ("import time\nfrom stagecheck.oracles import guard\n"
               "guard.guarded_call('derive of field x', time.sleep, 3600)\n")
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True,
                          env={**os.environ, guard.SECONDS_ENV: "1"}, timeout=60)
    assert "did not return within 1 s of CPU time or 3 s on the wall clock" in done.stderr
    assert time.monotonic() - started < 30


@pytest.mark.parametrize("given, seconds", [("30", 30.0), ("0.2", 1.0), ("nan", 60.0),
                                            ("inf", 60.0), ("later", 60.0)])
def test_the_deadline_of_loading_takes_a_finite_number_from_its_variable(monkeypatch, given,
                                                                          seconds):
    # was: STAGECHECK_LOAD_SECONDS=nan gave a deadline that never came
    monkeypatch.setenv("STAGECHECK_LOAD_SECONDS", given)
    assert load_deadline().cpu == seconds
    # a schema or protocol file's dry run: its own limit, lowered by the variable only
    assert probe_seconds(5.0) == min(5.0, seconds)


def test_a_hang_of_schema_code_says_where_it_was_stopped(tmp_path):
    # an audit: a protocol's `when` that loops said only "did not return within 5 s", with
    # no line to look at (a module-level hang names its line)
    code = tmp_path / "loops.py"
    code.write_text("def when(step):\n    while True:\n        pass\n")
    program = ("import importlib.util, sys\nfrom stagecheck.oracles import guard\n"
               f"spec = importlib.util.spec_from_file_location('loops', {str(code)!r})\n"
               "m = importlib.util.module_from_spec(spec); spec.loader.exec_module(m)\n"
               "guard.guarded_call('operations[0].when', m.when, None)\n")
    done = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True,
                          env={**os.environ, guard.SECONDS_ENV: "0.5"}, timeout=60)
    assert f"on the wall clock (stopped at {code}:3)" in done.stderr \
        or f"on the wall clock (stopped at {code}:2)" in done.stderr, done.stderr
