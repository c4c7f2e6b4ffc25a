"""Pure-Python stand-ins for vLLM's small integer helpers (``vllm.utils.math_utils``).

Staging code of the Mamba path imports a few of these (``preprocess_mamba`` uses
``cdiv``). stagecheck never imports vLLM; when a file target does
``from vllm.utils.math_utils import cdiv`` (or, in older releases,
``from vllm.utils import cdiv``), the loader binds the function of the same name from
this module. Each is written from its documented meaning, on Python ints, with the
same results as the engine's for every int argument (``tests/unit/test_shims.py``).
"""

from __future__ import annotations

__all__ = ["STANDS_FOR", "cdiv", "largest_power_of_2_divisor", "next_power_of_2",
           "prev_power_of_2", "round_down", "round_up"]

_MATH = ("vllm.utils.math_utils", "vllm.utils")

#: shim name -> the engine modules whose import of that name it stands for
STANDS_FOR: dict[str, tuple[str, ...]] = {
    "cdiv": _MATH,
    "round_up": _MATH,
    "round_down": _MATH,
    "next_power_of_2": _MATH,
    "prev_power_of_2": _MATH,
    "largest_power_of_2_divisor": _MATH,
}


def cdiv(a: int, b: int) -> int:
    """Ceiling of ``a / b`` for ints (floor division of the negated numerator, negated)."""
    return -(-a // b)


def round_up(x: int, y: int) -> int:
    """``x`` rounded up to a multiple of ``y`` (y > 0): ``ceil((x) / y) * y``."""
    return (x + y - 1) // y * y


def round_down(x: int, y: int) -> int:
    """``x`` rounded down to a multiple of ``y``."""
    return x // y * y


def next_power_of_2(n: int) -> int:
    """The smallest power of two >= ``n`` (1 for every n < 1)."""
    if n < 1:
        return 1
    return 1 << (n - 1).bit_length()


def prev_power_of_2(n: int) -> int:
    """The largest power of two <= ``n`` (0 for every n < 1)."""
    if n <= 0:
        return 0
    return 1 << (n.bit_length() - 1)


def largest_power_of_2_divisor(n: int) -> int:
    """The largest power of two dividing ``n`` (its lowest set bit; 0 for 0)."""
    return n & -n
