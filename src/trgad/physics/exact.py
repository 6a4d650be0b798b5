"""Independent references: exact enumeration of small tori and Onsager's solution.

* n <= 4 untruncated TRG steps represent a 2**n-site torus exactly:
  n = 1: 2 sites (each bonded to the other four times), n = 2: the 2 x 2 torus,
  n = 3: 8 sites with periods (2, 2) and (2, -2), n = 4: the 4 x 4 torus.
  :func:`torus_exact` enumerates all 2**N spin states of such a torus.
* :func:`onsager` gives lnZ/N, u and c of the infinite lattice (Onsager, Phys. Rev. 65, 117
  (1944); the closed forms of e.g. Huang, *Statistical Mechanics*, ch. 15), with SciPy's
  complete elliptic integrals (which take the parameter m = k**2).
* :func:`kaufman` gives lnZ/N, u and c of the finite L x L torus exactly (Kaufman 1949; the
  form of Ferdinand & Fisher 1969), e.g. the 1024 x 1024 torus of 20 TRG steps.
"""
from __future__ import annotations

from fractions import Fraction
import math

import jax
import jax.numpy as jnp
import numpy as np
from jax.scipy.special import logsumexp

from ..runtime import compiled
from ..runtime.validate import InputError, check_beta, check_int, checked

#: Critical inverse temperature ln(1 + sqrt 2) / 2.
BETA_C = math.log(1.0 + math.sqrt(2.0)) / 2.0


