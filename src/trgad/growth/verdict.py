"""The probe's verdict: is a cost sequence m(d) exponential or polynomial in the depth d?

The rule asks how m grows as the depth *doubles*.  For a polynomial of degree p with
non-negative coefficients, m(2d)/m(d) rises towards 2**p and never exceeds it; for an
exponential b**d, m(2d)/m(d) = b**d keeps growing, so log m(2d)/m(d) doubles with d and any
base b > 1 shows once the depths probed are deep enough.  *Once*: a finite probe has a
detection limit (:func:`detection_limit`), the smallest base it can tell from polynomial at
the depths it reached, so "polynomial" means "no exponential above that base".  The book's
chapter "How to detect it" (book/detect.md) states the rule in one sentence;
:func:`classify` applies it.
"""
from __future__ import annotations

import dataclasses
import math

#: Degree of the largest polynomial that can never be called exponential: a polynomial of
#: degree <= 3 with non-negative coefficients has m(2d)/m(d) <= 2**3 at every depth.
POLY_DEGREE = 3
#: Doubling the depth must multiply log-growth by more than this: log(m(D)/m(D/2)) >
#: ACCELERATION * log(m(D/2)/m(D/4)).  Exponential: 2; polynomial: tends to 1.
ACCELERATION = 1.5
#: Per-layer ratio above which growth counts as exponential when the depths probed do not
#: span two doublings (e.g. the TRG by 1, 2, 3 steps); with the polynomial bound as well.
THRESHOLD = 1.5
#: Fewest measured depths on which a verdict is given (two ratios, never one).
MIN_DEPTHS = 3


def detection_limit(depths, degree=POLY_DEGREE, threshold=THRESHOLD):
    """The smallest base b per layer for which :func:`classify` calls the pure exponential
    m(d) = b**d "exponential" at these ``depths`` (increasing); nan for fewer than
    :data:`MIN_DEPTHS`.

    Doubling rule (D >= 4 * depths[0], D the deepest depth): for b**d the growth over the
    last doubling is g1 = (D/2) ln b and g1 = 2 g0 always passes the acceleration test, so
    the verdict is exponential exactly when (D/2) ln b > degree ln 2: the limit is
    2**(2 degree / D) (1.110 at D = 40 with degree 3), and a base at or below it looks
    polynomial.  Per-layer ratio rule: the larger of the two bounds the last two ratios
    must pass, max(threshold, (d2/d1)**(degree/(d2 - d1))).  An exponential behind a large
    polynomial term needs more depth than this.
    """
    ds = [float(d) for d in depths]
    if len(ds) < MIN_DEPTHS:
        return math.nan
    D = ds[-1]
    if D >= 4 * ds[0]:
        return 2.0 ** (2.0 * degree / D)
    return max(max(threshold, (d2 / d1) ** (degree / (d2 - d1))) for d1, d2 in list(zip(ds, ds[1:]))[-2:])


def depth_to_detect(base, degree=POLY_DEGREE):
    """The smallest deepest depth D at which the doubling rule calls b**d exponential:
    the least integer D with (D/2) ln b > degree ln 2 (None for base <= 1)."""
    if not base > 1:
        return None
    return math.floor(2.0 * degree * math.log(2.0) / math.log(base)) + 1


@dataclasses.dataclass
class Classification:
    """Result of :func:`classify`.

    ``ratios``: per-layer ratios (m(d2)/m(d1))**(1/(d2-d1)) between consecutive depths;
    ``base``: per-layer growth from a least-squares fit of log m against d over the
    deepest half of the depths (d >= D/2); ``rule``: "doubling", "per-layer ratio" or why no
    verdict; ``doubling``: the depths (D/4, D/2, D) and the two growth factors
    m(D/2)/m(D/4) and m(D)/m(D/2) the doubling rule used (None otherwise); ``verdict``:
    "exponential", "polynomial" or "undetermined"; ``detection_limit``: the smallest base
    per layer this rule could have told from polynomial at these depths
    (:func:`detection_limit`): "polynomial" means "no exponential of a larger base".
    """

    ratios: list
    base: float
    verdict: str
    rule: str
    doubling: dict | None = None
    detection_limit: float = math.nan


