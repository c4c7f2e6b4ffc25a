"""Every option of stagecheck, declared once, and the frozen config objects built from them.

``TABLE`` holds one ``Option`` per option: its flag, its argparse destination, the
commands it belongs to, its check (with the limit and the reason for the limit), its
help, its default, its ``[tool.stagecheck]`` key and its name among a JSON document's
``settings``. Everything else that names options is derived from it:

- the command line's parser (``oracles/cli.py``: flags, defaults, help with the default);
- the ``[tool.stagecheck]`` keys (``oracles/config.py``: ``KEYS``);
- the JSON ``settings`` (``settings``; ``oracles/report/json.py``);
- the ``stagecheck diff ...`` line that reproduces a fixture's campaign
  (``reproduce_flags``; the pytest plugin), the fixture's keywords (``fixture_options``);
- the validation of every config object: ``RunOptions`` and ``CampaignConfig`` (``diff``,
  ``spec``, the pytest fixture, the public API), ``SymbolicConfig``, ``KernelConfig``,
  ``BenchConfig``, ``ReplayConfig``, ``ProtocolConfig`` and ``MutantsConfig`` (``oracles/mutants/runners.py``)
  check each field with its option's check, so the command line, the fixture and the
  file refuse the same bad value with the same message (a ``UsageError`` naming the
  field; each front end says it its own way: ``--max-capacity``, ``max_capacity=``,
  ``[tool.stagecheck] max-capacity``).

Adding an option: one ``Option`` here (and, where a config object carries it, the field
of that object, here too), and the code that reads the value.

Standard library only: the command line reads this module before any heavy import.
"""

from __future__ import annotations

import dataclasses
import math
import os
import re
from dataclasses import dataclass, field
from typing import Any, Callable

from stagecheck.oracles import messages
from stagecheck.oracles.errors import UsageError

#: the shortest time limit a call gets, whatever ``--timeout`` says (a smaller value is
#: raised to it, and the raised value is the one every report's settings show): CPU time
#: is counted in clock ticks (10 ms) and building a call's inputs and reading them back
#: takes a few milliseconds of stagecheck's own work, so a shorter limit would measure
#: that, not the code under test, and call every correct call a hang
TIMEOUT_FLOOR = 0.1

__all__ = ["BenchConfig", "CAPACITY_LIMIT", "COLOR_CHOICES", "CampaignConfig", "DEVICES", "KERNEL_BACKENDS",
           "KERNEL_MODES", "KernelConfig", "LIMITS", "OPTIONS", "Option", "PROTOCOL_FIELDS",
           "PROTOCOL_FIXTURE_OWN", "PROTOCOL_LIBRARY_FIELDS", "protocol_fixture_options",
           "ProtocolConfig", "ReplayConfig", "RunOptions", "SymbolicConfig", "TABLE",
           "option_for", "options_of", "save_folder", "settings"]

DEVICES = ("cpu", "cuda")
ENGINES = ("batched", "hypothesis")
KERNEL_MODES = ("auto", "always", "off")
KERNEL_BACKENDS = ("reference", "triton")
COLOR_CHOICES = ("auto", "always", "never")
DEFAULT_SAVE_DIR = os.path.join(".stagecheck", "findings")
CAMPAIGN = ("diff", "spec")
TARGETS = ("diff", "spec", "symbolic", "bench", "mutants", "replay")


# ---------------------------------------------------------------------------- checks

#: a whole number as text: ASCII digits only (``int`` takes '١٢', '1_000' and ' 5' too)
_DECIMAL = re.compile(r"-?[0-9]+")
#: a number of seconds as text, likewise: 5, 0.5, .5, 1e-3 (and signs, refused later)
_NUMBER = re.compile(r"[-+]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][-+]?[0-9]+)?")


def whole(option: str, value: Any, minimum: int = 1, example: str = "1",
          limit: int | None = None, reason: str | None = None) -> int:
    """``value`` as an int >= ``minimum`` and at most ``limit`` (default: the table's
    limit for ``option``), else a ``UsageError`` naming ``option``."""
    given = value
    if isinstance(value, str):
        if not _DECIMAL.fullmatch(value):
            raise UsageError.of(messages.BAD_WHOLE, given, option, minimum=minimum,
                                example=example)
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise UsageError.of(messages.BAD_WHOLE, given, option, minimum=minimum, example=example)
    limit = LIMITS.get(option) if limit is None else limit
    reason = LIMIT_REASONS.get(option) if reason is None else reason
    if limit is not None and value > limit:
        raise UsageError.of(messages.TOO_LARGE, given, option, limit=f"{limit:,}",
                            reason=f" ({reason})" if reason else "", example=example)
    return value


def integer(option: str, value: Any, example: str = "0") -> int:
    """Any whole number (a seed), else a ``UsageError``."""
    if isinstance(value, str):
        if not _DECIMAL.fullmatch(value):
            raise UsageError.of(messages.BAD_INTEGER, value, option, example=example)
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int):
        raise UsageError.of(messages.BAD_INTEGER, value, option, example=example)
    return value


