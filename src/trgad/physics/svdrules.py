"""The SVD's derivative rules in closed form, exact on degenerate spectra (first-order
perturbation theory of the SVD restricted to the k kept triplets; e.g. Townsend,
"Differentiating the singular value decomposition", 2016).

:func:`svd_tangent` and :func:`svd_pullback` for U, s, V^T themselves; :func:`split_tangent`
and :func:`split_pullback` for the balanced split's halves X = U sqrt(S), Y = sqrt(S) V^T.
Both sum the kept-discarded pairs in closed form through the resolvent of the discarded part
(:func:`resolvent`), so two discarded values are never paired, and :func:`gauge_inverse`
confines 1/(s_j^2 - s_i^2) to the gauge term.  Everything is in units of the largest
singular value, so the rules hold over the float64 range.  They are written against an
array namespace ``xp`` (``numpy`` or ``jax.numpy``): :mod:`trgad.physics.svd` wraps them for
JAX, the keyed engine calls the SVD rules with NumPy.
"""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from ..runtime.validate import check_finite_matrix

#: Two singular values whose relative gap |s_a - s_b| / (s_a + s_b) is at most this count as
#: equal: the gauge term of such a kept pair is 0, and a truncation between them is refused.
DEGENERATE_RTOL = 1e-10

def gauge_inverse(xp, s, rtol=DEGENERATE_RTOL):
    """F[a, b] = 1/(s_b^2 - s_a^2) for a != b, and 0 on the diagonal and on pairs equal to
    ``rtol``.  ``s``: (k,) array; returns (k, k).  The coefficient of the gauge term: on an
    exactly degenerate pair the rotation it describes is a symmetry of the loss."""
    d = s[None, :] - s[:, None]
    t = s[None, :] + s[:, None]
    apart = xp.abs(d) > rtol * t
    return xp.where(apart, 1.0 / xp.where(apart, d * t, 1.0), 0.0)

def _inverse_or_zero(xp, x):
    """1/x, and 0 where x is exactly 0 (a pair with no derivative: see :func:`resolvent`)."""
    zero = x == 0
    return xp.where(zero, 0.0, 1.0 / xp.where(zero, 1.0, x))

def _perp(xp, U, R):
    """(1 - U U^T) R, projected twice ("twice is enough", Kahan): what is left along U is
    O(eps^2) instead of O(eps), so a small shift of the resolvent cannot amplify it."""
    R = R - U @ (U.T @ R)
    return R - U @ (U.T @ R)

def _frame(xp, M, U, s, Vh, discarded):
    """What both rules need, in units of c = s[0]: V, 1/c, s/c, M_perp/c, the kept-kept
    factors G = c/(s_i + s_j) and F = c^2/(s_j^2 - s_i^2) (zero diagonals), and the
    discarded triplets with their singular values divided by c."""
    k = s.shape[0]
    if discarded is None:
        if xp is not np:
            raise ValueError("pass discarded=(U_d, s_d, Vh_d) unless xp is numpy")
        U_all, s_all, Vh_all = np.linalg.svd(check_finite_matrix(M), full_matrices=False)
        discarded = (U_all[:, k:], s_all[k:], Vh_all[k:, :])
    U_d, s_d, Vh_d = discarded
    c = s[0] if xp is np else jax.lax.stop_gradient(s[0])  # the rules are homogeneous in c
    inv_c = 1.0 / c
    st = s * inv_c
    V = Vh.T
    G = _inverse_or_zero(xp, st[:, None] + st[None, :]) * (1.0 - xp.eye(k, dtype=st.dtype))
    F = gauge_inverse(xp, st)
    P = _perp(xp, U, _perp(xp, V, (M * inv_c - (U * st[None, :]) @ Vh).T).T)
    return V, inv_c, st, P, G, F, (U_d, s_d * inv_c, Vh_d)

