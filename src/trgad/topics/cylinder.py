"""The Ising model on an infinite cylinder of circumference L: its row transfer matrix and
the oracles for :mod:`trgad.topics.fixedpoint`'s loop.

A row is a spin configuration s in {-1, +1}^L; the symmetric transfer matrix is
T[s, s'] = exp(beta * [h(s)/2 + s.s' + h(s')/2]), h(s) = sum_i s_i s_{i+1} (J = 1, periodic
around the cylinder), built scaled, T~ = T e^{-2 L beta} (:func:`transfer_matrix`).  The
oracles: exact diagonalisation with Hellmann-Feynman and first-order perturbation theory
(:func:`exact`), its central difference (:func:`finite_difference`), and Kaufman's closed
form (:func:`kaufman_cylinder`; Kaufman, Phys. Rev. 76, 1232 (1949)), independent of the
matrix built here.
"""
from __future__ import annotations

import functools
import math

import jax.numpy as jnp
import numpy as np

from ..runtime.validate import InputError, check_beta, check_choice, check_int, check_positive, checked

#: Smallest and largest circumference.  T is a dense 2**L x 2**L float64 matrix (128 MB at
#: L = 12) and :func:`exact` diagonalises it in O(8**L) (minutes at L = 12).
L_MIN, L_MAX = 2, 12
#: The oracles' range of the inverse temperature (1/J), inside trgad's
#: (:data:`trgad.runtime.validate.BETA_MIN`, ``BETA_MAX``).  Above the top, deep in the
#: ordered phase, the dominant eigenvalue's spin-flip partner comes within 1e-9 of it at
#: L = 12 (Kaufman's spectrum), and :func:`exact`'s perturbation sums over
#: 1/(lambda_1 - lambda_k) lose their digits.  Below the bottom, u ~ -2 beta is a difference
#: of nearly equal numbers in both oracles: measured at L = 4 and 12, Kaufman's u agrees
#: with :func:`exact`'s to 4e-9 relative at 1e-4, to 7e-5 at 1e-6, not at all at 1e-10.
CYLINDER_BETA_MIN, CYLINDER_BETA_MAX = 1e-4, 1.0


def check_cylinder_beta(beta):
    """Inverse temperature (1/J): trgad's range (:func:`trgad.runtime.validate.check_beta`),
    narrowed to the oracles' [CYLINDER_BETA_MIN, CYLINDER_BETA_MAX]."""
    b = check_beta(beta)
    if not CYLINDER_BETA_MIN <= b <= CYLINDER_BETA_MAX:
        raise InputError(f"beta={beta!r} is out of range for the cylinder oracles: beta must be in "
                         f"[{CYLINDER_BETA_MIN:g}, {CYLINDER_BETA_MAX:g}] (where they resolve u)")
    return b


def check_L(L):
    """Circumference: an integer in [L_MIN, L_MAX]."""
    return check_int("L", L, L_MIN, L_MAX)


@checked(L=check_L)
@functools.lru_cache(maxsize=L_MAX + 1)
def bond_sums(L):
    """The bond sums of the cylinder's rows (NumPy, cached per L).

    Returns ``(h, E)``: ``h`` of shape (2**L,), h(s) = sum_i s_i s_{i+1} (row s has s_i = +1
    where bit i of s is 0, periodic in i), and ``E`` of shape (2**L, 2**L),
    E[s, s'] = h(s)/2 + s.s' + h(s')/2 - 2 L, the bond sum of one transfer step minus its
    largest value (so T~ = exp(beta E)).  Raises InputError for a bad L.
    """
    spins = ((np.arange(2**L)[:, None] >> np.arange(L)) & 1) * -2 + 1
    h = np.sum(spins * np.roll(spins, -1, axis=1), axis=1).astype(float)
    return h, (h[:, None] + h[None, :]) / 2.0 + spins @ spins.T - 2.0 * L


@checked(L=check_L)
def transfer_matrix(beta, L):
    """Scaled transfer matrix T~ = T e^{-2 L beta}, a JAX array of shape (2**L, 2**L).

    ``beta`` (1/J): a float or a traced JAX scalar (T~ is differentiable in it).  Symmetric
    with entries in (0, 1].  See the module docstring for T.  Raises InputError for a bad L.
    """
    return jnp.exp(beta * jnp.asarray(bond_sums.trusted(L)[1]))


