"""Extreme inverse temperatures, from 1e-300 to the largest beta with 2 beta finite.

Oracles: exact enumeration of the small tori in 700-digit decimal arithmetic (so that even
beta = 1e-300 is resolved), the high-temperature series of the infinite lattice, and the
two ground states at low temperature (lnZ/N = 2 beta + ln(2)/N, u = -2).
"""
import decimal
import math

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


SMALL = [1e-3, 1e-8, 1e-10, 1e-11, 1e-12, 1e-300]
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
    # singular values ~ 2 beta s_0 are physics: a 1e-10 tolerance dropped them at
    # beta = 1e-11 (schedule [1, 1]) and gave u = -2e-11 on the 2-site torus instead of -8e-11
    assert trg.truncation_schedule(16, 2, 1e-11)[0] == 2
    lnz_ex, dlnz_ex = exact_torus(1e-11, 1)
    assert dlnz_ex == pytest.approx(8e-11, rel=1e-9)      # 2 tanh(4 beta) per site


@pytest.mark.parametrize("beta", [1e-3, 1e-8, 1e-300])
def test_small_beta_twenty_steps_equals_high_temperature_series(beta):
    lnz_ht, u_ht = high_temperature(beta)
    lnz, dlnz = staged.value_and_grad_jax(beta, trg.truncation_schedule(16, 20, beta))
    assert lnz == pytest.approx(lnz_ht, rel=1e-15)
    assert abs(-dlnz - u_ht) < 5e-15


LARGE = [50.0, 200.0, 1e3, 1e6, 1e300]


@pytest.mark.parametrize("beta", LARGE)
@pytest.mark.parametrize("steps", STEPS)
def test_large_beta_equals_exact_enumeration(beta, steps):
    ref = exact.torus_exact(beta, steps)
    lnz, dlnz = whole.value_and_grad(beta, trg.truncation_schedule(16, steps, beta))
    assert lnz == pytest.approx(ref["lnz_per_site"], rel=1e-15)
    assert dlnz == ref["dlnz"] == 2.0


@pytest.mark.parametrize("beta", LARGE + [validate.BETA_MAX])
def test_large_beta_two_ground_states(beta):
    # 2**6 sites: lnZ/N = 2 beta + ln(2)/64 (the two ground states), u = -2
    lnz, dlnz = staged.value_and_grad_jax(beta, trg.truncation_schedule(16, 6, beta))
    assert lnz == pytest.approx(2 * beta + math.log(2) / 64, rel=1e-15)
    assert dlnz == 2.0
    assert heat.specific_heat(beta, [2, 2, 2]) == 0.0        # beta**2 * 0, never inf * 0


@pytest.mark.parametrize("beta", [1e-300, 1e-8, 200.0, validate.BETA_MAX])
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


# A negative beta is not here: the library computes the antiferromagnet, Z(-beta) = Z(beta)
# (tests/test_hostile_inputs.py checks it against exact enumeration); the command line refuses it.
@pytest.mark.parametrize("beta", [0.0, -1e-310, 1e-310, math.inf, math.nan, math.nextafter(validate.BETA_MAX, math.inf)])
def test_beta_outside_the_range_is_refused_before_any_work(beta):
    with pytest.raises(validate.InputError, match="beta="):
        trg.truncation_schedule(16, 2, beta)
    with pytest.raises(validate.InputError, match="beta="):
        whole.value_and_grad(beta, [2])
