"""The ends of beta's range, BETA_MIN = 1e-10 and BETA_MAX = 350 (trgad.runtime.validate).

Oracles: exact enumeration of the small tori in 700-digit decimal arithmetic, the
high-temperature series of the infinite lattice, and the two ground states at low
temperature (lnZ/N = 2 beta + ln(2)/N, u = -2).  Below the range u is lost to rounding (the
measurement behind BETA_MIN); outside it every public function refuses beta.
"""
import decimal
import math

import jax
import numpy as np
import pytest

from trgad.keyed import engine as keyed
from trgad.physics import exact, staged, trg, whole, heat
from trgad.keyed import keyed_trg
from trgad.runtime import validate


def energy_histogram(steps):
    """Sites, and {sum_<ij> s_i s_j: number of states} of the 2**steps-site torus (exact ints)."""
    n, bonds = exact._torus_bonds(*exact.torus_periods(steps))
    states = ((np.arange(2**n)[:, None] >> np.arange(n)) & 1) * 2 - 1
    i, j = np.array(bonds).T
    values, counts = np.unique(np.sum(states[:, i] * states[:, j], axis=1), return_counts=True)
    return n, dict(zip(values.tolist(), counts.tolist()))


def exact_torus(beta, steps):
    """(lnZ/N, d lnZ/N / d beta) of the small torus in 700-digit arithmetic."""
    ctx = decimal.Context(prec=700, Emin=-10**6, Emax=10**6)
    n, hist = energy_histogram(steps)
    b, top = decimal.Decimal(beta), max(hist)
    w = {E: ctx.multiply(c, ctx.exp(ctx.multiply(b, E - top))) for E, c in hist.items()}
    Z = sum(w.values(), decimal.Decimal(0))
    mean = ctx.divide(sum((wE * E for E, wE in w.items()), decimal.Decimal(0)), Z)
    return float(ctx.divide(ctx.add(ctx.multiply(b, top), ctx.ln(Z)), n)), float(mean / n)


def high_temperature(beta):
    """Infinite-lattice series: lnZ/N = ln 2 + 2 ln cosh b + t^4 + 2 t^6 + O(t^8), t = tanh b."""
    t = math.tanh(beta)
    lnz = math.log(2) + 2 * math.log(math.cosh(beta)) + t**4 + 2 * t**6
    u = -(2 * t + (4 * t**3 + 12 * t**5) * (1 - t * t))
    return lnz, u


SMALL = [1e-3, 1e-8, validate.BETA_MIN]
# each (beta, steps) whose schedule is new compiles the whole graph again: the quick tier
# runs 2 steps at every beta, the slow tier 1, 3 and 4 steps as well
STEPS = [pytest.param(1, marks=pytest.mark.slow), 2,
         pytest.param(3, marks=pytest.mark.slow), pytest.param(4, marks=pytest.mark.slow)]


@pytest.mark.parametrize("beta", SMALL)
@pytest.mark.parametrize("steps", STEPS)
def test_small_beta_equals_exact_enumeration(beta, steps):
    lnz_ex, dlnz_ex = exact_torus(beta, steps)
    lnz, dlnz = whole.value_and_grad(beta, trg.truncation_schedule(16, steps, beta))
    assert lnz == pytest.approx(lnz_ex, rel=1e-15)
    # u ~ beta here; its absolute error is a few roundings of 2 - 2(1 - O(beta)) (trgad.physics.ising)
    assert abs(dlnz - dlnz_ex) < 5e-15


def test_small_beta_keeps_the_sector_that_carries_u():
    # singular values ~ 2 beta s_0 are physics: a 1e-10 relative tolerance dropped them
    # (schedule [1, 1]) and gave u a quarter of its value on the 2-site torus
    beta = validate.BETA_MIN
    assert trg.truncation_schedule(16, 2, beta)[0] == 2
    lnz_ex, dlnz_ex = exact_torus(beta, 1)
    assert dlnz_ex == pytest.approx(8 * beta, rel=1e-9)      # 2 tanh(4 beta) per site


