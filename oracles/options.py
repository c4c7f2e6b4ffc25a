"""The options of a run, as two frozen objects that travel whole through the pipeline.

``RunOptions`` says how one example is run (device, time limit, copies, steps, the
kernel oracle); ``CampaignConfig`` how many examples a campaign draws and from
where, with the ``RunOptions`` of each. Both validate every value when they are
made, so the CLI, the pytest fixture and ``[tool.stagecheck]`` refuse the same bad
values with the same message (a ``UsageError`` naming the option's canonical name).
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from typing import Any

from stagecheck.oracles import messages
from stagecheck.oracles.errors import UsageError

__all__ = ["CampaignConfig", "DEVICES", "KERNEL_BACKENDS", "KERNEL_MODES", "RunOptions"]

DEVICES = ("cpu", "cuda")
ENGINES = ("batched", "hypothesis")
KERNEL_MODES = ("auto", "always", "off")
KERNEL_BACKENDS = ("reference", "triton")
#: Largest values an option may take: beyond them a run cannot finish on any machine
#: (or the value is a typo), so they are refused up front.
LIMITS = {"timeout": 3600.0, "steps": 64, "examples": 10_000_000, "max_capacity": 4096,
          "max_drafts": 256,
          "gpu_busy_cycles": 10**12, "jobs": 64, "edge_examples": 100_000}
#: Why each limit is where it is (said with the refusal; docs/reliability.md lists them).
LIMIT_REASONS = {
    "timeout": "a call that takes an hour is a hang",
    "steps": "each step stages the same buffers again; a bug shows within a few",
    "examples": "at a few thousand examples per second more would run for days",
    "max_capacity": "vLLM batches hold at most a few thousand requests, and every "
                    "buffer and drawn scenario grows with the capacity",
    "max_drafts": "speculative decoding proposes a few dozen draft tokens at most",
    "gpu_busy_cycles": "a longer queue of device work only slows each example",
    "jobs": "each job holds worker processes of up to 4 GiB address space; at most the "
            "CPU count run at once anyway",
    "edge_examples": "the edge-case stream is a sample, not the search",
}


def whole(option: str, value: Any, minimum: int = 1, example: str = "1") -> int:
    """``value`` as an int >= ``minimum`` (and within ``LIMITS``), else a ``UsageError``."""
    given = value
    if isinstance(value, str):
        try:
            value = int(value.strip())
        except ValueError:
            raise UsageError.of(messages.BAD_WHOLE, given, option, minimum=minimum,
                                example=example) from None
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise UsageError.of(messages.BAD_WHOLE, given, option, minimum=minimum, example=example)
    limit = LIMITS.get(option)
    if limit is not None and value > limit:
        raise UsageError(f"{given!r} is larger than {limit:,}, the most this option takes"
                         + (f" ({LIMIT_REASONS[option]})" if option in LIMIT_REASONS else ""),
                         f"give e.g. {example}", value=given, option=option)
    return value


def integer(option: str, value: Any, example: str = "0") -> int:
    """Any whole number (a seed), else a ``UsageError``."""
    if isinstance(value, str):
        try:
            value = int(value.strip())
        except ValueError:
            raise UsageError.of(messages.BAD_INTEGER, value, option, example=example) from None
    if isinstance(value, bool) or not isinstance(value, int):
        raise UsageError.of(messages.BAD_INTEGER, value, option, example=example)
    return value


def seconds(option: str, value: Any, example: str = "5") -> float:
    """A finite number of seconds > 0 (at most ``LIMITS``), else a ``UsageError``."""
    try:
        number = float(value.strip() if isinstance(value, str) else value)
    except (TypeError, ValueError):
        raise UsageError.of(messages.BAD_SECONDS, value, option, example=example) from None
    if isinstance(value, bool) or not math.isfinite(number) or number <= 0:
        raise UsageError.of(messages.BAD_SECONDS, value, option, example=example)
    limit = LIMITS.get(option)
    if limit is not None and number > limit:
        raise UsageError(f"{value!r} seconds is more than {limit:g}, the most this option "
                         "takes" + (f" ({LIMIT_REASONS[option]})" if option in LIMIT_REASONS
                                    else ""),
                         f"give e.g. {example}", value=value, option=option)
    return number


def choice(option: str, value: Any, choices: tuple[str, ...]) -> str:
    if value not in choices:
        if option == "device":
            raise UsageError.of(messages.BAD_DEVICE, value, option)
        raise UsageError.of(messages.BAD_CHOICE, value, option, choices=", ".join(choices))
    return value


@dataclass(frozen=True)
class RunOptions:
    """How one example is run, on both sides alike."""

    device: str = "cpu"
    timeout: float = 5.0             # seconds per staging call before it counts as a hang
    deferred_copies: bool = False    # CPU model of asynchronous copies (hazard detection)
    gpu_busy_cycles: int = 0         # CUDA: device work queued ahead of each call's copies
    steps: int = 1                   # staging calls per example on the same buffers
    kernel: str = "auto"             # kernel oracle: "auto" (where live mirrors differ),
                                     # "always", or "off"
    kernel_backend: str | None = None   # None: triton on cuda, reference on cpu

    def __post_init__(self) -> None:
        choice("device", self.device, DEVICES)
        object.__setattr__(self, "timeout", seconds("timeout", self.timeout))
        object.__setattr__(self, "gpu_busy_cycles",
                           whole("gpu_busy_cycles", self.gpu_busy_cycles, 0, "1000000"))
        object.__setattr__(self, "steps", whole("steps", self.steps, 1, "2"))
        choice("kernel", self.kernel, KERNEL_MODES)
        if self.kernel_backend is not None:
            choice("kernel_backend", self.kernel_backend, KERNEL_BACKENDS)
        if not isinstance(self.deferred_copies, bool):
            raise UsageError.of(messages.BAD_CHOICE, self.deferred_copies, "deferred_copies",
                                choices="True, False")

    @property
    def resolved_kernel_backend(self) -> str:
        return self.kernel_backend or ("triton" if self.device == "cuda" else "reference")


@dataclass(frozen=True)
class CampaignConfig:
    """A campaign: examples per stream, seed, scenario size, and how each example runs."""

    examples: int = 300              # per stream: in contract, and out of contract
    seed: int = 0
    max_capacity: int | None = None  # largest capacity drawn (None: the schema's, 1,024 for
                                     # the built-in ones)
    max_drafts: int | None = None    # longest draft list drawn (None: the schema's bound)
    out_of_contract: bool = True
    run: RunOptions = field(default_factory=RunOptions)
    database: object = None          # a hypothesis example database (None: none kept)
    derandomize: bool = False        # hypothesis derandomize (the explicit seed still rules;
                                     # no example database is used with it)
    engine: str = "batched"          # "batched": seeded batches + a bounded hypothesis
                                     # stream for edge cases; "hypothesis": hypothesis alone
    jobs: int = 1                    # worker processes running the targets
    isolated: bool = True            # the targets run in worker processes
    edge_examples: int | None = None    # the hypothesis stream of the batched engine
                                        # (None: a tenth of examples, at most 200)

    def __post_init__(self) -> None:
        object.__setattr__(self, "examples", whole("examples", self.examples, 1, "500"))
        choice("engine", self.engine, ENGINES)
        object.__setattr__(self, "jobs", whole("jobs", self.jobs, 1, "2"))
        if self.edge_examples is not None:
            object.__setattr__(self, "edge_examples",
                               whole("edge_examples", self.edge_examples, 0, "100"))
        object.__setattr__(self, "seed", integer("seed", self.seed))
        if self.max_capacity is not None:
            object.__setattr__(self, "max_capacity",
                               whole("max_capacity", self.max_capacity, 1, "1024"))
        if self.max_drafts is not None:
            object.__setattr__(self, "max_drafts",
                               whole("max_drafts", self.max_drafts, 0, "16"))
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