def svd_tangent(xp, M, U, s, Vh, dM, discarded=None):
    """Tangents (dU, ds, dVh) of the truncated SVD ``M ~= U @ diag(s) @ Vh`` along dM.

    Parameters
    ----------
    xp : module, ``numpy`` or ``jax.numpy``.
    M : (m, n) array.  U, s, Vh : (m, k), (k,), (k, n), its k largest singular triplets
        (s descending, s[0] > 0).  dM : (m, n) tangent.
    discarded : (U_d (m, r-k), s_d (r-k,), Vh_d (r-k, n)), r = min(m, n), the other
        triplets of the same SVD: the eigenbasis of the resolvent, never differentiated.
        Required with JAX; recomputed from M with NumPy when omitted.

    Returns
    -------
    dU (m, k), ds (k,), dVh (k, n).  With dP = U^T dM V: ds = diag dP,
    dU = U (Xi + Phi) + X and dV = V (Xi' + Phi) + Y, where Xi_ji = dP_ji / (s_i + s_j),
    Xi'_ji = dP_ij / (s_i + s_j), Phi = S ((dP + dP^T) o F) is the gauge term
    (F = :func:`gauge_inverse`) and X, Y are the kept-discarded parts,
    X_i = (s_i^2 - M_perp M_perp^T)^-1 (1 - U U^T)(dM v_i s_i + M_perp dM^T u_i) (Y alike).
    Exact where the kept values are distinct; see the module docstring where they are not.

    Raises ValueError if ``discarded`` is omitted with JAX.
    """
    V, inv_c, st, P, G, F, (U_d, w, Vh_d) = _frame(xp, M, U, s, Vh, discarded)
    dP = U.T @ dM @ V
    Phi = st[:, None] * ((dP + dP.T) * F)
    shifts = st ** 2
    RU = _perp(xp, U, dM @ V) * st[None, :] + P @ (dM.T @ U)
    RV = _perp(xp, V, dM.T @ U) * st[None, :] + P.T @ (dM @ V)
    dU = (U @ (dP * G + Phi) + resolvent(xp, P, shifts, RU, U_d, w)) * inv_c
    dV = (V @ (dP.T * G + Phi) + resolvent(xp, P.T, shifts, RV, Vh_d.T, w)) * inv_c
    return dU, xp.diagonal(dP), dV.T

def svd_pullback(xp, M, U, s, Vh, U_bar, s_bar, Vh_bar, discarded=None):
    """Cotangent of M for the truncated SVD: the transpose of :func:`svd_tangent`.

    Parameters as :func:`svd_tangent`, with the cotangents U_bar (m, k), s_bar (k,) and
    Vh_bar (k, n) of the three outputs (zeros where an output is unused).  Returns the (m, n)
    cotangent of M.  With J = U^T U_bar, K = V^T V_bar, A = J + K:
    M_bar = U [diag(s_bar) + (J + K^T) o G + (SA - (SA)^T) o F] V^T + kept-discarded terms.
    The gauge term multiplies the antisymmetric part of S A, which is zero for a loss
    invariant under the bond gauge.  Raises ValueError if ``discarded`` is omitted with JAX.
    """
    V, inv_c, st, P, G, F, (U_d, w, Vh_d) = _frame(xp, M, U, s, Vh, discarded)
    J = U.T @ U_bar
    K = V.T @ Vh_bar.T
    SA = st[:, None] * (J + K)
    P_bar = ((J + K.T) * G + (SA - SA.T) * F) * inv_c + xp.diag(s_bar)
    shifts = st ** 2
    ZU = resolvent(xp, P, shifts, _perp(xp, U, U_bar), U_d, w)
    ZV = resolvent(xp, P.T, shifts, _perp(xp, V, Vh_bar.T), Vh_d.T, w)
    rest = (ZU * st[None, :] + P @ ZV) @ Vh + U @ (st[:, None] * ZV.T + ZU.T @ P)
    return U @ P_bar @ Vh + rest * inv_c

def resolvent(xp, P, shifts, R, W, w):
    """X[:, i] = (shifts[i] - P P^T)^-1 R[:, i], computed in a known eigenbasis.

    Parameters
    ----------
    xp : module, ``numpy`` or ``jax.numpy``.
    P : (m, p) array with P P^T = W diag(w**2) W^T (W: (m, q) orthonormal columns).
    shifts : (k,) array.  R : (m, k) array.
    W, w : the eigenbasis (left singular vectors and singular values of P); never
        differentiated.

    Returns
    -------
    (m, k) array X = R / shifts + W [(1/(shifts - w^2) - 1/shifts) * (W^T R)]: two matrix
    products instead of one LU factorisation per shift.  A shift equal to some w**2 (a kept
    singular value equal to a discarded one) or to 0 has no inverse: its term is 0, the
    value this module documents for a pair without a derivative.

    With JAX it is a ``jax.lax.custom_linear_solve`` of the symmetric operator
    X -> X shifts - P (P^T X): derivatives flow through P and the shifts by implicit
    differentiation, to any order and in both modes, never through the eigenbasis.
    """
    if xp is np:
        return _resolvent_eig(np, shifts, R, W, w)

    def matvec(X):
        return X * shifts[None, :] - P @ (P.T @ X)

    def solve(_, b):
        frozen = jax.lax.stop_gradient((shifts, W, w))
        return _resolvent_eig(jnp, frozen[0], b, frozen[1], frozen[2])

    return jax.lax.custom_linear_solve(matvec, R, solve, symmetric=True)

