"""The truncated SVD's derivative rules against finite differences and closed forms.

Oracles: central finite differences of smooth losses; the closed forms d(sum s)/dM = U V^T
and d<W, U S V^T>/dM = W; the transpose identity between the tangent and the pullback;
linear solves for the resolvent; exact enumeration for the TRG's second derivative.
"""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from trgad.physics import exact, svd, trg, svdrules
from trgad.runtime.validate import InputError



def rotated(values, m=None, n=None, seed=0):
    """Q diag(values) R^T with random orthogonal Q (m x r), R (n x r): repeated values stay
    exactly repeated in exact arithmetic, but no singular vector is a coordinate axis."""
    rng = np.random.default_rng(seed)
    r = len(values)
    m, n = m or r, n or r
    Q = np.linalg.qr(rng.normal(size=(m, m)))[0][:, :r]
    R = np.linalg.qr(rng.normal(size=(n, n)))[0][:, :r]
    return (Q * np.asarray(values, dtype=float)) @ R.T


# ---- losses -----------------------------------------------------------------------------
# Bond-gauge invariant (the tensor-network case): they see U, s, Vh only through the halves
# X = U sqrt(S), Y = sqrt(S) Vh, and are unchanged by X -> X G, Y -> G^T Y with G orthogonal.

def reconstruction(W):
    return lambda U, s, Vh: jnp.sum(W * ((U * s) @ Vh))


def on_halves(C, W):
    """A loss of the halves X, Y with the bond symmetry X -> X G, Y -> G^T Y."""
    def loss(X, Y):
        return (jnp.sum(C * (X @ X.T)) ** 2 + jnp.trace(jnp.linalg.matrix_power(Y.T @ Y, 3))
                + jnp.sum(W * (X @ Y)) ** 2 + jnp.sum((X @ Y) ** 3))
    return loss


def halves(C, W):
    """The same loss through truncated_svd's outputs."""
    loss = on_halves(C, W)
    return lambda U, s, Vh: loss(U * jnp.sqrt(s), jnp.sqrt(s)[:, None] * Vh)


# Not bond-gauge invariant: they look at the singular vectors themselves.
def vectors_cubed(U, s, Vh):
    return jnp.sum(U ** 3) * jnp.sum(Vh[0] ** 2 * s[0])


def along(loss, k, A, D, rule=svd.truncated_svd):
    """phi(x) = loss(rule(A + x D, k)): a scalar function of a scalar."""
    A, D = jnp.asarray(A), jnp.asarray(D)
    return lambda x: loss(*rule(A + x * D, k))


def fd1(phi, h=1e-6):
    return (float(phi(h)) - float(phi(-h))) / (2 * h)


def fd2(phi, h=1e-3):
    return (float(phi(h)) - 2 * float(phi(0.0)) + float(phi(-h))) / h ** 2


def fd2_of_grad(phi, h=1e-5):
    """Central difference of the gradient (itself checked against differences of values)."""
    g = jax.jit(jax.grad(phi))
    return (float(g(h)) - float(g(-h))) / (2 * h)


def second_derivatives(phi):
    """phi''(0) by reverse-over-reverse, forward-over-forward, forward-over-reverse, each one
    jitted program (eagerly, every operation of a second-order rule is dispatched and
    compiled one by one)."""
    rr = float(jax.jit(jax.grad(jax.grad(phi)))(0.0))
    ff = float(jax.jit(lambda x: jax.jvp(lambda y: jax.jvp(phi, (y,), (1.0,))[1], (x,), (1.0,))[1])(0.0))
    fr = float(jax.jit(lambda x: jax.jvp(jax.grad(phi), (x,), (1.0,))[1])(0.0))
    return rr, ff, fr


# ---- issue cases: degenerate kept values ----------------------------------------------------