def seconds(option: str, value: Any, example: str = "5", limit: float | None = None,
            reason: str | None = None) -> float:
    """A finite number of seconds > 0, at most ``limit`` (default: the table's limit for
    ``option``), else a ``UsageError``."""
    if isinstance(value, str) and not _NUMBER.fullmatch(value):
        raise UsageError.of(messages.BAD_SECONDS, value, option, example=example)
    try:
        number = float(value)
    except (TypeError, ValueError, OverflowError):      # 10**400 too: not a float
        raise UsageError.of(messages.BAD_SECONDS, value, option, example=example) from None
    if isinstance(value, bool) or not math.isfinite(number) or number <= 0:
        raise UsageError.of(messages.BAD_SECONDS, value, option, example=example)
    limit = LIMITS.get(option) if limit is None else limit
    reason = LIMIT_REASONS.get(option) if reason is None else reason
    if limit is not None and number > limit:
        raise UsageError.of(messages.TOO_MANY_SECONDS, value, option, limit=f"{limit:g}",
                            reason=f" ({reason})" if reason else "", example=example)
    return number


def choice(option: str, value: Any, choices: tuple[str, ...]) -> str:
    if value not in choices:
        if option == "device":
            raise UsageError.of(messages.BAD_DEVICE, value, option)
        raise UsageError.of(messages.BAD_CHOICE, value, option, choices=", ".join(choices))
    return value


@dataclass(frozen=True)
class Whole:
    """A whole number >= ``minimum``, at most ``limit`` (``reason``: why the limit)."""

    minimum: int = 1
    example: str = "1"
    limit: int | None = None
    reason: str | None = None

    def __call__(self, option: str, value: Any) -> int:
        return whole(option, value, self.minimum, self.example, self.limit, self.reason)


@dataclass(frozen=True)
class Integer:
    """Any whole number (a seed)."""

    example: str = "0"

    def __call__(self, option: str, value: Any) -> int:
        return integer(option, value, self.example)


@dataclass(frozen=True)
class Seconds:
    """A finite number of seconds > 0, at most ``limit``; one below ``floor`` is raised
    to it."""

    example: str = "5"
    limit: float | None = None
    reason: str | None = None
    floor: float = 0.0

    def __call__(self, option: str, value: Any) -> float:
        return max(seconds(option, value, self.example, self.limit, self.reason), self.floor)


@dataclass(frozen=True)
class Choice:
    """One of ``choices``."""

    choices: tuple[str, ...]

    def __call__(self, option: str, value: Any) -> str:
        return choice(option, value, self.choices)


@dataclass(frozen=True)
class Switch:
    """True or False (a switch on the command line)."""

    def __call__(self, option: str, value: Any) -> bool:
        if not isinstance(value, bool):
            raise UsageError.of(messages.BAD_SWITCH, value, option)
        return value


@dataclass(frozen=True)
class Text:
    """A non-empty text: a path, a name, a comma-separated list (``what``: what to give,
    for the message that refuses an empty one)."""

    what: str = "a quoted path or name"

    def __call__(self, option: str, value: Any) -> str:
        if isinstance(value, str) and not value.strip():
            raise UsageError.of(messages.EMPTY_TEXT, value, option, what=self.what)
        if not isinstance(value, str):
            raise UsageError.of(messages.BAD_TEXT, value, option)
        return value


@dataclass(frozen=True)
class OutputPath:
    """A path a command writes (a report, the save folder): an empty one is refused as
    such (``--json ''`` would write nowhere), naming the option and an example."""

    example: str

    def __call__(self, option: str, value: Any) -> str:
        if isinstance(value, str) and not value.strip():
            flag = "--" + option.replace("_", "-")
            raise UsageError.of(messages.OUTPUT_EMPTY, value, option, flag=flag,
                                example=f"{flag} {self.example}")
        return Text()(option, value)


@dataclass(frozen=True)
class Texts:
    """A list of non-empty texts (paths); one text is a list of one."""

    def __call__(self, option: str, value: Any) -> tuple[str, ...]:
        if isinstance(value, str):
            value = [value]
        blank = next((v for v in value if isinstance(v, str) and not v.strip()), None) \
            if isinstance(value, (list, tuple)) else None
        if blank is not None:       # ``--shim ''``: that value, not the list it is in
            raise UsageError.of(messages.EMPTY_TEXT, blank, option,
                                what="the path of a Python file, e.g. shims/vllm_helpers.py")
        if not isinstance(value, (list, tuple)) or not all(
                isinstance(v, str) and v.strip() for v in value):
            raise UsageError.of(messages.BAD_TEXTS, value, option)
        return tuple(value)


@dataclass(frozen=True)
class Names:
    """Names, as a comma- or space-separated text or a list (which names exist is the
    config object's to say)."""

    def __call__(self, option: str, value: Any) -> tuple[str, ...]:
        if isinstance(value, str):
            value = [n for part in value.split(",") for n in part.split()]
        if not isinstance(value, (list, tuple)) or not all(isinstance(v, str) for v in value):
            raise UsageError.of(messages.BAD_NAMES, value, option)
        return tuple(v.strip() for v in value if v.strip())


@dataclass(frozen=True)
class Anything:
    """No check (an object the library passes on, e.g. an example database)."""

    def __call__(self, option: str, value: Any) -> Any:
        return value