def _resolvent_eig(xp, shifts, R, W, w):
    inv = _inverse_or_zero(xp, shifts)
    weights = _inverse_or_zero(xp, shifts[None, :] - (w ** 2)[:, None]) - inv[None, :]
    return R * inv[None, :] + W @ (weights * (W.T @ R))


# ---- the balanced split: the halves a tensor network puts at the two ends of a bond --------

def frozen_solves(xp, Sigma, s, A_left, A_right, U_d, V_d, w):
    """Solvers for the covariant split rule (:func:`split_tangent`) at a point where
    Sigma = X^T X = diag(s).

    Parameters
    ----------
    xp : module, ``numpy`` or ``jax.numpy``.
    Sigma : (k, k) array equal to diag(s) here (with JAX the value derivatives flow through).
    s : (k,) positive array, Sigma's diagonal (an eigenbasis: never differentiated).
    A_left, A_right : functions Z -> A Z for the symmetric A = M_perp M_perp^T (m, m) and
        A = M_perp^T M_perp (n, n).
    U_d, V_d : (m, r) and (n, r) orthonormal columns with A_left = U_d diag(w**2) U_d^T and
        A_right = V_d diag(w**2) V_d^T; w : (r,) array (eigenbases: never differentiated).

    Returns
    -------
    (inv, lyap, left, right), functions of one array: inv(Z) = Sigma^-1 Z (Z: (k, j));
    lyap(Z) = the X with Sigma X + X Sigma = Z ((k, k)); left(R) = the X with
    X Sigma^2 - A_left X = R ((m, k)); right(R) the same with A_right ((n, k)).  A pair with
    no inverse (s_i + s_j = 0, or s_i**2 equal to some w**2) contributes 0, as in
    :func:`resolvent`.  The solves use the known eigenbases, never differentiated; with JAX
    each is a ``jax.lax.custom_linear_solve`` of its operator, so derivatives flow through
    Sigma and M_perp by implicit differentiation, to any order.
    """
    if xp is np:
        inv = lambda Z: Z / s[:, None]                                           # noqa: E731
        lyap = lambda Z: Z * _inverse_or_zero(np, s[:, None] + s[None, :])       # noqa: E731
        left = lambda R: _resolvent_eig(np, s ** 2, R, U_d, w)                  # noqa: E731
        right = lambda R: _resolvent_eig(np, s ** 2, R, V_d, w)                 # noqa: E731
        return inv, lyap, left, right
    s, U_d, V_d, w = jax.lax.stop_gradient((s, U_d, V_d, w))
    lin = jax.lax.custom_linear_solve

    def inv(Z):
        return lin(lambda x: Sigma @ x, Z, lambda _, b: b / s[:, None], symmetric=True)

    def lyap(Z):
        return lin(lambda x: Sigma @ x + x @ Sigma, Z,
                   lambda _, b: b * _inverse_or_zero(jnp, s[:, None] + s[None, :]), symmetric=True)

    def left(R):
        return lin(lambda x: x @ (Sigma @ Sigma) - A_left(x), R,
                   lambda _, b: _resolvent_eig(jnp, s ** 2, b, U_d, w), symmetric=True)

    def right(R):
        return lin(lambda x: x @ (Sigma @ Sigma) - A_right(x), R,
                   lambda _, b: _resolvent_eig(jnp, s ** 2, b, V_d, w), symmetric=True)

    return inv, lyap, left, right

def _split_frame(xp, M, X, Y, s, discarded):
    """Covariant quantities of the split (X, Y) of M, in units of c = s[0]: the halves X/sqrt c,
    Y/sqrt c, Sigma = X^T X, the left inverses X+ = Sigma^-1 X^T and (Y+)^T = Sigma^-1 Y,
    M_perp/c = (1 - X X+) M (1 - Y+ Y) / c (None where k = m or k = n: then it is 0), and
    the solvers of :func:`frozen_solves`."""
    c = s[0] if xp is np else jax.lax.stop_gradient(s[0])
    rc = xp.sqrt(c)
    Xt, Yt, st = X / rc, Y / rc, s / c
    U_d, s_d, Vh_d = discarded
    Sigma = Xt.T @ Xt
    holder = {}
    inv, lyap, left, right = frozen_solves(
        xp, Sigma, st, lambda Z: 0.0 * Z if holder["P"] is None else holder["P"] @ (holder["P"].T @ Z),
        lambda Z: 0.0 * Z if holder["P"] is None else holder["P"].T @ (holder["P"] @ Z),
        U_d, Vh_d.T, s_d / c)
    Xp, Ypt = inv(Xt.T), inv(Yt)

    def perp_left(R):
        for _ in range(2):
            R = R - Xt @ (Xp @ R)
        return R

    def perp_right(R):            # (1 - Y+ Y) acting on an (n, j) array
        for _ in range(2):
            R = R - Ypt.T @ (Yt @ R)
        return R

    if Xt.shape[0] == Xt.shape[1] or Yt.shape[0] == Yt.shape[1]:
        holder["P"] = None        # k = m or k = n: a projector of M_perp is 0, so is M_perp
    else:
        holder["P"] = perp_left(perp_right((M / c - Xt @ Yt).T).T)
    return c, rc, Xt, Yt, Sigma, Xp, Ypt, holder["P"], perp_left, perp_right, lyap, left, right

