"""The impurity method (trgad.topics.impurity) and the staged cotangents (staged.cotangents), against
independent oracles: exact enumeration of the small tori, Kaufman's finite torus, finite
differences of the NumPy TRG, jax.grad of the site tensor, and the staged pass's own gradient."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from trgad import InputError
from trgad.physics import exact, ising, staged, trg
from trgad.topics import impurity


def _lnz_from(T0, schedule):
    """lnZ/N of the scaled tensors, T0 given (NumPy, no derivative): the FD oracle."""
    T, lnz = T0, 0.0
    for i, k in enumerate(schedule):
        T, ln = trg.trg_step(T, k, trg.NUMPY)
        lnz += ln / 2**i
    return lnz + np.log(trg.torus_trace(T, trg.NUMPY)) / 2 ** len(schedule)


def test_energy_tensor_is_minus_the_beta_derivative_of_the_site_tensor():
    # unscaled T = e^{2b} T~ and X = -dT/db, so X~ = -(2 T~ + dT~/db); jax.grad is the oracle
    for b in (0.1, 0.3, exact.BETA_C, 0.9):
        dT = jax.jacfwd(lambda x: ising.initial_tensor(x, trg.JAX))(jnp.float64(b))
        want = -(2.0 * ising.initial_tensor(b, trg.NUMPY) + np.asarray(dT))
        np.testing.assert_allclose(impurity.energy_tensor(b), want, rtol=1e-13, atol=1e-15)


@pytest.mark.parametrize("beta", [0.3, 0.44, 0.9])
@pytest.mark.parametrize("steps", [1, 2, 3, 4])
def test_exact_on_the_small_tori(beta, steps):
    ks = trg.truncation_schedule(16, steps, beta)             # nothing truncated
    r = impurity.internal_energy(beta, ks)
    e = exact.torus_exact(beta, steps)                         # all 2**N states
    assert r["u"] == pytest.approx(-e["dlnz"], abs=1e-12)
    assert r["lnz_per_site"] == pytest.approx(e["lnz_per_site"], abs=1e-12)


def test_step_keeps_the_pure_tensor_of_the_trg():
    T = ising.initial_tensor(0.4, trg.NUMPY)
    X = impurity.energy_tensor(0.4)
    for k in (2, 4):
        T_next, X_next, ln = impurity.impurity_step(T, X, k)
        want, want_ln = trg.trg_step(T, k, trg.NUMPY)
        np.testing.assert_allclose(T_next, want, rtol=1e-12, atol=1e-14)
        assert ln == pytest.approx(float(want_ln), abs=1e-15) and X_next.shape == (k,) * 4
        T, X = T_next, X_next


def test_truncated_close_to_kaufman_at_small_chi_and_its_limit_near_beta_c():
    # 10 steps: the 32 x 32 torus.  At chi = 8, beta = 0.3 it is within 1e-3 of the exact torus
    ks = trg.truncation_schedule(8, 10, 0.3)
    u_k = exact.kaufman(0.3, 32)["u"]
    assert abs(impurity.internal_energy(0.3, ks)["u"] - u_k) < 1e-3
    # the documented limit: at chi = 24 near beta_c the split's error exceeds AD's many times
    b = 0.44
    ks = trg.truncation_schedule(24, 10, b)
    u_k = exact.kaufman(b, 32)["u"]
    err_imp = abs(impurity.internal_energy(b, ks)["u"] - u_k)
    err_ad = abs(-staged.value_and_grad_jax(b, ks)[1] - u_k)
    assert err_imp > 10 * err_ad


def test_bad_input_is_refused():
    T, X = ising.initial_tensor(0.3, trg.NUMPY), impurity.energy_tensor(0.3)
    with pytest.raises(InputError, match="k=5"):
        impurity.impurity_step(T, X, 5)
    with pytest.raises(InputError, match="X"):
        impurity.impurity_step(T, np.where(X == X.max(), np.nan, X), 2)
    with pytest.raises(InputError, match="all zeros"):
        impurity.impurity_step(np.zeros_like(T), X, 2)
    with pytest.raises(InputError):
        impurity.energy_tensor(float("nan"))
    with pytest.raises(InputError):
        impurity.internal_energy(0.3, [2, 0])


# ---- staged.cotangents: the environments ------------------------------------------------

@pytest.fixture(scope="module")
def env():
    ks = trg.truncation_schedule(8, 8, 0.42)                   # truncated from step 4 on
    return 0.42, ks, staged.cotangents(0.42, ks)


def test_cotangents_match_the_staged_gradient_and_satisfy_euler(env):
    beta, ks, out = env
    lnz, dlnz = staged.value_and_grad_jax(beta, ks)
    assert out["lnz_per_site"] == pytest.approx(lnz, abs=1e-13)
    assert out["dlnz"] == pytest.approx(dlnz, abs=1e-13)
    assert len(out["tensors"]) == len(out["cotangents"]) == len(ks) + 1
    for i, (T, Tbar) in enumerate(zip(out["tensors"], out["cotangents"])):
        assert T.shape == Tbar.shape
        assert float(jnp.vdot(Tbar, T)) * 2**i == pytest.approx(1.0, abs=1e-12)   # Euler


def test_first_cotangent_is_the_derivative_by_finite_differences(env):
    beta, ks, out = env
    T0 = ising.initial_tensor(beta, trg.NUMPY)
    rng = np.random.default_rng(0)
    for _ in range(2):
        d = rng.standard_normal(T0.shape)
        h = 1e-5
        fd = (_lnz_from(T0 + h * d, ks) - _lnz_from(T0 - h * d, ks)) / (2 * h)
        assert float(jnp.vdot(out["cotangents"][0], d)) == pytest.approx(fd, rel=1e-6, abs=1e-9)


def test_the_environment_with_the_energy_impurity_is_u(env):
    beta, ks, out = env
    u_env = float(jnp.vdot(out["cotangents"][0], impurity.energy_tensor(beta)))
    assert u_env == pytest.approx(-out["dlnz"], abs=1e-13)


def test_cotangents_refuse_bad_input():
    with pytest.raises(InputError):
        staged.cotangents(float("inf"), [2, 4])
    with pytest.raises(InputError):
        staged.cotangents(0.3, [])