def cpu_count() -> int:
    """The CPUs this process may run on (``mutants --jobs`` default), at most the most
    ``--jobs`` takes."""
    counter = getattr(os, "process_cpu_count", None)     # Python 3.13
    if counter is not None:
        count = counter()
    else:
        try:
            count = len(os.sched_getaffinity(0))
        except (AttributeError, OSError):
            count = os.cpu_count()
    return max(1, min(count or 1, _JOBS_LIMIT))


# ---------------------------------------------------------------------------- the table

@dataclass(frozen=True)
class Option:
    """One option, declared once.

    ``name`` is unique in the table. ``field`` is what it sets: the field of the command's
    config object, the name a ``UsageError`` carries, the fixture's keyword (default:
    ``name``). ``flag`` is how the command line spells it (None: the library and the
    fixture take it, the command line does not); ``dest`` the argparse destination
    (default: ``field``). ``action``: ``value`` (takes a value), ``switch`` (present:
    True), ``negated`` (present: False; ``--no-...``), ``append`` (repeatable),
    ``const`` (present: ``const``, an alias of another option). ``default`` may be a
    callable (computed when the parser is built); ``shown_default`` is how ``--help``
    says it where the value alone would not. ``key``: the ``[tool.stagecheck]`` key
    (``""``: ``field`` with dashes, for an option with a flag; None: none), applied to ``key_commands``
    (default: ``commands``); ``path``: the key's value is a path (taken from the
    pyproject.toml's folder). ``setting``: the name in a JSON document's ``settings``
    (``""``: ``field``; None: not a setting). ``pinned``: always written in the line that
    reproduces a fixture's campaign, even at its default (the fixture draws it from the
    hypothesis profile). ``fixture``: the pytest fixture takes it as a keyword.
    """

    name: str
    help: str
    commands: tuple[str, ...]
    check: Callable[[str, Any], Any] = Anything()
    default: Any = None
    flag: str | None = ""
    field: str = ""
    dest: str = ""
    action: str = "value"
    const: Any = None
    choices: tuple[str, ...] | None = None
    metavar: str | None = None
    short: str | None = None
    shown_default: str | None = None
    key: str | None = ""
    key_commands: tuple[str, ...] | None = None
    path: bool = False
    setting: str | None = ""
    pinned: bool = False
    fixture: bool = True

    def __post_init__(self) -> None:
        field_ = self.field or self.name
        object.__setattr__(self, "field", field_)
        if self.flag == "":
            object.__setattr__(self, "flag", "--" + field_.replace("_", "-"))
        object.__setattr__(self, "dest", self.dest or field_)
        if self.key == "":
            object.__setattr__(self, "key", field_.replace("_", "-") if self.flag else None)
        if self.key is not None and self.key_commands is None:
            object.__setattr__(self, "key_commands", self.commands)
        if self.setting == "":
            object.__setattr__(self, "setting", field_)

    @property
    def limit(self):
        return getattr(self.check, "limit", None)

    @property
    def reason(self) -> str | None:
        return getattr(self.check, "reason", None)

    def default_value(self) -> Any:
        return self.default() if callable(self.default) else self.default

    def default_text(self) -> str | None:
        """The default as the command line would give it (None: no value)."""
        value = self.default_value()
        if value is None:
            return None
        return f"{value:g}" if isinstance(value, float) else str(value)

    def help_text(self) -> str:
        """The help, with the default said (argparse's ``%`` escaped)."""
        if self.action in ("switch", "negated", "const"):
            text = self.help
        else:
            shown = self.shown_default
            if shown is None:
                shown = self.default_text() or "none"
            text = f"{self.help} (default: {shown})"
        return text.replace("%", "%%")


_EXAMPLES_LIMIT = 10_000_000
_EXAMPLES_REASON = "at a few thousand examples per second more would run for days"
_JOBS_LIMIT = 64
_JOBS_REASON = ("each job holds worker processes of up to 4 GiB address space; at most the "
                "CPU count run at once anyway")
_TIMEOUT_LIMIT = 3600.0
_CAPACITY_LIMIT = CAPACITY_LIMIT = 4096   # also the most a schema's max_capacity may be
_CAPACITY_REASON = ("vLLM batches hold at most a few thousand requests, and every buffer and "
                    "drawn scenario grows with the capacity")

