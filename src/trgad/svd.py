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
  on the complement of the kept space.  That is a positive-definite linear solve per kept
  value; the discarded singular vectors (and their degeneracies) never appear, so the
  rule is exact for the truncated SVD and is itself differentiable (second derivatives,
  e.g. the specific heat, stay finite).
"""
from __future__ import annotations

import numpy as np

#: Relative Lorentzian broadening of 1/(s_i - s_j) for kept-kept pairs (units of s_0).
BROADENING = 1e-10


def svd_pullback(xp, M, U, s, Vh, U_bar, s_bar, Vh_bar, broadening=BROADENING):
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
    broadening : float
        Relative Lorentzian broadening for kept-kept pairs.

    Returns
    -------
    (m, n) array: the cotangent of M.

    Source: first-order perturbation theory of the SVD (e.g. Townsend, "Differentiating the
    singular value decomposition", 2016), restricted to pairs that involve a kept value; the
    kept-discarded sums use the resolvent of M_perp (see the module docstring).  Exact for
    losses that are invariant under the sign/rotation gauge of the kept vectors, unless a
    kept value is degenerate with a discarded one (then no truncation is differentiable).
    """
    V = Vh.T
    V_bar = Vh_bar.T
    k = s.shape[0]
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
    X = _shifted_solve(xp, M_perp @ M_perp.T, s ** 2, pu_ubar)   # (m, k)
    Y = _shifted_solve(xp, M_perp.T @ M_perp, s ** 2, pv_vbar)   # (n, k)
    grad = grad + (X * s[None, :] + M_perp @ Y) @ Vh
    grad = grad + U @ (s[:, None] * Y.T + X.T @ M_perp)
    return grad


def _shifted_solve(xp, A, shifts, R):
    """X[:, i] = (shifts[i] * I - A)^-1 R[:, i]  (A symmetric, shifts[i] above its spectrum).

    With JAX the k solves run one after another (``lax.map``): a batched solve would use
    jaxlib's parallel batch map, which deadlocked on this 2-core machine (jaxlib 0.10.2).
    """
    eye = xp.eye(A.shape[0], dtype=A.dtype)
    if xp is np:
        return np.linalg.solve(shifts[:, None, None] * eye - A, R.T[:, :, None])[:, :, 0].T
    import jax

    return jax.lax.map(lambda sr: xp.linalg.solve(sr[0] * eye - A, sr[1]), (shifts, R.T)).T


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
        U, s, Vh = jnp.linalg.svd(M, full_matrices=False)
        return U[:, :k], s[:k], Vh[:k, :]

    rule = jax.custom_vjp(primal, nondiff_argnums=(1,))

    def fwd(M, k):
        # Calling the rule itself keeps higher derivatives on this same rule.
        out = rule(M, k)
        return out, (M, *out)

    def bwd(k, res, cts):
        M, U, s, Vh = res
        U_bar, s_bar, Vh_bar = cts
        return (svd_pullback(jnp, M, U, s, Vh, U_bar, s_bar, Vh_bar),)

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
    return _JAX_SVD(M, k)