def torus_periods(steps):
    """Period vectors of the torus that ``steps`` TRG steps represent (2**steps sites)."""
    steps = check_int("steps", steps, 1, 4)
    a = 2 ** (steps // 2)
    if steps % 2 == 0:
        return (a, 0), (0, a)
    return (a, a), (a, -a)


def _torus_bonds(p1, p2):
    """Sites and nearest-neighbour bonds (right and up of each site) of Z^2 / <p1, p2>."""
    det = p1[0] * p2[1] - p1[1] * p2[0]

    def reduce(x, y):
        # coordinates in the period basis, fractional parts only
        a = Fraction(x * p2[1] - y * p2[0], det)
        b = Fraction(-x * p1[1] + y * p1[0], det)
        fa, fb = a - math.floor(a), b - math.floor(b)
        return (fa, fb)

    index, frontier = {}, [(0, 0)]
    coords = {}
    while frontier:
        x, y = frontier.pop()
        key = reduce(x, y)
        if key in index:
            continue
        index[key] = len(index)
        coords[key] = (x, y)
        frontier += [(x + 1, y), (x, y + 1)]
    bonds = []
    for key, (x, y) in coords.items():
        for dx, dy in ((1, 0), (0, 1)):
            bonds.append((index[key], index[reduce(x + dx, y + dy)]))
    return len(index), bonds


def torus_exact(beta, steps):
    """Exact lnZ/N and its first two beta-derivatives on the 2**steps-site torus.

    Parameters
    ----------
    beta : float in [BETA_MIN, BETA_MAX] (:func:`trgad.runtime.validate.check_beta`),
        inverse temperature (1/J).
    steps : int in [1, 4].

    Returns
    -------
    dict with ``lnz_per_site``, ``dlnz`` (= -u) and ``d2lnz`` (so c = beta**2 * d2lnz), all
    per site, from the energy histogram of all 2**N states (log-sum-exp, float64).
    """
    beta = check_beta(beta)
    n_sites, bonds = _torus_bonds(*torus_periods(steps))
    states = ((np.arange(2**n_sites)[:, None] >> np.arange(n_sites)) & 1) * 2 - 1
    i, j = np.array(bonds).T
    energy = np.sum(states[:, i] * states[:, j], axis=1)  # sum of s_i s_j, integer
    values, counts = np.unique(energy, return_counts=True)
    logw = np.log(counts) + beta * values
    top = logw.max()
    w = np.exp(logw - top)
    Z = w.sum()
    mean = np.sum(w * values) / Z
    var = np.sum(w * (values - mean) ** 2) / Z
    return {
        "lnz_per_site": (top + np.log(Z)) / n_sites,
        "dlnz": mean / n_sites,
        "d2lnz": var / n_sites,
        "sites": n_sites,
    }


@checked(beta=check_beta)
def onsager(beta):
    """Onsager's infinite-lattice lnZ/N, internal energy u and specific heat c per site.

    Parameters
    ----------
    beta : float in [BETA_MIN, BETA_MAX] (:func:`trgad.runtime.validate.check_beta`).

    Returns
    -------
    dict with ``lnz_per_site``, ``u`` (= -d lnZ/N / d beta) and ``c``
    (= beta**2 d^2 lnZ/N / d beta**2), in units of J (u) and k_B (c).  At beta_c, c diverges
    and is returned as ``inf``.

    Formulas (k = 2 sinh 2b / cosh^2 2b):
      lnZ/N = ln(2 cosh 2b) + (1/pi) int_0^{pi/2} ln[(1 + sqrt(1 - k^2 sin^2 t)) / 2] dt
      u = -coth 2b [1 + (2/pi)(2 tanh^2 2b - 1) K(k)]
      c = (4/pi)(b coth 2b)^2 {K - E - (1 - tanh^2 2b)[pi/2 + (2 tanh^2 2b - 1) K]}
    SciPy's ``ellipk``/``ellipe`` take m = k^2, clipped to <= 1 (at beta_c, m rounds to
    1 + 2e-16 and ``ellipk`` would return NaN).
    """
    from scipy import integrate, special  # here, not at import: SciPy's import costs ~0.5 s

    b = beta                                  # the formulas' b
    k = 2.0 * math.sinh(2 * b) / math.cosh(2 * b) ** 2
    m = min(k * k, 1.0)

    def integrand(t):
        return math.log((1.0 + math.sqrt(max(0.0, 1.0 - m * math.sin(t) ** 2))) / 2.0)

    integral, _ = integrate.quad(integrand, 0.0, math.pi / 2, epsabs=1e-14, epsrel=1e-14, limit=200)
    lnz = math.log(2.0 * math.cosh(2 * b)) + integral / math.pi
    th = math.tanh(2 * b)
    coth = 1.0 / th
    K = float(special.ellipk(m))
    E = float(special.ellipe(m))
    if math.isinf(K):  # at beta_c: (2 tanh^2 2b - 1) K -> 0, so u = -coth 2b_c = -sqrt 2
        return {"lnz_per_site": lnz, "u": -coth, "c": math.inf}
    u = -coth * (1.0 + (2.0 / math.pi) * (2.0 * th**2 - 1.0) * K)
    c = (4.0 / math.pi) * (b * coth) ** 2 * (
        K - E - (1.0 - th**2) * (math.pi / 2 + (2.0 * th**2 - 1.0) * K)
    )
    return {"lnz_per_site": lnz, "u": u, "c": c}


def _kaufman_lnz(K, L):
    """ln Z / N of the L x L torus (J = 1) at K = beta, in JAX (float64), differentiable.

    Kaufman, Phys. Rev. 76, 1232 (1949), as written by Ferdinand & Fisher, Phys. Rev. 185,
    832 (1969), eqs. (2.1)-(2.5): Z = (1/2) (2 sinh 2K)^(N/2) (Z1 + Z2 + Z3 + Z4),
    Z1,2 = prod_{r=0}^{L-1} 2 cosh, 2 sinh (L gamma_{2r+1} / 2), Z3,4 the same with
    gamma_{2r}; cosh gamma_l = cosh 2K coth 2K - cos(pi l / L) for l >= 1 and
    gamma_0 = 2K + ln tanh K (signed: negative above T_c, so Z4 changes sign).
    """
    l = jnp.arange(1, 2 * L)
    g = jnp.arccosh(jnp.cosh(2 * K) / jnp.tanh(2 * K) - jnp.cos(jnp.pi * l / L))
    g0 = 2 * K + jnp.log(jnp.tanh(K))
    odd, even = g[0::2], g[1::2]                 # gamma_1, gamma_3, ...; gamma_2, gamma_4, ...
    x_odd, x_even, x0 = L * odd / 2, L * even / 2, L * g0 / 2
    lcosh = lambda x: jnp.abs(x) + jnp.log1p(jnp.exp(-2 * jnp.abs(x)))          # noqa: E731  ln 2cosh
    lsinh = lambda x: jnp.abs(x) + jnp.log(-jnp.expm1(-2 * jnp.abs(x)))         # noqa: E731  ln |2sinh|
    terms = jnp.stack([jnp.sum(lcosh(x_odd)), jnp.sum(lsinh(x_odd)),
                       lcosh(x0) + jnp.sum(lcosh(x_even)), lsinh(x0) + jnp.sum(lsinh(x_even))])
    signs = jnp.array([1.0, 1.0, 1.0, 1.0]).at[3].set(jnp.sign(g0))
    N = L * L
    return (jnp.log(0.5) + (N / 2) * jnp.log(2 * jnp.sinh(2 * K)) + logsumexp(terms, b=signs)) / N


def kaufman(beta, L):
    """Exact lnZ/N, u and c per site of the L x L Ising torus (periodic, J = 1, k_B = 1).

    Parameters
    ----------
    beta : float in [BETA_MIN, BETA_MAX] (positive: an odd L is not bipartite), not beta_c within 1e-12 (there gamma_0 = 0 and the formula's |sinh|
        term is log 0; c is finite there, but this function does not take the limit).
    L : int in [2, 4096], the side (N = L**2 sites); 2 * steps TRG steps represent L = 2**steps.

    Returns
    -------
    dict with ``lnz_per_site``, ``u`` (= -d lnZ/N / d beta, J) and ``c``
    (= beta**2 d^2 lnZ/N / d beta**2, k_B): Kaufman's closed form (see :func:`_kaufman_lnz`),
    differentiated by JAX (forward over reverse).  Raises InputError for a bad beta or L.
    """
    b = check_beta(beta)
    L = check_int("L", L, 2, 4096)
    if abs(b - BETA_C) < 1e-12:
        raise InputError(f"beta={beta!r} is beta_c to 1e-12: kaufman() needs beta != beta_c")
    if L not in _KAUFMAN:                      # one compiled program per L
        f = lambda k: _kaufman_lnz(k, L)                                        # noqa: E731
        _KAUFMAN[L] = compiled.jit(lambda k: (f(k),) + jax.jvp(jax.grad(f), (k,), (1.0,)))
    lnz, d1, d2 = (float(x) for x in _KAUFMAN[L](b))
    return {"lnz_per_site": lnz, "u": -d1, "c": b * b * d2}


#: One compiled program per L (registered: :func:`trgad.runtime.compiled.clear`).
_KAUFMAN = compiled.registry("exact.kaufman")
