"""Truncated SVD with a reverse rule that stays finite on degenerate spectra.

The rule is written once, against an array namespace ``xp`` (``numpy`` or ``jax.numpy``),
and is used by both the JAX TRG (through :func:`truncated_svd`, a ``jax.custom_vjp``) and
the keyed graph engine.

Why not ``jnp.linalg.svd``'s own rule?  Its JVP (``jax/_src/lax/linalg.py``,
``_svd_jvp_rule``) forms F_ij = 1/(s_j^2 - s_i^2) over *all* pairs of singular values and
masks only the diagonal.  From TRG step 5 on, the 256 x 256 matrix has many exactly equal
(numerically zero) singular values, F gets ``inf`` entries, and ``inf * 0`` makes the
gradient NaN although the loss never looks at the discarded vectors.

The rule here only ever pairs a *kept* singular value with another value:

* kept-kept pairs use the split 1/(s_i^2 - s_j^2) = [1/(s_i - s_j) +- 1/(s_i + s_j)]/(2 s)
  with a Lorentzian-broadened 1/(s_i - s_j) -> x/(x^2 + eps), as in wangleiphy/tensorgrad
  (``tensornets/adlib/svd.py``) and Francuz et al., Phys. Rev. Research 7, 013237 (2025).
  For a gauge-invariant loss the broadened term multiplies an antisymmetric combination that
  vanishes on a degenerate pair, so the result is exact there;
* kept-discarded pairs are summed in closed form with the resolvent of the discarded part
  M_perp = M - U S V^T:  sum_j u_j u_j^T / (s_i^2 - s_j^2) = (s_i^2 - M_perp M_perp^T)^-1
  on the complement of the kept space.  Only the *sum* appears, never a single
  1/(s_i^2 - s_j^2) between two discarded values, so degeneracies among the discarded
  values do no harm.  The forward SVD already diagonalises M_perp M_perp^T, so the resolvent
  costs two matrix products (:func:`resolvent`); it carries its own reverse rule, which
  makes the whole rule differentiable again (second derivatives, e.g. the specific heat,
  stay finite) without ever differentiating the discarded vectors.
"""
from __future__ import annotations

import numpy as np

#: Relative Lorentzian broadening of 1/(s_i - s_j) for kept-kept pairs (units of s_0).
BROADENING = 1e-10


def svd_pullback(xp, M, U, s, Vh, U_bar, s_bar, Vh_bar, discarded=None, broadening=BROADENING):
    """Cotangent of M for the truncated SVD ``M ~= U @ diag(s) @ Vh`` (k values kept).

    Parameters
    ----------
    xp : module
        Array namespace (``numpy`` or ``jax.numpy``).
    M : (m, n) array
        The matrix that was decomposed.
    U, s, Vh : (m, k), (k,), (k, n) arrays
        Its k largest singular triplets (s descending, s[k-1] > 0).
    U_bar, s_bar, Vh_bar : arrays shaped like U, s, Vh
        Cotangents of the three outputs (zeros where an output is unused).
    discarded : tuple (U_d (m, r-k), s_d (r-k,), Vh_d (r-k, n)), r = min(m, n), optional
        The other singular triplets of M, from the same full SVD.  They are only used as an
        eigenbasis in which the resolvent of M_perp is two matrix products (never
        differentiated: the resolvent has its own reverse rule).  Required with JAX; with
        NumPy they are recomputed from M when omitted.
    broadening : float
        Relative Lorentzian broadening for kept-kept pairs.

    Returns
    -------
    (m, n) array: the cotangent of M.

    Raises
    ------
    ValueError if ``discarded`` is omitted with a namespace other than NumPy.

    Source: first-order perturbation theory of the SVD (e.g. Townsend, "Differentiating the
    singular value decomposition", 2016), restricted to pairs that involve a kept value; the
    kept-discarded sums use the resolvent of M_perp (see the module docstring).  Exact for
    losses that are invariant under the sign/rotation gauge of the kept vectors, unless a
    kept value is degenerate with a discarded one (then no truncation is differentiable).
    """
    k = s.shape[0]
    if discarded is None:
        if xp is not np:
            raise ValueError("svd_pullback: pass discarded=(U_d, s_d, Vh_d) unless xp is numpy")
        U_all, s_all, Vh_all = np.linalg.svd(M, full_matrices=False)
        discarded = (U_all[:, k:], s_all[k:], Vh_all[k:, :])
    U_d, s_d, Vh_d = discarded
    V = Vh.T
    V_bar = Vh_bar.T
    eye_k = xp.eye(k, dtype=M.dtype)

    # Kept-kept block: P_bar with dL = sum P_bar_ab (U^T dM V)_ab.
    J = U.T @ U_bar                      # J[j, i] = u_j . u_bar_i
    K = V.T @ V_bar
    A, B = J + K, J - K
    diff = s[None, :] - s[:, None]       # [j, i] = s_i - s_j
    eps = (broadening * s[0]) ** 2
    f = (diff / (diff ** 2 + eps)) * (1 - eye_k)
    g = (1 - eye_k) / (s[None, :] + s[:, None])
    half_upper = 0.5 * (f * A + g * B)
    half_lower = 0.5 * (f * A - g * B)
    P_bar = half_upper + half_lower.T + s_bar[:, None] * eye_k  # diag(s_bar)
    grad = U @ P_bar @ Vh

    # Kept-discarded pairs, through the resolvent of the discarded part.
    M_perp = M - (U * s[None, :]) @ Vh
    pu_ubar = U_bar - U @ J              # (1 - U U^T) U_bar
    pv_vbar = V_bar - V @ K
    X = resolvent(xp, M_perp, s ** 2, pu_ubar, U_d, s_d)       # (m, k)
    Y = resolvent(xp, M_perp.T, s ** 2, pv_vbar, Vh_d.T, s_d)  # (n, k)
    grad = grad + (X * s[None, :] + M_perp @ Y) @ Vh
    grad = grad + U @ (s[:, None] * Y.T + X.T @ M_perp)
    return grad