def test_reconstruction_gradient_is_exact_at_degenerate_kept_values():
    rule = svd.truncated_svd
    # diag(1, 1, 2, 3), all four kept: the reconstruction is the matrix, so its gradient
    # with respect to the matrix is W itself, symmetric W or not.
    A = jnp.diag(jnp.array([1.0, 1.0, 2.0, 3.0]))
    for W in (jnp.zeros((4, 4)).at[0, 1].set(1.0), jnp.zeros((4, 4)).at[0, 1].set(1.0).at[1, 0].set(1.0)):
        g = jax.jit(jax.grad(lambda M: reconstruction(W)(*rule(M, 4))))(A)
        assert np.allclose(g, W, atol=1e-14)
    # the same on rotated matrices, square and rectangular, with and without truncation
    rng = np.random.default_rng(3)
    for values, m, n, k in [([3, 2, 2, 1], 4, 4, 4), ([3, 2, 2, 1, 0.5], 6, 5, 5), ([3, 2, 2, 1], 6, 5, 4),
                             ([3, 2, 2, 1, 1], 5, 7, 3)]:
        A = jnp.asarray(rotated(values, m, n, seed=m * n))
        W = jnp.asarray(rng.normal(size=(m, n)))
        U, s, Vh = np.linalg.svd(np.asarray(A), full_matrices=False)
        Pu, Pv = U[:, :k] @ U[:, :k].T, Vh[:k].T @ Vh[:k]
        g = jax.jit(jax.grad(lambda M: reconstruction(W)(*rule(M, k))))(A)
        if k == min(m, n):
            assert np.allclose(g, W, atol=1e-12)
        elif k == len(values):
            # rank k kept whole: d A_k = dM - (1 - Pu) dM (1 - Pv), so the gradient is
            # W - (1 - Pu) W (1 - Pv)
            Qu, Qv = np.eye(m) - Pu, np.eye(n) - Pv
            assert np.allclose(g, np.asarray(W) - Qu @ np.asarray(W) @ Qv, atol=1e-12)
        else:
            # d<W, A_k>: the kept block passes W through, the kept-discarded blocks pass it
            # scaled by the resolvent; central differences are the oracle there
            D = rng.normal(size=(m, n))
            phi = along(reconstruction(W), k, A, D, rule)
            assert float(jnp.sum(g * D)) == pytest.approx(fd1(phi), rel=1e-8)
            assert np.allclose(Pu @ np.asarray(g) @ Pv, Pu @ np.asarray(W) @ Pv, atol=1e-12)


# each case costs several second-order traces: the quick tier runs the smallest (a
# degenerate kept pair, 5 x 4), the slow tier all four
@pytest.mark.parametrize("values, m, n, k", [
    ([3.0, 2.0, 2.0, 1.0], 5, 4, 4),             # degenerate kept pair, nothing discarded
    pytest.param([3.0, 2.0, 2.0, 1.0, 1.0, 0.5], 6, 8, 3, marks=pytest.mark.slow),  # truncated between 2 and 1, pairs on both sides
    pytest.param([2.0, 2.0, 2.0, 0.0, 0.0], 5, 5, 3, marks=pytest.mark.slow),  # a kept triplet, a zero discarded pair
    pytest.param([4.0, 3.0, 2.5, 1.0, 0.5], 5, 6, 3, marks=pytest.mark.slow),  # no degeneracy
])
def test_split_is_exact_to_second_order_at_degeneracy(values, m, n, k):
    rng = np.random.default_rng(len(values) + k)
    A = rotated(values, m, n, seed=k)
    D, W, C = rng.normal(size=(m, n)), rng.normal(size=(m, n)), rng.normal(size=(m, m))
    phi = along(on_halves(C + C.T, W), k, A, D, rule=svd.balanced_split)
    g = float(jax.grad(phi)(0.0))
    assert g == pytest.approx(fd1(phi), rel=1e-7)
    assert float(jax.jvp(phi, (0.0,), (1.0,))[1]) == pytest.approx(g, rel=1e-12)
    rr, ff, fr = second_derivatives(phi)
    assert rr == pytest.approx(fd2(phi, h=3e-4), rel=1e-6)
    assert ff == pytest.approx(rr, rel=1e-10) and fr == pytest.approx(rr, rel=1e-10)
    # the same loss through truncated_svd: exact first derivative, finite second ones
    psi = along(halves(C + C.T, W), k, A, D)
    assert float(jax.grad(psi)(0.0)) == pytest.approx(g, rel=1e-10)
    assert all(np.isfinite(second_derivatives(psi)))
    if len(set(values)) == len(values):        # distinct: truncated_svd is exact too
        assert second_derivatives(psi)[0] == pytest.approx(rr, rel=1e-9)


