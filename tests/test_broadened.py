"""tensorgrad's broadened SVD rule (trgad.topics.broadened) against independent oracles.

Oracles: central finite differences of a bond-gauge-invariant loss (well separated singular
values, first and second derivative); the closed form d<W, U S V^T>/dM = W and its
antisymmetric part on a degenerate pair (the documented loss of the rule); exact
enumeration of the 8-site torus for the TRG through the rule; the attribution weight changes
no first derivative.
"""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from trgad.topics import broadened
from trgad.physics import exact, svd, trg
from trgad.runtime.validate import InputError


def rotated(values, m, n, seed=0):
    """Q diag(values) R^T with random orthonormal Q (m x r), R (n x r): no singular vector is
    a coordinate axis; equal values stay equal in exact arithmetic."""
    rng = np.random.default_rng(seed)
    r = len(values)
    Q = np.linalg.qr(rng.normal(size=(m, m)))[0][:, :r]
    R = np.linalg.qr(rng.normal(size=(n, n)))[0][:, :r]
    return (Q * np.asarray(values, dtype=float)) @ R.T


def bond_loss(X, Y):
    """Unchanged by X -> X G, Y -> G^T Y (G orthogonal): a tensor-network loss of one bond."""
    C = jnp.arange(X.shape[0] ** 2, dtype=X.dtype).reshape(X.shape[0], X.shape[0]) / 10.0
    return jnp.sum((X @ Y) ** 3) + jnp.sum(C * (X @ X.T)) ** 2


SEPARATED = [3.0, 2.1, 1.4, 0.8, 0.5]        # gaps >> sqrt(1e-12): broadening error ~1e-12


@pytest.mark.parametrize("shape", [(5, 5), pytest.param((7, 5), marks=pytest.mark.slow),
                                   pytest.param((5, 7), marks=pytest.mark.slow)])
def test_separated_gradient_matches_finite_differences_and_exact_rule(shape):
    """Square (the TRG's case) and both non-square cases (tensorgrad's projector terms)."""
    m, n = shape
    A = rotated(SEPARATED, m, n)
    D = np.random.default_rng(3).normal(size=shape)
    k = 3
    loss = jax.jit(lambda M: bond_loss(*broadened.split(M, k)))
    g = np.asarray(jax.jit(jax.grad(loss))(jnp.asarray(A)))
    h = 1e-6
    fd = (float(loss(jnp.asarray(A + h * D))) - float(loss(jnp.asarray(A - h * D)))) / (2 * h)
    assert abs(np.sum(g * D) - fd) < 1e-6 * abs(fd)
    g_exact = np.asarray(jax.jit(jax.grad(lambda M: bond_loss(*svd.balanced_split(M, k))))(
        jnp.asarray(A)))
    assert np.max(np.abs(g - g_exact)) < 1e-9 * np.max(np.abs(g_exact))


def test_separated_second_derivative_reverse_over_reverse_matches_finite_differences():
    A, D = rotated(SEPARATED, 5, 5), np.random.default_rng(4).normal(size=(5, 5))
    phi = jax.jit(lambda x: bond_loss(*broadened.split(jnp.asarray(A) + x * D, 3)))
    second = float(jax.jit(jax.grad(jax.grad(phi)))(0.0))
    h = 1e-4
    fd = (float(phi(h)) - 2 * float(phi(0.0)) + float(phi(-h))) / h ** 2
    assert abs(second - fd) < 1e-5 * abs(fd)


