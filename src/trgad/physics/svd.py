"""Truncated SVD and balanced split, with derivative rules that stay exact on degenerate spectra.

Why not ``jnp.linalg.svd``'s own rule?  It forms 1/(s_j^2 - s_i^2) over *all* pairs of
singular values (``jax/_src/lax/linalg.py``, ``_svd_jvp_rule``).  From TRG step 5 on, the
256 x 256 matrix has many exactly equal (numerically zero) singular values, the factor is
``inf``, and ``inf * 0`` makes the gradient NaN although the loss never looks at the
discarded vectors.

Two primitives, both first-order perturbation theory of the SVD (e.g. Townsend,
"Differentiating the singular value decomposition", 2016) restricted to the k kept triplets,
and both summing the kept-discarded pairs in closed form through the resolvent of the
discarded part (:func:`resolvent`), so that two discarded values are never paired:

* :func:`balanced_split` returns the halves X = U sqrt(S), Y = sqrt(S) V^T that a tensor
  network puts at the two ends of a bond (the TRG uses it).  Its tangent
  (:func:`split_tangent`) is written covariantly in X and Y, and its only denominators among
  kept values are s_i + s_j: derivatives of every order are exact at degenerate singular
  values for a loss unchanged by X -> X G, Y -> G^T Y (G orthogonal).
* :func:`truncated_svd` returns U, s, V^T themselves.  Its rules (:func:`svd_tangent`,
  :func:`svd_pullback`) split the kept-kept term into a regular part and a *gauge term*
  along (U, V) -> (U + U S Omega, V + V S Omega), the only part with 1/(s_j^2 - s_i^2)
  (:func:`gauge_inverse`, zero on pairs equal to rounding).  Where the kept values differ the
  rules are exact for any loss; at a degenerate pair the first derivative is exact for a
  loss with the symmetry above (and finite for any other), second derivatives are finite.

The page *SVD derivatives at degeneracy* (book/svd-degeneracy.md) shows the difference on a
degenerate matrix.  Everything is computed in units of the largest singular value, so the
rules hold over the float64 range.
The rules are written against an array namespace ``xp`` (``numpy`` or ``jax.numpy``); JAX
uses them through ``jax.custom_jvp`` (every transform: reverse mode by transposition), the
keyed graph engine calls the SVD rules with NumPy.
"""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from ..runtime.validate import InputError

#: Two singular values whose relative gap |s_a - s_b| / (s_a + s_b) is at most this count as
#: equal: the gauge term of such a kept pair is 0, and a truncation between them is refused.
DEGENERATE_RTOL = 1e-10
#: Relative size at or below which a singular value counts as zero: about 450 float64
#: epsilons, just above the SVD's rounding level (eps * s_0 times a small factor).  Anything
#: larger is resolved, so it is physics, not noise: at small beta the sectors that carry u
#: have singular values ~ 2 beta s_0, and 1e-10 (an earlier choice) dropped them for
#: beta < ~1e-10, keeping lnZ/N but giving u wrong by a factor up to 4 on the small tori.
RANK_RTOL = 1e-13


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


def check_finite_matrix(M, name="M"):
    """Refuse a concrete matrix (or tensor) with an inf or nan entry; return it as a NumPy array.

    LAPACK's SVD does not return on some matrices with an ``inf`` (JAX's ``jnp.linalg.svd``
    of a 4 x 4 Gaussian matrix with one ``inf`` entry never returned) and gives NaN or "did
    not converge" on others, so every SVD in the package checks its input first.  Raises
    InputError, one line naming ``name``, the first non-finite entry and its index.
    """
    A = np.asarray(M)
    if np.iscomplexobj(A) or not np.issubdtype(A.dtype, np.number):
        return A                          # the callers refuse these with their own message
    bad = ~np.isfinite(A)
    if bad.any():
        where = tuple(int(i) for i in np.argwhere(bad)[0])
        raise InputError(f"{name} has a non-finite entry ({float(A[where])!r} at {list(where)}): an SVD "
                         f"needs finite numbers")
    return A


def numerical_rank(s, rtol=RANK_RTOL):
    """Number of singular values above ``rtol * s[0]`` (s descending, any shape (r,))."""
    s = np.asarray(s)
    if s.size == 0 or s[0] == 0:
        return 0
    return int(np.sum(s > rtol * s[0]))


