"""Levin-Nave TRG for the 2D Ising model, written once for several array back ends.

The functions take an ``ops`` namespace (:data:`JAX`, :data:`NUMPY`, or the keyed engine's
``trgad.keyed.keyed_trg.KeyedOps``) so that the *same* code builds the JAX graph that ``jax.grad``
differentiates and the graph that the keyed engine transforms.

Conventions
-----------
* T[l, u, r, d]: legs left, up, right, down.  On one sublattice T is split as
  (l, u | r, d), on the other as (u, r | d, l); each half carries sqrt(s).  Four halves
  around a plaquette make the next tensor, on a lattice rotated by 45 degrees with half as
  many sites (Levin and Nave, PRL 99, 120601 (2007)).
* Before step i, T_i is divided by its Frobenius norm.  After n steps one tensor stands for
  N = 2**n sites and

      lnZ/N = 2 beta + sum_i ln||T_i|| / 2**i + ln(tr T_n) / 2**n,

  where tr joins left with right and up with down (a torus of one tensor).
* The truncation schedule ks[i] = min(chi, numerical rank at step i) is fixed before
  tracing, so every shape in the graph is static.  For chi = 16: [2, 4, 4, 16, 16, ...].
* The initial tensor is scaled by e^{-2 beta} (:mod:`trgad.physics.ising`) and lnZ/N gets 2 beta
  back, so nothing overflows for any beta in [BETA_MIN, BETA_MAX] (:mod:`trgad.runtime.validate`).
"""
from __future__ import annotations

from typing import NamedTuple

import jax.numpy as jnp
import numpy as np

from . import ising
from .svd import RANK_RTOL, balanced_split, balanced_split_reverse, check_multiplet, numerical_rank
from ..runtime.validate import (InputError, check_beta, check_chi, check_finite_matrix, check_int,
                                check_schedule, check_steps, checked)


class _Ops:
    """Array namespace used by the TRG: the few operations it needs, nothing else."""

    name = "?"


def _jax_ops(split=balanced_split, name="jax"):
    ops = _Ops()
    ops.name = name
    ops.exp, ops.expm1, ops.log, ops.sqrt = jnp.exp, jnp.expm1, jnp.log, jnp.sqrt
    ops.reshape, ops.transpose, ops.einsum = jnp.reshape, jnp.transpose, jnp.einsum
    ops.norm = jnp.linalg.norm
    ops.split = split
    ops.constant = lambda x: jnp.asarray(x, dtype=jnp.float64)
    return ops


def _numpy_split(M, k):
    U, s, Vh = np.linalg.svd(check_finite_matrix(M), full_matrices=False)
    r = np.sqrt(s[:k])
    return U[:, :k] * r[None, :], r[:, None] * Vh[:k, :]


def _numpy_ops():
    ops = _Ops()
    ops.name = "numpy"
    ops.exp, ops.expm1, ops.log, ops.sqrt = np.exp, np.expm1, np.log, np.sqrt
    ops.reshape, ops.transpose = np.reshape, np.transpose
    ops.einsum = lambda spec, *xs: np.einsum(spec, *xs, optimize=True)
    ops.norm = np.linalg.norm
    ops.split = _numpy_split
    ops.constant = lambda x: np.asarray(x, dtype=np.float64)
    return ops


#: NumPy back end (no derivatives; used to find the truncation schedule).
NUMPY = _numpy_ops()
#: JAX back end (``jax.numpy``, and :func:`trgad.physics.svd.balanced_split` for the splits): every
#: JAX transform works through it.
JAX = _jax_ops()
#: The JAX back end for first-order reverse mode only (``jax.grad``, ``jax.vjp``): the same
#: values as :data:`JAX`, with :func:`trgad.physics.svd.balanced_split_reverse`, whose pullback is
#: written out, so the gradient program is far smaller; forward mode and second derivatives
#: need :data:`JAX`.
JAX_REVERSE = _jax_ops(balanced_split_reverse, "jax-reverse")