def split_tangent(xp, M, X, Y, s, dM, discarded):
    """Tangents (dX, dY) of the balanced split X = U sqrt(S), Y = sqrt(S) V^T of M's k
    largest singular triplets, along dM.

    Parameters
    ----------
    xp : module, ``numpy`` or ``jax.numpy``.
    M : (m, n).  X : (m, k), Y : (k, n), the halves; s : (k,), the kept singular values
        (X^T X = Y Y^T = diag s at this point).  dM : (m, n).
    discarded : (U_d, s_d, Vh_d), the other triplets of the same SVD (eigenbases only).

    Returns
    -------
    dX (m, k), dY (k, n), the unique tangent with X dY + dX Y = dM_k (the tangent of the
    truncated matrix), d(X^T X) = d(Y Y^T) (the split stays balanced) and X^T dX - dY Y^T
    symmetric (no rotation of the bond).  With Q = X+ dM Y+ the kept part is dX = X alpha,
    dY = (Q - alpha) Y, where alpha = sigma/2 + omega and sigma, omega solve the Lyapunov
    equations Sigma z + z Sigma = Q Sigma + Sigma Q^T and = (Q Sigma - Sigma Q^T)/2: the only
    denominators among kept values are s_i + s_j.  The kept-discarded part solves the
    Sylvester equations Z Sigma^2 - M_perp M_perp^T Z = (1 - P_X)(dM Y^T Sigma + M_perp dM^T X)
    (and its mirror).  Every formula is covariant under X -> X G, Y -> G^T Y (G orthogonal),
    so derivatives of every order are exact for a loss with that symmetry, degenerate
    singular values included.
    """
    c, rc, Xt, Yt, Sigma, Xp, Ypt, P, perp_left, perp_right, lyap, left, right = \
        _split_frame(xp, M, X, Y, s, discarded)
    Q = Xp @ dM @ Ypt.T
    QS = Q @ Sigma
    alpha = 0.5 * lyap(QS + QS.T) + lyap(0.5 * (QS - QS.T))
    dX, dY = Xt @ alpha, (Q - alpha) @ Yt
    # the kept-discarded parts; one vanishes identically where its projector is 0 (k = m,
    # resp. k = n: nothing is discarded on that side), and then it is not computed
    if Xt.shape[0] != Xt.shape[1]:
        R = dM @ (Yt.T @ Sigma) + (0.0 if P is None else P @ (dM.T @ Xt))
        dX = dX + left(perp_left(R))
    if Yt.shape[0] != Yt.shape[1]:
        R = dM.T @ (Xt @ Sigma) + (0.0 if P is None else P.T @ (dM @ Yt.T))
        dY = dY + right(perp_right(R)).T
    return dX / rc, dY / rc