# truncated (6 x 5, k = 3), and nothing discarded on one side or both (k = m, k = n), where
# the rule leaves out the kept-discarded part that vanishes there
@pytest.mark.parametrize("m, n, k", [(6, 5, 3), (5, 5, 5), (5, 7, 5), (7, 5, 5)])
def test_split_tangent_against_differences_in_numpy(m, n, k):
    rng = np.random.default_rng(11)
    M = rotated([3.0, 2.0, 1.5, 1.0, 0.2], m, n)
    dM = rng.normal(size=M.shape)
    h = 1e-6

    def halves_at(x):
        U, s, Vh = np.linalg.svd(M + x * dM, full_matrices=False)
        r = np.sqrt(s[:k])
        return U[:, :k] * r, r[:, None] * Vh[:k], s, (U[:, k:], s[k:], Vh[k:])

    X, Y, s, disc = halves_at(0.0)
    dX, dY = svdrules.split_tangent(np, M, X, Y, s[:k], dM, disc)
    (Xp, Yp, *_), (Xm, Ym, *_) = halves_at(h), halves_at(-h)

    def fd(f):
        return (f(Xp, Yp) - f(Xm, Ym)) / (2 * h)

    # what a loss with the bond symmetry can see: X Y, X X^T, Y^T Y (sign- and gauge-free)
    assert np.allclose(X @ dY + dX @ Y, fd(lambda X, Y: X @ Y), atol=1e-8)
    assert np.allclose(dX @ X.T + X @ dX.T, fd(lambda X, Y: X @ X.T), atol=1e-8)
    assert np.allclose(dY.T @ Y + Y.T @ dY, fd(lambda X, Y: Y.T @ Y), atol=1e-8)
    # and the gauge it picks: balanced (d(X^T X) = d(Y Y^T)) with no rotation of the bond
    assert np.allclose(dX.T @ X + X.T @ dX, dY @ Y.T + Y @ dY.T, atol=1e-12)
    twist = X.T @ dX - dY @ Y.T
    assert np.allclose(twist, twist.T, atol=1e-12)


def test_other_losses_are_exact_where_kept_values_differ_and_finite_where_equal():
    rng = np.random.default_rng(7)
    D = rng.normal(size=(6, 5))
    distinct = along(vectors_cubed, 3, rotated([4.0, 3.0, 2.0, 1.0, 0.5], 6, 5), D)
    assert float(jax.grad(distinct)(0.0)) == pytest.approx(fd1(distinct), rel=1e-7)
    for value in second_derivatives(distinct):
        assert value == pytest.approx(fd2(distinct), rel=1e-5)
    equal = along(vectors_cubed, 3, rotated([4.0, 2.0, 2.0, 1.0, 0.5], 6, 5), D)
    assert np.isfinite(float(jax.grad(equal)(0.0)))
    assert all(np.isfinite(second_derivatives(equal)))


def test_the_old_lorentzian_rule_fails_the_reconstruction_case():
    # What this module replaced: 1/(s_i - s_j) -> x/(x^2 + eps) on the whole kept-kept term
    # keeps only the antisymmetric part of W at a degenerate pair (the example).
    s = np.array([3.0, 2.0, 1.0, 1.0])
    W = np.zeros((4, 4)); W[2, 3] = 1.0
    J = W * s[None, :]             # U = V = I: J = U^T W V S, K = V^T W^T U S
    K = W.T * s[None, :]
    diff = s[None, :] - s[:, None]
    f = diff / (diff ** 2 + 1e-20) * (1 - np.eye(4))
    g = (1 - np.eye(4)) / (s[None, :] + s[:, None])
    A, B = J + K, J - K
    old = 0.5 * (f * A + g * B) + (0.5 * (f * A - g * B)).T
    assert old[2, 3] == pytest.approx(0.5) and old[3, 2] == pytest.approx(-0.5)
    new = jax.grad(lambda M: reconstruction(jnp.asarray(W))(*svd.truncated_svd(M, 4)))(jnp.diag(jnp.asarray(s)))
    assert np.allclose(new, W, atol=1e-14)


# ---- scale ------------------------------------------------------------------------------------

# the quick tier: the ends of the float64 range; the slow tier every scale between
@pytest.mark.parametrize("scale", [1e-300] + [pytest.param(s, marks=pytest.mark.slow) for s in (1e-150, 1e-20, 1.0, 1e20, 1e150)]
                         + [1e300])
