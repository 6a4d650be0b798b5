"""The specific heat c(beta) across the phase transition, by an exact second derivative.

:func:`scan` computes c at many inverse temperatures for one bond dimension chi and number
of steps, with Onsager's infinite-lattice value beside each, and locates the peak
(:func:`peak`).  The truncation schedule is computed at every beta
(:func:`trgad.physics.trg.truncation_schedule`) and the betas sharing a schedule are computed
together; a chi that cuts a multiplet of equal singular values at some beta is reported
for that beta (its row has ``error``), never silently rounded.

The default method is ``staged`` (forward over forward, one step at a time,
:func:`trgad.physics.staged.value_grad_hess_jax`): it compiles one program per step shape (D, k),
and a program is shared by every schedule in which its shape appears, so a scan compiles
each distinct (D, k) once plus n passes for n betas; the other methods compile one
program per distinct schedule.  :func:`trgad.bench.second_order_costs`
measures the first and steady calls of every method (``python -m trgad bench --json``, its
``second_order`` rows).
"""
from __future__ import annotations

import math
import time

import numpy as np

from ..physics import modes, trg
from ..physics.exact import BETA_C, onsager
from ..runtime.validate import InputError, check_beta, check_chi, check_int, check_steps

#: The exact mode :func:`scan` uses unless told (see the module docstring).
DEFAULT_METHOD = "staged"


def beta_grid(n=41, low=0.3, high=0.6, focus=BETA_C, power=2.0):
    """``n`` inverse temperatures from ``low`` to ``high`` (both included), denser near ``focus``.

    beta_j = focus + (t_j |t_j|^(power - 1)) * (focus - low or high - focus), t_j evenly
    spaced in [-1, 1]: the spacing shrinks like |t| near ``focus`` (power = 2).  With odd
    ``n`` one point is ``focus`` itself.  Returns a list of floats, ascending.  Raises
    InputError unless 3 <= n <= 1000, 0 < low < focus < high and power >= 1.
    """
    n = check_int("n", n, 3, 1000)
    low, high, focus = (check_beta(b) for b in (low, high, focus))
    if not low < focus < high:
        raise InputError(f"focus={focus!r} is out of range: focus must lie strictly between "
                         f"low={low!r} and high={high!r}")
    if not power >= 1:
        raise InputError(f"power={power!r} is out of range: power must be >= 1")
    t = np.linspace(-1.0, 1.0, n)
    span = np.where(t < 0, focus - low, high - focus)
    betas = focus + np.sign(t) * np.abs(t) ** power * span
    betas[0], betas[-1] = low, high
    return [float(b) for b in betas]


def _onsager_c(ons):
    c = ons["c"]
    return c if math.isfinite(c) else None      # infinite at beta_c: null in JSON


def scan(chi, steps, betas, method=DEFAULT_METHOD):
    """c(beta) and u(beta) at every beta in ``betas`` by an exact second derivative.

    Parameters
    ----------
    chi : int in [2, 32].  steps : int in [1, 64] (2**steps sites).
    betas : sequence of floats > 0 (1/J), e.g. :func:`beta_grid`.
    method : one of :data:`trgad.physics.modes.METHODS` (order 2, exact), default
        :data:`DEFAULT_METHOD`.

    Returns
    -------
    JSON-ready dict: ``chi``, ``steps``, ``method``; ``rows``, one per beta in the given
    order, each ``{"beta", "c", "u", "lnz_per_site", "onsager_c", "onsager_u",
    "schedule_group", "error"}`` (c in k_B, u in J, per site; ``onsager_c`` None at
    beta_c; on a beta whose schedule is refused, c, u and lnz_per_site are None and
    ``error`` holds the one-line InputError message); ``schedules`` (the distinct schedules,
    indexed by ``schedule_group``); ``schedule_seconds`` (finding the schedules),
    ``derivative_seconds`` (all second derivatives, compilation included), ``seconds``.

    Raises InputError for a bad chi, steps, beta or method (a schedule refused at some beta
    is not raised: it is in that row).
    """
    chi, steps = check_chi(chi), check_steps(steps)
    betas = [check_beta(b) for b in betas]
    method = modes.check_method(method)
    t0 = time.perf_counter()
    schedules, groups, errors = [], [], []
    for b in betas:            # NumPy: one primal pass per beta, with the spectra at every cut
        try:
            ks = trg.truncation_schedule.trusted(chi, steps, b)
        except InputError as e:
            groups.append(None)
            errors.append(str(e))
            continue
        if ks not in schedules:
            schedules.append(ks)
        groups.append(schedules.index(ks))
        errors.append(None)
    t1 = time.perf_counter()
    rows = [None] * len(betas)
    for g, ks in enumerate(schedules):          # one schedule at a time: one compilation each
        for i, b in enumerate(betas):
            if groups[i] != g:
                continue
            r = modes.value_and_derivatives.trusted(b, tuple(ks), method, order=2)
            rows[i] = {"beta": b, "c": r["c"], "u": r["u"], "lnz_per_site": r["lnz_per_site"]}
    t2 = time.perf_counter()
    for i, b in enumerate(betas):
        ons = onsager.trusted(b)
        row = rows[i] or {"beta": b, "c": None, "u": None, "lnz_per_site": None}
        row.update(onsager_c=_onsager_c(ons), onsager_u=ons["u"], schedule_group=groups[i], error=errors[i])
        rows[i] = row
    return {"chi": chi, "steps": steps, "method": method, "rows": rows, "schedules": schedules,
            "schedule_seconds": t1 - t0, "derivative_seconds": t2 - t1, "seconds": time.perf_counter() - t0}


def peak(rows):
    """Height and position of the specific-heat peak from :func:`scan`'s rows.

    The vertex of the parabola through the largest c and its two neighbours in beta (rows
    with c None are skipped); at an end of the scan the largest point itself.  Returns a
    dict ``{"beta", "c", "coarse_beta", "coarse_c", "interior"}`` (``interior`` False
    when the maximum sits at an end of the scan, so the peak may lie outside it).
    Raises InputError if fewer than 3 rows have a c.
    """
    pts = sorted((r["beta"], r["c"]) for r in rows if r.get("c") is not None)
    if len(pts) < 3:
        raise InputError(f"rows={len(pts)} with a c is too few: a peak needs at least 3")
    b, c = np.array(pts).T
    i = int(np.argmax(c))
    out = {"coarse_beta": float(b[i]), "coarse_c": float(c[i]), "interior": 0 < i < len(b) - 1}
    if not out["interior"]:
        return dict(out, beta=float(b[i]), c=float(c[i]))
    x, y = b[i - 1:i + 2], c[i - 1:i + 2]
    a2, a1, a0 = np.polyfit(x - x[1], y, 2)       # centred: well conditioned
    if a2 >= 0:                                   # not a maximum (flat top): keep the point
        return dict(out, beta=float(b[i]), c=float(c[i]))
    xv = -a1 / (2 * a2)
    return dict(out, beta=float(x[1] + xv), c=float(a0 + a1 * xv + a2 * xv * xv))
