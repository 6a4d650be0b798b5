"""The 2D Ising model as a tensor network.

Conventions (J = 1): Z = sum_s exp(beta * sum_<ij> s_i s_j).  The bond weight
Q = [[e^b, e^-b], [e^-b, e^b]] = H diag(2 cosh b, 2 sinh b) H^T with H the 2x2 Hadamard
matrix, so Q = W W^T with W = H diag(sqrt(2 cosh b), sqrt(2 sinh b)).  Putting one W on each
end of every bond and summing the spin on each site gives the site tensor

    T[l, u, r, d] = sum_s W[s, l] W[s, u] W[s, r] W[s, d],

nonzero only for l + u + r + d even.  Contracting T over a lattice gives exactly Z.  The
sum over s is done by hand: H[s, i] = (-1)**(s i) / sqrt 2, so with n = l + u + r + d,

    T[l, u, r, d] = (1/2) (2 cosh b)**((4 - n)/2) (2 sinh b)**(n/2)   for n = 0, 2, 4

and 0 for odd n: integer powers only, no square root, so derivatives of every order stay
finite as beta -> 0 (through sqrt(2 sinh b) the second derivative overflowed below
beta ~ 1e-206, and c came out NaN).

Scaled tensor (what the code builds).  T itself overflows float64 for beta > ~177 (its
entries grow like e^{2 beta}) and 2 sinh b = e^b - e^-b loses all digits as beta -> 0.
So the code factors out the ground-state weight e^{2 beta} per site (each site has two
bonds, each e^beta at low temperature):

    e = 1 + e^{-2b} = 2 cosh(b) e^{-b},   o = -expm1(-2b) = 2 sinh(b) e^{-b},
    T~ = T e^{-2 beta} = (1/2) e**((4 - n)/2) o**(n/2),
    lnZ/N = 2 beta + ln Z~/N,   d(lnZ/N)/d beta = 2 + d(ln Z~/N)/d beta.

Both e and o lie in (0, 2] for every beta > 0 and -expm1(-2b) keeps full relative
precision for small beta, so T~ is finite and accurate over the whole range of
:data:`trgad.runtime.validate.BETA_MIN` to :data:`~trgad.runtime.validate.BETA_MAX`.
"""
from __future__ import annotations

import numpy as np

HADAMARD = np.array([[1.0, 1.0], [1.0, -1.0]]) / np.sqrt(2.0)
#: n = l + u + r + d for every entry [l, u, r, d] of the site tensor.
_LEGS_ODD = np.indices((2, 2, 2, 2)).sum(axis=0)
#: Masks (1/2 where n = 0, 2, 4, else 0): T~ = e^2 MASKS[0] + e o MASKS[1] + o^2 MASKS[2].
MASKS = tuple(np.where(_LEGS_ODD == n, 0.5, 0.0) for n in (0, 2, 4))


def initial_tensor(beta, ops):
    """Scaled site tensor T~[l, u, r, d] = T e^{-2 beta}, shape (2, 2, 2, 2).

    ``beta`` (in [BETA_MIN, BETA_MAX], :mod:`trgad.runtime.validate`; not checked here) is a
    float or a traced value of ``ops``, an array namespace from
    :mod:`trgad.physics.trg` (JAX, NumPy or the keyed engine; it needs ``exp`` and ``expm1``), so the
    tensor is a differentiable function of ``beta``.  Add :func:`log_weight_per_site` (= 2 beta)
    to lnZ/N computed from it.  Source: the bond-weight factorisation above (e.g.
    Levin and Nave, PRL 99, 120601 (2007), for the TRG setting), with the sum over the
    site's spin done in closed form (equal to ``einsum("si,sj,sk,sl->ijkl", W, W, W, W)``
    with W = H diag(sqrt e, sqrt o), to rounding).
    """
    m2b = beta * -2.0
    even = 1.0 + ops.exp(m2b)            # 2 cosh(b) e^-b, in (1, 2]
    odd = ops.expm1(m2b) * -1.0          # 2 sinh(b) e^-b, in (0, 1], no cancellation
    return (even * even * ops.constant(MASKS[0]) + even * odd * ops.constant(MASKS[1])
            + odd * odd * ops.constant(MASKS[2]))


def log_weight_per_site(beta):
    """ln of the factor taken out of every site tensor: 2 beta (see above); its derivative
    is :func:`log_weight_slope`."""
    return beta * 2.0


def log_weight_slope(beta):
    """d/d beta of :func:`log_weight_per_site`: 2 (what the staged passes add to the
    derivative of ln Z~/N)."""
    return 2.0


def specific_heat_of(beta, d2lnz):
    """The specific heat per site c = beta**2 d^2(lnZ/N)/d beta^2 (units of k_B), given the
    second derivative ``d2lnz``; 0 when ``d2lnz`` is exactly 0 (deep in the ordered phase,
    where beta**2 would overflow float64 and give inf * 0).  Floats in, a float out."""
    return 0.0 if d2lnz == 0 else beta * d2lnz * beta