def test_rules_are_scale_invariant_over_the_float64_range(scale):
    # each derivative is one jitted program (eagerly, every operation of a second-order rule
    # would be dispatched, and compiled, one by one)
    rule = svd.truncated_svd
    B = np.array([[4.0, 1.0, 0.0], [1.0, 3.0, 1.0], [0.0, 1.0, 2.0]])
    U, s, Vh = np.linalg.svd(B)
    E = np.array([[0.0, 1.0, 2.0], [1.0, 0.0, 0.5], [-1.0, 0.5, 1.0]])
    for k in (3, 2):
        g = jax.jit(jax.grad(lambda M: jnp.sum(rule(M, k)[1])))(jnp.asarray(B * scale))
        assert np.allclose(g, U[:, :k] @ Vh[:k], atol=1e-14)
        # second derivative of sum(s) along E: homogeneous of degree 1 in the scale
        phi = lambda x, c=scale: jnp.sum(rule(jnp.asarray(B * c) + x * jnp.asarray(E * c), k)[1]) / c  # noqa: E731
        ref = lambda x: jnp.sum(rule(jnp.asarray(B) + x * jnp.asarray(E), k)[1])  # noqa: E731
        want = float(jax.jit(jax.grad(jax.grad(ref)))(0.0))
        assert float(jax.jit(jax.grad(jax.grad(phi)))(0.0)) == pytest.approx(want, rel=1e-12)
        ff = float(jax.jit(lambda x: jax.jvp(lambda y: jax.jvp(phi, (y,), (1.0,))[1], (x,), (1.0,))[1])(0.0))
        assert ff == pytest.approx(want, rel=1e-12)
    # the halves scale like sqrt(c): sum(X * X) = sum(s), with the same closed-form gradient
    for k in (3, 2):
        g = jax.jit(jax.grad(lambda M: jnp.sum(svd.balanced_split(M, k)[0] ** 2)))(jnp.asarray(B * scale))
        assert np.allclose(g, U[:, :k] @ Vh[:k], atol=1e-14)
        phi = lambda x, c=scale: jnp.sum(svd.balanced_split(  # noqa: E731
            jnp.asarray(B * c) + x * jnp.asarray(E * c), k)[1] ** 2) / c
        ref = lambda x: jnp.sum(svd.balanced_split(jnp.asarray(B) + x * jnp.asarray(E), k)[1] ** 2)  # noqa: E731
        assert float(jax.jit(jax.grad(jax.grad(phi)))(0.0)) == pytest.approx(float(jax.jit(jax.grad(jax.grad(ref)))(0.0)), rel=1e-12)


# ---- preconditions ----------------------------------------------------------------------------

def test_truncations_without_a_derivative_are_refused_or_defined():
    A = jnp.diag(jnp.array([1.0, 1.0, 2.0, 3.0]))
    with pytest.raises(InputError, match=r"k=3 cuts inside a multiplet"):
        svd.truncated_svd(A, 3)
    rank2 = jnp.asarray(rotated([2.0, 1.0, 0.0, 0.0], seed=1))
    with pytest.raises(InputError, match=r"k=3 keeps a zero singular value: at most 2"):
        svd.balanced_split(rank2, 3)
    with pytest.raises(InputError, match=r"k=5 is out of range: k must be in \[1, 4\]"):
        svd.truncated_svd(A, 5)
    # Under jit nothing can be checked: the pairs without a derivative contribute 0, never NaN.
    W = jnp.asarray(np.random.default_rng(0).normal(size=(4, 4)))
    for M, k in ((A, 3), (rank2, 3)):
        g = jax.jit(jax.grad(lambda M: reconstruction(W)(*svd.truncated_svd(M, k))))(M)
        assert np.all(np.isfinite(g))
        h = jax.jit(jax.hessian(lambda x: reconstruction(W)(*svd.truncated_svd(M + x * W, k))))(0.0)
        assert np.isfinite(h)
        g = jax.jit(jax.grad(lambda M: jnp.sum(W * (jnp.dot(*svd.balanced_split(M, k))))))(M)
        assert np.all(np.isfinite(g))


def test_check_truncation_accepts_a_near_degenerate_but_distinct_cut():
    s = np.array([3.0, 1.0 + 1e-7, 1.0, 0.5])
    assert svd.check_truncation(s, 2) == 2
    with pytest.raises(InputError, match="multiplet"):
        svd.check_truncation(np.array([3.0, 1.0 + 1e-15, 1.0]), 2)


