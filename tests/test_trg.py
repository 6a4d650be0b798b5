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


def test_svd_rule_matches_finite_differences_with_degenerate_spectrum():
    rng = np.random.default_rng(1)
    base = rng.normal(size=(16, 4)) @ rng.normal(size=(4, 16))  # rank 4: 12 zero values
    direction = rng.normal(size=(16, 16))

    def loss(x, k=3):
        U, s, Vh = trgad.truncated_svd(base + x * direction, k)
        R = (U * s) @ Vh
        return (R ** 3).sum() + jax.numpy.log(s).sum()

    g = float(jax.grad(loss)(0.2))
    h = 1e-6
    fd = (float(loss(0.2 + h)) - float(loss(0.2 - h))) / (2 * h)
    assert g == pytest.approx(fd, rel=1e-7)
    with pytest.raises(ValueError, match="k=20"):
        trgad.truncated_svd(jax.numpy.eye(4), 20)


@pytest.mark.parametrize("m, p", [(12, 12), (12, 7), (7, 12)])
def test_resolvent_equals_linear_solves_and_its_rule_equals_finite_differences(m, p):
    from trgad import svd

    rng = np.random.default_rng(m + p)
    P = rng.normal(size=(m, p))
    W_all, w_all, Vh_all = np.linalg.svd(P, full_matrices=False)
    W, w = W_all[:, 2:], w_all[2:]          # eigenbasis of the part kept in P below
    P = P - (W_all[:, :2] * w_all[:2]) @ Vh_all[:2]
    shifts = w_all[:2] ** 2
    R = rng.normal(size=(m, 2))
    oracle = np.stack([np.linalg.solve(sh * np.eye(m) - P @ P.T, R[:, i]) for i, sh in enumerate(shifts)], 1)
    assert np.allclose(svd.resolvent(np, P, shifts, R, W, w), oracle, rtol=1e-11, atol=1e-12)
    jnp = jax.numpy
    args = [jnp.asarray(a) for a in (P, shifts, R, W, w)]
    assert np.allclose(svd.resolvent(jnp, *args), oracle, rtol=1e-11, atol=1e-12)

    # Reverse rule against central differences of the oracle, in P, shifts and R at once.
    dirs = [rng.normal(size=a.shape) for a in (P, shifts, R)]
    C = rng.normal(size=(m, 2))

    def loss_oracle(x):
        Px, sx, Rx = (a + x * d for a, d in zip((P, shifts, R), dirs))
        return sum(C[:, i] @ np.linalg.solve(sx[i] * np.eye(m) - Px @ Px.T, Rx[:, i]) for i in range(2))

    def loss(x):
        Px, sx, Rx = (a + x * d for a, d in zip(args[:3], dirs))
        return jnp.sum(C * svd.resolvent(jnp, Px, sx, Rx, args[3], args[4]))

    h = 1e-6
    fd = (loss_oracle(h) - loss_oracle(-h)) / (2 * h)
    assert float(jax.grad(loss)(0.0)) == pytest.approx(fd, rel=1e-7)