def split_halves(M, D, k, ops):
    """Truncated SVD of a (D*D, D*D) matrix into halves U sqrt(S) (D, D, k) and
    sqrt(S) V^T (k, D, D): ``ops.split`` (JAX: :func:`trgad.physics.svd.balanced_split`)."""
    left, right = ops.split(M, k)
    return ops.reshape(left, (D, D, k)), ops.reshape(right, (k, D, D))


def trg_step(T, k, ops):
    """One Levin-Nave step.

    Parameters
    ----------
    T : (D, D, D, D) array, legs [l, u, r, d], not normalised.
    k : int, number of singular values kept (the new bond dimension).
    ops : array namespace.

    Returns
    -------
    (T_next, ln_norm): T_next of shape (k, k, k, k) built from T / ||T||, and ln ||T||.
    """
    D = T.shape[0]
    norm = ops.norm(T)
    T = T / norm
    # sublattice A: (l, u | r, d) -> A1[l, u, a], A2[a, r, d]
    A1, A2 = split_halves(ops.reshape(T, (D * D, D * D)), D, k, ops)
    # sublattice B: (u, r | d, l) -> B1[u, r, b], B2[b, d, l]
    B1, B2 = split_halves(ops.reshape(ops.transpose(T, (1, 2, 3, 0)), (D * D, D * D)), D, k, ops)
    return plaquette(B1, A1, B2, A2, ops), ops.log(norm)


def plaquette(B1, A1, B2, A2, ops):
    """The next tensor (k, k, k, k) from the four halves (D, D, k) and (k, D, D) around a
    plaquette: B1 lower-left, A1 lower-right, B2 upper-right, A2 upper-left; new legs
    [l', u', r', d'] = [a2, b2, a1, b1] (the lattice turned by 45 degrees).  One einsum,
    whose cheapest pairing costs D^3 k^2 twice, then D^2 k^4 (chi^6 at D = k = chi).
    Apart from :func:`trg_step` so that its pullback can be timed alone
    (:func:`trgad.physics.stepcost.step_costs`)."""
    return ops.einsum("pqD,qrC,Brs,Asp->ABCD", B1, A1, B2, A2)


def torus_trace(T, ops):
    """tr T = sum_ab T[a, b, a, b]: one tensor on a torus (left joined to right, up to down)."""
    return ops.einsum("abab->", T)


def lnz_from_steps(ln_norms, T_last, ops):
    """ln Z~/N = sum_i ln||T_i|| / 2**i + ln tr T_n / 2**n (n = len(ln_norms)), for the scaled
    tensor of :func:`trgad.physics.ising.initial_tensor` (add 2 beta for lnZ/N)."""
    n = len(ln_norms)
    total = ops.log(torus_trace(T_last, ops)) * (1.0 / 2**n)
    for i, ln in enumerate(ln_norms):
        total = total + ln * (1.0 / 2**i)
    return total


def _check_concrete_beta(beta):
    """``beta``, checked by check_beta if its value is known now (a number or a concrete
    array); a traced value or an engine value passes unchecked (see :func:`lnz_per_site`)."""
    try:
        value = float(beta)
    except (TypeError, ValueError):    # a tracer (ConcretizationTypeError is a TypeError), an engine value
        return beta
    check_beta(value)
    return beta


@checked(schedule=check_schedule, beta=_check_concrete_beta)
def lnz_per_site(beta, schedule, ops=None):
    """lnZ/N of the Ising model on a 2**len(schedule)-site torus, by TRG, as one graph.

    Parameters
    ----------
    beta : scalar (float or a traced value of ``ops``), inverse temperature in units of 1/J.
    schedule : sequence of int, ks[i] kept at step i (see :func:`truncation_schedule`).
    ops : array namespace, default JAX.

    Returns
    -------
    Scalar lnZ/N (dimensionless).  ``jax.grad`` of it with respect to beta is -u.  The graph
    contracts the scaled tensor T e^{-2 beta} and adds 2 beta back
    (:func:`trgad.physics.ising.log_weight_per_site`), so it stays finite for every beta in
    [BETA_MIN, BETA_MAX].

    Raises
    ------
    InputError for a bad schedule (:func:`trgad.runtime.validate.check_schedule`) and for a concrete
    beta (a number, not a traced value) outside that range (:func:`trgad.runtime.validate.check_beta`).
    A traced beta (inside ``jax.jit`` or ``jax.grad``) is not checked: the caller that traces
    it owns its range.
    """
    ops = ops or JAX
    T = ising.initial_tensor(beta, ops)
    ln_norms = []
    for k in schedule:
        T, ln = trg_step(T, k, ops)
        ln_norms.append(ln)
    return lnz_from_steps(ln_norms, T, ops) + ising.log_weight_per_site(beta)