def split_pullback(xp, U_full, s_full, Vh_full, k, X_bar, Y_bar):
    """Cotangent of M for the balanced split X = U sqrt(S), Y = sqrt(S) V^T: the transpose
    of :func:`split_tangent` at the SVD point, written out in the singular basis.

    Parameters
    ----------
    xp : module, ``numpy`` or ``jax.numpy``.
    U_full (m, r), s_full (r,), Vh_full (r, n) : the thin SVD of M (r = min(m, n), s
        descending, s[0] > 0).  The first k triplets are the kept U, s, Vh; the other r - k
        are the discarded U_d, s_d, Vh_d, and M_perp = U_d diag(s_d) Vh_d.
    k : int in [1, r], the number kept.
    X_bar (m, k), Y_bar (k, n) : cotangents of the two halves.

    Returns
    -------
    The (m, n) cotangent of M.  With dP = U^T dM V, the tangent of :func:`split_tangent` is
    dX = X alpha + dX_c, dY = (Q - alpha) Y + dY_c, alpha_ij = dP_ij sqrt(s_j/s_i)/(s_i + s_j),
    Q_ij = dP_ij / sqrt(s_i s_j), and the kept-discarded parts dX_c[:, i] =
    (s_i^2 - M_perp M_perp^T)^-1 (1 - U U^T)(dM v_i s_i^(3/2) + M_perp dM^T u_i s_i^(1/2))
    (dY_c alike).  Transposed: M_bar = U C V^T + Z_X S^(3/2) V^T + U S^(1/2) Z_X^T M_perp +
    U S^(3/2) Z_Y^T + M_perp Z_Y S^(1/2) V^T, where C collects the kept-kept terms and
    Z_X = (s_i^2 - M_perp M_perp^T)^-1 (1 - U U^T) X_bar[:, i] column by column (Z_Y alike,
    with M_perp^T M_perp and Y_bar^T).  The only denominators among kept values are
    s_i + s_j, so it is exact at degenerate kept values for a loss with the bond's gauge
    symmetry, like :func:`split_tangent`; a kept value equal to a discarded one has no
    derivative and contributes 0 (:func:`resolvent`).  Z_X is 0 where k = m and Z_Y where
    k = n (exactly, while the kept values are nonzero): those terms are then not computed.
    Computed in units of s[0], so it holds over the float64 range.
    """
    U, s, Vh, s_d = U_full[:, :k], s_full[:k], Vh_full[:k, :], s_full[k:]
    c = s[0]
    st, wt = s / c, s_d / c
    rt = xp.sqrt(st)
    V = Vh.T
    g = _inverse_or_zero(xp, st[:, None] + st[None, :]) * rt[None, :] / rt[:, None]
    q = 1.0 / (rt[:, None] * rt[None, :])
    A = rt[:, None] * (U.T @ X_bar)             # S^1/2 U^T X_bar
    B = (Y_bar @ V) * rt[None, :]               # Y_bar V S^1/2
    C = (A - B) * g + B * q
    s32 = st * rt
    # M_bar = U @ left + right @ Vh.  The kept-discarded terms enter through G = U_d^T R_X
    # and V_d^T R_Y only: Z = R inv + W ((full - inv) o G) (the resolvent in the discarded
    # basis, full_ji = 1/(s_i^2 - w_j^2)), and U_d^T U_d = Vh_d V_d = 1 turns Z_X^T M_perp
    # and Vh_d Z_Y into (full o G) scaled by w: four thin products with the discarded
    # vectors instead of eight.  Z_X is 0 where k = m (U is square), Z_Y where k = n.
    # The products take the whole U_full and Vh_full, the small factor padded with k zero
    # rows (or columns), so no (m, r - k) slice of the singular vectors is ever copied.
    inv = _inverse_or_zero(xp, st ** 2)
    full = _inverse_or_zero(xp, (st ** 2)[None, :] - (wt ** 2)[:, None])    # (r - k, k)
    thin_U, thin_V = U.shape[0] != U.shape[1], Vh.shape[0] != Vh.shape[1]
    left, right, mid_left, mid_right = C @ Vh, 0.0, 0.0, 0.0
    if thin_U:
        R_X = X_bar - U @ (U.T @ X_bar)
        G_X = (R_X.T @ U_full)[:, k:].T                     # U_d^T R_X, (r - k, k)
        right = R_X * (inv * s32)[None, :]
        mid_right = (full - inv[None, :]) * G_X * s32[None, :]
        mid_left = rt[:, None] * (full * G_X).T * wt[None, :]
    if thin_V:
        R_Y = Y_bar.T - V @ (Vh @ Y_bar.T)
        G_Y = (Vh_full @ R_Y)[k:]                           # Vh_d R_Y, (r - k, k)
        left = left + (inv * s32)[:, None] * R_Y.T
        mid_left = mid_left + s32[:, None] * ((full - inv[None, :]) * G_Y).T
        mid_right = mid_right + wt[:, None] * (full * G_Y) * rt[None, :]
    if not (thin_U or thin_V):
        return U @ left / xp.sqrt(c)
    zeros = xp.zeros((k, k), dtype=X_bar.dtype)
    left = left + xp.concatenate([zeros, mid_left], axis=1) @ Vh_full       # + mid_left Vh_d
    right = right + U_full @ xp.concatenate([zeros, mid_right], axis=0)     # + U_d mid_right
    M_bar = U @ left + right @ Vh
    return M_bar / xp.sqrt(c)