#: Every option, once. The parser lists a command's options in this order.
TABLE: tuple[Option, ...] = (
    # ------------------------------------------------------------ what is run, and where
    Option("schema", "the staging schema of the targets: a built-in name or "
           "'path/to/schema.py[:NAME]'", TARGETS, Text(), metavar="SCHEMA",
           shown_default="chosen by the function's name"),
    Option("device", "where the buffers live: cpu or cuda (kernel: cpu runs the Triton "
           "interpreter, cuda the compiled kernel)", CAMPAIGN + ("kernel", "bench"),
           Choice(DEVICES), "cpu", choices=DEVICES),
    Option("replay_device", "where the example runs again: cpu or cuda", ("replay",),
           Choice(DEVICES), None, field="device", choices=DEVICES, key=None, setting=None,
           shown_default="the device the finding was saved from"),
    Option("replay_baseline", "run the saved example on this baseline target instead",
           ("replay",), Text(), field="baseline", metavar="TARGET", key=None, setting=None,
           shown_default="the saved baseline"),
    Option("replay_candidate", "run the saved example on this candidate target instead",
           ("replay",), Text(), field="candidate", metavar="TARGET", key=None, setting=None,
           shown_default="the saved candidate"),
    Option("protocol", "check step sequences of a staging protocol instead of one call per "
           "example: a built-in protocol, 'single-call:SCHEMA' or 'path/to/protocol.py[:NAME]' "
           "(docs/protocols.md); the targets are the component class or method it drives",
           CAMPAIGN, Text("a built-in protocol (stagecheck protocol list), "
                          "'single-call:SCHEMA' or path/to/protocol.py[:NAME]"), None,
           metavar="NAME|FILE", key=None, setting=None,
           shown_default="the built-in protocol that drives the target's class or method, "
           "where exactly one does and no staging schema describes it"),
    Option("replay_protocol", "run a saved protocol finding under this protocol instead (a "
           "protocol file outside the repository must be given here)", ("replay",), Text(),
           field="protocol", metavar="NAME|FILE", key=None, setting=None,
           shown_default="the saved protocol"),
    Option("shim", "a module whose top-level names file targets may use where their imports "
           "cannot be honoured (e.g. def cdiv(a, b): ...); repeatable", TARGETS + ("protocol",),
           Texts(), (),
           flag="--shim", field="shims", dest="shim", action="append", metavar="PATH.py",
           key="shims",
           path=True, shown_default="none"),
    # ------------------------------------------------------------ the campaign (diff, spec)
    Option("examples", "examples per stream, in contract and out of contract", CAMPAIGN,
           Whole(1, "500", _EXAMPLES_LIMIT, _EXAMPLES_REASON), 300, pinned=True),
    Option("kernel_examples", "kernel scenarios (about 0.03 s each under the Triton "
           "interpreter on cpu; [tool.stagecheck] examples is the diff and spec budget and "
           "does not set it)", ("kernel",),
           Whole(1, "100", _EXAMPLES_LIMIT, _EXAMPLES_REASON), 100, field="examples",
           key=None),
    Option("seed", "hypothesis seed", CAMPAIGN + ("kernel",), Integer("0"), 0, pinned=True),
    Option("max_capacity", "largest buffer capacity drawn (most examples stay small, some "
           "land on thresholds, a few are full batches: docs/schemas.md)", CAMPAIGN,
           Whole(1, "1024", _CAPACITY_LIMIT, _CAPACITY_REASON), None,
           shown_default="the schema's, 1024 for the built-in ones"),
    Option("max_drafts", "longest draft-token list drawn per request", CAMPAIGN,
           Whole(0, "16", 256, "speculative decoding proposes a few dozen draft tokens at "
                 "most"), None, shown_default="the schema's, 16 for mamba-postprocess"),
    Option("timeout", "seconds per staging call, as CPU time of its worker (a smaller value "
           "than 0.1 s runs as 0.1 s: CPU time is counted in 10 ms ticks and a call's own "
           "setup takes milliseconds; 3 times as much on the wall clock), before it is a "
           "hang", CAMPAIGN + ("bench",),
           Seconds("5", _TIMEOUT_LIMIT, "a call that takes an hour is a hang",
                   floor=TIMEOUT_FLOOR), 5.0),
    Option("steps", "staging calls per example on the same buffers, each after the previous "
           "step's copies completed", CAMPAIGN,
           Whole(1, "2", 64, "each step stages the same buffers again; a bug shows within "
                 "a few"), 1),
    Option("gpu_busy_cycles", "cuda: device cycles of work queued ahead of each call, so its "
           "copies stay queued while the host runs (0 turns it off)", CAMPAIGN,
           Whole(0, "1000000", 10**12, "a longer queue of device work only slows each "
                 "example"), None, shown_default="1000000 on cuda, 0 on cpu"),
    Option("deferred_copies", "cpu: model asynchronous copies (they execute at the end of the "
           "call, reading host memory then) to find write-after-copy hazards", CAMPAIGN,
           Switch(), False, action="switch"),
    Option("kernel", "kernel oracle: run the postprocess kernel on both sides' mirrors where "
           "their live slots differ, on each kept finding's examples (auto), on every example "
           "of every stream (always: the report says how many and how long; much slower on "
           "large batches), or never (off)",
           CAMPAIGN, Choice(KERNEL_MODES), "auto", choices=KERNEL_MODES),
    Option("no_kernel", "same as --kernel off", CAMPAIGN, Choice(KERNEL_MODES),
           flag="--no-kernel", field="kernel",
           action="const", const="off", key=None, setting=None, fixture=False),
    Option("kernel_backend", "kernel the oracle runs: reference or triton (triton on cpu uses "
           "the interpreter)", CAMPAIGN, Choice(KERNEL_BACKENDS), None, choices=KERNEL_BACKENDS,
           shown_default="triton on cuda, reference on cpu"),
    Option("out_of_contract", "skip the stream of inputs that should not happen (it gives info "
           "findings only: the same errors, about twice as fast, less explained)",
           CAMPAIGN + ("mutants",), Switch(), True, flag="--no-out-of-contract",
           action="negated"),
    # library and fixture only: how the search runs
    Option("engine", "batched: seeded batches and a bounded hypothesis stream for edge cases; "
           "hypothesis: hypothesis alone (the fixture's, with the profile's database)",
           CAMPAIGN, Choice(ENGINES), "batched", flag=None),
    Option("campaign_jobs", "worker processes running the targets", CAMPAIGN,
           Whole(1, "2", _JOBS_LIMIT, _JOBS_REASON), 1, field="jobs", flag=None),
    Option("isolated", "run the targets in worker processes", CAMPAIGN, Switch(), True,
           flag=None, setting=None),
    Option("edge_examples", "examples of the batched engine's hypothesis stream (None: a "
           "twentieth of examples, at most 100)", CAMPAIGN,
           Whole(0, "100", 100_000, "the edge-case stream is a sample, not the search"), None,
           flag=None, setting=None),
    Option("database", "a hypothesis example database (None: none kept)", CAMPAIGN,
           Anything(), None, flag=None, setting=None, fixture=False),
    Option("derandomize", "hypothesis derandomize (the seed still rules)", CAMPAIGN, Switch(),
           False, flag=None, setting=None, fixture=False),
    # ------------------------------------------------------------ symbolic
    Option("exploration_timeout", "seconds of exploration", ("symbolic",),
           Seconds("30", _TIMEOUT_LIMIT, "a search that takes an hour is better split"),
           None, field="timeout", key=None,
           shown_default="30; with --max-paths, a limit the budget should not reach"),
    Option("max_paths", "path budget: stop after N paths, so that two runs with the same "
           "arguments explore the same paths", ("symbolic",), Whole(1, "500"), None,
           metavar="N", key=None, shown_default="none: --timeout decides"),
    Option("symbolic_capacity", "largest capacity", ("symbolic",),
           Whole(1, "4", _CAPACITY_LIMIT, _CAPACITY_REASON), 4, field="max_capacity", key=None),
    # ------------------------------------------------------------ mutants
    Option("oracles", "comma-separated: spec, differential, kernel, symbolic, upstream",
           ("mutants",), Names(), "spec,differential,kernel,symbolic,upstream", key=None),
    Option("budget", "examples per stream of each campaign oracle run", ("mutants",),
           Whole(1, "300", _EXAMPLES_LIMIT, _EXAMPLES_REASON), 300),
    Option("symbolic_paths", "symbolic paths explored per mutant (a budget of paths gives the "
           "same matrix on any machine)", ("mutants",), Whole(1, "160"), 160, key=None),
    Option("symbolic_timeout", "seconds of symbolic search per mutant at most", ("mutants",),
           Seconds("60", _TIMEOUT_LIMIT, "a search that takes an hour per mutant is better "
                   "split"), 60.0, key=None),
    Option("operators", "comma-separated subset of the catalog", ("mutants",), Names(), None,
           key=None, shown_default="every operator"),
    Option("jobs", "mutants run in this many parallel processes", ("mutants",),
           Whole(1, "2", _JOBS_LIMIT, _JOBS_REASON), cpu_count,
           shown_default=f"the CPUs this process may use, here {cpu_count()}"),
    Option("list", "list the mutants and exit", ("mutants",), Switch(), False,
           action="switch", key=None, setting=None),
    # ------------------------------------------------------------ the verdict and the reports
    Option("strict", "info findings also give exit 1", CAMPAIGN + ("symbolic",), Switch(),
           False, action="switch"),
    Option("json", "write the verdict, the settings and the findings (kernel: the result; "
           "bench: the timings; mutants: the kill matrix) as JSON ('-': to stdout, the text "
           "report then goes to stderr)", CAMPAIGN + (
               "kernel", "symbolic", "bench", "mutants"), OutputPath("report.json"),
           metavar="PATH", key=None,
           setting=None),
    Option("junit_xml", "write a JUnit XML report (one test case per invariant) for CI",
           CAMPAIGN, OutputPath("report.xml"), metavar="PATH", key=None, setting=None),
    Option("markdown", "write a Markdown summary to paste into a pull request: verdict, "
           "targets and SHAs, budget, errors with slot tables, info findings by reason, the "
           "reproduction tests", CAMPAIGN, OutputPath("summary.md"), metavar="PATH", key=None,
           setting=None),
    Option("save_dir", "where replay files of findings go, with a manifest per run under runs/ "
           "(the last 20 runs are kept)", CAMPAIGN + ("symbolic",),
           OutputPath(".stagecheck/findings"),
           DEFAULT_SAVE_DIR, path=True,
           setting=None),
    Option("save_infos", "save info findings as replay files too (error findings always are)",
           CAMPAIGN, Switch(), False, action="switch", key=None, setting=None),
    Option("no_save", "write no replay file and no run manifest", CAMPAIGN + ("symbolic",),
           Switch(), False,
           action="switch", key=None, setting=None),
    Option("verbose", "list every info finding in full (default: one line per reason, with a "
           "count and one example)", CAMPAIGN + ("symbolic",), Switch(), False,
           action="switch", key=None, setting=None),
    Option("color", "colour the verdict line and the ERRORS/INFO headers: auto (on a "
           "terminal, unless NO_COLOR is set; FORCE_COLOR forces it), always, never",
           CAMPAIGN + ("kernel", "symbolic"), Choice(COLOR_CHOICES), "auto",
           choices=COLOR_CHOICES, key=None, setting=None),
    Option("quiet", "no progress on stderr (default: a live line on a terminal, a plain line "
           "every few seconds elsewhere) and no notes beside the report",
           CAMPAIGN + ("kernel", "symbolic", "mutants", "replay"),
           Switch(), False, action="switch", short="-q", key=None, setting=None),
)

