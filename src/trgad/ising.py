"""The 2D Ising model as a tensor network.

Conventions (J = 1): Z = sum_s exp(beta * sum_<ij> s_i s_j).  The bond weight
Q = [[e^b, e^-b], [e^-b, e^b]] = H diag(2 cosh b, 2 sinh b) H^T with H the 2x2 Hadamard
matrix, so Q = W W^T with W = H diag(sqrt(2 cosh b), sqrt(2 sinh b)).  Putting one W on each
end of every bond and summing the spin on each site gives the site tensor

    T[l, u, r, d] = sum_s W[s, l] W[s, u] W[s, r] W[s, d],

nonzero only for l + u + r + d even.  Contracting T over a lattice gives exactly Z.

Scaled tensor (what the code builds).  T itself overflows float64 for beta > ~177 (its
entries grow like e^{2 beta}) and 2 sinh b = e^b - e^-b loses all digits as beta -> 0.
So the code factors out the ground-state weight e^{2 beta} per site (each site has two
bonds, each e^beta at low temperature):

    W~ = H diag(sqrt(1 + e^{-2b}), sqrt(-expm1(-2b))),   W~ W~^T = Q e^{-b},
    T~ = T e^{-2 beta},   lnZ/N = 2 beta + ln Z~/N,   d(lnZ/N)/d beta = 2 + d(ln Z~/N)/d beta.

Both diagonal entries lie in (0, 2] for every beta > 0 and -expm1(-2b) keeps full relative
precision for small beta, so T~ is finite and accurate from beta = 1e-300 to beta = 1e300.
"""
from __future__ import annotations

import numpy as np

HADAMARD = np.array([[1.0, 1.0], [1.0, -1.0]]) / np.sqrt(2.0)


def initial_tensor(beta, ops):
    """Scaled site tensor T~[l, u, r, d] = T e^{-2 beta}, shape (2, 2, 2, 2).

    ``beta`` > 0 is a float or a traced value of ``ops``, an array namespace from
    :mod:`trgad.trg` (JAX, NumPy or the keyed engine; it needs ``exp`` and ``expm1``), so the
    tensor is a differentiable function of ``beta``.  Add :func:`log_weight_per_site`
    (= 2 beta) to lnZ/N computed from it.  Source: the bond-weight factorisation above (e.g.
    Levin and Nave, PRL 99, 120601 (2007), for the TRG setting).
    """
    m2b = beta * -2.0
    even = 1.0 + ops.exp(m2b)            # 2 cosh(b) e^-b, in (1, 2]
    odd = ops.expm1(m2b) * -1.0          # 2 sinh(b) e^-b, in (0, 1], no cancellation
    lam = even * ops.constant([1.0, 0.0]) + odd * ops.constant([0.0, 1.0])
    W = ops.constant(HADAMARD) * ops.reshape(ops.sqrt(lam), (1, 2))
    return ops.einsum("si,sj,sk,sl->ijkl", W, W, W, W)


def log_weight_per_site(beta):
    """ln of the factor taken out of every site tensor: 2 beta (derivative 2; see above)."""
    return beta * 2.0


def specific_heat_of(beta, d2lnz):
    """The specific heat per site c = beta**2 d^2(lnZ/N)/d beta^2 (units of k_B), given the
    second derivative ``d2lnz``; 0 when ``d2lnz`` is exactly 0 (deep in the ordered phase,
    where beta**2 would overflow float64 and give inf * 0).  Floats in, a float out."""
    return 0.0 if d2lnz == 0 else beta * d2lnz * beta