# ---- the two rules against each other and against differences --------------------------------

@pytest.mark.parametrize("m, n, k", [(7, 7, 7), (7, 7, 3), (9, 5, 5), (9, 5, 2), (5, 9, 4)])
def test_pullback_is_the_transpose_of_the_tangent(m, n, k):
    rng = np.random.default_rng(m * n + k)
    M = rng.normal(size=(m, n))
    U_all, s_all, Vh_all = np.linalg.svd(M, full_matrices=False)
    U, s, Vh = U_all[:, :k], s_all[:k], Vh_all[:k]
    dM = rng.normal(size=(m, n))
    bars = rng.normal(size=U.shape), rng.normal(size=s.shape), rng.normal(size=Vh.shape)
    for xp in (np, jnp):
        args = [xp.asarray(a) for a in (M, U, s, Vh)]
        disc = tuple(xp.asarray(a) for a in (U_all[:, k:], s_all[k:], Vh_all[k:]))
        tangents = svdrules.svd_tangent(xp, *args, xp.asarray(dM), disc)
        M_bar = svdrules.svd_pullback(xp, *args, *(xp.asarray(b) for b in bars), disc)
        lhs = sum(float(np.sum(np.asarray(b) * np.asarray(t))) for b, t in zip(bars, tangents))
        assert lhs == pytest.approx(float(np.sum(np.asarray(M_bar) * dM)), rel=1e-12)
    # the tangent against central differences of a sign-fixed SVD
    h = 1e-6

    def parts(x):
        Ux, sx, Vhx = np.linalg.svd(M + x * dM, full_matrices=False)
        sign = np.sign(np.sum(Ux[:, :k] * U, axis=0))
        return Ux[:, :k] * sign, sx[:k], Vhx[:k] * sign[:, None]

    dU, ds, dVh = svdrules.svd_tangent(np, M, U, s, Vh, dM)
    for t, plus, minus in zip((dU, ds, dVh), parts(h), parts(-h)):
        assert np.allclose(t, (plus - minus) / (2 * h), rtol=1e-6, atol=1e-7)


def test_degenerate_discarded_values_do_not_matter():
    rng = np.random.default_rng(1)
    base = rng.normal(size=(16, 4)) @ rng.normal(size=(4, 16))  # rank 4: 12 zero values
    direction = rng.normal(size=(16, 16))

    def loss(U, s, Vh):
        return jnp.sum(((U * s) @ Vh) ** 3) + jnp.sum(jnp.log(s))

    phi = along(loss, 3, base + 0.2 * direction, direction)
    assert float(jax.grad(phi)(0.0)) == pytest.approx(fd1(phi), rel=1e-7)
    rr, ff, fr = second_derivatives(phi)
    assert rr == pytest.approx(fd2_of_grad(phi), rel=1e-7)
    assert ff == pytest.approx(rr, rel=1e-9) and fr == pytest.approx(rr, rel=1e-9)


@pytest.mark.parametrize("m, p", [(12, 12), (12, 7), (7, 12)])
def test_resolvent_equals_linear_solves_and_its_derivative_equals_finite_differences(m, p):
    rng = np.random.default_rng(m + p)
    P = rng.normal(size=(m, p))
    W_all, w_all, Vh_all = np.linalg.svd(P, full_matrices=False)
    W, w = W_all[:, 2:], w_all[2:]          # eigenbasis of the part kept in P below
    P = P - (W_all[:, :2] * w_all[:2]) @ Vh_all[:2]
    shifts = w_all[:2] ** 2
    R = rng.normal(size=(m, 2))
    oracle = np.stack([np.linalg.solve(sh * np.eye(m) - P @ P.T, R[:, i]) for i, sh in enumerate(shifts)], 1)
    assert np.allclose(svdrules.resolvent(np, P, shifts, R, W, w), oracle, rtol=1e-11, atol=1e-12)
    args = [jnp.asarray(a) for a in (P, shifts, R, W, w)]
    assert np.allclose(svdrules.resolvent(jnp, *args), oracle, rtol=1e-11, atol=1e-12)

    # first and second derivatives in P, shifts and R at once, against the linear solves
    dirs = [rng.normal(size=a.shape) for a in (P, shifts, R)]
    C = rng.normal(size=(m, 2))

    def loss_oracle(x):
        Px, sx, Rx = (a + x * d for a, d in zip((P, shifts, R), dirs))
        return sum(C[:, i] @ np.linalg.solve(sx[i] * np.eye(m) - Px @ Px.T, Rx[:, i]) for i in range(2))

    def loss(x):
        Px, sx, Rx = (a + x * d for a, d in zip(args[:3], dirs))
        return jnp.sum(C * svdrules.resolvent(jnp, Px, sx, Rx, args[3], args[4]))

    assert float(jax.grad(loss)(0.0)) == pytest.approx(fd1(loss_oracle), rel=1e-7)
    assert float(jax.jvp(loss, (0.0,), (1.0,))[1]) == pytest.approx(fd1(loss_oracle), rel=1e-7)
    assert float(jax.grad(jax.grad(loss))(0.0)) == pytest.approx(fd2(loss_oracle, h=1e-4), rel=1e-5)