OPTIONS: dict[str, Option] = {o.name: o for o in TABLE}
if len(OPTIONS) != len(TABLE):
    raise ImportError("two options of the table share a name")


def options_of(command: str, cli: bool = True) -> list[Option]:
    """The options of ``command`` in table order (``cli``: only those with a flag)."""
    return [o for o in TABLE if command in o.commands and (o.flag or not cli)]


def option_for(command: str, field_: str) -> Option | None:
    """The option of ``command`` that sets ``field_`` (aliases aside)."""
    for o in TABLE:
        if command in o.commands and o.field == field_ and o.action != "const":
            return o
    return None


def save_folder(values: dict) -> str | None:
    """Where a run writes its replay files (and an internal error its traceback):
    ``--save-dir``, or None under ``--no-save``."""
    return None if values.get("no_save") else values.get("save_dir")


def flag_of(command: str | None, field_: str) -> str:
    """How the command line spells the option of ``command`` that sets ``field_``."""
    for o in TABLE:
        if o.field == field_ and o.flag and (command is None or command in o.commands):
            return o.flag
    return "--" + field_.replace("_", "-")


def _limits() -> tuple[dict[str, Any], dict[str, str]]:
    limits: dict[str, Any] = {}
    reasons: dict[str, str] = {}
    for o in TABLE:
        if o.limit is None:
            continue
        if limits.setdefault(o.field, o.limit) != o.limit:
            raise ImportError(f"options setting {o.field!r} disagree on its limit")
        if o.reason:
            reasons.setdefault(o.field, o.reason)
    return limits, reasons