def _per_layer(c1, c2, d1, d2):
    if not (c1 > 0 and c2 > 0):
        return math.nan
    return (c2 / c1) ** (1.0 / (d2 - d1))


def _interp(x, xs, ys):
    """Piecewise-linear interpolation (xs increasing, xs[0] <= x <= xs[-1])."""
    for (x1, y1), (x2, y2) in zip(zip(xs, ys), zip(xs[1:], ys[1:])):
        if x1 <= x <= x2:
            return y1 + (y2 - y1) * (x - x1) / (x2 - x1)
    return ys[-1] if x >= xs[-1] else ys[0]


def _fit_slope(xs, ys):
    n = len(xs)
    mx, my = sum(xs) / n, sum(ys) / n
    sxx = sum((x - mx) ** 2 for x in xs)
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sxx


def classify(depths, costs, degree=POLY_DEGREE, acceleration=ACCELERATION, threshold=THRESHOLD):
    """Verdict on costs ``costs`` measured at increasing ``depths`` (a :class:`Classification`).

    With D the deepest depth and at least :data:`MIN_DEPTHS` positive costs:

    * if D >= 4 * depths[0] (two doublings probed), "exponential" when
      g1 = ln(m(D)/m(D/2)) > degree * ln 2 and g1 > acceleration * ln(m(D/2)/m(D/4)), log m
      interpolated linearly in d between probed depths; "polynomial" otherwise;
    * else (too short a range to double twice) "exponential" when each of the last two
      per-layer ratios exceeds max(threshold, (d2/d1)**(degree/(d2-d1))), the largest ratio a
      polynomial of that degree can show there.

    Fewer than :data:`MIN_DEPTHS` depths, or a cost <= 0 or not finite: "undetermined".
    """
    ds, cs = [float(d) for d in depths], [float(c) for c in costs]
    ratios = [_per_layer(cs[j], cs[j + 1], ds[j], ds[j + 1]) for j in range(len(ds) - 1)]
    if len(ds) < MIN_DEPTHS:
        return Classification(ratios, math.nan, "undetermined", f"fewer than {MIN_DEPTHS} depths")
    if not all(math.isfinite(c) and c > 0 for c in cs):
        return Classification(ratios, math.nan, "undetermined", "a cost is zero or not finite", None,
                              detection_limit(ds, degree, threshold))
    logs = [math.log(c) for c in cs]
    D = ds[-1]
    deep = [(d, L) for d, L in zip(ds, logs) if d >= D / 2]
    if len(deep) < 2:
        deep = list(zip(ds, logs))[-2:]
    base = math.exp(_fit_slope([d for d, _ in deep], [L for _, L in deep]))
    if D >= 4 * ds[0]:
        L = lambda x: _interp(x, ds, logs)  # noqa: E731
        g0, g1 = L(D / 2) - L(D / 4), L(D) - L(D / 2)
        exponential = g1 > degree * math.log(2) and g1 > acceleration * g0
        doubling = {"depths": [D / 4, D / 2, D], "growth": [math.exp(g0), math.exp(g1)]}
        return Classification(ratios, base, "exponential" if exponential else "polynomial",
                              "doubling", doubling, detection_limit(ds, degree, threshold))
    last = list(zip(ds, ds[1:], ratios))[-2:]
    exponential = all(r > max(threshold, (d2 / d1) ** (degree / (d2 - d1))) for d1, d2, r in last)
    return Classification(ratios, base, "exponential" if exponential else "polynomial", "per-layer ratio",
                          None, detection_limit(ds, degree, threshold))


