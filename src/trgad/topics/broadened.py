"""tensorgrad's broadened ("Lorentzian") SVD rule in JAX, and the book's TRG run through it.

Source: wangleiphy/tensorgrad, commit 732bd6430e86f1b69a8615045ca5b6399ad73061 (2021-05-20),
files ``tensornets/adlib/svd.py`` (the rule), ``tensornets/trg.py`` (its TRG) and
``1_ising_TRG/ising.py`` (u and c of the Ising model); the method is that of Liao, Liu,
Wang and Xiang, Phys. Rev. X 9, 031041 (2019).  What that code does, and what is kept here:

* **The SVD it differentiates is the full one.**  ``torch.svd(A)`` of the square
  (D^2, D^2) matrix returns all D^2 triplets (U, S, V, V not transposed); the TRG then keeps
  the first D_new columns by slicing, so the cotangents of the discarded columns are zero
  and the rule still pairs every singular value with every other.  :func:`svd` here is a
  ``jax.custom_vjp`` of ``jnp.linalg.svd(A, full_matrices=False)`` returning (U, S, V) in
  torch's convention, and :func:`split` slices it.
* **The broadening.**  ``safe_inverse(x, epsilon=1e-12) = x / (x**2 + epsilon)`` is applied
  to F[i, j] = s_j - s_i (not to s_j**2 - s_i**2), the diagonal of F is set to 0;
  G[i, j] = 1 / (s_i + s_j) unbroadened, 0 on the diagonal.  With J = U^T dU, K = V^T dV:
  dA = U [(F + G) o (J - J^T)/2 + (F - G) o (K - K^T)/2 + diag(dS)] V^T, plus the two
  projector terms for non-square A (absent in the TRG, whose matrices are square).
  epsilon is absolute, so how much it broadens depends on the matrix's scale (next point).
* **Its TRG** divides T by max |T| before each step and keeps
  D_new = min(D^2, chi, #(S_a > 1e-15), #(S_b > 1e-15)) values, chosen at run time.  Here
  the book's TRG (:func:`trgad.physics.trg.trg_step`, its repeated full-size steps in one
  ``lax.scan``, :func:`trgad.physics.modes.lnz_scanned`) is used unchanged, only its ``split``
  replaced (:func:`ops`).  The book divides T by its Frobenius norm; :func:`split` hands
  the rule M / max|M|, which is tensorgrad's matrix T / max|T|, so the absolute epsilon
  broadens exactly as much as there (on the book's scale, s_0 <= 1 instead of >= 1, it
  would broaden more).  The kept numbers come from :func:`trgad.physics.trg.truncation_schedule`,
  fixed before tracing, because a traced JAX graph has static shapes (a page using this
  module checks that they equal tensorgrad's D_new at its betas).
* **Its second derivative** is ``torch.autograd.grad(lnZ, beta, create_graph=True)`` and
  then ``grad`` again: reverse over reverse, PyTorch differentiating the backward formula
  itself (safe_inverse included), and the saved (U, S, V) back through the same rule.
  Here :func:`svd`'s forward rule returns its own outputs as residuals *by calling*
  :func:`svd`, so under a second ``jax.grad`` their dependence on A goes through this rule
  again, as in PyTorch.  What JAX's structure forces: a ``custom_vjp`` has no forward mode,
  so ``jax.jvp``, ``jax.jacfwd`` and forward-over-reverse raise TypeError; the second
  derivative is ``jax.grad`` of ``jax.grad`` (:func:`value_and_derivatives`), the form
  tensorgrad uses.

:func:`value_and_derivatives` gives lnZ/N, u and c of the book's TRG through this rule.
One addition, off by default and not tensorgrad's: ``exact_discarded`` gives pairs of two
discarded values the exact coefficient 1/(s_j - s_i), to find which pairs the broadening
affects (a rule for the truncated SVD never forms those pairs).
"""
from __future__ import annotations

import copy
import functools

import jax
import jax.numpy as jnp

from ..runtime import compiled
from ..physics import modes, trg
from ..runtime.validate import InputError, check_beta, check_choice, check_positive, check_range

#: tensorgrad's ``safe_inverse`` default (``tensornets/adlib/svd.py``).
EPSILON = 1e-12
#: The tensorgrad commit this module follows.
SOURCE_COMMIT = "732bd6430e86f1b69a8615045ca5b6399ad73061"


def safe_inverse(x, epsilon=EPSILON):
    """x / (x**2 + epsilon), elementwise: ~1/x for |x| >> sqrt(epsilon), 0 at x = 0."""
    return x / (x ** 2 + epsilon)