#: Largest value each field takes (from the table): beyond it a run cannot finish on any
#: machine (or the value is a typo), so it is refused up front; and why.
LIMITS, LIMIT_REASONS = _limits()


def validated(command: str, values: dict[str, Any]) -> dict[str, Any]:
    """``values`` (by field) checked by the options of ``command``; None stays None (an
    option left at no value). A ``UsageError`` names the field."""
    out = dict(values)
    for name, value in values.items():
        option = option_for(command, name)
        if option is not None and value is not None:
            out[name] = option.check(name, value)
    return out


def check_fields(config, command: str) -> None:
    """Check every field of the frozen dataclass ``config`` with its option of
    ``command`` (a field without an option is left to the class); None passes only
    where it is the field's default (an optional value left out)."""
    for f in dataclasses.fields(config):
        option = option_for(command, f.name)
        value = getattr(config, f.name)
        if option is not None and not (value is None and f.default is None):
            object.__setattr__(config, f.name, option.check(f.name, value))


def refuse_cuda_only(device: str | None, busy_cycles: int | None) -> None:
    """Device work queued ahead of the copies exists only on CUDA: a non-zero
    ``gpu_busy_cycles`` on the CPU is a ``UsageError``, never ignored (and never shown in a
    report's settings as if it had been used)."""
    if (device or "cpu") == "cpu" and busy_cycles:
        raise UsageError.of(messages.CUDA_ONLY, busy_cycles, "gpu_busy_cycles")


def flat(config) -> dict[str, Any]:
    """A config object's fields by name, nested config objects' fields beside them."""
    out: dict[str, Any] = {}
    for f in dataclasses.fields(config):
        value = getattr(config, f.name)
        if dataclasses.is_dataclass(value) and not isinstance(value, type):
            out.update(flat(value))
        else:
            out[f.name] = value
    return out


def settings(command: str, values: dict[str, Any]) -> dict[str, Any]:
    """The JSON ``settings`` of ``command``: every option of it that has a settings name,
    with its value in ``values`` (by field; missing: None), in table order."""
    out: dict[str, Any] = {}
    for o in TABLE:
        if command in o.commands and o.setting is not None and o.setting not in out:
            value = values.get(o.field)
            out[o.setting] = list(value) if isinstance(value, tuple) else value
    return out


def reproduce_flags(command: str, values: dict[str, Any], defaults: dict[str, Any]
                    ) -> tuple[list[str], dict[str, Any]]:
    """The flags that make ``stagecheck COMMAND`` run with ``values`` (by field): every
    pinned option, and every other one whose value is not ``defaults``'; and what is
    left: the values of fields the command line has no flag for."""
    words: list[str] = []
    left: dict[str, Any] = {}
    done: set[str] = set()
    for name, value in values.items():
        option = option_for(command, name)
        if option is None or not option.flag or option.action == "const":
            if name not in defaults or value != defaults[name]:
                left[name] = value
            continue
        done.add(name)
        if not option.pinned and name in defaults and value == defaults[name]:
            continue
        if option.action == "switch":
            words += [option.flag] if value else []
        elif option.action == "negated":
            words += [] if value else [option.flag]
        elif option.action == "append":
            for item in value or ():
                words += [option.flag, str(item)]
        elif value is not None:
            words += [option.flag, f"{value:g}" if isinstance(value, float) else str(value)]
    return words, left


