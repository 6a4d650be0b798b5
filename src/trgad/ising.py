"""The 2D Ising model as a tensor network.

Conventions (J = 1): Z = sum_s exp(beta * sum_<ij> s_i s_j).  The bond weight
Q = [[e^b, e^-b], [e^-b, e^b]] = H diag(2 cosh b, 2 sinh b) H^T with H the 2x2 Hadamard
matrix, so Q = W W^T with W = H diag(sqrt(2 cosh b), sqrt(2 sinh b)).  Putting one W on each
end of every bond and summing the spin on each site gives the site tensor

    T[l, u, r, d] = sum_s W[s, l] W[s, u] W[s, r] W[s, d],

nonzero only for l + u + r + d even.  Contracting T over a lattice gives exactly Z (no
constant prefactor is dropped), so lnZ/N computed from it is the true free-energy density
times -beta.
"""
from __future__ import annotations

import numpy as np

HADAMARD = np.array([[1.0, 1.0], [1.0, -1.0]]) / np.sqrt(2.0)


def initial_tensor(beta, ops):
    """Site tensor T[l, u, r, d] of shape (2, 2, 2, 2) at inverse temperature ``beta``.

    ``ops`` is an array namespace from :mod:`trgad.trg` (JAX or the keyed engine), so the
    tensor is a differentiable function of ``beta``.  Source: the bond-weight factorisation
    Q = W W^T above (e.g. Levin and Nave, PRL 99, 120601 (2007), for the TRG setting).
    """
    e_plus = ops.exp(beta)
    e_minus = ops.exp(beta * -1.0)
    lam = e_plus * ops.constant([1.0, 1.0]) + e_minus * ops.constant([1.0, -1.0])
    W = ops.constant(HADAMARD) * ops.reshape(ops.sqrt(lam), (1, 2))
    return ops.einsum("si,sj,sk,sl->ijkl", W, W, W, W)
