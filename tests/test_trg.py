"""The TRG against independent oracles: exact small tori, Onsager, finite differences."""
import math

import jax
import numpy as np
import pytest

import trgad
from trgad import exact, recorded, trg, whole

BETA = 0.3
SCHEDULE = trg.truncation_schedule(16, 30, BETA)

# Recorded in the source document (JAX 0.12.0.1 and tenferro-rs 0.8.0, identical digits).
RECORDED_GRADS = {n: row[4] for n, row in recorded.TENFERRO_WHOLE.items()}


def test_schedule_for_chi_16():
    assert SCHEDULE[:5] == [2, 4, 4, 16, 16]
    assert all(k == 16 for k in SCHEDULE[3:])
    assert trg.truncation_schedule(4, 6, BETA) == [2, 4, 4, 4, 4, 4]


@pytest.mark.parametrize("steps", [1, 2, 3, 4])
def test_small_tori_equal_exact_enumeration(steps):
    ref = exact.torus_exact(BETA, steps)
    lnz, dlnz = whole.value_and_grad(BETA, SCHEDULE[:steps], jit=False)
    assert lnz == pytest.approx(ref["lnz_per_site"], rel=1e-12)
    assert dlnz == pytest.approx(ref["dlnz"], rel=1e-12)
    assert dlnz == pytest.approx(RECORDED_GRADS[steps], rel=1e-12)


def test_exact_enumeration_one_step_closed_form():
    # two sites bonded four times: Z = 2 * 2 cosh(4 beta)
    ref = exact.torus_exact(BETA, 1)
    assert ref["lnz_per_site"] == pytest.approx(math.log(4 * math.cosh(4 * BETA)) / 2, rel=1e-14)
    assert ref["dlnz"] == pytest.approx(2 * math.tanh(4 * BETA), rel=1e-14)


@pytest.fixture(scope="module")
def twenty_steps():
    return whole.value_and_grad(BETA, SCHEDULE[:20])


def test_twenty_steps_against_onsager_and_recorded(twenty_steps):
    lnz, dlnz = twenty_steps
    ref = exact.onsager(BETA)
    assert abs(lnz - ref["lnz_per_site"]) < 1e-7
    assert abs(-dlnz - ref["u"]) < 1e-5
    assert lnz == pytest.approx(recorded.TENFERRO_STAGED["lnz_per_site"], abs=1e-15)
    assert -dlnz == pytest.approx(recorded.TENFERRO_STAGED["u"], abs=1e-13)


def test_thirty_steps_finite_and_equal_to_finite_differences():
    f = jax.jit(whole.lnz_fn(SCHEDULE))
    vg = jax.jit(jax.value_and_grad(whole.lnz_fn(SCHEDULE)))
    lnz, g = vg(BETA)
    assert np.isfinite(float(lnz)) and np.isfinite(float(g))
    h = 1e-5
    fd = (float(f(BETA + h)) - float(f(BETA - h))) / (2 * h)
    assert float(g) == pytest.approx(fd, rel=1e-7)


def test_near_critical_point_finite():
    beta = exact.BETA_C * 0.999
    sched = trg.truncation_schedule(8, 12, beta)
    lnz, g = whole.value_and_grad(beta, sched)
    assert np.isfinite(lnz) and np.isfinite(g)
    assert -g == pytest.approx(exact.onsager(beta)["u"], abs=5e-2)


def test_second_derivative_finite_and_equal_to_finite_differences():
    # 6 steps: from step 5 on the discarded singular values are exactly degenerate,
    # which is where the stock SVD rule gives NaN.
    sched = SCHEDULE[:6]
    g = jax.grad(whole.lnz_fn(sched))
    g2 = float(jax.grad(g)(BETA))
    h = 1e-4
    fd = (float(g(BETA + h)) - float(g(BETA - h))) / (2 * h)
    assert np.isfinite(g2)
    assert g2 == pytest.approx(fd, rel=1e-6)
