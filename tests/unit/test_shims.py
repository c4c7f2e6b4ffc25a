"""The shipped vLLM shims give the engine helpers' results on every int argument."""

from __future__ import annotations

import math
from fractions import Fraction

from hypothesis import given, strategies as st

from stagecheck.impl.shims import vllm

INTS = st.integers(-10**30, 10**30)
POSITIVE = st.integers(1, 10**12)


@given(INTS, INTS.filter(lambda b: b != 0))
def test_cdiv_is_the_ceiling_of_the_quotient(a, b):
    assert vllm.cdiv(a, b) == math.ceil(Fraction(a, b))


@given(INTS, POSITIVE)
def test_round_up_and_down_are_the_nearest_multiples(x, y):
    up, down = vllm.round_up(x, y), vllm.round_down(x, y)
    assert up % y == 0 and down % y == 0
    assert down <= x <= up and up - down in (0, y) and (up - down == 0) == (x % y == 0)


@given(st.integers(-5, 2**70))
def test_powers_of_two(n):
    nxt, prv = vllm.next_power_of_2(n), vllm.prev_power_of_2(n)
    if n < 1:
        assert nxt == 1 and prv == 0
        return
    assert nxt & (nxt - 1) == 0 and nxt >= n and nxt // 2 < n
    assert prv & (prv - 1) == 0 and prv <= n < 2 * prv


@given(st.integers(1, 2**70))
def test_largest_power_of_2_divisor(n):
    d = vllm.largest_power_of_2_divisor(n)
    assert n % d == 0 and (n // d) % 2 == 1


def test_every_shim_says_which_modules_it_stands_for():
    assert set(vllm.STANDS_FOR) == set(vllm.__all__) - {"STANDS_FOR"}
    for modules in vllm.STANDS_FOR.values():
        assert "vllm.utils.math_utils" in modules and "vllm.utils" in modules
