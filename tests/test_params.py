"""Gradients in many parameters (trgad.topics.params): reverse mode against forward mode, central
finite differences, the chain rule to d lnZ/N / d beta (tensor) and Euler's relation
(couplings)."""
import numpy as np
import pytest

from trgad import InputError
from trgad.physics import ising, trg
from trgad.topics import params

BETA = 0.3


@pytest.fixture(scope="module")
def schedule():
    return trg.truncation_schedule(16, 6, BETA)


def test_isotropic_couplings_give_the_ising_tensor():
    T = params.anisotropic_tensor(BETA, BETA, trg.NUMPY)
    # to rounding: ising sums over the site's spin in closed form, params by an einsum of W's
    assert np.allclose(T, ising.initial_tensor(BETA, trg.NUMPY), rtol=0, atol=1e-15)
    # anisotropic: legs l, r carry J_x; swapping J_x, J_y turns the tensor by 90 degrees
    A = params.anisotropic_tensor(0.2, 0.5, trg.NUMPY)
    B = params.anisotropic_tensor(0.5, 0.2, trg.NUMPY)
    assert np.allclose(A, B.transpose(1, 2, 3, 0), rtol=0, atol=1e-15)


# the quick tier: 2 couplings at chi = 4; the slow tier: the 16 tensor entries (16 forward
# passes, 32 differences) and both at chi = 16
@pytest.mark.parametrize("chi", [4, pytest.param(16, marks=pytest.mark.slow)])
@pytest.mark.parametrize("which,n", [pytest.param("tensor", 16, marks=pytest.mark.slow), ("couplings", 2)])
def test_reverse_forward_fd_and_beta_oracle_agree(which, n, chi):
    schedule = trg.truncation_schedule(chi, 6, BETA)
    r = params.compare(BETA, schedule, which)
    assert r["n_params"] == n and r["reverse"]["passes"] == 1 and r["forward_mode"]["passes"] == n
    assert r["forward_mode_over_reverse"] == r["forward_mode"]["steady_seconds"] / r["reverse"]["steady_seconds"]
    assert r["jacfwd"]["passes"] == 1 and r["jacfwd"]["lnz_per_site"] == pytest.approx(r["reverse"]["lnz_per_site"], rel=1e-14)
    assert r["jacfwd_over_reverse"] == r["jacfwd"]["steady_seconds"] / r["reverse"]["steady_seconds"]
    assert r["max_abs_difference"] < 1e-13          # reverse against the jvps and jacfwd
    assert r["max_abs_fd_difference"] < 1e-8
    expected, from_grad = r["beta_oracle"]
    assert abs(expected - from_grad) < 1e-12
    assert r["reverse"]["lnz_per_site"] == pytest.approx(float(trg.lnz_per_site(BETA, schedule)), abs=1e-14)


def test_couplings_are_symmetric_at_the_isotropic_point(schedule):
    gx, gy = params.gradient(BETA, schedule, "couplings")["gradient"]
    assert gx == pytest.approx(gy, abs=1e-13)


def test_bad_input(schedule):
    with pytest.raises(InputError, match="params='spins'"):
        params.gradient(BETA, schedule, "spins")
    with pytest.raises(InputError, match="mode='sideways'"):
        params.gradient(BETA, schedule, "tensor", "sideways")
    # "forward" names forward mode for one more release (trgad.runtime.validate.DEPRECATED_NAMES)
    assert params.gradient(BETA, schedule, "couplings", "forward")["mode"] == "forward_mode"
    with pytest.raises(InputError, match="h="):
        params.finite_difference(BETA, schedule, "tensor", h=1.0)
