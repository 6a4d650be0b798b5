"""Onsager's solution against the check values in the physics notes."""
import math

import pytest

from trgad.physics import exact


@pytest.mark.parametrize("beta,lnz,u,c", [
    (0.4, 0.879363820775, -1.1060792037, 0.86169836),
    (0.5, 1.025792812695, -1.7455645753, 0.72487145),
])
def test_onsager_check_values(beta, lnz, u, c):
    ref = exact.onsager(beta)
    assert ref["lnz_per_site"] == pytest.approx(lnz, abs=1e-12)
    assert ref["u"] == pytest.approx(u, abs=1e-10)
    assert ref["c"] == pytest.approx(c, abs=1e-8)


def test_onsager_at_critical_point():
    ref = exact.onsager(exact.BETA_C)
    assert ref["u"] == pytest.approx(-math.sqrt(2), abs=1e-12)
    assert math.isinf(ref["c"])


def test_onsager_u_is_minus_derivative_of_lnz():
    h = 1e-5
    for beta in (0.2, 0.35, 0.6):
        fd = (exact.onsager(beta + h)["lnz_per_site"] - exact.onsager(beta - h)["lnz_per_site"]) / (2 * h)
        assert exact.onsager(beta)["u"] == pytest.approx(-fd, abs=1e-8)


def test_torus_sites_and_bonds():
    for steps in (1, 2, 3, 4):
        n, bonds = exact._torus_bonds(*exact.torus_periods(steps))
        assert n == 2 ** steps and len(bonds) == 2 * n


@pytest.mark.parametrize("steps,L", [(2, 2), (4, 4)])
@pytest.mark.parametrize("beta", [0.2, 0.4406, 0.45, 0.7])
def test_kaufman_matches_enumeration_of_the_torus(steps, L, beta):
    # oracle: all 2**N states of the L x L torus (torus_periods(steps) is L x L for even steps)
    ref, k = exact.torus_exact(beta, steps), exact.kaufman(beta, L)
    assert k["lnz_per_site"] == pytest.approx(ref["lnz_per_site"], abs=1e-13)
    assert k["u"] == pytest.approx(-ref["dlnz"], abs=1e-12)
    assert k["c"] == pytest.approx(beta**2 * ref["d2lnz"], abs=1e-11)


def test_kaufman_tends_to_onsager_away_from_beta_c():
    for beta in (0.3, 0.6):
        assert exact.kaufman(beta, 256)["c"] == pytest.approx(exact.onsager(beta)["c"], abs=1e-10)


@pytest.mark.parametrize("beta,L,needle", [(exact.BETA_C, 8, "beta="), (0.3, 1, "L=1"), (-1.0, 8, "beta=")])
def test_kaufman_bad_input(beta, L, needle):
    from trgad.runtime.validate import InputError
    with pytest.raises(InputError, match=needle):
        exact.kaufman(beta, L)