def resolvent(xp, P, shifts, R, W, w):
    """X[:, i] = (shifts[i] * I - P P^T)^-1 R[:, i], computed in a known eigenbasis.

    Parameters
    ----------
    xp : module, ``numpy`` or ``jax.numpy``
    P : (m, p) array, with P P^T = W diag(w**2) W^T (W (m, q) orthonormal columns)
    shifts : (k,) array, each above the spectrum (shifts > max(w**2), shifts > 0)
    R : (m, k) array
    W, w : the eigenbasis (left singular vectors and singular values of P); not differentiated

    Returns
    -------
    (m, k) array.  On the complement of W, P P^T is zero, so
    X = R / shifts + W [(1/(shifts - w^2) - 1/shifts) * (W^T R)]: matrix products only,
    instead of one LU factorisation of an m x m matrix per shift.  Nothing is checked: a
    shift equal to some w**2 (a kept singular value degenerate with a discarded one) gives
    inf, exactly where the linear system is singular and no truncation is differentiable.

    With JAX the function is a ``custom_vjp`` whose reverse rule calls the resolvent again
    (R_bar = Z, P_bar = Z (X^T P) + X (Z^T P), shifts_bar = -sum_rows Z*X with
    Z = resolvent(X_bar)), so it is differentiable to any order and derivatives flow through
    P, not through the eigenbasis.
    """
    if xp is np:
        return _resolvent_eig(np, shifts, R, W, w)
    global _JAX_RESOLVENT
    if _JAX_RESOLVENT is None:
        _JAX_RESOLVENT = _make_jax_resolvent()
    return _JAX_RESOLVENT(P, shifts, R, W, w)


def _resolvent_eig(xp, shifts, R, W, w):
    inv = 1.0 / shifts
    weights = 1.0 / (shifts[None, :] - (w ** 2)[:, None]) - inv[None, :]  # (q, k)
    return R * inv[None, :] + W @ (weights * (W.T @ R))


_JAX_RESOLVENT = None


def _make_jax_resolvent():
    import jax
    import jax.numpy as jnp

    @jax.custom_vjp
    def rule(P, shifts, R, W, w):
        return _resolvent_eig(jnp, shifts, R, jax.lax.stop_gradient(W), jax.lax.stop_gradient(w))

    def fwd(P, shifts, R, W, w):
        X = rule(P, shifts, R, W, w)
        return X, (P, shifts, X, W, w)

    def bwd(res, X_bar):
        # dX_i = (s_i - A)^-1 (dR_i - ds_i X_i + dA X_i), A = P P^T, A symmetric.
        P, shifts, X, W, w = res
        Z = rule(P, shifts, X_bar, W, w)
        P_bar = Z @ (X.T @ P) + X @ (Z.T @ P)
        return P_bar, -jnp.sum(Z * X, axis=0), Z, jnp.zeros_like(W), jnp.zeros_like(w)

    rule.defvjp(fwd, bwd)
    return rule


def numerical_rank(s, rtol=1e-10):
    """Number of singular values above ``rtol * s[0]`` (s descending, any shape (r,))."""
    s = np.asarray(s)
    if s.size == 0 or s[0] == 0:
        return 0
    return int(np.sum(s > rtol * s[0]))


def _make_jax_svd():
    import jax
    import jax.numpy as jnp

    def primal(M, k):
        # Returns the kept triplets and the discarded ones; the latter only serve as the
        # resolvent's eigenbasis in the reverse rule (their cotangents are ignored).
        U, s, Vh = jnp.linalg.svd(M, full_matrices=False)
        return U[:, :k], s[:k], Vh[:k, :], U[:, k:], s[k:], Vh[k:, :]

    rule = jax.custom_vjp(primal, nondiff_argnums=(1,))

    def fwd(M, k):
        # Calling the rule itself keeps higher derivatives on this same rule.
        out = rule(M, k)
        return out, (M, *out)

    def bwd(k, res, cts):
        M, U, s, Vh, *discarded = res
        U_bar, s_bar, Vh_bar = cts[:3]
        hints = tuple(jax.lax.stop_gradient(x) for x in discarded)
        return (svd_pullback(jnp, M, U, s, Vh, U_bar, s_bar, Vh_bar, hints),)

    rule.defvjp(fwd, bwd)
    return rule


_JAX_SVD = None


def truncated_svd(M, k):
    """The k largest singular triplets of a JAX matrix, differentiable to any order.

    Parameters
    ----------
    M : (m, n) jax array, float64
    k : int, 1 <= k <= min(m, n), static (a Python int)

    Returns
    -------
    U (m, k), s (k,), Vh (k, n) with ``M ~= U @ diag(s) @ Vh``.

    Raises
    ------
    ValueError if k is outside [1, min(m, n)].

    The reverse rule is :func:`svd_pullback`.
    """
    global _JAX_SVD
    k = int(k)
    if not 1 <= k <= min(M.shape):
        raise ValueError(f"k={k} is outside [1, {min(M.shape)}] for a {M.shape} matrix")
    if _JAX_SVD is None:
        _JAX_SVD = _make_jax_svd()
    return _JAX_SVD(M, k)[:3]