def check_multiplet(s, k, what=None):
    """Refuse a k that cuts inside a multiplet; return k.

    ``s``: all singular values of a matrix (descending NumPy array); ``k`` of them are kept.
    Raises InputError if (s[k-1] - s[k]) / (s[k-1] + s[k]) <= :data:`DEGENERATE_RTOL`: the kept
    subspace is then not a smooth function of the matrix, and no derivative exists.  The
    one-line message names ``what`` (default "k=<k>") and the nearest k on either side of
    the multiplet.
    """
    s = np.asarray(s, dtype=float)
    equal = s[:-1] - s[1:] <= DEGENERATE_RTOL * (s[:-1] + s[1:])   # equal[j]: s[j] ~ s[j+1]
    if k >= s.size or not equal[k - 1]:
        return k
    lo, hi = k - 1, k
    while lo > 0 and equal[lo - 1]:
        lo -= 1
    while hi < equal.size and equal[hi]:
        hi += 1
    options = " or ".join(str(j) for j in (lo, hi + 1) if j >= 1)
    raise InputError(f"{what or f'k={k}'} cuts inside a multiplet of {hi - lo + 1} equal singular "
                     f"values (numbers {lo + 1} to {hi + 1}): keep {options} instead")


def check_truncation(s, k, what=None):
    """Refuse a truncation whose derivative does not exist; return k.

    ``s``: all singular values of the matrix (descending); ``k``: how many are kept.  Raises
    InputError, one line naming ``what`` (default "k=<k>"), if a kept value is zero (not above
    :data:`RANK_RTOL` times s[0]: its singular vectors are arbitrary), or if k cuts inside a
    multiplet (:func:`check_multiplet`).
    """
    s = np.asarray(s, dtype=float)
    if not s[k - 1] > RANK_RTOL * s[0]:
        raise InputError(f"{what or f'k={k}'} keeps a zero singular value: at most "
                         f"{numerical_rank(s)} singular values are nonzero here")
    return check_multiplet(s, k, what)


def _svd_parts_impl(M, k):
    """Kept (U, s, Vh) and discarded (U_d, s_d, Vh_d) triplets from one full SVD of M.

    LAPACK is never handed a non-finite matrix (it may not return): if any entry of M is inf
    or nan, the SVD is taken of zeros and every output is NaN.  Concrete input never gets
    here (:func:`_checked` refuses it); this is what a traced M (under ``jax.jit``) gives."""
    finite = jnp.all(jnp.isfinite(M))
    U, s, Vh = jnp.linalg.svd(jnp.where(finite, M, 0.0), full_matrices=False)
    U, s, Vh = (jnp.where(finite, x, jnp.nan) for x in (U, s, Vh))
    return U[:, :k], s[:k], Vh[:k, :], U[:, k:], s[k:], Vh[k:, :]


# A custom_jvp whose rule calls the function itself (so every order of derivative uses the
# rule) and whose reverse mode JAX derives by transposing the rule.  The discarded triplets
# only serve as the resolvent's eigenbasis: their tangents are zero by definition.
_svd_parts = jax.custom_jvp(_svd_parts_impl, nondiff_argnums=(1,))


@_svd_parts.defjvp
def _svd_parts_jvp(k, primals, tangents):
    (M,), (dM,) = primals, tangents
    out = _svd_parts(M, k)
    dU, ds, dVh = svd_tangent(jnp, M, *out[:3], dM, discarded=out[3:])
    return out, (dU, ds, dVh, *(jnp.zeros_like(x) for x in out[3:]))