def test_degenerate_pair_keeps_only_the_antisymmetric_part():
    """<W, U S V^T> has gradient W (the reconstruction is M).  In the singular basis,
    P = U^T grad V, the rule returns (W~ - W~^T)/2 on a degenerate pair (W~ = U^T W V) and
    W~ everywhere else: the symmetric part of the pair is dropped."""
    A = rotated([3.0, 2.0, 2.0, 1.0], 4, 4, seed=1)
    W = np.random.default_rng(2).normal(size=(4, 4))
    loss = lambda M: jnp.sum(W * jnp.dot(*broadened.split(M, 4)))           # noqa: E731
    g = np.asarray(jax.jit(jax.grad(loss))(jnp.asarray(A)))
    U, s, V = (np.asarray(x) for x in broadened.svd(jnp.asarray(A)))
    P, Wt = U.T @ g @ V, U.T @ W @ V
    expected = Wt.copy()
    expected[1, 2] = (Wt[1, 2] - Wt[2, 1]) / 2
    expected[2, 1] = -expected[1, 2]
    assert np.max(np.abs(P - expected)) < 1e-8
    assert abs(P[1, 2] - Wt[1, 2]) > 0.1              # and the exact gradient is W
    exact_loss = lambda M: jnp.sum(W * jnp.dot(*svd.balanced_split(M, 4)))  # noqa: E731
    g_exact = np.asarray(jax.jit(jax.grad(exact_loss))(jnp.asarray(A)))
    assert np.max(np.abs(g_exact - W)) < 1e-10


def test_forward_mode_is_refused():
    """A custom_vjp has no forward mode: the reason c goes reverse over reverse."""
    A = jnp.asarray(rotated(SEPARATED, 5, 5))
    with pytest.raises(TypeError):
        jax.jvp(lambda M: broadened.svd(M)[1], (A,), (A,))


@pytest.mark.parametrize("steps", [2, pytest.param(3, marks=pytest.mark.slow)])
def test_trg_through_the_rule_on_the_small_tori(steps):
    """Two or three untruncated steps ([2, 4] or [2, 4, 4]; the zero singular values of a
    rank-deficient matrix paired by the rule) are the 4- or 8-site torus: lnZ/N, u and c by
    enumeration (three steps: slow tier)."""
    beta = 0.3
    ks = trg.truncation_schedule(16, steps, beta)
    got = broadened.value_and_derivatives(beta, ks)
    ref = exact.torus_exact(beta, steps)
    assert abs(got["lnz_per_site"] - ref["lnz_per_site"]) < 1e-13
    assert abs(got["u"] + ref["dlnz"]) < 1e-10
    assert abs(got["c"] - beta ** 2 * ref["d2lnz"]) < 1e-8


def test_exact_discarded_pairs_change_only_pairs_of_discarded_values():
    """A first derivative never meets a pair of two discarded values (their cotangents are
    0), so the weight leaves it unchanged; with all pairs kept it changes nothing."""
    A, D = rotated(SEPARATED, 5, 5), np.random.default_rng(5).normal(size=(5, 5))
    for k in (3, 5):
        grads = [np.asarray(jax.jit(jax.grad(lambda M: bond_loss(*broadened.split(M, k, 1e-4, w))))(
            jnp.asarray(A))) for w in (0.0, 1.0)]
        assert np.max(np.abs(grads[0] - grads[1])) < 1e-12 * np.max(np.abs(grads[0]))
    phi = lambda x, w: bond_loss(*broadened.split(jnp.asarray(A) + x * D, 3, 1e-4, w))  # noqa: E731
    second = [float(jax.jit(jax.grad(jax.grad(phi)))(0.0, w)) for w in (0.0, 1.0)]
    assert abs(second[0] - second[1]) > 1e-8 * abs(second[1])      # a broadening of 1e-4 shows


def test_bad_input():
    with pytest.raises(InputError, match="epsilon"):
        broadened.ops(0.0)
    with pytest.raises(InputError, match="exact_discarded"):
        broadened.ops(exact_discarded=-0.5)
    with pytest.raises(InputError, match="discarded_pairs"):
        broadened.value_and_derivatives(0.3, [2], discarded_pairs="none")
    with pytest.raises(InputError, match="k=5"):
        broadened.split(jnp.eye(4), 5)
    with pytest.raises(InputError, match="beta"):
        broadened.value_and_derivatives(float("nan"), [2])
