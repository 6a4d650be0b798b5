"""Equation counts of jaxprs, nested ones included, on a function whose counts are known."""
import jax
import jax.numpy as jnp
from jax import lax
import pytest

import trgad  # noqa: F401  (float64)
from trgad import whole


def hand_built(x):
    y = jax.jit(lambda v: v * 2.0 + 1.0)(x)                   # jit: 1 here, mul + add inside
    z = lax.cond(x > 0, lambda a: a * 3.0, lambda a: a - 1.0, y)  # gt, convert, cond: 1 + 1 per branch
    c, _ = lax.scan(lambda carry, _: (carry * 1.5, None), z, None, length=3)  # scan: mul inside
    return jnp.sin(c)


def test_count_eqns_counts_nested_jaxprs():
    closed = jax.make_jaxpr(hand_built)(0.5)
    # top level: jit, gt, convert_element_type, cond, scan, sin
    assert whole.count_eqns(closed, nested=False) == 6 == len(closed.jaxpr.eqns)
    # nested: jit body 2 (mul, add), cond branches 1 + 1, scan body 1
    assert whole.count_eqns(closed) == 6 + 2 + 2 + 1
    assert whole.count_eqns(closed.jaxpr) == whole.count_eqns(closed)


def test_count_eqns_without_nesting_is_the_top_level_length():
    closed = jax.make_jaxpr(lambda x: jnp.exp(x) * x + 1.0)(0.3)
    assert whole.count_eqns(closed) == whole.count_eqns(closed, nested=False) == 3


def test_measure_reports_nested_and_top_level_counts():
    row = whole.measure(1)
    assert row["eqns"] > row["eqns_top_level"] > 0     # the SVD rule's custom_vjp holds a body
    closed = jax.make_jaxpr(jax.grad(whole.lnz_fn([2])))(0.3)
    assert row["eqns"] == whole.count_eqns(closed)
    assert row["grad"] == pytest.approx(float(jax.grad(whole.lnz_fn([2]))(0.3)), rel=1e-15)