def _checked(parts, M, k, s_at):
    """parts(M, k) after checking M and k; with concrete M also its entries
    (:func:`check_finite_matrix`, before any LAPACK call) and :func:`check_truncation` (the
    kept singular values are output ``s_at`` of ``parts``, the discarded ones output 4)."""
    M = M if isinstance(M, jax.core.Tracer) else jnp.asarray(M)
    if jnp.iscomplexobj(M):
        raise InputError(f"M has dtype {M.dtype}: the truncated SVD and its derivative rules here "
                         f"take real matrices only")
    if M.ndim != 2:
        raise InputError(f"M has shape {tuple(M.shape)}: give a matrix (2 dimensions)")
    if not jnp.issubdtype(M.dtype, jnp.floating):
        M = M.astype(jnp.float64)
    if not isinstance(M, jax.core.Tracer):
        check_finite_matrix(M)
    k = int(k)
    if not 1 <= k <= min(M.shape):
        raise InputError(f"k={k} is out of range: k must be in [1, {min(M.shape)}] for a "
                         f"{tuple(M.shape)} matrix")
    out = parts(M, k)
    if not isinstance(out[s_at], jax.core.Tracer):
        check_truncation(np.concatenate([np.asarray(out[s_at]), np.asarray(out[4])]), k)
    return out


def truncated_svd(M, k):
    """The k largest singular triplets of a JAX matrix, under every JAX transform.

    Parameters
    ----------
    M : (m, n) real array (JAX or NumPy; float64, integers are converted).
    k : int, 1 <= k <= min(m, n), static (a Python int).

    Returns
    -------
    U (m, k), s (k,), Vh (k, n) with ``M ~= U @ diag(s) @ Vh``.

    Raises
    ------
    InputError if M is complex or not 2-dimensional, if k is outside [1, min(m, n)], and,
    when M is concrete (not traced), if an entry of M is inf or nan (before any LAPACK call:
    :func:`check_finite_matrix`), if k keeps a zero singular value or cuts inside a
    multiplet (:func:`check_truncation`).  Traced values cannot be checked: pairs without a
    derivative then contribute 0, and a non-finite M gives NaN in every output (the SVD is
    then taken of zeros, never of the non-finite matrix).  Integer matrices are converted
    to float64.

    ``grad``, ``vjp``, ``jvp``, ``jacfwd``, ``jacrev``, ``hessian`` and their nestings all
    work: the forward-mode rule is :func:`svd_tangent`, transposed by JAX for reverse mode.
    At exactly degenerate kept values prefer :func:`balanced_split` for second derivatives
    (see the module docstring).
    """
    return _checked(_svd_parts, M, k, s_at=1)[:3]


def _split_parts_impl(M, k):
    """The halves X = U sqrt(S), Y = sqrt(S) Vh, then s and the discarded triplets (the
    solves' eigenbases, zero tangents, as for :func:`truncated_svd`)."""
    U, s, Vh, *discarded = _svd_parts_impl(M, k)
    r = jnp.sqrt(s)
    return (U * r[None, :], r[:, None] * Vh, s, *discarded)


_split_parts = jax.custom_jvp(_split_parts_impl, nondiff_argnums=(1,))


@_split_parts.defjvp
def _split_parts_jvp(k, primals, tangents):
    (M,), (dM,) = primals, tangents
    out = _split_parts(M, k)
    dX, dY = split_tangent(jnp, M, out[0], out[1], out[2], dM, out[3:])
    return out, (dX, dY, *(jnp.zeros_like(x) for x in out[2:]))


def balanced_split(M, k):
    """The halves X = U sqrt(S) (m, k) and Y = sqrt(S) Vh (k, n) of M's k largest singular
    triplets, under every JAX transform (forward rule :func:`split_tangent`).

    This is what a tensor network puts at the two ends of a truncated bond (the TRG's
    ``_split``); its derivatives have no 1/(s_i - s_j) between kept values, so they are exact
    at degenerate singular values, to any order, for any loss unchanged by X -> X G,
    Y -> G^T Y with G orthogonal.  Parameters and errors as :func:`truncated_svd`; every JAX
    transform works.
    """
    return _checked(_split_parts, M, k, s_at=2)[:2]


# ---- the balanced split's pullback in closed form: reverse mode, first order -------------