def normalized(T, name="T"):
    """T / ||T|| (Frobenius) for a concrete tensor, scaled by its largest entry first, so that
    neither the squares of 1e200 (overflow) nor those of 1e-200 (underflow to 0) enter the
    norm.  Raises InputError if T has an inf or nan entry (:func:`trgad.runtime.validate.check_finite_matrix`)
    or is all zeros."""
    T = check_finite_matrix(np.asarray(T, dtype=np.float64), name)
    top = np.max(np.abs(T)) if T.size else 0.0
    if not top > 0:
        raise InputError(f"{name} is all zeros: the TRG divides by its norm")
    T = T / top
    return T / np.linalg.norm(T)


def split_spectra(T):
    """Singular values of the two matrices a TRG step splits, for T / ||T||.

    ``T``: (D, D, D, D) NumPy array, legs [l, u, r, d], any scale (:func:`normalized`).
    Returns (s_A, s_B), each a (D*D,) array in descending order: sublattice A splits
    (l, u | r, d), sublattice B (u, r | d, l) (see :func:`trg_step`).  Raises InputError for
    a T with an inf or nan entry, or all zeros.
    """
    D = T.shape[0]
    Tn = normalized(T)
    mats = (Tn.reshape(D * D, D * D), Tn.transpose(1, 2, 3, 0).reshape(D * D, D * D))
    return tuple(np.linalg.svd(m, compute_uv=False) for m in mats)


@checked(chi=check_chi, steps=check_steps, beta=check_beta)
def truncation_schedule(chi, steps, beta=0.3, rtol=RANK_RTOL):
    """ks[i] = min(chi, numerical rank at step i) for ``steps`` TRG steps.

    Found by a NumPy primal pass at ``beta`` (the ranks of the first steps come from the
    structure of the network, not from beta: [2, 4, 4, 16, 16, ...] for chi = 16 at
    beta = 0.3; see :func:`cut_spectra`).  A singular value
    counts when it exceeds ``rtol`` times the largest one (default :data:`RANK_RTOL`; below
    beta ~ 1e-13 the beta-sized values fall under it and u keeps an absolute error of about
    6 beta, while lnZ/N stays exact to rounding).

    Returns a list of ``steps`` ints.  Raises InputError for chi outside [2, CHI_MAX], steps
    outside [1, MAX_STEPS] or a bad beta (see :mod:`trgad.runtime.validate`), and if chi cuts inside a
    multiplet of equal singular values at some step (:func:`trgad.physics.svd.check_multiplet`: the
    truncated tensor would not be a differentiable function of beta there).
    """
    ops = NUMPY
    T = ising.initial_tensor(beta, ops)
    ks = []
    for step in range(steps):
        spectra = split_spectra(T)
        k = max(1, min(chi, *(numerical_rank(sv, rtol) for sv in spectra)))
        for sv in spectra:
            check_multiplet(sv, k, f"chi={chi} at step {step} (beta={beta:g})")
        ks.append(k)
        T, _ = trg_step(T, k, ops)
    return ks


#: Most entries of a tensor that :func:`cut_spectra` builds (2**24 float64 values, 128 MB).
#: Without truncation the bond dimension squares every two steps, so only a few steps fit.
CUT_SPECTRA_MAX_ENTRIES = 2**24


class Cut(NamedTuple):
    """The spectrum at the cut of one TRG step (see :func:`cut_spectra`).

    ``k``: values kept; ``rank``: numerical rank (:data:`trgad.physics.svd.RANK_RTOL`), the smaller
    over the two splits; ``a``, ``b``: all singular values of sublattice A's and B's matrix,
    each divided by its largest (descending (D*D,) arrays).
    """

    k: int
    rank: int
    a: np.ndarray
    b: np.ndarray

    @property
    def gap(self):
        """Relative gap (s_k - s_{k+1}) / s_k between the last kept and the first discarded
        value (1-based), the smaller over the two splits; nan if nothing is discarded."""
        if self.k >= self.a.size:
            return float("nan")
        return float(min((s[self.k - 1] - s[self.k]) / s[self.k - 1] for s in (self.a, self.b)))


