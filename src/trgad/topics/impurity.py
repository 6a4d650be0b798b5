"""The internal energy by the impurity method: one tensor carries the bond energy, coarse-grained along.

No derivative is taken anywhere in this module (NumPy only): it is an oracle for u that is
independent of every derivative rule in the package.

The impurity.  With the book's bond weight Q = H diag(2 cosh b, 2 sinh b) H (H the Hadamard
matrix, :mod:`trgad.physics.ising`), the energy -s s' of one bond, weighted by Q, is
-(s s' Q_ss') = -H diag(2 sinh b, 2 cosh b) H: the bond's two channels (the bond index 0 and
1 of the site tensor) swap their weights.  Putting half of it on each of a site's four bonds
multiplies the site tensor entry [l, u, r, d] with n = l + u + r + d by
-(1/2) [(4 - n) tanh b + n coth b], which gives, in the scaled form of
:func:`trgad.physics.ising.initial_tensor` (e = 1 + e^{-2b}, o = 1 - e^{-2b}),

    X[l, u, r, d] = -e o  (n = 0 or 4),   -(e**2 + o**2) / 2  (n = 2),   0 (n odd).

On the torus, Z with X at one site and T everywhere else, divided by Z, is the energy of that
site's four half-bonds, -(1/2) sum s_0 s_j = u (every site is alike).

Coarse-graining it (:func:`impurity_step`).  Each step splits the pure tensor as the TRG does
(:func:`trgad.physics.trg.trg_step`: M = U S V^T, halves U sqrt(S) and sqrt(S) V^T, k kept) and
splits the impurity's matrix M_X on the *same* singular vectors:

    M_X ~ U U^T M_X + (1 - U U^T) M_X V V^T
        = [U sqrt(S)] [S^-1/2 U^T M_X] + [(1 - U U^T) M_X V S^-1/2] [sqrt(S) V^T],

a sum of two terms that each put the impurity on one half.  Each term puts the impurity
into one new tensor; by translation invariance and linearity the two are one impurity, the
sum of the two plaquettes.  Averaging over the impurity's sublattice (A or B, each half of
the sites) and dividing by 2 (the coarse lattice has half as many sites) gives the next
impurity X' (legs as T').  After n steps u = tr X_n / tr T_n.  The approximation
M_X ~ ... is exact when M has rank k and M_X lies in the tangent space of the rank-k
matrices at M (the terms dropped are (1 - U U^T) M_X (1 - V V^T)); that holds on the
untruncated steps, so on the small tori (n <= 4 steps at chi >= 16) the method is exact.
Where the TRG truncates, X' differs from the derivative of T' by the derivative of the
truncation itself (how U, S, V move), which the impurity method leaves out: this is the
correspondence between forward-mode AD with the SVD's derivative dropped and the impurity
method (Sugimoto, arXiv:2602.08987 (2026)).

A limit, not hidden: both kept terms divide by sqrt(S) down to the k-th singular value, so
where the truncation drops weight comparable to the smallest kept singular values (near
beta_c, and more so at larger chi, whose smallest kept values are smaller) the dropped
term's error is amplified from step to step.  This split is exact where nothing is
truncated and close to the exact u at small chi away from beta_c; it is not a converged
estimate at large chi near beta_c (tests/test_impurity.py checks both sides of this).  Sources: Levin and Nave, PRL 99, 120601 (2007)
(the TRG); impurity tensors for expectation values, e.g. Morita and Kawashima,
arXiv:2411.13998 (2024) and the references there.
"""
from __future__ import annotations

import time

import numpy as np

from ..physics import ising, trg
from ..runtime.validate import InputError, check_beta, check_finite_matrix, check_schedule, checked


@checked(beta=check_beta)
def energy_tensor(beta):
    """The impurity tensor X[l, u, r, d] carrying the bond energy, shape (2, 2, 2, 2), float64.

    Scaled like ``ising.initial_tensor(beta, trg.NUMPY)`` (the factor e^{-2 beta}), so
    that Z[X at one site] / Z[T] = u(beta), the internal energy per site (J per site; see the module docstring for the closed form).  ``beta``: float
    in [BETA_MIN, BETA_MAX] (:func:`trgad.runtime.validate.check_beta`).  Raises
    InputError otherwise.
    """
    b = beta
    q = np.exp(-2.0 * b)
    even, odd = 1.0 + q, -np.expm1(-2.0 * b)
    n0, n2, n4 = ising.MASKS                     # 1/2 where n = 0, 2, 4, else 0
    return -2.0 * even * odd * (n0 + n4) - (even ** 2 + odd ** 2) * n2