@dataclasses.dataclass
class Growth:
    """Result of :func:`growth` / :func:`trg_growth`.

    Per-depth lists (same length as ``depths``): ``transform_seconds`` (keyed engine: wall
    time of the transform; JAX: CPU time of ``make_jaxpr(grad)``, minimum of 3),
    ``run_seconds`` (executing the derivative program; JAX: a compiled ``jit(grad)`` call, or
    None when not executed), ``free_seconds`` (keyed engine: dropping the program; JAX:
    None), ``key_visits`` (keyed engine; JAX: None), ``derivative_ops`` (instructions /
    jaxpr equations, nested ones included), ``grads``.  ``measure`` names the cost the
    verdict uses ("key_visits" or "transform_cpu_seconds"); ``ratios``, ``base``, ``rule``,
    ``doubling``, ``detection_limit`` and ``verdict`` are :func:`classify`'s, except that a
    "polynomial" verdict becomes "undetermined" (and ``rule`` says why) when the exact path
    count says the cost is exponential: ``path_growth`` is the growth per layer of the paths
    from the derivative's output back to the start (the Perron root of
    :func:`path_matrix` on the components that output reaches; keyed engine, structural
    keys only, whose key visits walk those paths; None elsewhere).  ``stopped_early`` /
    ``stop_reason`` say whether and why the sweep ended before the last requested depth.
    """

    engine: str
    keys: str | None
    depths: list
    transform_seconds: list
    run_seconds: list
    free_seconds: list
    key_visits: list
    derivative_ops: list
    grads: list
    measure: str
    budget_seconds: float
    elapsed_seconds: float = 0.0
    stopped_early: bool = False
    stop_reason: str = ""
    ratios: list = dataclasses.field(default_factory=list)
    base: float = math.nan
    rule: str = ""
    doubling: dict | None = None
    verdict: str = "undetermined"
    detection_limit: float = math.nan
    path_growth: float | None = None

    def costs(self):
        """The per-depth cost the verdict uses."""
        return self.key_visits if self.measure == "key_visits" else self.transform_seconds

    def as_dict(self):
        """JSON-ready dict: non-finite floats become None, and a derivative that is not a
        finite number at some depth (the step overflows or divides by zero) gets a ``note``
        naming those depths, as :func:`trgad.keyed.chain.run` does for the chain."""
        def clean(x):
            if isinstance(x, float) and not math.isfinite(x):
                return None
            if isinstance(x, (list, tuple)):
                return [clean(v) for v in x]
            if isinstance(x, dict):
                return {k: clean(v) for k, v in x.items()}
            return x
        out = {f.name: clean(getattr(self, f.name)) for f in dataclasses.fields(self)}
        bad = [d for d, g in zip(self.depths, self.grads) if g is not None and not math.isfinite(g)]
        if bad:
            where = (f"every depth probed ({bad[0]} to {bad[-1]})" if bad == self.depths and len(bad) > 2
                     else "depth " + ", ".join(map(str, bad)))
            out["note"] = (f"the derivative is not a finite number at {where} (the step's "
                           f"values overflow or divide by zero there): grads are null at those "
                           f"depths; the verdict rests on the transform's cost, not on this value")
        return out

    def detection(self):
        """One sentence: the smallest base per layer the verdict could see at these depths."""
        if not math.isfinite(self.detection_limit):
            return "too few depths for a verdict: no detection limit"
        return (f"at depths {self.depths[0]} to {self.depths[-1]} an exponential b**d is told from "
                f"polynomial only if b > {self.detection_limit:.4g}")

    def rows(self):
        """One dict per depth (for a table)."""
        out = []
        for i, d in enumerate(self.depths):
            out.append({"depth": d, "transform_seconds": self.transform_seconds[i],
                        "run_seconds": self.run_seconds[i], "free_seconds": self.free_seconds[i],
                        "key_visits": self.key_visits[i], "derivative_ops": self.derivative_ops[i],
                        "ratio": self.ratios[i - 1] if i else None})
        return out