def cut_spectra(T, steps, chi=None, rtol=RANK_RTOL):
    """The singular values at each step's cut, from a NumPy primal pass of the TRG.

    Parameters
    ----------
    T : (D, D, D, D) NumPy array, the initial tensor (e.g. ``ising.initial_tensor(beta,
        trg.NUMPY)``; any tensor with the TRG's leg order).
    steps : int in [1, MAX_STEPS], number of steps looked at.
    chi : int >= 1, or None.  Step i keeps min(chi, numerical rank) values, as
        :func:`truncation_schedule` does (without its multiplet check: this function only
        looks); None keeps every nonzero value, the untruncated and exact TRG.
    rtol : relative threshold of the numerical rank.

    Returns
    -------
    A list of ``steps`` :class:`Cut` records (k, rank, spectra of both splits, gap).

    Raises InputError for a bad ``steps`` or ``chi``, for a T with an inf or nan entry or
    all zeros, or if a tensor would exceed :data:`CUT_SPECTRA_MAX_ENTRIES` entries (an
    untruncated TRG of too many steps).  The cuts do not depend on the scale of T: it is
    normalised first (:func:`normalized`), as every step normalises its input.
    """
    steps = check_steps(steps)
    chi = None if chi is None else check_int("chi", chi, 1)
    T = np.asarray(T, dtype=np.float64)
    if T.ndim != 4 or len(set(T.shape)) != 1:
        raise InputError(f"T has shape {T.shape}: give a (D, D, D, D) tensor")
    T = normalized(T)
    cuts = []
    for step in range(steps):
        a, b = split_spectra(T)
        rank = min(numerical_rank(a, rtol), numerical_rank(b, rtol))
        k = max(1, rank if chi is None else min(chi, rank))
        cuts.append(Cut(k, rank, a / a[0], b / b[0]))
        if step + 1 < steps:
            if k ** 4 > CUT_SPECTRA_MAX_ENTRIES:
                raise InputError(f"steps={steps} is out of range here: step {step + 1} would build a "
                                 f"tensor of bond dimension {k} ({k ** 4} entries, at most "
                                 f"{CUT_SPECTRA_MAX_ENTRIES}); pass a smaller chi or fewer steps")
            T, _ = trg_step(T, k, NUMPY)
    return cuts


def lnz_terms(beta, schedule, ops=None):
    """The terms of lnZ/N, step by step, from one primal pass of the TRG.

    Parameters as :func:`lnz_per_site`.  Returns a dict of three lists, one entry per step i
    (scalars of ``ops``):

    * ``ln_norms``: ln||T_i||, the norm divided out before step i (enters lnZ/N as
      ln||T_i|| / 2**i);
    * ``ln_traces``: ln tr T_{i+1}, the torus trace of the tensor step i returns;
    * ``estimates``: lnZ/N on 2**(i+1) sites, 2 beta + sum_{j<=i} ln||T_j|| / 2**j +
      ln tr T_{i+1} / 2**(i+1): entry i equals ``lnz_per_site(beta, schedule[:i + 1], ops)``,
      and the entries for i <= 3 are the exact small tori when nothing is truncated there.
    """
    ops, schedule = ops or JAX, check_schedule(schedule)
    _check_concrete_beta(beta)
    T = ising.initial_tensor(beta, ops)
    total = ising.log_weight_per_site(beta)
    terms = {"ln_norms": [], "ln_traces": [], "estimates": []}
    for i, k in enumerate(schedule):
        T, ln = trg_step(T, k, ops)
        total = total + ln * (1.0 / 2**i)
        ln_trace = ops.log(torus_trace(T, ops))
        terms["ln_norms"].append(ln)
        terms["ln_traces"].append(ln_trace)
        terms["estimates"].append(total + ln_trace * (1.0 / 2**(i + 1)))
    return terms