def _halves(M, MX, k):
    """Pure halves (m, k), (k, n) of M and impurity halves on the same singular vectors."""
    U, s, Vh = np.linalg.svd(M, full_matrices=False)
    U, s, Vh = U[:, :k], s[:k], Vh[:k, :]
    r = np.sqrt(s)
    MXV = MX @ Vh.T
    left_x = (MXV - U @ (U.T @ MXV)) / r[None, :]        # (1 - U U^T) M_X V S^-1/2
    right_x = (U.T @ MX) / r[:, None]                     # S^-1/2 U^T M_X
    return U * r[None, :], r[:, None] * Vh, left_x, right_x


def _plaquette(B1, A1, B2, A2):
    """The TRG's plaquette (:func:`trgad.physics.trg.trg_step`): new legs [a2, b2, a1, b1]."""
    return np.einsum("pqD,qrC,Brs,Asp->ABCD", B1, A1, B2, A2, optimize=True)


def impurity_step(T, X, k):
    """One TRG step of the pure tensor T and the impurity X together.

    Parameters
    ----------
    T, X : (D, D, D, D) float64 arrays, legs [l, u, r, d]; T not normalised.
    k : int in [1, D*D], singular values kept.

    Returns
    -------
    (T_next, X_next, ln_norm): T_next of shape (k, k, k, k), equal to
    ``trg.trg_step(T, k, trg.NUMPY)[0]`` to rounding; X_next of the same shape, the coarse
    impurity built from X / ||T|| (see the module docstring), so that
    Z[X_next at one site] / Z[T_next] equals Z[X at one site] / Z[T] wherever nothing is
    truncated; ln_norm = ln ||T||.  Raises InputError for a T or X with an inf or nan
    entry, a bad k, or T all zeros.
    """
    D = T.shape[0]
    if not 1 <= int(k) <= D * D:
        raise InputError(f"k={k!r} is out of range: k must be in [1, {D * D}] for D = {D}")
    T = check_finite_matrix(np.asarray(T, dtype=np.float64), "T")
    X = check_finite_matrix(np.asarray(X, dtype=np.float64), "X")
    norm = np.linalg.norm(T)
    if not norm > 0:
        raise InputError("T is all zeros: the TRG divides by its norm")
    T, X = T / norm, X / norm
    shape = (D, D, k), (k, D, D)

    def split(t, x):
        halves = _halves(t.reshape(D * D, D * D), x.reshape(D * D, D * D), k)
        return [h.reshape(shape[i % 2]) for i, h in enumerate(halves)]

    A1, A2, A1x, A2x = split(T, X)                                     # (l, u | r, d)
    B1, B2, B1x, B2x = split(T.transpose(1, 2, 3, 0), X.transpose(1, 2, 3, 0))   # (u, r | d, l)
    T_next = _plaquette(B1, A1, B2, A2)
    on_a = _plaquette(B1, A1x, B2, A2) + _plaquette(B1, A1, B2, A2x)   # impurity on sublattice A
    on_b = _plaquette(B1x, A1, B2, A2) + _plaquette(B1, A1, B2x, A2)   # ... on sublattice B
    return T_next, 0.5 * (on_a + on_b), float(np.log(norm))


def internal_energy(beta, schedule):
    """u (and lnZ/N) of the Ising model on the 2**len(schedule)-site torus by the impurity method.

    Parameters
    ----------
    beta : float in [BETA_MIN, BETA_MAX] (1/J).
    schedule : sequence of int, the k kept at each step (:func:`trgad.physics.trg.truncation_schedule`).

    Returns
    -------
    dict: ``u`` (J per site) = tr X_n / tr T_n; ``lnz_per_site`` from the same
    primal pass (as :func:`trgad.physics.trg.lnz_per_site`); ``seconds``, the wall time of this call.
    Exact on the untruncated small tori (n <= 4 steps with the ranks of
    :func:`trgad.physics.trg.truncation_schedule` at chi >= 16); elsewhere it differs from
    d(lnZ/N)/d beta of the same truncated TRG by the truncation's own derivative (module
    docstring).  Raises InputError for a bad beta or schedule.
    """
    t0 = time.perf_counter()
    beta, ks = check_beta(beta), check_schedule(schedule)
    T, X = ising.initial_tensor(beta, trg.NUMPY), energy_tensor.trusted(beta)
    lnz = ising.log_weight_per_site(beta)
    for i, k in enumerate(ks):
        T, X, ln = impurity_step(T, X, k)
        lnz += ln / 2**i
    trace = trg.torus_trace(T, trg.NUMPY)
    u = float(trg.torus_trace(X, trg.NUMPY) / trace)
    return {"u": u, "lnz_per_site": float(lnz + np.log(trace) / 2 ** len(ks)),
            "seconds": time.perf_counter() - t0}
