"""The whole JAX graph: the phenomenon's row (equation counts of the gradient's jaxpr) and
its exact second derivative (reverse over reverse)."""
import jax
import pytest

import trgad
from trgad.runtime import timing
from trgad.physics import trg, whole
from trgad.physics import exact

BETA = 0.3


def test_measure_reports_nested_and_top_level_counts():
    row = whole.measure(1)
    assert row["eqns"] > row["eqns_top_level"] > 0     # the SVD rule's custom_vjp holds a body
    closed = jax.make_jaxpr(jax.grad(whole.lnz_fn([2])))(0.3)
    assert row["eqns"] == timing.count_eqns(closed)
    assert row["grad"] == pytest.approx(float(jax.grad(whole.lnz_fn([2]))(0.3)), rel=1e-15)


@pytest.mark.parametrize("steps", [2, pytest.param(3, marks=pytest.mark.slow)])
def test_specific_heat_autodiff_matches_exact_torus(steps):
    # reverse-over-reverse through the truncated-SVD rule, 2 or 3 steps = the exact 4- or
    # 8-site torus
    c = whole.specific_heat_autodiff(BETA, trg.truncation_schedule(16, steps, BETA))
    assert c == pytest.approx(BETA**2 * exact.torus_exact(BETA, steps)["d2lnz"], rel=1e-10)


def test_value_and_grad_checks_its_schedule():
    with pytest.raises(trgad.InputError, match=r"schedule=\[2.5\]"):
        whole.value_and_grad(BETA, [2.5])
    with pytest.raises(trgad.InputError, match="schedule"):
        whole.specific_heat_autodiff(BETA, [])