def test_u_is_resolved_at_beta_min_and_lost_below_it():
    # the measurement behind BETA_MIN: u = -(2 + d ln Z~/N / d beta) cancels to ~1e-16 / beta,
    # and below ~1e-13 the sector that carries u falls under the rank tolerance (a traced
    # beta is not checked: its caller owns the range)
    schedule = trg.truncation_schedule(16, 2, validate.BETA_MIN)
    grad = jax.grad(lambda b: trg.lnz_per_site(b, schedule))
    rel = {b: abs(float(grad(b)) / exact_torus(b, 2)[1] - 1) for b in (validate.BETA_MIN, 1e-12)}
    assert rel[validate.BETA_MIN] < 1e-6 < rel[1e-12]
    with pytest.raises(validate.InputError, match="keeps a zero singular value"):
        grad(1e-14)


@pytest.mark.parametrize("beta", [1e-3, 1e-8, validate.BETA_MIN])
def test_small_beta_twenty_steps_equals_high_temperature_series(beta):
    lnz_ht, u_ht = high_temperature(beta)
    lnz, dlnz = staged.value_and_grad_jax(beta, trg.truncation_schedule(16, 20, beta))
    assert lnz == pytest.approx(lnz_ht, rel=1e-15)
    assert abs(-dlnz - u_ht) < 5e-15


LARGE = [50.0, 200.0, validate.BETA_MAX]


@pytest.mark.parametrize("beta", LARGE)
@pytest.mark.parametrize("steps", STEPS)
def test_large_beta_equals_exact_enumeration(beta, steps):
    ref = exact.torus_exact(beta, steps)
    lnz, dlnz = whole.value_and_grad(beta, trg.truncation_schedule(16, steps, beta))
    assert lnz == pytest.approx(ref["lnz_per_site"], rel=1e-15)
    assert dlnz == ref["dlnz"] == 2.0


@pytest.mark.parametrize("beta", LARGE)
def test_large_beta_two_ground_states(beta):
    # 2**6 sites: lnZ/N = 2 beta + ln(2)/64 (the two ground states), u = -2
    lnz, dlnz = staged.value_and_grad_jax(beta, trg.truncation_schedule(16, 6, beta))
    assert lnz == pytest.approx(2 * beta + math.log(2) / 64, rel=1e-15)
    assert dlnz == 2.0
    assert heat.specific_heat(beta, [2, 2, 2]) == 0.0        # beta**2 * 0, never inf * 0


@pytest.mark.parametrize("beta", [validate.BETA_MIN, 1e-8, 200.0, validate.BETA_MAX])
def test_keyed_engine_at_extreme_beta(beta):
    sched = trg.truncation_schedule(16, 3, beta)
    lnz, dlnz = whole.value_and_grad(beta, sched)
    whole_keyed = keyed_trg.trg_whole(beta, sched, keys="interned")
    staged_keyed = keyed_trg.value_and_grad_engine(beta, sched, keys="interned")
    for value, grad in ((whole_keyed["lnz_per_site"], -whole_keyed["u"]),
                        (staged_keyed["lnz_per_site"], staged_keyed["dlnz"])):
        assert value == pytest.approx(lnz, rel=1e-14)
        assert abs(grad - dlnz) < 1e-14


def test_expm1_rule_on_the_keyed_engine_matches_its_derivative():
    x = keyed.leaf(np.array([-1e-9, -0.3, 2.0]), "interned")
    y = keyed_trg.KeyedOps("interned").expm1(x * 2.0)
    d = keyed.vjp([y], x, [np.ones(3)])
    np.testing.assert_allclose(d.run(), 2.0 * np.exp(2.0 * x.data), rtol=1e-15)
    np.testing.assert_allclose(y.data, np.expm1(2.0 * x.data), rtol=1e-15)


@pytest.mark.parametrize("beta", [0.0, -0.3, 1e-310, math.nextafter(validate.BETA_MIN, 0), math.inf, math.nan,
                                  math.nextafter(validate.BETA_MAX, math.inf)])
def test_beta_outside_the_range_is_refused_before_any_work(beta):
    with pytest.raises(validate.InputError, match="beta="):
        trg.truncation_schedule(16, 2, beta)
    with pytest.raises(validate.InputError, match="beta="):
        whole.value_and_grad(beta, [2])
