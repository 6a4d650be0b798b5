"""trgad.topics.fixedpoint: power iteration on the Ising row transfer matrix and its three derivatives.

Oracles: Kaufman's closed form of the cylinder's largest eigenvalue (independent of the
matrix the module builds), exact diagonalisation with Hellmann-Feynman and perturbation
theory, and central finite differences.
"""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from trgad import InputError
from trgad.pages import caps
from trgad.topics import fixedpoint as fp, cylinder
from trgad.physics.exact import BETA_C

L = 5                      # 32 row states: every check below runs in well under a second
BETAS = (0.3, BETA_C)      # the book's reference point and the critical point


@pytest.mark.parametrize("beta", (0.05, 0.3, BETA_C, 0.6, 1.0))
@pytest.mark.parametrize("width", (2, 3, 4, 6))
def test_transfer_matrix_spectrum_is_kaufmans(beta, width):
    e, k = cylinder.exact(beta, width), cylinder.kaufman_cylinder(beta, width)
    assert abs(e["f"] - k["f"]) < 1e-13
    assert abs(e["u"] - k["u"]) < 1e-12


@pytest.mark.parametrize("beta", BETAS)
def test_exact_derivatives_match_finite_differences(beta):
    e = cylinder.exact(beta, L)
    assert abs(-e["u"] - cylinder.finite_difference(beta, L, "lnz")) < 1e-8
    assert abs(e["dbond"] - cylinder.finite_difference(beta, L, "bond")) < 1e-7
    # u is the sum of the two bond correlations, in a row and between rows
    h, E = cylinder.bond_sums(L)
    T = np.exp(beta * E)
    across = e["v"] @ (T * (E + 2 * L - (h[:, None] + h[None, :]) / 2)) @ e["v"] / e["lambda"] / L
    assert abs(e["bond"] + across + e["u"]) < 1e-13


@pytest.fixture(scope="module")
def converged():
    """Iterations to ||g(v) - v|| <= 1e-12 at each beta; one count for both (the larger)."""
    counts = {b: fp.converge(b, L, 1e-12)["iterations"] for b in BETAS}
    return max(counts.values())


def _oracle(beta, output):
    e = cylinder.exact(beta, L)
    return (e["f"], -e["u"]) if output == "lnz" else (e["bond"], e["dbond"])


@pytest.mark.parametrize("output", ("lnz", "bond"))
@pytest.mark.parametrize("beta", BETAS)
def test_staged_and_implicit_agree_with_the_oracles(beta, output, converged):
    value, ref = _oracle(beta, output)
    for r in (fp.staged(beta, L, converged, output), fp.implicit(beta, L, output=output, tol=1e-12)):
        assert abs(r["value"] - value) < 1e-11
        assert abs(r["derivative"] - ref) < 1e-10
    assert abs(cylinder.finite_difference(beta, L, output) - ref) < 1e-7


@pytest.mark.slow
@pytest.mark.parametrize("output", ("lnz", "bond"))
def test_unrolled_agrees_with_the_oracles_at_convergence(output, converged):
    for beta in BETAS:                  # one compiled whole graph serves both betas
        value, ref = _oracle(beta, output)
        r = fp.unrolled(beta, L, converged, output)
        assert abs(r["value"] - value) < 1e-11 and abs(r["derivative"] - ref) < 1e-10


def test_unrolled_staged_and_forward_curve_are_one_derivative():
    n_max = 6
    values, derivs = fp.truncated_curve(BETA_C, L, n_max, "bond")
    for n in (1, 3, n_max):
        st = fp.staged(BETA_C, L, n, "bond")
        assert abs(derivs[n - 1] - st["derivative"]) < 1e-12
        assert abs(values[n - 1] - st["value"]) < 1e-14
    un = fp.unrolled(BETA_C, L, n_max, "bond")
    assert abs(derivs[-1] - un["derivative"]) < 1e-12 and abs(values[-1] - un["value"]) < 1e-14


def test_stopped_early_errors_fall_at_the_rates_the_spectrum_predicts():
    """The truncated loop's u is off by O(r^(2n)) (the Rayleigh quotient is stationary), the
    implicit u at v_n by O(r^n) (it is Hellmann-Feynman at v_n)."""
    e = cylinder.exact(BETA_C, L)
    n = np.arange(4, 13)
    _, derivs = fp.truncated_curve(BETA_C, L, 12, "lnz")
    trunc = np.abs(-derivs[n - 1] - e["u"])
    impl = np.abs([-fp.implicit(BETA_C, L, iterations=int(k))["derivative"] - e["u"] for k in n])
    slope = lambda err: np.polyfit(n, np.log(err), 1)[0]          # noqa: E731
    assert abs(slope(trunc) / (2 * np.log(e["rate"])) - 1) < 0.15
    assert abs(slope(impl) / np.log(e["rate"]) - 1) < 0.15


def test_convergence_criterion_stops_at_the_first_vector_within_tol():
    tol = 1e-10
    c = fp.converge(0.3, L, tol)
    T = cylinder.transfer_matrix(0.3, L)
    n = c["iterations"]
    assert c["residual"] <= tol
    assert float(fp.residual(fp.power_iteration(T, n - 1), T)) <= tol    # the last step's change
    assert float(fp.residual(fp.power_iteration(T, n - 2), T)) > tol     # the one before: larger
    assert np.allclose(c["v"], fp.power_iteration(T, n), atol=1e-15)
    e = cylinder.exact(0.3, L)
    assert np.linalg.norm(c["v"] - e["v"]) < 10 * tol