def fixture_options() -> list[str]:
    """The campaign options the pytest fixture takes as keywords: the options of ``diff``
    that are fields of ``CampaignConfig`` or ``RunOptions``, less those the hypothesis
    profile decides (``fixture=False``)."""
    fields_ = {f.name for cls in (CampaignConfig, RunOptions) for f in dataclasses.fields(cls)}
    return sorted({o.field for o in options_of("diff", cli=False)
                   if o.fixture and o.field in fields_})


# ---------------------------------------------------------------------------- config objects

def _default(name: str) -> Any:
    """The table's default of option ``name`` (a config object's field default)."""
    return OPTIONS[name].default_value()


@dataclass(frozen=True)
class RunOptions:
    """How one example is run, on both sides alike (``diff``, ``spec``)."""

    device: str = _default("device")
    timeout: float = _default("timeout")    # seconds per staging call before it is a hang
    deferred_copies: bool = _default("deferred_copies")   # CPU model of asynchronous copies
    gpu_busy_cycles: int | None = _default("gpu_busy_cycles")   # CUDA: device work queued
                                    # ahead of each call's copies (None: 1,000,000 on cuda)
    steps: int = _default("steps")  # staging calls per example on the same buffers
    kernel: str = _default("kernel")    # kernel oracle: "auto" (where live mirrors differ),
                                        # "always", or "off"
    kernel_backend: str | None = _default("kernel_backend")   # None: triton on cuda,
                                                              # reference on cpu

    def __post_init__(self) -> None:
        check_fields(self, "diff")
        refuse_cuda_only(self.device, self.gpu_busy_cycles)
        if self.gpu_busy_cycles is None:
            object.__setattr__(self, "gpu_busy_cycles",
                               1_000_000 if self.device == "cuda" else 0)

    @property
    def resolved_kernel_backend(self) -> str:
        return self.kernel_backend or ("triton" if self.device == "cuda" else "reference")


@dataclass(frozen=True)
class CampaignConfig:
    """A campaign (``diff``, ``spec``, the fixture): examples per stream, seed, scenario
    size, and how each example runs."""

    examples: int = _default("examples")    # per stream: in contract, and out of contract
    seed: int = _default("seed")
    max_capacity: int | None = _default("max_capacity")   # None: the schema's bound (1,024
                                                          # for the built-in schemas)
    max_drafts: int | None = _default("max_drafts")   # longest draft list (None: the schema's)
    out_of_contract: bool = _default("out_of_contract")
    run: RunOptions = field(default_factory=RunOptions)
    database: object = _default("database")       # a hypothesis example database (None:
                                                  # none kept)
    derandomize: bool = _default("derandomize")   # hypothesis derandomize (the explicit seed
                                                  # still rules; no database with it)
    engine: str = _default("engine")        # "batched": seeded batches + a bounded hypothesis
                                            # stream for edge cases; "hypothesis": alone
    jobs: int = _default("campaign_jobs")   # worker processes running the targets
    isolated: bool = _default("isolated")   # the targets run in worker processes
    edge_examples: int | None = _default("edge_examples")   # the batched engine's hypothesis
                                            # stream (None: a twentieth of examples, <= 100)

    def __post_init__(self) -> None:
        check_fields(self, "diff")
        if not isinstance(self.run, RunOptions):
            raise TypeError(f"run must be RunOptions, got {type(self.run).__name__}")

    @classmethod
    def from_options(cls, **options: Any) -> "CampaignConfig":
        """A config from flat keyword options (campaign and run fields mixed, as the
        fixture and ``[tool.stagecheck]`` give them); an unknown name is a UsageError."""
        run_names = {f.name for f in dataclasses.fields(RunOptions)}
        own_names = {f.name for f in dataclasses.fields(cls)} - {"run"}
        unknown = sorted(set(options) - run_names - own_names)
        if unknown:
            raise UsageError.of(messages.UNKNOWN_OPTIONS, ", ".join(unknown),
                                known=", ".join(sorted(run_names | own_names)))
        run = RunOptions(**{k: v for k, v in options.items() if k in run_names})
        return cls(run=run, **{k: v for k, v in options.items() if k in own_names})


@dataclass(frozen=True)
class SymbolicConfig:
    """``symbolic``: the path budget, the seconds of exploration, the capacity."""

    timeout: float | None = _default("exploration_timeout")   # None: 30 s, or with a path
                                            # budget no limit but the longest a run may take
    max_paths: int | None = _default("max_paths")
    max_capacity: int = _default("symbolic_capacity")

    def __post_init__(self) -> None:
        check_fields(self, "symbolic")


@dataclass(frozen=True)
class KernelConfig:
    """``kernel``: kernel scenarios, seed, device (cpu: the Triton interpreter)."""

    examples: int = _default("kernel_examples")
    seed: int = _default("seed")
    device: str = _default("device")

    def __post_init__(self) -> None:
        check_fields(self, "kernel")