def exact_inverse(x):
    """1/x elementwise, and 0 where x == 0 (the unbroadened coefficient)."""
    zero = x == 0
    return jnp.where(zero, 0.0, 1.0 / jnp.where(zero, 1.0, x))


@jax.custom_vjp
def svd(A, epsilon=EPSILON, exact_pairs=0.0):
    """Thin SVD of an (m, n) matrix with tensorgrad's backward rule (:func:`backward`).

    Returns U (m, r), S (r,), V (n, r) with r = min(m, n) and A = U diag(S) V^T (torch's
    convention: V, not V^T).  ``epsilon`` > 0 is the broadening of :func:`safe_inverse`;
    ``exact_pairs`` (scalar or (r, r) array of weights in [0, 1], default 0: tensorgrad's
    rule) mixes in the exact 1/(s_j - s_i) pair by pair (see :func:`backward`).  Both may be
    traced (one compiled program serves every value) and are never differentiated (their
    cotangents are 0).  Reverse mode only, to any order (see the module docstring);
    ``jax.jvp`` raises TypeError.
    """
    U, S, Vh = jnp.linalg.svd(A, full_matrices=False)
    return U, S, Vh.T


def _svd_fwd(A, epsilon, exact_pairs):
    out = svd(A, epsilon, exact_pairs)   # through the rule again, so a second grad sees it
    return out, (out, epsilon, exact_pairs)


def backward(epsilon, res, cts, exact_pairs=0.0):
    """tensorgrad's ``SVD.backward`` (``tensornets/adlib/svd.py``), line by line.

    ``res`` = (U (m, r), S (r,), V (n, r)) of :func:`svd`, ``cts`` = their cotangents
    (dU, dS, dV).  Returns the (m, n) cotangent dA (formula in the module docstring).
    ``exact_pairs`` = w (0 in tensorgrad) replaces F by (1 - w) F + w / (s_j - s_i) (0 where
    s_i = s_j): not tensorgrad's, only for finding which pairs its broadening affects."""
    U, S, V = res
    dU, dS, dV = cts
    M, N, NS = U.shape[0], V.shape[0], S.shape[0]
    eye = jnp.eye(NS, dtype=S.dtype)
    x = S[None, :] - S[:, None]
    F = safe_inverse(x, epsilon)                               # F[i, j] ~ 1/(s_j - s_i)
    F = F + exact_pairs * (exact_inverse(x) - F)               # (0 in tensorgrad)
    F = jnp.where(eye > 0, 0.0, F)
    G = S[None, :] + S[:, None]
    G = 1.0 / jnp.where(eye > 0, jnp.inf, G)                  # 1/(s_i + s_j), 0 on the diagonal
    UdU = U.T @ dU
    VdV = V.T @ dV
    Su = (F + G) * (UdU - UdU.T) / 2
    Sv = (F - G) * (VdV - VdV.T) / 2
    dA = U @ (Su + Sv + jnp.diag(dS)) @ V.T
    if M > NS:
        dA = dA + (jnp.eye(M, dtype=U.dtype) - U @ U.T) @ (dU / S) @ V.T
    if N > NS:
        dA = dA + (U / S) @ dV.T @ (jnp.eye(N, dtype=U.dtype) - V @ V.T)
    return dA


def _svd_bwd(saved, cts):
    res, epsilon, exact_pairs = saved
    return (backward(epsilon, res, cts, exact_pairs), jnp.zeros_like(epsilon),
            jnp.zeros_like(exact_pairs))


svd.defvjp(_svd_fwd, _svd_bwd)


def split(M, k, epsilon=EPSILON, exact_discarded=0.0):
    """Halves X = U_k sqrt(S_k) (m, k) and Y = sqrt(S_k) V_k^T (k, n) of M as tensorgrad's
    ``renormalize`` makes them: :func:`svd` of M / max|M| (the matrix tensorgrad decomposes,
    its T / max|T|; the book passes T / ||T||), the first k triplets sliced, the scale put
    back.  Same halves as :func:`trgad.physics.svd.balanced_split` (up to rounding and the bond gauge).

    ``k``: static int in [1, min(m, n)], else InputError.  ``epsilon``: the broadening.
    ``exact_discarded`` (0 in tensorgrad): weight of the exact 1/(s_j - s_i) for pairs of two
    discarded values (1: fully exact there, the pairs a rule for the truncated SVD never
    forms); a float or traced scalar."""
    if not 1 <= int(k) <= min(M.shape):
        raise InputError(f"k={k!r} is out of range: k must be in [1, {min(M.shape)}] for a "
                         f"{tuple(M.shape)} matrix")
    r = min(M.shape)
    discarded = (jnp.arange(r) >= k).astype(M.dtype)
    scale = jnp.max(jnp.abs(M))
    U, S, V = svd(M / scale, epsilon, exact_discarded * jnp.outer(discarded, discarded))
    root = jnp.sqrt(S[:k] * scale)
    return U[:, :k] * root[None, :], (V[:, :k] * root[None, :]).T