def test_error_shrinks_by_the_symmetric_gap_per_iteration():
    e = cylinder.exact(BETA_C, L)
    T = cylinder.transfer_matrix(BETA_C, L)
    err = [np.linalg.norm(np.asarray(fp.power_iteration(T, n)) - e["v"]) for n in (10, 11)]
    assert abs(err[1] / err[0] / e["rate"] - 1) < 0.02


def test_implicit_keeps_the_same_bytes_whatever_the_iterations():
    n = 6
    size = 2**L * 8
    held = {m: [fp.held_bytes(m, 0.3, L, k) for k in (n, 2 * n)] for m in fp.LOOP_METHODS}
    assert held["unrolled"] == held["staged"]
    assert held["staged"][1] - held["staged"][0] == n * (2 * size + 3 * 8)  # v_k, T v_k, 3 scalars
    assert held["implicit"][0] == held["implicit"][1]


def test_adjoint_solve_solves_the_adjoint_equation():
    beta = BETA_C
    v = jnp.asarray(fp.converge(beta, L, 1e-13)["v"])
    A = jax.jacobian(lambda x: fp.power_step(x, cylinder.transfer_matrix(beta, L)))(v)
    v_bar = jax.grad(lambda x: fp.row_bond(x, None, beta))(v)
    solve = jax.jit(fp.adjoint_solve, static_argnums=2)           # one program for both cotangents
    w, k = solve(v, beta, L, v_bar)
    assert np.linalg.norm((np.eye(2**L) - A.T) @ w - v_bar) < 1e-12 * np.linalg.norm(v_bar)
    assert int(k) > 5
    # for lnZ/N the cotangent is along T v, which A^T annihilates: w = v_bar at once
    lnz_bar = jax.grad(lambda x: fp.lnz_from_vector(x, cylinder.transfer_matrix(beta, L), beta))(v)
    w, k = solve(v, beta, L, lnz_bar)
    assert int(k) == 1 and np.linalg.norm(w - lnz_bar) < 1e-15


def test_reverse_mode_refuses_the_while_loop_and_fixed_point_does_not():
    T_of = lambda b: cylinder.transfer_matrix(b, L)                     # noqa: E731
    through_loop = lambda b: fp.lnz_from_vector(fp.while_power_iteration(T_of(b), 1e-12, 1000)[0], T_of(b), b)  # noqa: E731,E501
    with pytest.raises(ValueError, match="Reverse-mode differentiation does not work"):
        jax.grad(through_loop)(0.3)
    assert np.isfinite(fp.implicit(0.3, L)["derivative"])


@pytest.mark.parametrize("call, text", [
    (lambda: cylinder.exact(0.3, 1), "L=1 is out of range"),
    (lambda: cylinder.exact(0.3, 13), "L=13 is out of range"),
    (lambda: cylinder.exact(0.3, "x"), "L='x' is not an integer"),
    (lambda: cylinder.exact(0.0, 4), "beta=0.0 is out of range"),
    (lambda: cylinder.exact(1.5, 4), "beta=1.5 is out of range"),
    (lambda: cylinder.exact(float("nan"), 4), "beta=nan is out of range"),
    (lambda: fp.converge(0.3, 4, tol=0.0), "tol=0.0 is out of range"),
    (lambda: fp.converge(0.3, 4, tol=1e-16), "tol=1e-16 is out of range"),
    (lambda: fp.converge(0.3, 4, tol=1.0), "tol=1.0 is out of range"),
    (lambda: fp.converge(0.3, 4, max_iterations=0), "max_iterations=0 is out of range"),
    (lambda: fp.converge(0.3, 4, tol=1e-12, max_iterations=3), "max_iterations=3 is too small"),
    (lambda: fp.staged(0.3, 4, 0), "iterations=0 is out of range"),
    (lambda: fp.unrolled(0.3, 4, 10**6), "iterations=1000000 is out of range"),
    (lambda: fp.implicit(0.3, 4, iterations=-1), "iterations=-1 is out of range"),
    (lambda: fp.truncated_curve(0.3, 4, 2.5), "iterations=2.5 is not an integer"),
    (lambda: fp.staged(0.3, 4, 3, output="energy"), "output='energy' is not known"),
    (lambda: fp.held_bytes("scan", 0.3, 4, 3), "method='scan' is not known"),
    (lambda: cylinder.finite_difference(0.3, 4, h=0.0), "h=0.0 is out of range"),
    (lambda: cylinder.finite_difference(0.05, 4, h=0.1), "beta - h must stay > 0"),
])
def test_bad_input_is_one_line_naming_the_value(call, text):
    with pytest.raises(InputError) as err:
        call()
    message = str(err.value)
    assert text in message and "\n" not in message


def test_the_pages_caps_are_valid_sizes():
    assert cylinder.check_L(caps.FIXEDPOINT_L) == caps.FIXEDPOINT_L
    assert fp.check_iterations(caps.FIXEDPOINT_SWEEP) == caps.FIXEDPOINT_SWEEP


@pytest.mark.parametrize("beta", [0.0, 1e-5, 1.5])
def test_cylinder_oracles_refuse_beta_outside_their_range(beta):
    from trgad.runtime.validate import InputError

    with pytest.raises(InputError, match=r"beta=.* is out of range"):
        cylinder.exact(beta, 4)
