"""Truncated SVD and balanced split, with derivative rules that stay exact on degenerate spectra.

Why not ``jnp.linalg.svd``'s own rule?  It forms 1/(s_j^2 - s_i^2) over *all* pairs of
singular values (``jax/_src/lax/linalg.py``, ``_svd_jvp_rule``).  From TRG step 5 on, the
256 x 256 matrix has many exactly equal (numerically zero) singular values, the factor is
``inf``, and ``inf * 0`` makes the gradient NaN although the loss never looks at the
discarded vectors.

Two primitives, both first-order perturbation theory of the SVD (e.g. Townsend,
"Differentiating the singular value decomposition", 2016) restricted to the k kept triplets,
and both summing the kept-discarded pairs in closed form through the resolvent of the
discarded part (:func:`~trgad.physics.svdrules.resolvent`), so that two discarded values are never paired:

* :func:`balanced_split` returns the halves X = U sqrt(S), Y = sqrt(S) V^T that a tensor
  network puts at the two ends of a bond (the TRG uses it).  Its tangent
  (:func:`~trgad.physics.svdrules.split_tangent`) is written covariantly in X and Y, and its only denominators among
  kept values are s_i + s_j: derivatives of every order are exact at degenerate singular
  values for a loss unchanged by X -> X G, Y -> G^T Y (G orthogonal).
* :func:`truncated_svd` returns U, s, V^T themselves.  Its rules (:func:`~trgad.physics.svdrules.svd_tangent`,
  :func:`~trgad.physics.svdrules.svd_pullback`) split the kept-kept term into a regular part and a *gauge term*
  along (U, V) -> (U + U S Omega, V + V S Omega), the only part with 1/(s_j^2 - s_i^2)
  (:func:`~trgad.physics.svdrules.gauge_inverse`, zero on pairs equal to rounding).  Where the kept values differ the
  rules are exact for any loss; at a degenerate pair the first derivative is exact for a
  loss with the symmetry above (and finite for any other), second derivatives are finite.

The page *SVD derivatives at degeneracy* (book/svd-degeneracy.md) shows the difference on a
degenerate matrix.  Everything is computed in units of the largest singular value, so the
rules hold over the float64 range.
The rules themselves, written against an array namespace ``xp`` (``numpy`` or
``jax.numpy``), are in :mod:`trgad.physics.svdrules`; this module wraps them for JAX through
``jax.custom_jvp`` (every transform: reverse mode by transposition) and checks what the
primitives are given.
"""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from .svdrules import DEGENERATE_RTOL, split_pullback, split_tangent, svd_tangent
from ..runtime.validate import InputError, check_finite_matrix

#: Relative size at or below which a singular value counts as zero: about 450 float64
#: epsilons, just above the SVD's rounding level (eps * s_0 times a small factor).  Anything
#: larger is resolved, so it is physics, not noise: at small beta the sectors that carry u
#: have singular values ~ 2 beta s_0, and 1e-10 (an earlier choice) dropped them for
#: beta < ~1e-10, keeping lnZ/N but giving u wrong by a factor up to 4 on the small tori.
RANK_RTOL = 1e-13


def numerical_rank(s, rtol=RANK_RTOL):
    """Number of singular values above ``rtol * s[0]`` (s descending, any shape (r,))."""
    s = np.asarray(s)
    if s.size == 0 or s[0] == 0:
        return 0
    return int(np.sum(s > rtol * s[0]))


def check_multiplet(s, k, what=None):
    """Refuse a k that cuts inside a multiplet; return k.

    ``s``: all singular values of a matrix (descending NumPy array); ``k`` of them are kept.
    Raises InputError if (s[k-1] - s[k]) / (s[k-1] + s[k]) <= :data:`~trgad.physics.svdrules.DEGENERATE_RTOL`: the kept
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


def _full_svd(M):
    """The thin SVD (U, s, Vh) of M and whether M is finite; s is all NaN when it is not.

    LAPACK is never handed a non-finite matrix (it may not return): if any entry of M is inf
    or nan, the SVD is taken of zeros.  The test sums M * 0, which is 0 for a finite matrix
    and NaN otherwise and never overflows.  Why not ``jnp.all(jnp.isfinite(M))``: with JAX
    0.12 on CPU the float multiply-and-sum goes to a library kernel (YNNPACK), the boolean
    reduction to a loop LLVM compiles, unoptimised in trgad's programs
    (:mod:`trgad.runtime.compiled`), several times slower.  It relies on IEEE arithmetic:
    XLA's fast math (``--xla_cpu_enable_fast_math=true`` in ``XLA_FLAGS``, off by default)
    folds it away.  Concrete input never gets here (:func:`_checked` refuses it); this is
    what a traced M gives."""
    finite = jnp.isfinite(jnp.sum(M * 0.0))
    U, s, Vh = jnp.linalg.svd(jnp.where(finite, M, 0.0), full_matrices=False)
    return U, jnp.where(finite, s, jnp.nan), Vh, finite


def _svd_parts_impl(M, k):
    """Kept (U, s, Vh) and discarded (U_d, s_d, Vh_d) triplets from one full SVD of M; every
    output is NaN if an entry of M is not finite (:func:`_full_svd`)."""
    U, s, Vh, finite = _full_svd(M)
    U, Vh = (jnp.where(finite, x, jnp.nan) for x in (U, Vh))
    return _kept_and_discarded(U, s, Vh, k)


def _kept_and_discarded(U, s, Vh, k):
    """(U_k, s_k, Vh_k, U_d, s_d, Vh_d): an SVD's k kept triplets, then the rest."""
    return U[:, :k], s[:k], Vh[:k, :], U[:, k:], s[k:], Vh[k:, :]


