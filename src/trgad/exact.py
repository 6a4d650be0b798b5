"""Independent references: exact enumeration of small tori and Onsager's solution.

* n <= 4 untruncated TRG steps represent a 2**n-site torus exactly:
  n = 1: 2 sites (each bonded to the other four times), n = 2: the 2 x 2 torus,
  n = 3: 8 sites with periods (2, 2) and (2, -2), n = 4: the 4 x 4 torus.
  :func:`torus_exact` enumerates all 2**N spin states of such a torus.
* :func:`onsager` gives lnZ/N, u and c of the infinite lattice (Onsager, Phys. Rev. 65, 117
  (1944); the closed forms of e.g. Huang, *Statistical Mechanics*, ch. 15), with SciPy's
  complete elliptic integrals (which take the parameter m = k**2).
"""
from __future__ import annotations

from fractions import Fraction
import math

import numpy as np
from scipy import integrate, special

from .validate import check_beta, check_int

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
    beta : float > 0, inverse temperature (1/J).
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


def onsager(beta):
    """Onsager's infinite-lattice lnZ/N, internal energy u and specific heat c per site.

    Parameters
    ----------
    beta : float > 0.

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
    b = check_beta(beta)
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