def _epsilon(value):
    return value if isinstance(value, jax.core.Tracer) else check_positive("epsilon", value)


def _weight(value):
    if isinstance(value, jax.core.Tracer):
        return value
    v = check_range("exact_discarded", value, None, 1.0)
    if v < 0:
        raise InputError(f"exact_discarded={value!r} is out of range: exact_discarded must be "
                         f"in [0, 1] (0 is tensorgrad's rule)")
    return v


def ops(epsilon=EPSILON, exact_discarded=0.0):
    """The JAX array namespace of :mod:`trgad.physics.trg` with ``split`` replaced by :func:`split`:
    pass it to :func:`trgad.physics.trg.lnz_per_site` to run the book's TRG through tensorgrad's rule.
    ``epsilon`` (> 0) and ``exact_discarded`` (in [0, 1]) as in :func:`split`, floats
    (InputError if out of range) or traced scalars."""
    epsilon, exact_discarded = _epsilon(epsilon), _weight(exact_discarded)
    namespace = copy.copy(trg.JAX)
    namespace.name = "jax, tensorgrad's broadened SVD rule"
    namespace.split = functools.partial(split, epsilon=epsilon, exact_discarded=exact_discarded)
    return namespace


_TENSORGRAD_PROGRAMS = compiled.registry("broadened")


def program(schedule):
    """The compiled (beta, epsilon, exact_discarded) -> (lnZ/N, d lnZ/N/d beta,
    d^2 lnZ/N/d beta^2) of the book's TRG through :func:`split`, second derivative by
    reverse over reverse (``jax.grad`` of ``jax.grad``, as tensorgrad's ``ising.py``), the
    repeated full-size steps in one ``lax.scan`` (:func:`trgad.physics.modes.lnz_scanned`; tensorgrad
    unrolls them: the same values up to the order of a floating-point sum, and a program
    compiled once for the repeated step); cached per schedule.  Call it with three Python
    floats."""
    key = tuple(int(k) for k in schedule)
    if key not in _TENSORGRAD_PROGRAMS:
        def first(b, eps, weight):
            namespace = ops(eps, weight)
            lnz = lambda x: modes.lnz_scanned(x, key, namespace)       # noqa: E731
            value, slope = jax.value_and_grad(lnz)(b)
            return slope, value

        both = jax.value_and_grad(first, has_aux=True)
        _TENSORGRAD_PROGRAMS[key] = compiled.jit(lambda *a: (lambda r: (r[0][1], r[0][0], r[1]))(both(*a)))
    return _TENSORGRAD_PROGRAMS[key]


#: What :func:`value_and_derivatives` may do with pairs of two discarded singular values.
DISCARDED_PAIRS = ("broadened", "exact")


def value_and_derivatives(beta, schedule, epsilon=EPSILON, discarded_pairs="broadened"):
    """lnZ/N, u and c of the Ising model by the book's TRG through tensorgrad's rule.

    Parameters
    ----------
    beta : float in (0, 8.9e307], inverse temperature (1/J).
    schedule : sequence of int, the kept k at each step (:func:`trgad.physics.trg.truncation_schedule`).
    epsilon : float > 0, the broadening (default tensorgrad's 1e-12).
    discarded_pairs : "broadened" (tensorgrad's rule) or "exact" (pairs of two discarded
        values get the exact coefficient: not tensorgrad's, for attributing its error).

    Returns
    -------
    dict with ``lnz_per_site``, ``u`` = -d(lnZ/N)/d beta (J per site) and
    ``c`` = beta**2 d^2(lnZ/N)/d beta**2 (k_B per site), floats.  Raises InputError for a bad
    beta, epsilon, discarded_pairs or k.  The first call per schedule compiles the program
    (every beta, epsilon and discarded_pairs then reuse it).
    """
    beta, epsilon = check_beta(beta), check_positive("epsilon", epsilon)
    weight = DISCARDED_PAIRS.index(check_choice("discarded_pairs", discarded_pairs, DISCARDED_PAIRS))
    lnz, d1, d2 = (float(x) for x in program(schedule)(beta, epsilon, float(weight)))
    return {"lnz_per_site": lnz, "u": -d1, "c": beta * beta * d2}