@checked(beta=check_cylinder_beta, L=check_L)
def exact(beta, L):
    """Exact diagonalisation of T~ (``numpy.linalg.eigh``) and the exact derivatives.

    Returns a dict: ``f`` = ln(lambda_max)/L of the unscaled T (lnZ/N of the infinite
    cylinder) and ``u`` = -df/dbeta by Hellmann-Feynman, d lambda/d beta = v^T (dT/d beta) v
    for the unit dominant eigenvector v of the symmetric T; ``bond`` = sum v^2 h/L and
    ``dbond`` = its beta-derivative, 2 sum v dv h/L, with ``dv`` = dv/dbeta by first-order
    perturbation theory, sum_{k>1} u_k (u_k^T T' v)/(lambda_1 - lambda_k); ``v`` (positive
    entries, shape (2**L,)); ``lambda`` (of T~); ``rate`` = lambda_2/lambda_1 with lambda_2
    the largest other eigenvalue whose eigenvector overlaps the uniform start (the power
    iteration's error shrinks by this factor per step).  Raises InputError for a bad beta
    or L.  Cost O(8**L) (a 256 x 256 eigh at L = 8).
    """
    h, E = bond_sums.trusted(L)
    T = np.exp(beta * E)
    lam, U = np.linalg.eigh(T)
    v = U[:, -1] * np.sign(U[:, -1].sum())
    dT = E * T                                       # d T~ / d beta
    dlam = v @ dT @ v
    dv = U[:, :-1] @ ((U[:, :-1].T @ (dT @ v)) / (lam[-1] - lam[:-1]))
    overlap = np.abs(U[:, :-1].T @ np.full(2**L, 2.0 ** (-L / 2)))
    symmetric = np.nonzero(overlap > 1e-8)[0]
    rate = lam[symmetric[-1]] / lam[-1] if symmetric.size else 0.0
    return {"f": math.log(lam[-1]) / L + 2.0 * beta, "u": -(dlam / lam[-1] / L + 2.0),
            "bond": float(v * v @ h / L), "dbond": float(2 * (v * dv) @ h / L),
            "lambda": float(lam[-1]), "v": v, "dv": dv, "rate": float(rate)}


def finite_difference(beta, L, output="lnz", h=1e-5):
    """The beta-derivative of :func:`exact`'s f ("lnz") or bond ("bond") by a central
    difference with step ``h`` (error O(h^2) plus rounding of order 1e-16/h).  Raises
    InputError for a bad beta, L, output or h (h in (0, 0.1], beta - h > 0)."""
    beta, L, h = check_cylinder_beta(beta), check_L(L), check_positive("h", h, 0.1)
    output = check_choice("output", output, ("lnz", "bond"))
    if beta - h <= 0:
        raise InputError(f"h={h!r} is out of range: beta - h must stay > 0 (beta={beta!r})")
    key = "f" if output == "lnz" else "bond"
    return (exact.trusted(beta + h, L)[key] - exact.trusted(beta - h, L)[key]) / (2 * h)


def kaufman_cylinder(beta, L):
    """lnZ/N and u of the infinite cylinder of circumference L from Kaufman's closed form.

    lambda_max = (2 sinh 2b)^{L/2} exp[(gamma_1 + gamma_3 + ... + gamma_{2L-1}) / 2],
    cosh gamma_l = cosh 2b coth 2b - cos(pi l / L) (Kaufman, Phys. Rev. 76, 1232 (1949); in
    the form of Ferdinand and Fisher, Phys. Rev. 185, 832 (1969)), so
    f = ln(2 sinh 2b)/2 + sum gamma_l / (2L), and u = -df/db with
    d gamma_l/db = 2 cosh 2b (1 - 1/sinh^2 2b) / sinh gamma_l.  Returns a dict with ``f`` and
    ``u``; independent of the matrix this module builds.  Raises InputError for a bad beta
    or L.
    """
    b, L = check_cylinder_beta(beta), check_L(L)
    l = np.arange(1, 2 * L, 2)
    c = math.cosh(2 * b) / math.tanh(2 * b)
    gamma = np.arccosh(c - np.cos(np.pi * l / L))
    dgamma = 2 * math.cosh(2 * b) * (1 - 1 / math.sinh(2 * b) ** 2) / np.sinh(gamma)
    f = 0.5 * math.log(2 * math.sinh(2 * b)) + gamma.sum() / (2 * L)
    df = 1 / math.tanh(2 * b) + dgamma.sum() / (2 * L)
    return {"f": f, "u": -df}