@pytest.mark.parametrize("xp", [np, jnp], ids=["numpy", "jax"])
def test_frozen_solves_invert_their_operators(xp):
    # the split rule's four solvers, against the operators they invert (dense NumPy algebra)
    rng = np.random.default_rng(3)
    k, m, n, r = 3, 7, 6, 4
    s = np.array([1.0, 0.6, 0.3])
    U_d = np.linalg.qr(rng.normal(size=(m, r)))[0]
    V_d = np.linalg.qr(rng.normal(size=(n, r)))[0]
    w = np.array([0.5, 0.2, 0.1, 0.05])                  # no w**2 equals an s_i**2
    A_left, A_right = U_d @ np.diag(w**2) @ U_d.T, V_d @ np.diag(w**2) @ V_d.T
    cast = (lambda a: a) if xp is np else jnp.asarray
    inv, lyap, left, right = svdrules.frozen_solves(
        xp, cast(np.diag(s)), cast(s), lambda Z: cast(A_left) @ Z, lambda Z: cast(A_right) @ Z,
        cast(U_d), cast(V_d), cast(w))
    S = np.diag(s)
    Z, Q = rng.normal(size=(k, 5)), rng.normal(size=(k, k))
    RL, RR = rng.normal(size=(m, k)), rng.normal(size=(n, k))
    assert np.allclose(S @ np.asarray(inv(cast(Z))), Z, atol=1e-13)
    X = np.asarray(lyap(cast(Q)))
    assert np.allclose(S @ X + X @ S, Q, atol=1e-13)
    XL, XR = np.asarray(left(cast(RL))), np.asarray(right(cast(RR)))
    assert np.allclose(XL @ S @ S - A_left @ XL, RL, atol=1e-12)
    assert np.allclose(XR @ S @ S - A_right @ XR, RR, atol=1e-12)


# ---- the TRG under every transform ---------------------------------------------------------

@pytest.mark.slow      # second order by five transforms at 4 and 6 steps, each one jitted program
@pytest.mark.parametrize("steps", [4, 6])
def test_every_transform_of_lnz_agrees_and_matches_exact_enumeration(steps):
    beta = 0.3
    f = lambda b, s=tuple(trg.truncation_schedule(16, steps, beta)): trg.lnz_per_site(b, s)  # noqa: E731
    g = float(jax.jit(jax.grad(f))(beta))
    assert float(jax.jit(lambda b: jax.jvp(f, (b,), (1.0,))[1])(beta)) == pytest.approx(g, rel=1e-13)
    assert float(jax.jit(jax.jacfwd(f))(beta)) == pytest.approx(g, rel=1e-13)
    rr = float(jax.jit(jax.grad(jax.grad(f)))(beta))
    second = {
        "hessian": jax.hessian(f),
        "jvp(jvp)": lambda b: jax.jvp(lambda x: jax.jvp(f, (x,), (1.0,))[1], (b,), (1.0,))[1],
        "jvp(vjp)": lambda b: jax.jvp(lambda x: jax.vjp(f, x)[1](1.0)[0], (b,), (1.0,))[1],
    }
    for name, fn in second.items():
        assert float(jax.jit(fn)(beta)) == pytest.approx(rr, rel=1e-9), name
    if steps == 4:   # nothing truncated: the 16-site torus, exactly
        ex = exact.torus_exact(beta, 4)
        assert g == pytest.approx(ex["dlnz"], rel=1e-13)
        assert rr == pytest.approx(ex["d2lnz"], rel=1e-13)