@dataclass(frozen=True)
class BenchConfig:
    """``bench``: where the buffers live, and how long one call may take (a warm-up
    call, or a timed batch of calls) before it is a hang."""

    device: str = _default("device")
    timeout: float = _default("timeout")

    def __post_init__(self) -> None:
        check_fields(self, "bench")


@dataclass(frozen=True)
class ReplayConfig:
    """``replay``: the saved example, and what the command line puts in place of what the
    file saved (None: the file's)."""

    file: str
    baseline: str | None = None
    candidate: str | None = None
    device: str | None = None
    shims: tuple[str, ...] = ()
    schema: str | None = None
    protocol: str | None = None     # a protocol finding: run under this protocol

    def __post_init__(self) -> None:
        check_fields(self, "replay")


#: The options a protocol campaign reads, by the ``ProtocolConfig`` field each one sets
#: (the rest of ``diff``/``spec``'s options apply to one call per example only).
PROTOCOL_FIELDS = {"sequences": "examples", "seed": "seed", "device": "device",
                   "timeout": "timeout", "busy_cycles": "gpu_busy_cycles",
                   "max_capacity": "max_capacity", "shims": "shim"}
#: The library-only options (no flag) of ``diff``/``spec`` a protocol campaign reads too,
#: by the ``ProtocolConfig`` field each one sets: the pytest fixture takes them as keywords.
PROTOCOL_LIBRARY_FIELDS = {"jobs": "campaign_jobs"}
#: ``assert_protocol``'s own arguments (the rest are ``protocol_fixture_options()``).
PROTOCOL_FIXTURE_OWN = ("baseline", "examples", "seed", "device", "strict")


def protocol_fixture_options() -> list[str]:
    """The keywords the pytest fixture's ``assert_protocol`` takes besides its own
    (``PROTOCOL_FIXTURE_OWN``): the options a protocol run reads on the command line
    (``PROTOCOL_FIELDS``) and the library-only ones it reads (``PROTOCOL_LIBRARY_FIELDS``),
    by field."""
    names = {OPTIONS[o].field for o in (*PROTOCOL_FIELDS.values(),
                                        *PROTOCOL_LIBRARY_FIELDS.values())}
    return sorted(names - set(PROTOCOL_FIXTURE_OWN))


#: How many step sequences go to a worker in one call at most (``ProtocolConfig.batch``).
_PROTOCOL_BATCH = Whole(1, "8", 256, "a batch is judged only when all of it ran")


@dataclass(frozen=True)
class ProtocolConfig:
    """A protocol campaign (``diff``/``spec --protocol``, the fixture's ``assert_protocol``,
    ``run_protocol_campaign``): how many step sequences, from which seed, how each runs.
    Every field is checked by the option of ``TABLE`` that sets it (``PROTOCOL_FIELDS``)."""

    sequences: int = _default("examples")    # step sequences drawn
    seed: int = _default("seed")
    device: str = _default("device")         # "cpu" (the CPU model) or "cuda"
    timeout: float = _default("timeout")     # seconds per operation before it is a hang
    busy_cycles: int = 0             # cuda: device work queued at each lazy boundary
    max_capacity: int = 8            # one-step staging protocols: scenario capacity
    max_steps: int | None = None     # at most this many steps per sequence
    steps: int | None = None         # exactly this many steps per sequence
    jobs: int = _default("campaign_jobs")   # worker processes
    batch: int = 8                   # sequences per worker call
    shims: tuple[str, ...] = ()      # --shim modules for file targets
    shrink: bool = True

    def __post_init__(self) -> None:
        checks = {**{f: OPTIONS[o] for f, o in PROTOCOL_FIELDS.items()},
                  "max_steps": OPTIONS["steps"], "steps": OPTIONS["steps"],
                  "jobs": OPTIONS["campaign_jobs"]}
        for name, option in checks.items():
            value = getattr(self, name)
            if value is not None or name not in ("max_steps", "steps"):
                object.__setattr__(self, name, option.check(name, value))
        object.__setattr__(self, "batch", _PROTOCOL_BATCH("batch", self.batch))
        object.__setattr__(self, "shrink", Switch()("shrink", self.shrink))

    @classmethod
    def from_values(cls, values: dict[str, Any]) -> "ProtocolConfig":
        """The config of ``diff``/``spec --protocol`` from the checked option values (by
        the option's field); an option left at no value keeps the config's default."""
        given = {f: values.get(OPTIONS[o].field) for f, o in PROTOCOL_FIELDS.items()}
        refuse_cuda_only(given["device"], given["busy_cycles"])
        if given["busy_cycles"] is None:      # the run's default: the same as one call's
            given["busy_cycles"] = RunOptions(device=given["device"] or "cpu").gpu_busy_cycles
        return cls(**{f: v for f, v in given.items() if v is not None})


def build(cls, command: str, values: dict[str, Any]):
    """A ``cls`` (a config object above, or ``MutantsConfig``) from ``values`` by field,
    taking the fields it has; a nested ``RunOptions`` field takes the run fields."""
    names = {f.name for f in dataclasses.fields(cls)}
    given = {k: v for k, v in values.items() if k in names}
    if "run" in names and "run" not in values:
        run_names = {f.name for f in dataclasses.fields(RunOptions)}
        given["run"] = RunOptions(**{k: v for k, v in values.items() if k in run_names})
    return cls(**given)