def _halves(U, s, Vh, k):
    """X = U_k sqrt(S_k) and Y = sqrt(S_k) Vh_k, the balanced split of the k kept triplets."""
    r = jnp.sqrt(s[:k])
    return U[:, :k] * r[None, :], r[:, None] * Vh[:k, :]


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
    (:func:`~trgad.runtime.validate.check_finite_matrix`, before any LAPACK call) and :func:`check_truncation` (the
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
    :func:`~trgad.runtime.validate.check_finite_matrix`), if k keeps a zero singular value or cuts inside a
    multiplet (:func:`check_truncation`).  Traced values cannot be checked: pairs without a
    derivative then contribute 0, and a non-finite M gives NaN in every output (the SVD is
    then taken of zeros, never of the non-finite matrix).  Integer matrices are converted
    to float64.

    ``grad``, ``vjp``, ``jvp``, ``jacfwd``, ``jacrev``, ``hessian`` and their nestings all
    work: the forward-mode rule is :func:`~trgad.physics.svdrules.svd_tangent`, transposed by JAX for reverse mode.
    At exactly degenerate kept values prefer :func:`balanced_split` for second derivatives
    (see the module docstring).
    """
    return _checked(_svd_parts, M, k, s_at=1)[:3]


def _split_parts_impl(M, k):
    """The halves X = U sqrt(S), Y = sqrt(S) Vh, then s and the discarded triplets (the
    solves' eigenbases, zero tangents, as for :func:`truncated_svd`).  A non-finite M makes
    s NaN (:func:`_full_svd`), hence both halves and every derivative: the singular vectors
    need no mask of their own."""
    U, s, Vh, _ = _full_svd(M)
    _, s_k, _, *discarded = _kept_and_discarded(U, s, Vh, k)
    return (*_halves(U, s, Vh, k), s_k, *discarded)


_split_parts = jax.custom_jvp(_split_parts_impl, nondiff_argnums=(1,))


@_split_parts.defjvp
def _split_parts_jvp(k, primals, tangents):
    (M,), (dM,) = primals, tangents
    out = _split_parts(M, k)
    dX, dY = split_tangent(jnp, M, out[0], out[1], out[2], dM, out[3:])
    return out, (dX, dY, *(jnp.zeros_like(x) for x in out[2:]))


def balanced_split(M, k):
    """The halves X = U sqrt(S) (m, k) and Y = sqrt(S) Vh (k, n) of M's k largest singular
    triplets, under every JAX transform (forward rule :func:`~trgad.physics.svdrules.split_tangent`).

    This is what a tensor network puts at the two ends of a truncated bond (the TRG's
    ``_split``); its derivatives have no 1/(s_i - s_j) between kept values, so they are exact
    at degenerate singular values, to any order, for any loss unchanged by X -> X G,
    Y -> G^T Y with G orthogonal.  Parameters and errors as :func:`truncated_svd`; every JAX
    transform works.
    """
    return _checked(_split_parts, M, k, s_at=2)[:2]


# ---- the balanced split's pullback in closed form: reverse mode, first order -------------

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
    U, s, Vh, _ = _full_svd(M)
    return _halves(U, s, Vh, k), (U, s, Vh)


def _split_reverse_bwd(k, residuals, cotangents):
    return (split_pullback(jnp, *_first_order_only(residuals), k, *cotangents),)


_split_reverse.defvjp(_split_reverse_fwd, _split_reverse_bwd)


def balanced_split_reverse(M, k):
    """:func:`balanced_split` with a reverse-mode rule written out (:func:`~trgad.physics.svdrules.split_pullback`):
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