def split_pullback(xp, U, s, Vh, discarded, X_bar, Y_bar):
    """Cotangent of M for the balanced split X = U sqrt(S), Y = sqrt(S) V^T: the transpose
    of :func:`split_tangent` at the SVD point, written out in the singular basis.

    Parameters
    ----------
    xp : module, ``numpy`` or ``jax.numpy``.
    U (m, k), s (k,), Vh (k, n) : the kept singular triplets (s descending, s[0] > 0).
    discarded : (U_d (m, r-k), s_d (r-k,), Vh_d (r-k, n)), the other triplets of the same
        SVD (r = min(m, n)); M_perp = U_d diag(s_d) Vh_d.
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
    U_d, s_d, Vh_d = discarded
    c = s[0]
    st, wt = s / c, s_d / c
    rt = xp.sqrt(st)
    V, V_d = Vh.T, Vh_d.T
    g = _inverse_or_zero(xp, st[:, None] + st[None, :]) * rt[None, :] / rt[:, None]
    q = 1.0 / (rt[:, None] * rt[None, :])
    A = rt[:, None] * (U.T @ X_bar)             # S^1/2 U^T X_bar
    B = (Y_bar @ V) * rt[None, :]               # Y_bar V S^1/2
    C = (A - B) * g + B * q
    shifts = st ** 2
    s32 = st * rt
    U_dw = U_d * wt[None, :]                     # M_perp / c = U_dw Vh_d
    M_bar = U @ C @ Vh
    # the kept-discarded parts; Z_X is 0 where k = m (U is square: (1 - U U^T) = 0), Z_Y
    # where k = n, and then they are not computed
    if U.shape[0] != U.shape[1]:
        Z_X = _resolvent_eig(xp, shifts, X_bar - U @ (U.T @ X_bar), U_d, wt)
        M_bar = M_bar + (Z_X * s32[None, :]) @ Vh + (U * rt[None, :]) @ ((Z_X.T @ U_dw) @ Vh_d)
    if Vh.shape[0] != Vh.shape[1]:
        Z_Y = _resolvent_eig(xp, shifts, Y_bar.T - V @ (Vh @ Y_bar.T), V_d, wt)
        M_bar = M_bar + (U * s32[None, :]) @ Z_Y.T + (U_dw @ (Vh_d @ Z_Y)) @ (rt[:, None] * Vh)
    return M_bar / xp.sqrt(c)


@jax.custom_jvp
def _first_order_only(x):
    """Identity whose derivative raises: guards the residuals of a first-order rule."""
    return x


@_first_order_only.defjvp
def _first_order_only_jvp(primals, tangents):
    raise InputError("balanced_split_reverse has first derivatives only (reverse mode): use "
                     "trgad.physics.svd.balanced_split for forward mode and higher derivatives")


def _split_reverse_impl(M, k):
    return _split_parts_impl(M, k)[:2]


_split_reverse = jax.custom_vjp(_split_reverse_impl, nondiff_argnums=(1,))


def _split_reverse_fwd(M, k):
    U, s, Vh, *discarded = _svd_parts_impl(M, k)
    r = jnp.sqrt(s)
    return (U * r[None, :], r[:, None] * Vh), (U, s, Vh, tuple(discarded))


def _split_reverse_bwd(k, residuals, cotangents):
    U, s, Vh, discarded = _first_order_only(residuals)
    return (split_pullback(jnp, U, s, Vh, discarded, *cotangents),)


_split_reverse.defvjp(_split_reverse_fwd, _split_reverse_bwd)


def balanced_split_reverse(M, k):
    """:func:`balanced_split` with a reverse-mode rule written out (:func:`split_pullback`):
    the same halves X (m, k), Y (k, n) and the same first derivatives, for a far smaller
    derivative program than JAX's transposition of the forward-mode rule.

    For ``jax.grad`` / ``jax.vjp`` / ``jax.value_and_grad`` only, first order: forward mode
    raises JAX's own error (a ``custom_vjp`` has no forward-mode rule) and a second
    derivative raises :class:`trgad.runtime.validate.InputError` (its residuals are singular
    vectors, whose own derivatives this rule does not define); use :func:`balanced_split`
    for those.  Parameters and errors otherwise as :func:`balanced_split`.
    """
    k = int(k)
    if not 1 <= k <= min(M.shape):
        raise InputError(f"k={k} is out of range: k must be in [1, {min(M.shape)}] for a "
                         f"{tuple(M.shape)} matrix")
    if not isinstance(M, jax.core.Tracer):
        check_truncation(np.linalg.svd(np.asarray(M), compute_uv=False), k)
    return _split_reverse(M, k)
